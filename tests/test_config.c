/* test_config.c — config_parse() and config_load() against tables of YAML
 * texts: every refusal with its exact "file:line:column: message" (an
 * unknown key with the nearest known one), configs with several errors
 * reported all at once in file order, the cap on how many are listed,
 * every default, the full example
 * of the design, the file-level errors, and file paths resolved against
 * the config file's directory from any current directory.
 * Each table row runs as its own Check loop iteration. */
#include <check.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config.h"
#include "duro_config.h"
#include "paths.h"
#include "suite_run.h"

#define MiB (1024LL * 1024)
#define DAY_MS (24LL * 3600 * 1000)

static config *parse(const char *yaml, char *err, size_t errlen) {
  return config_parse("t.yaml", yaml, strlen(yaml), err, errlen);
}

/* ---- Refusals ---------------------------------------------------------- */

typedef struct bad_case {
  const char *yaml;
  const char *error; /* a substring of the message, position included */
} bad_case;

/* Prefixes that put the interesting line at a known number. */
#define WF_HEAD                                                                \
  "plugins:\n"                                                                 \
  "  - name: orders\n"                                                         \
  "    path: o.so\n"                                                           \
  "    workflows:\n"
#define WF_ABC                                                                 \
  "      - name: a\n"                                                          \
  "        binding: A\n"                                                       \
  "        class_name: C\n"
#define Q_HEAD                                                                 \
  "plugins:\n"                                                                 \
  "  - name: p\n"                                                              \
  "    path: p.so\n"                                                           \
  "    queues:\n"
#define CONSUMER_Q                                                             \
  Q_HEAD "      consumers:\n"                                                  \
         "        - queue: q\n"
#define TRIGGERS_HEAD                                                          \
  "plugins:\n"                                                                 \
  "  - name: p\n"                                                              \
  "    path: p.so\n"                                                           \
  "    triggers:\n"

static const bad_case bad[] = {
    /* YAML syntax, reported at libyaml's mark. */
    {"a: [1,\nb: 2\n",
     "t.yaml:3:1: YAML syntax error: did not find expected ',' or ']'"},
    {"storage:\n  path: x\n   bad: 1\n",
     "t.yaml:3:7: YAML syntax error: mapping values are not allowed"},
    {"storage:\n\tpath: x\n",
     "t.yaml:2:1: YAML syntax error: found character that cannot start any "
     "token"},
    {"storage:\n  path: \"\xff\"\n",
     "t.yaml:2:10: YAML syntax error: invalid leading UTF-8 octet"},
    /* Columns count characters, not bytes: the "é" is two bytes. */
    {"storage:\n  path: \"\xc3\xa9\xff\"\n",
     "t.yaml:2:11: YAML syntax error: invalid leading UTF-8 octet"},
    {"engine:\n  workers: 8\n\x01\n",
     "t.yaml:3:1: YAML syntax error: control characters are not allowed"},
    {"storage: *nope\n",
     "t.yaml:1:10: YAML syntax error: found undefined alias"},
    {"http:\n  listen: \"abc\n",
     "t.yaml:3:1: YAML syntax error: found unexpected end of stream (while "
     "scanning a quoted scalar started at 2:11)"},
    {"engine: {workers: 2}\n---\nengine: {workers: 3}\n",
     "t.yaml:3:1: only one YAML document is allowed"},

    /* The top level. */
    {"- a\n- b\n", "t.yaml:1:1: the top level must be a mapping"},
    {"just words\n", "t.yaml:1:1: the top level must be a mapping"},
    {"storge: {}\n", "t.yaml:1:1: unknown key \"storge\" at the top level"},
    {"? [a]\n: 1\n", "t.yaml:1:3: keys must be strings at the top level"},
    {"engine: {threads: 2, workers: 3}\n",
     "t.yaml:1:31: \"workers\" is the old name of \"threads\": give one"},
    {"engine: {workers: 2}\nengine: {workers: 3}\n",
     "t.yaml:2:1: duplicate key \"engine\" at the top level"},

    /* storage */
    {"storage: [a]\n", "t.yaml:1:10: \"storage\" must be a mapping"},
    {"storage:\n  synchronous: fast\n",
     "t.yaml:2:16: \"synchronous\" must be \"full\" or \"normal\""},
    {"storage:\n  synchronous: FULL\n",
     "t.yaml:2:16: \"synchronous\" must be \"full\" or \"normal\""},
    {"log:\n  format: yaml\n",
     "t.yaml:2:11: \"format\" must be \"json\" or \"text\""},
    {"log: {level: debug}\n", "t.yaml:1:7: unknown key \"level\" in log"},
    {"storage: { path: \"\" }\n",
     "t.yaml:1:18: \"path\" must be a non-empty string"},
    {"storage:\n  path:\n", "t.yaml:2:8: \"path\" must be a non-empty string"},
    {"storage:\n  path: [a, b]\n",
     "t.yaml:2:9: \"path\" must be a non-empty string"},
    {"storage:\n  path: \"a\\0b\"\n",
     "t.yaml:2:9: \"path\" must not contain a NUL character"},
    {"storage:\n  path: a\n  path: b\n",
     "t.yaml:3:3: duplicate key \"path\" in storage"},
    {"storage:\n  sync: full\n", "t.yaml:2:3: unknown key \"sync\" in storage"},
    {"storage:\n  postgresql: \"\"\n",
     "t.yaml:2:15: \"postgresql\" must be a non-empty string"},
#if !DURO_HAVE_PG
    {"storage:\n  postgresql: x\n",
     "t.yaml:2:15: \"postgresql\": this duro was built without PostgreSQL "
     "(libpq)"},
#endif
    {"storage: { connect_timeout: 2h }\n",
     "t.yaml:1:29: \"connect_timeout\" must be at most 1 hour"},
    {"storage: { connect_timeout: soon }\n",
     "t.yaml:1:29: \"connect_timeout\" is not a valid duration: \"soon\""},
    {"storage: { lease: 100ms }\n",
     "t.yaml:1:19: \"lease\" must be at least 500 milliseconds"},
    {"storage:\r\n  sync: full\r\n",
     "t.yaml:2:3: unknown key \"sync\" in storage"},
    /* A key's control characters are escaped in the message. */
    {"storage:\n  \"a\\nb\": 1\n",
     "t.yaml:2:3: unknown key \"a\\x0ab\" in storage"},

    /* http */
    {"http:\n  allow_insecure: yes\n",
     "t.yaml:2:19: \"allow_insecure\" must be true or false"},
    {"http:\n  allow_insecure: True\n",
     "t.yaml:2:19: \"allow_insecure\" must be true or false"},
    {"http:\n  allow_insecure: \"true\"\n",
     "t.yaml:2:19: \"allow_insecure\" must be true or false"},
    {"http: { max_body_bytes: 0 }\n",
     "t.yaml:1:25: \"max_body_bytes\" must be between 1 and 1073741824"},
    {"plugins:\n  - {name: p, path: p.so, workers: 65}\n",
     "t.yaml:2:36: \"workers\" must be between 0 and 64"},
    {"plugins:\n  - {name: p, path: p.so, limits: {memory: 1MiB}}\n",
     "t.yaml:2:44: \"memory\" must be between 16777216 and 1099511627776 "
     "bytes"},
    {"plugins:\n  - {name: p, path: p.so, limits: {memory: 2 TB}}\n",
     "t.yaml:2:44: \"memory\" must be a size such as \"256MiB\""},
    {"plugins:\n  - {name: p, path: p.so, limits: {cpu: 5ms}}\n",
     "t.yaml:2:41: \"cpu\" must be at least 10 milliseconds"},
    {"plugins:\n  - {name: p, path: p.so, workers: 0, limits: {cpu: 1s}}\n",
     "t.yaml:2:47: \"limits\" apply to worker processes"},
    {"plugins:\n  - {name: p, path: p.so, workers: 0, limits: {cpus: 1}}\n",
     "t.yaml:2:47: \"limits\" apply to worker processes"},
    {"plugins:\n  - {name: p, path: p.so, limits: {processes: 8}}\n",
     "t.yaml:2:47: \"processes\" must be between 16 and 4194304"},
    {"plugins:\n  - {name: p, path: p.so, limits: {cpus: 0.001}}\n",
     "t.yaml:2:42: \"cpus\" must be between 0.01 and 1024"},
    {"plugins:\n  - {name: p, path: p.so, limits: {cpus: 2000}}\n",
     "t.yaml:2:42: \"cpus\" must be between 0.01 and 1024"},
    {"plugins:\n  - {name: p, path: p.so, limits: {cpus: 50%}}\n",
     "t.yaml:2:42: \"cpus\" must be a number such as 1.5"},
    {"plugins:\n"
     "  - name: p\n"
     "    path: p.so\n"
     "    workflows:\n"
     "      - {name: a, binding: A, class_name: C, on_timeout: undo}\n",
     "t.yaml:5:58: \"on_timeout\" must be \"error\" or \"rollback\""},
    {"plugins:\n"
     "  - name: p\n"
     "    path: p.so\n"
     "    workflows:\n"
     "      - name: a\n"
     "        binding: A\n"
     "        class_name: C\n"
     "        flow: {concurrency: [{key: customerId, limit: 2}]}\n",
     "t.yaml:8:36: \"key\" must be a JSON pointer into the params, "
     "such as \"/customerId\""},
    {"plugins:\n"
     "  - name: p\n"
     "    path: p.so\n"
     "    workflows:\n"
     "      - name: a\n"
     "        binding: A\n"
     "        class_name: C\n"
     "        flow: {concurrency: [{key: /c, limit: 0}]}\n",
     "t.yaml:8:47: \"limit\" must be between 1 and 1000000"},
    {"plugins:\n"
     "  - name: p\n"
     "    path: p.so\n"
     "    workflows:\n"
     "      - name: a\n"
     "        binding: A\n"
     "        class_name: C\n"
     "        flow: {concurrency: [{key: /c, limit: 1}, {key: /c, limit: "
     "2}]}\n",
     "t.yaml:8:51: a second concurrency rule for the key \"/c\" (the "
     "first is at 8:30)"},
    {"plugins:\n"
     "  - name: p\n"
     "    path: p.so\n"
     "    workflows:\n"
     "      - name: a\n"
     "        binding: A\n"
     "        class_name: C\n"
     "        flow: {concurrency: [{key: /c}]}\n",
     "t.yaml:8:30: concurrency rule is missing \"limit\""},
    {"plugins:\n"
     "  - name: p\n"
     "    path: p.so\n"
     "    workflows:\n"
     "      - name: a\n"
     "        binding: A\n"
     "        class_name: C\n"
     "        flow: {concurency: [{limit: 1}]}\n",
     "t.yaml:8:16: unknown key \"concurency\" in flow — did you mean "
     "\"concurrency\"?"},
    {"plugins:\n"
     "  - name: p\n"
     "    path: p.so\n"
     "    workflows:\n"
     "      - name: a\n"
     "        binding: A\n"
     "        class_name: C\n"
     "        flow: {rate: [{key: /t, limit: 10}]}\n",
     "t.yaml:8:23: rate rule is missing \"period\""},
    {"plugins:\n"
     "  - name: p\n"
     "    path: p.so\n"
     "    workflows:\n"
     "      - name: a\n"
     "        binding: A\n"
     "        class_name: C\n"
     "        flow: {rate: [{key: /t, limit: 10, period: 1m}, {key: /t, "
     "limit: 1, period: 1s}]}\n",
     "t.yaml:8:57: a second rate rule for the key \"/t\" (the first is at "
     "8:23)"},
    {"plugins:\n"
     "  - name: p\n"
     "    path: p.so\n"
     "    workflows:\n"
     "      - name: a\n"
     "        binding: A\n"
     "        class_name: C\n"
     "        flow: {rate: [{key: t, limit: 10, period: 1m}]}\n",
     "t.yaml:8:29: \"key\" must be a JSON pointer into the params"},
    {"plugins:\n"
     "  - name: p\n"
     "    path: p.so\n"
     "    workflows:\n"
     "      - name: a\n"
     "        binding: A\n"
     "        class_name: C\n"
     "        flow: {rate: [{limit: 10, period: 1m, burst: 0}]}\n",
     "t.yaml:8:54: \"burst\" must be between 1 and 1000000"},
    {"plugins:\n"
     "  - name: p\n"
     "    path: p.so\n"
     "    workflows:\n"
     "      - name: a\n"
     "        binding: A\n"
     "        class_name: C\n"
     "        flow: {on_excess: drop}\n",
     "t.yaml:8:27: \"on_excess\" must be \"queue\" or \"reject\""},
    {"plugins:\n"
     "  - name: p\n"
     "    path: p.so\n"
     "    workflows:\n"
     "      - name: a\n"
     "        binding: A\n"
     "        class_name: C\n"
     "        flow: {priority: {key: /p}}\n",
     "t.yaml:8:26: \"priority\" orders the instances waiting for a flow "
     "rule's turn, and this flow has no concurrency or rate rule"},
    {"plugins:\n"
     "  - name: p\n"
     "    path: p.so\n"
     "    workflows:\n"
     "      - name: a\n"
     "        binding: A\n"
     "        class_name: C\n"
     "        flow: {singleton: {key: userId, mode: skip}}\n",
     "t.yaml:8:33: \"key\" must be a JSON pointer into the params, "
     "such as \"/userId\""},
    {"plugins:\n"
     "  - name: p\n"
     "    path: p.so\n"
     "    workflows:\n"
     "      - name: a\n"
     "        binding: A\n"
     "        class_name: C\n"
     "        flow: {concurrency: [{limit: 1}], priority: {key: tier}}\n",
     "t.yaml:8:59: \"key\" must be a JSON pointer into the params"},
    {"plugins:\n"
     "  - name: p\n"
     "    path: p.so\n"
     "    workflows:\n"
     "      - name: a\n"
     "        binding: A\n"
     "        class_name: C\n"
     "        flow: {singleton: {key: /u, mode: drop}}\n",
     "t.yaml:8:43: \"mode\" must be \"skip\" or \"queue\""},
    {"plugins:\n"
     "  - name: p\n"
     "    path: p.so\n"
     "    workflows:\n"
     "      - name: a\n"
     "        binding: A\n"
     "        class_name: C\n"
     "        flow: {concurrency: [{limit: 1}], priority: {default: 2}}\n",
     "t.yaml:8:53: priority is missing \"key\""},
    {"plugins:\n"
     "  - name: p\n"
     "    path: p.so\n"
     "    workflows:\n"
     "      - name: a\n"
     "        binding: A\n"
     "        class_name: C\n"
     "        flow: {singleton: {key: u, mode: drop}, on_excess: reject}\n",
     "t.yaml:8:33: \"key\" must be a JSON pointer into the params, such as "
     "\"/userId\"\n"
     "t.yaml:8:42: \"mode\" must be \"skip\" or \"queue\""},
    {"plugins:\n"
     "  - name: p\n"
     "    path: p.so\n"
     "    workflows:\n"
     "      - name: a\n"
     "        binding: A\n"
     "        class_name: C\n"
     "        flow: {concurrency: [{limit: 1}], priority: {key: /p, default: "
     "2000000}}\n",
     "t.yaml:8:72: \"default\" must be between -1000000 and 1000000"},
    {"plugins:\n"
     "  - name: p\n"
     "    path: p.so\n"
     "    workflows:\n"
     "      - name: a\n"
     "        binding: A\n"
     "        class_name: C\n"
     "        flow: {singleton: {key: /u}}\n",
     "t.yaml:8:27: singleton is missing \"mode\""},
    {"plugins:\n"
     "  - name: p\n"
     "    path: p.so\n"
     "    workflows:\n"
     "      - name: a\n"
     "        binding: A\n"
     "        class_name: C\n"
     "        flow: {concurrency: [{limit: 1}], fairness: {key: /t, weights: "
     "{gold: 0}}}\n",
     "t.yaml:8:79: the weight of \"gold\" must be an integer between 1 and "
     "1000"},
    {"plugins:\n"
     "  - name: p\n"
     "    path: p.so\n"
     "    workflows:\n"
     "      - name: a\n"
     "        binding: A\n"
     "        class_name: C\n"
     "        flow: {singleton: {mode: queue}}\n",
     "t.yaml:8:27: singleton is missing \"key\""},
    {"plugins:\n"
     "  - name: p\n"
     "    path: p.so\n"
     "    workflows:\n"
     "      - name: a\n"
     "        binding: A\n"
     "        class_name: C\n"
     "        flow: {concurrency: [{limit: 1}], fairness: {key: /t, weights: "
     "[gold]}}\n",
     "t.yaml:8:72: \"weights\" must be a mapping of the fairness key's "
     "values"},
    {"plugins:\n"
     "  - name: p\n"
     "    path: p.so\n"
     "    workflows:\n"
     "      - name: a\n"
     "        binding: A\n"
     "        class_name: C\n"
     "        flow: {singleton: [/u]}\n",
     "t.yaml:8:27: \"singleton\" must be a mapping"},
    {"plugins:\n"
     "  - name: p\n"
     "    path: p.so\n"
     "    workflows:\n"
     "      - name: a\n"
     "        binding: A\n"
     "        class_name: C\n"
     "        flow: {debounce: {key: docId, period: 30s}}\n",
     "t.yaml:8:32: \"key\" must be a JSON pointer into the params"},
    {"plugins:\n"
     "  - name: p\n"
     "    path: p.so\n"
     "    workflows:\n"
     "      - name: a\n"
     "        binding: A\n"
     "        class_name: C\n"
     "        flow: {debounce: {key: /d}}\n",
     "t.yaml:8:26: debounce is missing \"period\""},
    {"plugins:\n"
     "  - name: p\n"
     "    path: p.so\n"
     "    workflows:\n"
     "      - name: a\n"
     "        binding: A\n"
     "        class_name: C\n"
     "        flow: {debounce: {period: 8d}}\n",
     "t.yaml:8:35: \"period\" must be at most 1 week"},
    {"plugins:\n"
     "  - name: p\n"
     "    path: p.so\n"
     "    workflows:\n"
     "      - name: a\n"
     "        binding: A\n"
     "        class_name: C\n"
     "        flow: {debounce: {period: 1m, max_wait: 30s}}\n",
     "t.yaml:8:49: \"max_wait\" must be at least \"period\""},
    {"plugins:\n"
     "  - name: p\n"
     "    path: p.so\n"
     "    workflows:\n"
     "      - name: a\n"
     "        binding: A\n"
     "        class_name: C\n"
     "        flow:\n"
     "          singleton: {key: /u, mode: skip}\n"
     "          debounce: {key: /u, period: 1s}\n",
     "t.yaml:10:21: a flow has \"debounce\" or \"singleton\", not both"},
    {"plugins:\n  - {name: p, path: p.so, on_crash_storm: stop}\n",
     "t.yaml:2:43: \"on_crash_storm\" must be \"pause\" or \"rollback\""},
    {"plugins:\n  - {name: p, path: p.so, crash_storm: {window: 10ms}}\n",
     "t.yaml:2:49: \"window\" must be at least 1 second"},
    {"plugins:\n  - {name: p, path: p.so, crash_storm: {crashes: -1}}\n",
     "t.yaml:2:50: \"crashes\" must be between 0 and 100000"},
    {"plugins:\n  - {name: p, path: p.so, crash_storm: {rate: 1.5}}\n",
     "t.yaml:2:47: \"rate\" must be between 0 and 1"},
    {"plugins:\n  - {name: p, path: p.so, crash_storm: {rate: half}}\n",
     "t.yaml:2:47: \"rate\" must be a fraction such as 0.5 or a percentage "
     "such as \"50%\""},
    {"plugins:\n  - {name: p, path: p.so, crash_storm: {limit: 3}}\n",
     "t.yaml:2:41: unknown key \"limit\" in crash_storm"},
    {"http:\n  token_env: ~\n",
     "t.yaml:2:14: \"token_env\" must be a non-empty string"},
    {"http:\n  listen: {host: a}\n",
     "t.yaml:2:11: \"listen\" must be a non-empty string"},
    {"http:\n  tls: true\n", "t.yaml:2:8: \"tls\" must be a mapping"},
    {"http:\n  tls: {cert: c.pem}\n", "t.yaml:2:8: tls is missing \"key\""},
    {"http:\n  keys:\n    - {name: ops, token_env: T, scopes: [read, "
     "opperate]}\n",
     "t.yaml:3:48: unknown scope \"opperate\" (did you mean \"operate\"?)"},
    {"http:\n  keys:\n    - {name: ops, scopes: [read]}\n",
     "t.yaml:3:7: key \"ops\" is missing \"token_env\""},
    {"http:\n  keys:\n    - {name: ops, token_env: T, scopes: []}\n",
     "t.yaml:3:41: key \"ops\" has no scopes"},
    {"http:\n  keys:\n    - {name: ops, token_env: T, scopes: [read]}\n"
     "    - {name: ops, token_env: U, scopes: [read]}\n",
     "t.yaml:4:14: duplicate key name \"ops\" (first at 3:14)"},
    {"http:\n  token_env: T\n  keys:\n"
     "    - {name: default, token_env: U, scopes: [read]}\n",
     "t.yaml:4:14: duplicate key name \"default\" (first at 2:14)"},
    {"http:\n  keys:\n    - {name: a, token_env: T, scopes: [read]}\n"
     "    - {name: b, token_env: T, scopes: [admin]}\n",
     "t.yaml:4:28: duplicate key token_env \"T\" (first at 3:28)"},
    {"http:\n  keys:\n"
     "    - {name: a, token_env: T, scopes: [read], workflows: [w, w]}\n",
     "t.yaml:3:62: \"workflows\" names \"w\" twice"},
    {"http: { max_wait: 11 minutes }\n",
     "t.yaml:1:19: \"max_wait\" must be at most 10 minutes"},
    {"http: { max_wait: soon }\n",
     "t.yaml:1:19: \"max_wait\" is not a valid duration: \"soon\""},
    {"http:\n  allowed_hosts: duro.example.com\n",
     "t.yaml:2:18: \"allowed_hosts\" must be a list"},
    {"http:\n  allowed_hosts: [a.test, \"\"]\n",
     "t.yaml:2:27: \"allowed_hosts\" must be a non-empty string"},
    {"http:\n  allowed_hosts:\n    - ok.test\n    - http://duro.test/\n",
     "t.yaml:4:7: \"allowed_hosts\" entries are host names as a Host header "
     "gives them (\"duro.example.com\" or \"duro.example.com:8787\"), not "
     "\"http://duro.test/\""},
    {"http:\n  allowed_hosts: [\"duro.test:http\"]\n",
     "t.yaml:2:19: \"allowed_hosts\" entries are host names as a Host header "
     "gives them (\"duro.example.com\" or \"duro.example.com:8787\"), not "
     "\"duro.test:http\""},

    /* storage.encryption: keys with unique ids of their syntax, an active
     * one among them */
    {"storage:\n  encryption:\n    keys:\n      - {id: k1, key_env: A}\n"
     "      - {id: k1, key_env: B}\n    active: k1\n",
     "t.yaml:5:14: duplicate storage.encryption key id \"k1\" (first at "
     "4:14)"},
    {"storage:\n  encryption:\n    keys:\n      - {id: k1, key_env: A}\n"
     "    active: k2\n",
     "t.yaml:5:13: \"active\" names key \"k2\", which \"keys\" does not "
     "list"},
    {"storage:\n  encryption:\n    keys:\n      - {id: \"k 1\", key_env: A}\n"
     "    active: k1\n",
     "t.yaml:4:14: key ids are 1-32 characters of A-Z a-z 0-9 _ -, not "
     "\"k 1\""},
    {"storage:\n  encryption:\n    keys: []\n    active: k1\n",
     "t.yaml:3:11: \"keys\" lists at least one key: {id, key_env}"},
    {"storage:\n  encryption:\n    keys:\n      - {id: k1}\n"
     "    active: k1\n",
     "t.yaml:4:9: key \"k1\" is missing \"key_env\""},
    {"storage:\n  encryption:\n    keys:\n      - {id: k1, key_env: A}\n",
     "t.yaml:3:5: storage.encryption is missing \"active\""},

    /* engine: integers are decimal, plain and range-checked */
    {"engine:\n  workers: eight\n",
     "t.yaml:2:12: \"workers\" must be an integer"},
    {"engine:\n  workers: 12abc\n",
     "t.yaml:2:12: \"workers\" must be an integer"},
    {"engine:\n  workers: \"8\"\n",
     "t.yaml:2:12: \"workers\" must be an integer"},
    {"engine:\n  workers: 0x10\n",
     "t.yaml:2:12: \"workers\" must be an integer"},
    {"engine:\n  workers: 1.5\n",
     "t.yaml:2:12: \"workers\" must be an integer"},
    {"engine:\n  workers: +8\n", "t.yaml:2:12: \"workers\" must be an integer"},
    {"engine:\n  workers: 1e3\n",
     "t.yaml:2:12: \"workers\" must be an integer"},
    {"engine:\n  workers: --5\n",
     "t.yaml:2:12: \"workers\" must be an integer"},
    {"engine:\n  workers:\n", "t.yaml:2:11: \"workers\" must be an integer"},
    {"engine:\n  workers: [8]\n",
     "t.yaml:2:12: \"workers\" must be an integer"},
    {"engine:\n  workers: 0\n",
     "t.yaml:2:12: \"workers\" must be between 1 and 1024"},
    {"engine:\n  workers: -1\n",
     "t.yaml:2:12: \"workers\" must be between 1 and 1024"},
    {"engine:\n  workers: 1025\n",
     "t.yaml:2:12: \"workers\" must be between 1 and 1024"},
    {"engine:\n  workers: 99999999999999999999999\n",
     "t.yaml:2:12: \"workers\" must be between 1 and 1024"},
    {"engine:\n  max_step_result: 1073741825\n",
     "t.yaml:2:20: \"max_step_result\" must be between 1 and 1073741824"},
    {"engine: 5\n", "t.yaml:1:9: \"engine\" must be a mapping"},
    {"engine:\n  workers: 4\n  workers: 5\n",
     "t.yaml:3:3: duplicate key \"workers\" in engine"},

    /* plugins */
    {"plugins: {name: x}\n", "t.yaml:1:10: \"plugins\" must be a list"},
    {"plugins:\n  - just-a-name\n",
     "t.yaml:2:5: each entry of \"plugins\" must be a mapping"},
    {"plugins:\n  - path: a.so\n", "t.yaml:2:5: plugin is missing \"name\""},
    {"plugins:\n  - name: orders\n",
     "t.yaml:2:5: plugin \"orders\" is missing \"path\""},
    {"plugins:\n  - name: x\n    path: \"\"\n",
     "t.yaml:3:11: \"path\" must be a non-empty string"},
    {"plugins:\n  - {name: a, path: a.so}\n  - {name: a, path: b.so}\n",
     "t.yaml:3:12: duplicate plugin name \"a\" (first at 2:12)"},
    {"plugins:\n  - name: x\n    path: x.so\n    wrkflows: []\n",
     "t.yaml:4:5: unknown key \"wrkflows\" in plugin"},

    /* workflows */
    {WF_HEAD "      - name: order-flow\n"
             "        binding: ORDER_FLOW\n"
             "        class_name: OrderFlow\n"
             "        retension: 30d\n",
     "t.yaml:8:9: unknown key \"retension\" in workflow"},
    {WF_HEAD "      - name: order-flow\n"
             "        class_name: OrderFlow\n",
     "t.yaml:5:9: workflow \"order-flow\" is missing \"binding\""},
    {WF_HEAD "      - binding: B\n"
             "        class_name: C\n",
     "t.yaml:5:9: workflow is missing \"name\""},
    {WF_HEAD "      - {name: a, binding: A}\n",
     "t.yaml:5:9: workflow \"a\" is missing \"class_name\""},
    {WF_HEAD WF_ABC "        retention: 3 fortnights\n",
     "t.yaml:8:20: \"retention\" is not a valid duration: \"3 fortnights\""},
    {WF_HEAD WF_ABC "        retention: -1d\n",
     "t.yaml:8:20: \"retention\" is not a valid duration: \"-1d\""},
    {WF_HEAD WF_ABC "        retention: [30d]\n",
     "t.yaml:8:20: \"retention\" must be a duration such as \"30d\", or a "
     "mapping {complete, errored, terminated} of durations"},
    /* by outcome: each a duration, no other key */
    {WF_HEAD WF_ABC "        retention: {complete: 7d, errord: 30d}\n",
     "t.yaml:8:35: unknown key \"errord\" in retention"},
    {WF_HEAD WF_ABC "        retention:\n"
                    "          complete: 3 fortnights\n",
     "t.yaml:9:21: \"complete\" is not a valid duration: \"3 fortnights\""},
    {WF_HEAD WF_ABC "        retention: {terminated: 36501 days}\n",
     "t.yaml:8:33: \"terminated\" must be at most 36500 days"},
    {WF_HEAD WF_ABC "        retention: {errored: [1d]}\n",
     "t.yaml:8:30: \"errored\" must be a duration"},
    {WF_HEAD WF_ABC "        retention: {complete: 1d, complete: 2d}\n",
     "t.yaml:8:35: duplicate key \"complete\" in retention"},
    /* Past the longest duration the parser takes, named as a limit. */
    {WF_HEAD WF_ABC "        retention: 36501 days\n",
     "t.yaml:8:20: \"retention\" must be at most 36500 days"},
    /* index: search attributes, each a valid name once, a JSON pointer,
     * a known type, at most 16. */
    {WF_HEAD WF_ABC "        index: [{name: customer, from: customerId}]\n",
     "t.yaml:8:40: \"from\" is not a JSON pointer into the params"},
    {WF_HEAD WF_ABC "        index: [{name: c, from: /c}, {name: c}]\n",
     "t.yaml:8:45: a second attribute named \"c\" (the first is at 8:17)"},
    {WF_HEAD WF_ABC "        index: [{name: amount, type: integer}]\n",
     "t.yaml:8:38: \"type\" must be \"string\" or \"number\""},
    {WF_HEAD WF_ABC "        index: [{name: 2fast}]\n",
     "t.yaml:8:24: an attribute's name is 1-64 characters of A-Z a-z 0-9 _"},
    {WF_HEAD WF_ABC "        index: [{from: /c}]\n",
     "t.yaml:8:17: attribute is missing \"name\""},
    {WF_HEAD WF_ABC "        index: {name: c}\n",
     "t.yaml:8:16: \"index\" must be a list"},
    {WF_HEAD WF_ABC "        index: [{name: a1}, {name: a2}, {name: a3}, "
                    "{name: a4}, {name: a5}, {name: a6}, {name: a7}, "
                    "{name: a8}, {name: a9}, {name: b1}, {name: b2}, "
                    "{name: b3}, {name: b4}, {name: b5}, {name: b6}, "
                    "{name: b7}, {name: b8}]\n",
     "t.yaml:8:16: \"index\" holds at most 16 attributes, not 17"},
    {WF_HEAD WF_ABC "        timeout: soon\n",
     "t.yaml:8:18: \"timeout\" is not a valid duration: \"soon\""},
    {WF_HEAD WF_ABC "        timeout: 36501 days\n",
     "t.yaml:8:18: \"timeout\" must be at most 36500 days"},
    {WF_HEAD WF_ABC "        retention: 9223372036854775807\n",
     "t.yaml:8:20: \"retention\" must be at most 36500 days"},
    {WF_HEAD WF_ABC "        retention: 9999999999999999999 days\n",
     "t.yaml:8:20: \"retention\" must be at most 36500 days"},
    {WF_HEAD WF_ABC "        limits: { steps: 0 }\n",
     "t.yaml:8:26: \"steps\" must be between 1 and 25000"},
    {WF_HEAD WF_ABC "        limits: { steps: 25001 }\n",
     "t.yaml:8:26: \"steps\" must be between 1 and 25000"},
    {WF_HEAD WF_ABC "        limits: { concurrency: -1 }\n",
     "t.yaml:8:32: \"concurrency\" must be between 0 and 4294967295"},
    {WF_HEAD WF_ABC "        limits: 5\n",
     "t.yaml:8:17: \"limits\" must be a mapping"},
    {WF_HEAD WF_ABC "        limits: { step: 10 }\n",
     "t.yaml:8:19: unknown key \"step\" in limits"},
    {WF_HEAD "      - {name: a, binding: A, class_name: C, name: b}\n",
     "t.yaml:5:46: duplicate key \"name\" in workflow"},
    {WF_HEAD "      - {name: a, binding: A, class_name: C}\n"
             "      - {name: a, binding: B, class_name: C}\n",
     "t.yaml:6:16: duplicate workflow name \"a\" (first at 5:16)"},
    /* Workflow names are unique across plugins... */
    {"plugins:\n"
     "  - name: p1\n"
     "    path: p1.so\n"
     "    workflows:\n"
     "      - {name: a, binding: A, class_name: C}\n"
     "  - name: p2\n"
     "    path: p2.so\n"
     "    workflows:\n"
     "      - {name: a, binding: B, class_name: C}\n",
     "t.yaml:9:16: duplicate workflow name \"a\" (first at 5:16)"},
    /* ...and so are bindings, */
    {"plugins:\n"
     "  - name: p1\n"
     "    path: p1.so\n"
     "    workflows:\n"
     "      - {name: a, binding: A, class_name: C}\n"
     "  - name: p2\n"
     "    path: p2.so\n"
     "    workflows:\n"
     "      - {name: b, binding: A, class_name: C}\n",
     "t.yaml:9:28: duplicate binding name \"A\" (first at 5:28)"},
    /* ...which workflows share with queue producers. */
    {"plugins:\n"
     "  - name: p\n"
     "    path: p.so\n"
     "    workflows:\n"
     "      - {name: a, binding: A, class_name: C}\n"
     "    queues:\n"
     "      producers:\n"
     "        - {binding: A, queue: q}\n",
     "t.yaml:8:21: duplicate binding name \"A\" (first at 5:28)"},
    {"plugins:\n  - name: p\n    path: p.so\n    workflows: {a: 1}\n",
     "t.yaml:4:16: \"workflows\" must be a list"},
    {WF_HEAD "      - order-flow\n",
     "t.yaml:5:9: each entry of \"workflows\" must be a mapping"},

    /* queues */
    {"plugins:\n  - name: p\n    path: p.so\n    queues: []\n",
     "t.yaml:4:13: \"queues\" must be a mapping"},
    {Q_HEAD "      producer: []\n",
     "t.yaml:5:7: unknown key \"producer\" in queues"},
    {Q_HEAD "      consumers: {queue: q}\n",
     "t.yaml:5:18: \"consumers\" must be a list"},
    {Q_HEAD "      producers:\n        - [B, q]\n",
     "t.yaml:6:11: each entry of \"producers\" must be a mapping"},
    {Q_HEAD "      producers:\n        - binding: B\n",
     "t.yaml:6:11: producer \"B\" is missing \"queue\""},
    {Q_HEAD "      producers:\n        - queue: q\n",
     "t.yaml:6:11: producer is missing \"binding\""},
    {Q_HEAD "      consumers:\n        - max_retries: 3\n",
     "t.yaml:6:11: consumer is missing \"queue\""},
    {CONSUMER_Q "          max_batch_size: 0\n",
     "t.yaml:7:27: \"max_batch_size\" must be between 1 and 100"},
    {CONSUMER_Q "          max_batch_size: 101\n",
     "t.yaml:7:27: \"max_batch_size\" must be between 1 and 100"},
    {CONSUMER_Q "          max_batch_timeout: 61s\n",
     "t.yaml:7:30: \"max_batch_timeout\" must be at most 1 minute"},
    {CONSUMER_Q "          max_batch_timeout: fast\n",
     "t.yaml:7:30: \"max_batch_timeout\" is not a valid duration: \"fast\""},
    {CONSUMER_Q "          retry_delay: 13h\n",
     "t.yaml:7:24: \"retry_delay\" must be at most 12 hours"},
    {CONSUMER_Q "          retry_delay: soon\n",
     "t.yaml:7:24: \"retry_delay\" is not a valid duration: \"soon\""},
    {CONSUMER_Q "          max_retries: 101\n",
     "t.yaml:7:24: \"max_retries\" must be between 0 and 100"},
    {CONSUMER_Q "          dead_letter_queue: q\n",
     "t.yaml:7:30: \"dead_letter_queue\" must differ from the consumer's queue "
     "\"q\""},
    {CONSUMER_Q "          dead_letter_queue: \"dead letters\"\n",
     "t.yaml:7:30: queue names are 1-100 characters of A-Z a-z 0-9 _ . : -, "
     "not \"dead letters\""},
    {Q_HEAD "      consumers:\n"
            "        - queue: jobs/1\n",
     "t.yaml:6:18: queue names are 1-100 characters of A-Z a-z 0-9 _ . : -, "
     "not \"jobs/1\""},
    {CONSUMER_Q "          visibility_timeout: 999ms\n",
     "t.yaml:7:31: \"visibility_timeout\" must be at least 1 second"},
    {CONSUMER_Q "          visibility_timeout: 13h\n",
     "t.yaml:7:31: \"visibility_timeout\" must be at most 12 hours"},
    {CONSUMER_Q "          visibility_timeout_ms: 30000\n",
     "t.yaml:7:11: unknown key \"visibility_timeout_ms\" in consumer"},
    /* A queue has one consumer, across all plugins. */
    {CONSUMER_Q "        - queue: q\n",
     "t.yaml:7:18: duplicate consumer for queue \"q\" (first at 6:18)"},
    /* Tail consumers: plugins of the file, each once. */
    {"plugins:\n"
     "  - name: p\n"
     "    path: p.so\n"
     "    tail_consumers: [audit]\n",
     "t.yaml:4:22: tail consumer \"audit\" is not a plugin of this file"},
    {"plugins:\n"
     "  - name: p\n"
     "    path: p.so\n"
     "    tail_consumers: [p, p]\n",
     "t.yaml:4:25: \"tail_consumers\" names plugin \"p\" twice (first at "
     "4:22)"},
    {"plugins:\n"
     "  - name: p\n"
     "    path: p.so\n"
     "    tail_consumers: [p]\n"
     "    workflows:\n" WF_ABC "        tail_consumers: [p]\n",
     "t.yaml:9:26: tail consumer \"p\" of workflow \"a\" is named by its "
     "plugin's tail_consumers already (at 4:22)"},
    {"tail:\n  max_batch_size: 0\n",
     "t.yaml:2:19: \"max_batch_size\" must be between 1 and 10000"},
    {"tail:\n  buffers: 10\n", "t.yaml:2:3: unknown key \"buffers\" in tail"},
    /* The no-code consumer: a declared workflow, a JSON pointer. */
    {CONSUMER_Q "          workflow: nowhere\n"
                "          id_from: /jobId\n",
     "t.yaml:7:21: consumer of queue \"q\" creates instances of workflow "
     "\"nowhere\", which no plugin declares"},
    {CONSUMER_Q "          workflow: a\n"
                "          id_from: jobId\n"
                "    workflows:\n" WF_ABC,
     "t.yaml:8:20: \"id_from\" is not a JSON pointer (RFC 6901: \"\" or "
     "\"/a/b\", with ~0 for '~' and ~1 for '/'): \"jobId\""},
    {CONSUMER_Q "          workflow: a\n"
                "          id_from: /a~2b\n",
     "t.yaml:8:20: \"id_from\" is not a JSON pointer (RFC 6901: \"\" or "
     "\"/a/b\", with ~0 for '~' and ~1 for '/'): \"/a~2b\""},
    {CONSUMER_Q "          id_from: /jobId\n",
     "t.yaml:7:20: \"id_from\" needs \"workflow\": it names where a "
     "message's instance id is"},
    {CONSUMER_Q "          workflow: a\n",
     "t.yaml:7:21: \"workflow\" needs \"id_from\", the JSON pointer to each "
     "message's instance id (e.g. \"/jobId\")"},
    /* A queue handler's concurrency by key. */
    {CONSUMER_Q "          concurrency: {key: account, limit: 1}\n",
     "t.yaml:7:30: \"key\" is not a JSON pointer into the message body "
     "(RFC 6901: \"/account\", with ~0 for '~' and ~1 for '/'): "
     "\"account\""},
    {CONSUMER_Q "          concurrency: {key: /account, limit: 0}\n",
     "t.yaml:7:47: \"limit\" must be between 1 and 1000"},
    {CONSUMER_Q "          concurrency: {limit: 2}\n",
     "t.yaml:7:24: concurrency is missing \"key\""},
    {CONSUMER_Q "          concurrency: 1\n",
     "t.yaml:7:24: \"concurrency\" must be a mapping"},
    {CONSUMER_Q "          concurrency: {key: /a, max: 1}\n",
     "t.yaml:7:34: unknown key \"max\" in concurrency"},
    {CONSUMER_Q "          workflow: a\n"
                "          id_from: /jobId\n"
                "          concurrency: {key: /account}\n"
                "    workflows:\n" WF_ABC,
     "t.yaml:9:24: \"concurrency\" limits a queue handler's messages by key; "
     "a no-code consumer's instances are limited by their workflow's "
     "flow.concurrency"},

    /* triggers */
    {"plugins:\n  - name: p\n    path: p.so\n    triggers: [a]\n",
     "t.yaml:4:15: \"triggers\" must be a mapping"},
    {TRIGGERS_HEAD "      cron: []\n",
     "t.yaml:5:7: unknown key \"cron\" in triggers"},
    {TRIGGERS_HEAD "      crons: \"*/5 * * * *\"\n",
     "t.yaml:5:14: \"crons\" must be a list"},
    {TRIGGERS_HEAD "      crons: [{a: 1}]\n",
     "t.yaml:5:16: unknown key \"a\" in cron"},
    {TRIGGERS_HEAD "      crons: [\"\"]\n",
     "t.yaml:5:15: each entry of \"crons\" must be a cron expression or a "
     "mapping with a \"schedule\""},
    {TRIGGERS_HEAD "      crons: [~]\n",
     "t.yaml:5:15: each entry of \"crons\" must be a cron expression or a "
     "mapping with a \"schedule\""},
    {TRIGGERS_HEAD "      crons: [[a]]\n",
     "t.yaml:5:15: each entry of \"crons\" must be a cron expression or a "
     "mapping with a \"schedule\""},
    {TRIGGERS_HEAD "      crons: [{timezone: UTC}]\n",
     "t.yaml:5:15: cron is missing \"schedule\""},
    {TRIGGERS_HEAD "      crons: [{schedule: \"\"}]\n",
     "t.yaml:5:26: \"schedule\" must be a non-empty string"},

    /* A bad expression is placed at its offending token (past the opening
     * quote of a quoted scalar), or at its end when a field is missing. */
    {TRIGGERS_HEAD "      crons: [\"61 * * * *\"]\n",
     "t.yaml:5:16: invalid cron expression \"61 * * * *\": minute field: 61 "
     "is out of range 0-59"},
    {TRIGGERS_HEAD "      crons: ['0 3 * * *', '*/5 * * 13 *']\n",
     "t.yaml:5:37: invalid cron expression \"*/5 * * 13 *\": month field: "
     "13 is out of range 1-12"},
    {TRIGGERS_HEAD "      crons:\n        - 0 9 * * 0\n",
     "t.yaml:6:19: invalid cron expression \"0 9 * * 0\": day-of-week field: "
     "0 is not a weekday: weekdays are 1-7 with 1 = Sunday"},
    {TRIGGERS_HEAD "      crons:\n        - schedule: 0 9 * *\n",
     "t.yaml:6:28: invalid cron expression \"0 9 * *\": expected 5 fields, "
     "got 4"},
    {TRIGGERS_HEAD "      crons:\n        - schedule: \"\xc3\xa9 9 * * *\"\n",
     "t.yaml:6:22: invalid cron expression \"\xc3\xa9 9 * * *\": minute "
     "field:"},
    /* A schedule no date matches is refused at its start. */
    {TRIGGERS_HEAD "      crons: [\"0 0 30 2 *\"]\n",
     "t.yaml:5:16: cron \"0 0 30 2 *\" never fires: no date matches it"},
    {TRIGGERS_HEAD "      crons:\n        - schedule: 0 12 31 4,6 *\n",
     "t.yaml:6:21: cron \"0 12 31 4,6 *\" never fires: no date matches it"},
    {TRIGGERS_HEAD "      crons:\n        - {schedule: \"0 9 * * *\", "
                   "timezone: \"America/New York\"}\n",
     "t.yaml:6:45: time zone \"America/New York\" has a character no zone "
     "name has"},
    {TRIGGERS_HEAD "      crons:\n        - {schedule: \"0 9 1 * *\", "
                   "schedule: \"0 9 2 * *\"}\n",
     "t.yaml:6:35: duplicate key \"schedule\" in cron"},

    /* options */
    {TRIGGERS_HEAD "      crons:\n"
                   "        - schedule: 0 9 * * *\n"
                   "          timezone: Mars/Olympus_Mons\n",
     "t.yaml:7:21: unknown time zone \"Mars/Olympus_Mons\" (not in the "
     "system's time zone database"},
    {TRIGGERS_HEAD "      crons:\n"
                   "        - schedule: 0 9 * * *\n"
                   "          timezone: ../etc/passwd\n",
     "t.yaml:7:21: time zone \"../etc/passwd\" must be a zone name such as "
     "Europe/Berlin, not a path"},
    {TRIGGERS_HEAD "      crons:\n"
                   "        - schedule: 0 9 * * *\n"
                   "          timezone: \"Europe/\\\"x\"\n",
     "t.yaml:7:21: unknown time zone \"Europe/\\\"x\" (not in the system's "
     "time zone database)"},
    {TRIGGERS_HEAD "      crons:\n"
                   "        - schedule: 0 9 * * *\n"
                   "          catch_up: some\n",
     "t.yaml:7:21: \"catch_up\" must be \"none\", \"latest\" or \"all\""},
    {TRIGGERS_HEAD "      crons:\n"
                   "        - schedule: 0 9 * * *\n"
                   "          overlap: queue\n",
     "t.yaml:7:20: \"overlap\" must be \"skip\" or \"allow\""},
    {TRIGGERS_HEAD "      crons:\n"
                   "        - schedule: 0 9 * * *\n"
                   "          max_catch_up: 0\n",
     "t.yaml:7:25: \"max_catch_up\" must be between 1 and 10000"},
    {TRIGGERS_HEAD "      crons:\n"
                   "        - schedule: 0 9 * * *\n"
                   "          max_catch_up: 10001\n",
     "t.yaml:7:25: \"max_catch_up\" must be between 1 and 10000"},
    {TRIGGERS_HEAD "      crons:\n"
                   "        - schedule: 0 9 * * *\n"
                   "          overlap_allow: true\n",
     "t.yaml:7:11: unknown key \"overlap_allow\" in cron"},
    {TRIGGERS_HEAD "      crons:\n"
                   "        - schedule: 0 9 * * *\n"
                   "          params: {a: 1}\n",
     "t.yaml:7:19: \"params\" needs \"workflow\": they are the params of "
     "the instances a cron creates"},

    /* The no-code form: a declared workflow, an id template that makes
     * valid instance ids. */
    {TRIGGERS_HEAD "      crons:\n"
                   "        - schedule: 0 9 * * *\n"
                   "          workflow: nightly\n",
     "t.yaml:7:21: cron \"0 9 * * *\" creates instances of workflow "
     "\"nightly\", which no plugin declares"},
    {TRIGGERS_HEAD "      crons:\n"
                   "        - schedule: 0 9 * * *\n"
                   "          id: \"report-{date}\"\n",
     "t.yaml:7:15: \"id\" needs \"workflow\": it is the id template of the "
     "instances a cron creates"},
    {TRIGGERS_HEAD "      crons:\n"
                   "        - schedule: 0 9 * * *\n"
                   "          workflow: a\n"
                   "          params: [1, 2]\n",
     "t.yaml:8:19: \"params\" must be a mapping: the instances' params, a "
     "JSON object"},
    {TRIGGERS_HEAD "      crons:\n"
                   "        - schedule: 0 9 * * *\n"
                   "          workflow: a\n"
                   "          params: {scheduled_ms: 1}\n",
     "t.yaml:8:19: \"params\" cannot set \"cron\" or \"scheduled_ms\": each "
     "instance gets its trigger's schedule and tick there"},
    {TRIGGERS_HEAD "      crons:\n"
                   "        - schedule: 0 9 * * *\n"
                   "          workflow: a\n"
                   "          params: {x: .inf}\n",
     "t.yaml:8:23: .inf has no JSON form (write it quoted for a string)"},
    {TRIGGERS_HEAD "      crons:\n"
                   "        - schedule: 0 9 * * *\n"
                   "          workflow: a\n"
                   "          id: \"report-{day}\"\n",
     "t.yaml:8:15: \"id\" template \"report-{day}\": unknown placeholder "
     "\"{day}\" (the placeholders are {date}, {time}, {datetime} and {ts})"},
    {TRIGGERS_HEAD "      crons:\n"
                   "        - schedule: 0 9 * * *\n"
                   "          workflow: a\n"
                   "          id: \"report-{date\"\n",
     "t.yaml:8:15: \"id\" template \"report-{date\": a \"{\" with no \"}\" "
     "after it"},
    {TRIGGERS_HEAD "      crons:\n"
                   "        - schedule: 0 9 * * *\n"
                   "          workflow: a\n"
                   "          id: \"report-{{date}\"\n",
     "t.yaml:8:15: \"id\" template \"report-{{date}\": a \"{\" with no \"}\" "
     "after it"},
    {TRIGGERS_HEAD "      crons:\n"
                   "        - schedule: 0 9 * * *\n"
                   "          workflow: a\n"
                   "          id: \"report-date}\"\n",
     "t.yaml:8:15: \"id\" template \"report-date}\": a \"}\" with no \"{\" "
     "before it"},
    {TRIGGERS_HEAD "      crons:\n"
                   "        - schedule: 0 9 * * *\n"
                   "          workflow: a\n"
                   "          id: \"daily report {date}\"\n",
     "t.yaml:8:15: \"id\" template \"daily report {date}\" makes ids such as "
     "\"daily report 2025-01-31\", which is not an instance id (1-100 "
     "characters of A-Z a-z 0-9 _ . : -)"},
    /* 85 characters and a 16-character {datetime}: 101 */
    {TRIGGERS_HEAD
     "      crons:\n"
     "        - schedule: 0 9 * * *\n"
     "          workflow: a\n"
     "          id: "
     "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
     "aaaaaaaaaaaaaaaaaaaaaaaa{datetime}\n",
     "t.yaml:8:15: \"id\" template \"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
     "aaaaaaaaaaaaaaaaaaaaaaa...\" makes ids such as"},

    /* The same trigger twice in a plugin would fire twice per tick; a
     * default spelled out is the same trigger. */
    {TRIGGERS_HEAD
     "      crons: [\"0 3 * * *\", \"0 4 * * *\", \"0 3 * * *\"]\n",
     "t.yaml:5:41: duplicate cron trigger \"0 3 * * *\" (first at 5:15): it "
     "would fire twice"},
    {TRIGGERS_HEAD "      crons:\n"
                   "        - {schedule: 0 9 * * *, timezone: Europe/Berlin}\n"
                   "        - {schedule: 0 9 * * *, timezone: Europe/Berlin,\n"
                   "           catch_up: all}\n",
     "t.yaml:7:11: duplicate cron trigger \"0 9 * * *\" (first at 6:11): it "
     "would fire twice"},
    {TRIGGERS_HEAD "      crons:\n"
                   "        - 0 9 * * *\n"
                   "        - {schedule: 0 9 * * *, timezone: UTC}\n",
     "t.yaml:7:11: duplicate cron trigger \"0 9 * * *\" (first at 6:11): it "
     "would fire twice"},
    {TRIGGERS_HEAD "      crons:\n"
                   "        - {schedule: 0 9 * * *, workflow: a}\n"
                   "        - {schedule: 0 9 * * *, workflow: a,\n"
                   "           id: \"cron-{datetime}\"}\n"
                   "    workflows:\n" WF_ABC,
     "t.yaml:7:11: duplicate cron trigger \"0 9 * * *\" (first at 6:11): it "
     "would fire twice"},

    {WF_HEAD WF_ABC "        lifecycle_queue: events\n",
     "t.yaml:8:26: workflow \"a\" publishes its lifecycle to queue "
     "\"events\", which no consumer consumes or names as its "
     "dead_letter_queue"},
    {WF_HEAD WF_ABC "        lifecycle_queue: \"a b\"\n",
     "t.yaml:8:26: queue names are 1-100 characters"},
    {CONSUMER_Q "          max_concurrency: 0\n",
     "t.yaml:7:28: \"max_concurrency\" must be between 1 and 250"},
    {CONSUMER_Q "          max_concurrency: 251\n",
     "t.yaml:7:28: \"max_concurrency\" must be between 1 and 250"},
    {CONSUMER_Q "          message_retention: 15d\n",
     "t.yaml:7:30: \"message_retention\" must be at most 2 weeks"},
    {CONSUMER_Q "          message_retention: 59s\n",
     "t.yaml:7:30: \"message_retention\" must be at least 1 minute"},
    /* A producer must send to a queue some consumer consumes or
     * dead-letters into, in any plugin; another producer is not enough. */
    {Q_HEAD "      producers:\n"
            "        - {binding: B1, queue: q}\n"
            "        - {binding: B2, queue: q}\n"
            "      consumers:\n"
            "        - {queue: unproduced, dead_letter_queue: nowhere}\n",
     "t.yaml:6:32: producer \"B1\" sends to queue \"q\", which no consumer "
     "consumes or names as its dead_letter_queue"},
    {CONSUMER_Q "      producers:\n"
                "        - {binding: B, queue: q}\n"
                "        - {binding: C,\n"
                "           queue: r}\n",
     "t.yaml:10:19: producer \"C\" sends to queue \"r\", which no consumer "
     "consumes or names as its dead_letter_queue"},

    /* Resources: a concurrency or a rate each, in range, named once. */
    {"resources:\n"
     "  - name: payments\n",
     "t.yaml:2:5: resource \"payments\" needs a \"concurrency\" or a "
     "\"rate\" (or both): it would limit nothing"},
    {"resources:\n"
     "  - {name: payments, concurrency: 0}\n",
     "t.yaml:2:35: \"concurrency\" must be between 1 and 1000000"},
    {"resources:\n"
     "  - name: payments\n"
     "    rate: {limit: 50}\n",
     "t.yaml:3:11: rate is missing \"period\""},
    {"resources:\n"
     "  - name: payments\n"
     "    rate: {limit: 50, period: 1s, burst: 0}\n",
     "t.yaml:3:42: \"burst\" must be between 1 and 1000000"},
    {"resources:\n"
     "  - {name: payments, concurrency: 10}\n"
     "  - {name: payments, concurrency: 5}\n",
     "t.yaml:3:12: duplicate resource name \"payments\" (first at 2:12)"},
    {"resources:\n"
     "  - {name: \"pay ments\", concurrency: 10}\n",
     "t.yaml:2:12: resource names are 1-100 characters of A-Z a-z 0-9 _ . : -, "
     "not \"pay ments\""},
    {"resources:\n"
     "  - {name: payments, concurrency: 10, rates: {limit: 1}}\n",
     "t.yaml:2:39: unknown key \"rates\" in a resource — did you mean "
     "\"rate\"?"},

    /* Pipelines: one sink is required, its keys are checked, and a
     * partition stays under the sink's path. */
    {"pipelines:\n"
     "  - name: events\n"
     "    binding: EVENTS\n",
     "t.yaml:2:5: pipeline \"events\" is missing \"sink\""},
    {"pipelines:\n"
     "  - name: events\n"
     "    binding: EVENTS\n"
     "    sink: {}\n",
     "t.yaml:4:11: \"sink\" needs \"files\" or \"s3\""},
    {"pipelines:\n"
     "  - name: events\n"
     "    binding: EVENTS\n"
     "    sink:\n"
     "      files: {path: out}\n"
     "      s3: {endpoint: \"http://h\", bucket: bkt, access_key_env: K,\n"
     "           secret_key_env: S}\n",
     "t.yaml:6:11: \"sink\" takes one of \"files\" and \"s3\", not both"},
    {"pipelines:\n"
     "  - name: events\n"
     "    binding: EVENTS\n"
     "    sink:\n"
     "      s3: {endpoint: \"http://h\", access_key_env: K, secret_key_env: "
     "S}\n",
     "t.yaml:5:11: s3 sink is missing \"bucket\""},
    {"pipelines:\n"
     "  - name: events\n"
     "    binding: EVENTS\n"
     "    sink:\n"
     "      s3: {bucket: bkt, access_key_env: K, secret_key_env: S}\n",
     "t.yaml:5:11: s3 sink is missing \"endpoint\""},
    {"pipelines:\n"
     "  - name: events\n"
     "    binding: EVENTS\n"
     "    sink:\n"
     "      s3: {endpoint: \"http://h\", bucket: bkt, access_key_env: K}\n",
     "t.yaml:5:11: s3 sink is missing \"secret_key_env\""},
    {"pipelines:\n"
     "  - name: events\n"
     "    binding: EVENTS\n"
     "    sink:\n"
     "      s3:\n"
     "        endpoint: \"ftp://h\"\n"
     "        bucket: bkt\n"
     "        access_key_env: K\n"
     "        secret_key_env: S\n",
     "t.yaml:6:19: \"endpoint\" \"ftp://h\" is not a URL such as "
     "\"https://s3.example.com\": it does not start with http:// or https://"},
    {"pipelines:\n"
     "  - name: events\n"
     "    binding: EVENTS\n"
     "    sink:\n"
     "      s3:\n"
     "        endpoint: \"http://127.0.0.1:99999\"\n"
     "        bucket: bkt\n"
     "        access_key_env: K\n"
     "        secret_key_env: S\n",
     "t.yaml:6:19: \"endpoint\" \"http://127.0.0.1:99999\" is not a URL such "
     "as \"https://s3.example.com\": its port is not 1-65535"},
    {"pipelines:\n"
     "  - name: events\n"
     "    binding: EVENTS\n"
     "    sink:\n"
     "      s3:\n"
     "        endpoint: \"https://s3.example.com/bkt\"\n"
     "        bucket: bkt\n"
     "        access_key_env: K\n"
     "        secret_key_env: S\n",
     "t.yaml:6:19: \"endpoint\" \"https://s3.example.com/bkt\" is not a URL "
     "such as \"https://s3.example.com\": it holds more than a scheme, a host "
     "and a port"},
    {"pipelines:\n"
     "  - name: events\n"
     "    binding: EVENTS\n"
     "    sink:\n"
     "      s3:\n"
     "        endpoint: \"http://\"\n"
     "        bucket: bkt\n"
     "        access_key_env: K\n"
     "        secret_key_env: S\n",
     "t.yaml:6:19: \"endpoint\" \"http://\" is not a URL such as "
     "\"https://s3.example.com\": it names no host"},
    {"pipelines:\n"
     "  - name: events\n"
     "    binding: EVENTS\n"
     "    sink:\n"
     "      s3: {endpoint: \"http://h\", bucket: My_Bucket, access_key_env: "
     "K,\n"
     "           secret_key_env: S}\n",
     "t.yaml:5:42: \"bucket\" \"My_Bucket\" is not a bucket name: 3-63 "
     "characters of a-z 0-9 . -"},
    {"pipelines:\n"
     "  - name: events\n"
     "    binding: EVENTS\n"
     "    sink:\n"
     "      s3: {endpoint: \"http://h\", bucket: bkt, prefix: /events,\n"
     "           access_key_env: K, secret_key_env: S}\n",
     "t.yaml:5:55: \"prefix\" \"/events\" may hold only A-Z a-z 0-9 _ . = - /, "
     "not start with '/' nor hold \"//\""},
    {"pipelines:\n"
     "  - name: events\n"
     "    binding: EVENTS\n"
     "    sink:\n"
     "      s3: {endpoint: \"http://h\", bucket: bkt, access_key_env: K,\n"
     "           secret_key_env: S, region: \"eu:west\"}\n",
     "t.yaml:6:39: \"region\" \"eu:west\" may hold only a-z 0-9 -"},
    {"pipelines:\n"
     "  - name: events\n"
     "    binding: EVENTS\n"
     "    sink:\n"
     "      s3: {endpoint: \"http://h\", bucket: bkt, access_key_env: K,\n"
     "           secret_key_env: \"wJalrXUtnFEMI/K7MDENG\"}\n",
     "t.yaml:6:28: \"secret_key_env\" \"wJalrXUtnFEMI/K7MDENG\" is not an "
     "environment variable's name (it names the variable holding the key, not "
     "the key)"},
    {"pipelines:\n"
     "  - name: events\n"
     "    binding: EVENTS\n"
     "    sink:\n"
     "      s3: {endpoint: \"http://h\", bucket: bkt, access_key_env: K,\n"
     "           secret_key_env: S, partition: \"{yyyy}//{mm}\"}\n",
     "t.yaml:6:42: \"partition\" \"{yyyy}//{mm}\" may not hold empty "
     "directory names"},
    {"pipelines:\n"
     "  - name: events\n"
     "    binding: EVENTS\n"
     "    sink: {files: {path: out, partition: \"../{yyyy}\"}}\n",
     "t.yaml:4:42: \"partition\" \"../{yyyy}\" may not hold \".\" or \"..\""},
    {"pipelines:\n"
     "  - name: events\n"
     "    binding: EVENTS\n"
     "    sink: {files: {path: out, partition: \"{yyyy}/{day}\"}}\n",
     "t.yaml:4:42: \"partition\" \"{yyyy}/{day}\" may not hold a field other "
     "than {yyyy} {mm} {dd} {hh} {mi}"},
    {"pipelines:\n"
     "  - name: events\n"
     "    binding: EVENTS\n"
     "    sink: {files: {path: out}}\n"
     "    format: parquet\n",
     "t.yaml:5:13: \"format\" must be \"jsonl\" or \"csv\""},
    /* csv names its columns, each a key or a JSON pointer; jsonl none */
    {"pipelines:\n"
     "  - name: events\n"
     "    binding: EVENTS\n"
     "    sink: {files: {path: out}}\n"
     "    format: csv\n",
     "t.yaml:5:13: pipeline \"events\": \"format: csv\" needs \"columns\""},
    {"pipelines:\n"
     "  - name: events\n"
     "    binding: EVENTS\n"
     "    sink: {files: {path: out}}\n"
     "    columns: [a]\n",
     "t.yaml:5:14: pipeline \"events\": \"columns\" is for \"format: csv\""},
    {"pipelines:\n"
     "  - name: events\n"
     "    binding: EVENTS\n"
     "    sink: {files: {path: out}}\n"
     "    format: csv\n"
     "    columns: [a, \"/x~2\"]\n",
     "t.yaml:6:18: \"columns\" entry \"/x~2\" is not a JSON pointer"},
    {"pipelines:\n"
     "  - name: events\n"
     "    binding: EVENTS\n"
     "    sink: {files: {path: out}}\n"
     "    format: csv\n"
     "    columns: {a: 1}\n",
     "t.yaml:6:14: \"columns\" must be a list"},
    {"pipelines:\n"
     "  - name: events\n"
     "    binding: EVENTS\n"
     "    sink: {files: {path: out}}\n"
     "    compression: lz4\n",
     "t.yaml:5:18: \"compression\" must be \"gzip\", \"zstd\" or \"none\""},
    {"pipelines:\n"
     "  - name: events\n"
     "    binding: EVENTS\n"
     "    sink: {files: {path: out}}\n"
     "    roll: {size: 10, interval: 0}\n",
     "t.yaml:5:18: \"size\" must be"},
    {"pipelines:\n"
     "  - {name: events, binding: EVENTS, sink: {files: {path: a}}}\n"
     "  - {name: events, binding: OTHER, sink: {files: {path: b}}}\n",
     "t.yaml:3:12: duplicate pipeline name \"events\" (first at 2:12)"},
    {"pipelines:\n"
     "  - {name: \"a b\", binding: EVENTS, sink: {files: {path: a}}}\n",
     "t.yaml:2:12: pipeline names are 1-100 characters"},
    {"pipelines:\n"
     "  - {name: a, binding: EVENTS, sink: {files: {partition: x}}}\n",
     "t.yaml:2:46: files sink is missing \"path\""},

};

START_TEST(test_bad) {
  const bad_case *c = &bad[_i];
  char err[512] = "untouched";
  config *cfg = parse(c->yaml, err, sizeof err);
  if (cfg)
    config_free(cfg);
  ck_assert_msg(cfg == NULL, "row %d accepted, expected \"%s\"", _i, c->error);
  ck_assert_msg(strstr(err, c->error) != NULL,
                "row %d:\n  got      \"%s\"\n  expected \"%s\"", _i, err,
                c->error);
}
END_TEST

/* A NUL byte inside the given length is the reader's to refuse. */
START_TEST(test_nul_in_text) {
  static const char text[] = "engine: {}\n\0\n";
  char err[256];
  config *cfg = config_parse("t.yaml", text, sizeof text - 1, err, sizeof err);
  ck_assert_ptr_null(cfg);
  ck_assert_str_eq(err,
                   "t.yaml:2:1: YAML syntax error: control characters are not "
                   "allowed");
}
END_TEST

/* The message is cut to the buffer and still terminated; no buffer at all
 * is fine too. */
START_TEST(test_small_error_buffer) {
  char err[12];
  memset(err, 'x', sizeof err);
  ck_assert_ptr_null(parse("storge: {}\n", err, sizeof err));
  ck_assert_str_eq(err, "t.yaml:1:1:");
  ck_assert_ptr_null(parse("storge: {}\n", NULL, 0));
  err[0] = 'x';
  ck_assert_ptr_null(parse("storge: {}\n", err, 0));
  ck_assert_int_eq(err[0], 'x');
}
END_TEST

/* ---- Depth ------------------------------------------------------------- */

/* A document `depth` levels deep: the top-level mapping, then under its key
 * "a" depth - 1 collections of one kind nested in each other, the innermost
 * holding 1.  Block mappings grow by a line and an indent per level, so
 * their size is quadratic: keep them shallow.  Returns malloc'ed text. */
typedef enum nest_kind { FLOW_SEQ, FLOW_MAP, BLOCK_SEQ, BLOCK_MAP } nest_kind;

static char *nested(nest_kind kind, int depth) {
  int inner = depth - 1;
  size_t cap = 64 + (size_t)inner * 8 +
               (kind == BLOCK_MAP ? (size_t)inner * (size_t)(2 * inner) : 0);
  char *s = malloc(cap);
  ck_assert_ptr_nonnull(s);
  size_t o = 0;
  o += (size_t)snprintf(
      s + o, cap - o, kind == FLOW_SEQ || kind == FLOW_MAP ? "a: " : "a:\n  ");
  for (int i = 0; i < inner; i++) {
    switch (kind) {
    case FLOW_SEQ:
      s[o++] = '[';
      break;
    case FLOW_MAP:
      memcpy(s + o, "{b: ", 4);
      o += 4;
      break;
    case BLOCK_SEQ: /* "- - - 1": compact nested sequences */
      memcpy(s + o, "- ", 2);
      o += 2;
      break;
    case BLOCK_MAP:
      if (i > 0) {
        s[o++] = '\n';
        memset(s + o, ' ', (size_t)(2 * (i + 1)));
        o += (size_t)(2 * (i + 1));
      }
      memcpy(s + o, "b:", 2);
      o += 2;
      break;
    }
  }
  if (kind == BLOCK_MAP && inner > 0)
    s[o++] = ' ';
  s[o++] = '1';
  for (int i = 0; i < inner && (kind == FLOW_SEQ || kind == FLOW_MAP); i++)
    s[o++] = kind == FLOW_SEQ ? ']' : '}';
  s[o++] = '\n';
  s[o] = '\0';
  ck_assert_uint_lt(o, cap);
  return s;
}

static void expect_refused(const char *text, const char *error) {
  char err[512] = "";
  config *cfg = config_parse("t.yaml", text, strlen(text), err, sizeof err);
  if (cfg)
    config_free(cfg);
  ck_assert_msg(cfg == NULL, "accepted, expected \"%s\"", error);
  ck_assert_msg(strcmp(err, error) == 0, "got \"%s\", expected \"%s\"", err,
                error);
}

/* Where the 65th level of each kind opens: the 64th collection under "a". */
static const char *const too_deep[] = {
    [FLOW_SEQ] = "t.yaml:1:67: mappings and lists nested deeper than 64 levels",
    [FLOW_MAP] =
        "t.yaml:1:256: mappings and lists nested deeper than 64 levels",
    [BLOCK_SEQ] =
        "t.yaml:2:129: mappings and lists nested deeper than 64 levels",
    [BLOCK_MAP] =
        "t.yaml:65:129: mappings and lists nested deeper than 64 levels",
};

/* 64 levels are composed and walked (and refused for the key "a", which
 * proves it); 65 are refused at the collection that opens the 65th level.
 * This holds whatever the speed of the machine. */
START_TEST(test_depth_limit) {
  for (nest_kind k = FLOW_SEQ; k <= BLOCK_MAP; k++) {
    char *text = nested(k, 64);
    expect_refused(text, "t.yaml:1:1: unknown key \"a\" at the top level");
    free(text);
    text = nested(k, 65);
    expect_refused(text, too_deep[k]);
    free(text);
  }
}
END_TEST

/* A hostile depth is refused the same way, having scanned only the first
 * 65 levels; composing 100,000 nested flow collections takes libyaml tens
 * of seconds each.  Also in a second document, which would otherwise be
 * composed in full before being refused for being there. */
START_TEST(test_depth_hostile) {
  for (nest_kind k = FLOW_SEQ; k <= BLOCK_SEQ; k++) {
    char *text = nested(k, 100000);
    expect_refused(text, too_deep[k]);
    free(text);
  }
  char *deep = nested(FLOW_SEQ, 100000);
  size_t n = strlen(deep) + 32;
  char *two = malloc(n);
  ck_assert_ptr_nonnull(two);
  snprintf(two, n, "engine: {}\n---\n%s", deep);
  expect_refused(
      two, "t.yaml:3:67: mappings and lists nested deeper than 64 levels");
  free(two);
  free(deep);
}
END_TEST

/* ---- Acceptance -------------------------------------------------------- */

static void assert_default_sections(const config *cfg) {
  ck_assert_str_eq(cfg->file, "t.yaml");
  ck_assert_str_eq(cfg->storage.path, "var/duro.db");
  ck_assert_int_eq(cfg->storage.synchronous_full, 1);
  ck_assert_ptr_null(cfg->storage.postgresql);
  ck_assert_int_eq(cfg->storage.connect_timeout_ms, 30 * 1000);
  ck_assert_int_eq(cfg->storage.lease_ms, 5 * 1000);
  ck_assert_str_eq(cfg->http.listen, "127.0.0.1:8787");
  ck_assert_ptr_null(cfg->http.token_env);
  ck_assert_int_eq(cfg->http.allow_insecure, 0);
  ck_assert_int_eq(cfg->http.max_body_bytes, 1 * MiB);
  ck_assert_int_eq(cfg->http.max_wait_ms, 60 * 1000);
  /* 64 threads while plugin code may run on them; 8 when every plugin
   * runs in worker processes (their default) */
  int all_in_workers = cfg->n_plugins > 0;
  for (size_t i = 0; i < cfg->n_plugins; i++)
    all_in_workers &= cfg->plugins[i].workers > 0;
  ck_assert_uint_eq(cfg->engine.workers, all_in_workers ? 8 : 64);
  ck_assert_int_eq(cfg->engine.max_step_result, 1 * MiB);
}

static void check_defaults(const config *cfg) {
  assert_default_sections(cfg);
  ck_assert_uint_eq(cfg->n_plugins, 0);
  ck_assert_ptr_null(cfg->plugins);
}

/* The crash-storm breaker's keys: one plugin rolls back at the 2nd
 * crash within 5 minutes, the other has none. */
static void check_log_json(const config *cfg) {
  ck_assert_int_eq(cfg->log.json, 1);
}

static void check_limits(const config *cfg) {
  ck_assert_int_eq(cfg->plugins[0].limits.memory, 256LL << 20);
  ck_assert_int_eq(cfg->plugins[0].limits.cpu_ms, 2000);
  ck_assert_int_eq(cfg->plugins[1].limits.memory, 1000000000);
  ck_assert_int_eq(cfg->plugins[1].limits.cpu_ms, 0);
  ck_assert_int_eq(cfg->plugins[2].limits.memory, 0);
  ck_assert_uint_eq(cfg->plugins[0].limits.processes, 64);
  ck_assert_uint_eq(cfg->plugins[0].limits.cpus_ppm, 1500000);
  ck_assert_uint_eq(cfg->plugins[1].limits.cpus_ppm, 250000);
  ck_assert_uint_eq(cfg->plugins[2].limits.processes, 0);
  ck_assert_uint_eq(cfg->plugins[2].limits.cpus_ppm, 0);
}

static void check_crash_storm(const config *cfg) {
  ck_assert_uint_eq(cfg->plugins[0].crash_storm.crashes, 2);
  ck_assert_int_eq(cfg->plugins[0].crash_storm.window_ms, 300000);
  ck_assert_int_eq(cfg->plugins[0].crash_storm.rollback, 1);
  ck_assert_uint_eq(cfg->plugins[1].crash_storm.crashes, 0);
  ck_assert_int_eq(cfg->plugins[1].crash_storm.window_ms, 60000);
  ck_assert_uint_eq(cfg->plugins[0].crash_storm.rate_ppm, 250000);
  ck_assert_uint_eq(cfg->plugins[1].crash_storm.rate_ppm, 2000);
}

/* One plugin in the engine's process: its threads stay 64. */
static void check_workers_in_engine(const config *cfg) {
  ck_assert_uint_eq(cfg->plugins[0].workers, 0);
  ck_assert_uint_eq(cfg->plugins[1].workers, 4);
  ck_assert_uint_eq(cfg->engine.workers, 64);
}

static void check_bare_plugin(const config *cfg) {
  assert_default_sections(cfg);
  ck_assert_uint_eq(cfg->n_plugins, 1);
  const config_plugin *pl = &cfg->plugins[0];
  ck_assert_uint_eq(pl->workers, 1);
  ck_assert_uint_eq(pl->crash_storm.crashes, 5);
  ck_assert_int_eq(pl->crash_storm.window_ms, 60000);
  ck_assert_uint_eq(pl->crash_storm.rate_ppm, 500000);
  ck_assert_int_eq(pl->crash_storm.rollback, 0);
  ck_assert_uint_eq(cfg->engine.workers, 8);
  ck_assert_str_eq(pl->name, "p");
  ck_assert_str_eq(pl->path, "p.so");
  ck_assert_int_eq(pl->pos.line, 2);
  ck_assert_int_eq(pl->pos.column, 5);
  ck_assert_uint_eq(pl->n_workflows, 0);
  ck_assert_ptr_null(pl->workflows);
  ck_assert_uint_eq(pl->n_producers, 0);
  ck_assert_ptr_null(pl->producers);
  ck_assert_uint_eq(pl->n_consumers, 0);
  ck_assert_ptr_null(pl->consumers);
  ck_assert_uint_eq(pl->n_crons, 0);
  ck_assert_ptr_null(pl->crons);
}

static void check_workflow_defaults(const config *cfg) {
  ck_assert_uint_eq(cfg->n_plugins, 1);
  ck_assert_uint_eq(cfg->plugins[0].n_workflows, 1);
  const config_workflow *w = &cfg->plugins[0].workflows[0];
  ck_assert_str_eq(w->name, "a");
  ck_assert_str_eq(w->binding, "A");
  ck_assert_str_eq(w->class_name, "C");
  ck_assert_int_eq(w->retention_ms, 30 * DAY_MS);
  ck_assert_uint_eq(w->max_steps, 10000);
  ck_assert_uint_eq(w->concurrency, 0);
  ck_assert_int_eq(w->pos.line, 5);
  ck_assert_int_eq(w->pos.column, 9);
}

static void check_allowed_hosts(const config *cfg) {
  ck_assert_uint_eq(cfg->http.n_allowed_hosts, 3);
  ck_assert_str_eq(cfg->http.allowed_hosts[0], "duro.example.com");
  ck_assert_str_eq(cfg->http.allowed_hosts[1], "10.0.0.5:8787");
  ck_assert_str_eq(cfg->http.allowed_hosts[2], "[fd00::1]:80");
}

static void check_encryption(const config *cfg) {
  ck_assert_uint_eq(cfg->storage.encryption.n_keys, 2);
  const config_encryption_key *k = cfg->storage.encryption.keys;
  ck_assert_str_eq(k[0].id, "k1");
  ck_assert_str_eq(k[0].key_env, "DURO_KEY_K1");
  ck_assert_str_eq(k[1].id, "k-2_b");
  ck_assert_int_eq(k[1].env_pos.line, 5);
  ck_assert_str_eq(cfg->storage.encryption.active, "k-2_b");
  ck_assert_int_eq(cfg->storage.encryption.active_pos.line, 6);
}

static void check_limits_edges(const config *cfg) {
  ck_assert_uint_eq(cfg->engine.workers, 1024);
  ck_assert_int_eq(cfg->engine.max_step_result, 1);
  ck_assert_int_eq(cfg->http.max_body_bytes, 1024 * MiB);
  ck_assert_int_eq(cfg->http.max_wait_ms, 10 * 60 * 1000);
  const config_plugin *pl = &cfg->plugins[0];
  ck_assert_uint_eq(pl->workflows[0].max_steps, 25000);
  ck_assert_uint_eq(pl->workflows[0].concurrency, UINT32_MAX);
  ck_assert_int_eq(pl->workflows[0].retention_ms, 0);
  ck_assert_uint_eq(pl->workflows[1].max_steps, 1);
  ck_assert_int_eq(pl->workflows[1].retention_ms, 36500 * DAY_MS);
}

/* retention: by outcome, a missing one the default; one duration for
 * all three. */
static void check_retention(const config *cfg) {
  const config_workflow *w = cfg->plugins[0].workflows;
  ck_assert_int_eq(w[0].retention_ms, 7 * DAY_MS);
  ck_assert_int_eq(w[0].retention_errored_ms, 90 * DAY_MS);
  ck_assert_int_eq(w[0].retention_terminated_ms, 30 * DAY_MS);
  ck_assert_int_eq(w[1].retention_ms, 2 * DAY_MS);
  ck_assert_int_eq(w[1].retention_errored_ms, 2 * DAY_MS);
  ck_assert_int_eq(w[1].retention_terminated_ms, 2 * DAY_MS);
  ck_assert_int_eq(w[2].retention_ms, 30 * DAY_MS);
  ck_assert_int_eq(w[2].retention_errored_ms, 30 * DAY_MS);
  ck_assert_int_eq(w[2].retention_terminated_ms, 0);
}

static void check_flow_order(const config *cfg) {
  const config_workflow *w = &cfg->plugins[0].workflows[0];
  ck_assert_str_eq(w->priority_key, "/tier");
  ck_assert_int_eq(w->priority_default, -5);
  ck_assert_str_eq(w->fairness_key, "/tenant/id");
  ck_assert_uint_eq(w->n_weights, 2);
  ck_assert_str_eq(w->weights[0].value, "acme");
  ck_assert_uint_eq(w->weights[0].weight, 3);
  ck_assert_str_eq(w->weights[1].value, "42");
  ck_assert_uint_eq(w->weights[1].weight, 1000);
  const config_workflow *b = &cfg->plugins[0].workflows[1];
  ck_assert_ptr_null(b->priority_key); /* first come first served */
  ck_assert_int_eq(b->priority_default, 0);
  ck_assert_str_eq(b->fairness_key, "/t"); /* ordering a rate's backlog */
  ck_assert_uint_eq(b->n_weights, 0);
}

static void check_flow_debounce(const config *cfg) {
  const config_workflow *w = &cfg->plugins[0].workflows[0];
  ck_assert_str_eq(w->debounce_key, "/docId");
  ck_assert_int_eq(w->debounce_ms, 30000);
  ck_assert_int_eq(w->debounce_max_wait_ms, 5 * 60000);
  const config_workflow *b = &cfg->plugins[0].workflows[1];
  ck_assert_ptr_null(b->debounce_key); /* the whole workflow is one key */
  ck_assert_int_eq(b->debounce_ms, 1500);
  ck_assert_int_eq(b->debounce_max_wait_ms, 0); /* no bound */
}

static void check_durations(const config *cfg) {
  const config_plugin *pl = &cfg->plugins[0];
  ck_assert_int_eq(pl->workflows[0].retention_ms, 60000); /* plain = ms */
  ck_assert_int_eq(pl->workflows[1].retention_ms, 5400000);
  ck_assert_int_eq(pl->workflows[0].timeout_ms, 0); /* none by default */
  ck_assert_int_eq(pl->workflows[1].timeout_ms, 2 * DAY_MS);
  ck_assert_int_eq(pl->workflows[0].rollback_on_timeout, 0); /* error */
  ck_assert_int_eq(pl->workflows[1].rollback_on_timeout, 1);
}

static void check_scalar_typing(const config *cfg) {
  ck_assert_int_eq(cfg->storage.synchronous_full, 0);
  ck_assert_int_eq(cfg->log.json, 0);          /* text unless asked */
  ck_assert_str_eq(cfg->storage.path, "null"); /* quoted: a string */
  ck_assert_str_eq(cfg->http.listen, "8787");  /* a string field */
  ck_assert_str_eq(cfg->http.token_env, "TOKEN");
  ck_assert_int_eq(cfg->http.allow_insecure, 1);
  ck_assert_uint_eq(cfg->engine.workers, 8); /* "08" is decimal */
}

static void check_aliases(const config *cfg) {
  const config_plugin *pl = &cfg->plugins[0];
  ck_assert_uint_eq(pl->n_workflows, 2);
  for (size_t i = 0; i < 2; i++) {
    ck_assert_uint_eq(pl->workflows[i].max_steps, 5);
    ck_assert_uint_eq(pl->workflows[i].concurrency, 2);
  }
}

static void check_quoted_crlf(const config *cfg) {
  ck_assert_str_eq(cfg->storage.path, "x.db");
  ck_assert_uint_eq(cfg->engine.workers, 3);
}

/* A connection string, kept as written (not a path to resolve). */
static void check_postgresql(const config *cfg) {
  ck_assert_str_eq(cfg->storage.postgresql, "host=/run/pg dbname=duro");
  ck_assert_str_eq(cfg->storage.path, "var/duro.db");
}

static void check_workers_3(const config *cfg) {
  ck_assert_uint_eq(cfg->engine.workers, 3);
}

static void check_workflow_consumer(const config *cfg) {
  const config_consumer *c = &cfg->plugins[0].consumers[0];
  ck_assert_str_eq(c->workflow, "job-flow");
  ck_assert_str_eq(c->id_from, "/job~1id");
  ck_assert_int_eq(c->workflow_pos.line, 6);
  ck_assert_uint_eq(cfg->plugins[1].n_consumers, 0);
}

static void check_consumer_concurrency(const config *cfg) {
  const config_consumer *c = &cfg->plugins[0].consumers[0];
  ck_assert_str_eq(c->concurrency_key, "/account/id");
  ck_assert_uint_eq(c->concurrency_limit, 1);
  c = &cfg->plugins[0].consumers[1];
  ck_assert_str_eq(c->concurrency_key, "/a~1b");
  ck_assert_uint_eq(c->concurrency_limit, 7);
}

static void check_consumer_defaults(const config *cfg) {
  ck_assert_uint_eq(cfg->plugins[0].n_consumers, 1);
  const config_consumer *c = &cfg->plugins[0].consumers[0];
  ck_assert_ptr_null(c->workflow);
  ck_assert_ptr_null(c->id_from);
  ck_assert_str_eq(c->queue, "q");
  ck_assert_uint_eq(c->max_batch_size, 10);
  ck_assert_int_eq(c->max_batch_timeout_ms, 5000);
  ck_assert_uint_eq(c->max_retries, 3);
  ck_assert_int_eq(c->retry_delay_ms, 0);
  ck_assert_ptr_null(c->dead_letter_queue);
  ck_assert_uint_eq(c->max_concurrency, 0);
  ck_assert_int_eq(c->message_retention_ms, 4 * DAY_MS);
  ck_assert_int_eq(c->visibility_timeout_ms, 30000);
  ck_assert_ptr_null(c->concurrency_key);
  ck_assert_int_eq(c->pos.line, 6);
  ck_assert_int_eq(c->pos.column, 11);
}

static void check_consumer_edges(const config *cfg) {
  ck_assert_uint_eq(cfg->plugins[0].n_consumers, 3);
  const config_consumer *c = cfg->plugins[0].consumers;
  ck_assert_uint_eq(c[0].max_batch_size, 100);
  ck_assert_int_eq(c[0].max_batch_timeout_ms, 60000);
  ck_assert_int_eq(c[0].retry_delay_ms, 12 * 3600 * 1000LL);
  ck_assert_uint_eq(c[0].max_retries, 100);
  ck_assert_uint_eq(c[0].max_concurrency, 250);
  ck_assert_int_eq(c[0].message_retention_ms, 14 * DAY_MS);
  ck_assert_uint_eq(c[1].max_batch_size, 1);
  ck_assert_int_eq(c[1].max_batch_timeout_ms, 0);
  ck_assert_uint_eq(c[1].max_retries, 0);
  ck_assert_int_eq(c[1].message_retention_ms, 60000);
  ck_assert_int_eq(c[2].max_batch_timeout_ms, 250);
  ck_assert_int_eq(c[2].retry_delay_ms, 90000);
}

static void check_producers(const config *cfg) {
  ck_assert_uint_eq(cfg->n_plugins, 2);
  const config_plugin *pl = &cfg->plugins[0];
  ck_assert_uint_eq(pl->n_producers, 2);
  ck_assert_str_eq(pl->producers[0].binding, "B1");
  ck_assert_str_eq(pl->producers[0].queue, "q");
  ck_assert_int_eq(pl->producers[0].queue_pos.line, 6);
  ck_assert_int_eq(pl->producers[0].queue_pos.column, 32);
  ck_assert_str_eq(pl->producers[1].queue, "dlq");
  ck_assert_str_eq(cfg->plugins[1].consumers[0].dead_letter_queue, "dlq");
}

/* The string form: a schedule, every option at its default; a numbered
 * weekday field gets a note, a named one none. */
static void check_cron_strings(const config *cfg) {
  const config_plugin *pl = &cfg->plugins[0];
  ck_assert_uint_eq(pl->n_crons, 3);
  const config_cron *c = pl->crons;
  ck_assert_str_eq(c[0].schedule, "0 9 * * 1-5");
  ck_assert_ptr_null(c[0].timezone);
  ck_assert_ptr_null(c[0].workflow);
  ck_assert_ptr_null(c[0].id);
  ck_assert_int_eq(c[0].catch_up, CONFIG_CATCH_UP_LATEST);
  ck_assert_uint_eq(c[0].max_catch_up, 100);
  ck_assert_int_eq(c[0].overlap_allow, 0);
  ck_assert_ptr_nonnull(c[0].weekday_note);
  ck_assert_msg(strstr(c[0].weekday_note, "Sunday to Thursday") != NULL,
                "note: %s", c[0].weekday_note);
  ck_assert_int_eq(c[0].pos.line, 6);
  ck_assert_int_eq(c[0].pos.column, 11);
  ck_assert_int_eq(c[0].schedule_pos.line, 6); /* past the quote */
  ck_assert_int_eq(c[0].schedule_pos.column, 12);
  ck_assert_str_eq(c[1].schedule, "0 9 * * MON-FRI");
  ck_assert_ptr_null(c[1].weekday_note);
  ck_assert_int_eq(c[1].schedule_pos.line, 7); /* plain */
  ck_assert_int_eq(c[1].schedule_pos.column, 11);
  ck_assert_str_eq(c[2].schedule, "*/15 * * * *");
  ck_assert_ptr_null(c[2].weekday_note);
  ck_assert_int_eq(c[2].workflow_pos.line, 0);
}

/* The mapping form, every key set; a workflow without an id gets the
 * default template; the same schedule in another zone is another
 * trigger. */
static void check_cron_mappings(const config *cfg) {
  const config_plugin *pl = &cfg->plugins[0];
  ck_assert_uint_eq(pl->n_crons, 3);
  const config_cron *c = pl->crons;
  ck_assert_str_eq(c[0].schedule, "30 2 L * ?");
  ck_assert_str_eq(c[0].timezone, "Europe/Berlin");
  ck_assert_str_eq(c[0].workflow, "report");
  ck_assert_str_eq(c[0].id, "report-{date}.{time}:{ts}_{datetime}");
  ck_assert_int_eq(c[0].catch_up, CONFIG_CATCH_UP_ALL);
  ck_assert_uint_eq(c[0].max_catch_up, 10000);
  ck_assert_int_eq(c[0].overlap_allow, 1);
  ck_assert_ptr_null(c[0].weekday_note);
  ck_assert_int_eq(c[0].pos.line, 6);
  ck_assert_int_eq(c[0].pos.column, 11);
  ck_assert_int_eq(c[0].schedule_pos.line, 6);
  ck_assert_int_eq(c[0].schedule_pos.column, 22);
  ck_assert_int_eq(c[0].workflow_pos.line, 8);
  ck_assert_int_eq(c[0].workflow_pos.column, 21);
  /* params typed as YAML 1.2's core schema does; quoted stays a string */
  ck_assert_str_eq(c[0].params, "{\"code\":\"007\",\"dry\":false,\"limit\":100,"
                                "\"nested\":{\"deep\":null},\"ratio\":0.5,"
                                "\"region\":\"eu\",\"tags\":[\"a\",2,null]}");
  ck_assert_ptr_null(c[1].params);

  ck_assert_str_eq(c[1].schedule, "30 2 L * ?");
  ck_assert_str_eq(c[1].timezone, "UTC");
  ck_assert_str_eq(c[1].workflow, "report");
  ck_assert_str_eq(c[1].id, "cron-{datetime}");
  ck_assert_int_eq(c[1].catch_up, CONFIG_CATCH_UP_NONE);
  ck_assert_uint_eq(c[1].max_catch_up, 1);
  ck_assert_int_eq(c[1].overlap_allow, 0);

  ck_assert_str_eq(c[2].schedule, "0 9 * * 2,7");
  ck_assert_ptr_null(c[2].timezone);
  ck_assert_ptr_null(c[2].workflow);
  ck_assert_ptr_null(c[2].id);
  ck_assert_int_eq(c[2].catch_up, CONFIG_CATCH_UP_LATEST);
  ck_assert_uint_eq(c[2].max_catch_up, 100);
  ck_assert_ptr_nonnull(c[2].weekday_note);
}

typedef struct good_case {
  const char *yaml;
  void (*check)(const config *cfg);
} good_case;

static const good_case good[] = {
    {"", check_defaults},
    {"---\n", check_defaults},
    {"# nothing but a comment\n", check_defaults},
    {"~\n", check_defaults},
    {"storage:\nhttp: ~\nengine: {}\nplugins: []\n", check_defaults},
    {"plugins:\n"
     "  - name: p\n"
     "    path: p.so\n"
     "    workflows:\n"
     "    queues:\n"
     "    triggers: {}\n",
     check_bare_plugin},
    {"plugins:\n"
     "  - name: p\n"
     "    path: p.so\n"
     "    queues: {producers: [], consumers: ~}\n"
     "    triggers: {crons: []}\n",
     check_bare_plugin},
    {WF_HEAD "      - {name: a, binding: A, class_name: C}\n",
     check_workflow_defaults},
    {"plugins:\n"
     "  - {name: p, path: p.so, workers: 0}\n"
     "  - {name: q, path: q.so, workers: 4}\n",
     check_workers_in_engine},
    {"plugins:\n"
     "  - {name: p, path: p.so, on_crash_storm: rollback,\n"
     "     crash_storm: {crashes: 2, window: 5m, rate: 0.25}}\n"
     "  - {name: q, path: q.so, crash_storm: {crashes: 0, rate: 0.2%}}\n",
     check_crash_storm},
    {"plugins:\n"
     "  - {name: p, path: p.so, limits: {memory: 256MiB, cpu: 2s,\n"
     "     processes: 64, cpus: 1.5}}\n"
     "  - {name: q, path: q.so, limits: {memory: 1 GB, cpus: 0.25}}\n"
     "  - {name: r, path: r.so}\n",
     check_limits},
    {WF_HEAD "      - {name: a, binding: A, class_name: C, limits: {}}\n",
     check_workflow_defaults},
    {"http:\n  allowed_hosts: [duro.example.com, \"10.0.0.5:8787\", "
     "\"[fd00::1]:80\"]\n",
     check_allowed_hosts},
    {"storage:\n  encryption:\n    keys:\n"
     "      - {id: k1, key_env: DURO_KEY_K1}\n"
     "      - {id: k-2_b, key_env: DURO_KEY_K2}\n    active: k-2_b\n",
     check_encryption},
    {"http: {max_body_bytes: 1073741824, max_wait: 10 minutes}\n"
     "engine: {workers: 1024, max_step_result: 1}\n"
     "plugins:\n"
     "  - name: p\n"
     "    path: p.so\n"
     "    workflows:\n"
     "      - {name: a, binding: A, class_name: C, retention: 0,\n"
     "         limits: {steps: 25000, concurrency: 4294967295}}\n"
     "      - {name: b, binding: B, class_name: C, limits: {steps: 1},\n"
     "         retention: 36500 days}\n",
     check_limits_edges},
    {"plugins:\n"
     "  - name: p\n"
     "    path: p.so\n"
     "    workflows:\n"
     "      - {name: a, binding: A, class_name: C, retention: 60000}\n"
     "      - {name: b, binding: B, class_name: C, retention: 1.5 hours,\n"
     "         timeout: 2d, on_timeout: rollback}\n",
     check_durations},
    {"log: {format: json}\n", check_log_json},
    {"plugins:\n"
     "  - name: p\n"
     "    path: p.so\n"
     "    workflows:\n"
     "      - name: a\n"
     "        binding: A\n"
     "        class_name: C\n"
     "        flow:\n"
     "          concurrency: [{limit: 10}]\n"
     "          priority: {key: /tier, default: -5}\n"
     "          fairness: {key: /tenant/id, weights: {acme: 3, 42: 1000}}\n"
     "      - name: b\n"
     "        binding: B\n"
     "        class_name: C\n"
     "        flow: {rate: [{limit: 1, period: 1s}], fairness: {key: /t}}\n",
     check_flow_order},
    {"plugins:\n"
     "  - name: p\n"
     "    path: p.so\n"
     "    workflows:\n"
     "      - {name: a, binding: A, class_name: C,\n"
     "         retention: {complete: 7d, errored: 90d}}\n"
     "      - {name: b, binding: B, class_name: C, retention: 2d}\n"
     "      - {name: c, binding: C, class_name: C,\n"
     "         retention: {terminated: 0}}\n",
     check_retention},
    {"plugins:\n"
     "  - name: p\n"
     "    path: p.so\n"
     "    workflows:\n"
     "      - name: a\n"
     "        binding: A\n"
     "        class_name: C\n"
     "        flow: {debounce: {key: /docId, period: 30s, max_wait: 5m}}\n"
     "      - name: b\n"
     "        binding: B\n"
     "        class_name: C\n"
     "        flow: {debounce: {period: 1500ms}}\n",
     check_flow_debounce},
    {"storage: {path: \"null\", synchronous: normal}\n"
     "http: {listen: 8787, token_env: \"TOKEN\", allow_insecure: true}\n"
     "engine: {workers: 08}\n",
     check_scalar_typing},
    {"plugins:\n"
     "  - name: p\n"
     "    path: p.so\n"
     "    workflows:\n"
     "      - {name: a, binding: A, class_name: C,\n"
     "         limits: &shared {steps: 5, concurrency: 2}}\n"
     "      - {name: b, binding: B, class_name: C, limits: *shared}\n",
     check_aliases},
    {"\"storage\":\r\n  'path': x.db\r\nengine:\r\n  workers: 3\r\n",
     check_quoted_crlf},
    {"engine: {workers: 3}\n...\n", check_workers_3},
    /* the engine's threads under their name, and the old one */
    {"engine: {threads: 3}\n", check_workers_3},
#if DURO_HAVE_PG
    {"storage:\n  postgresql: \"host=/run/pg dbname=duro\"\n",
     check_postgresql},
#endif
    {CONSUMER_Q, check_consumer_defaults},
    {Q_HEAD
     "      consumers:\n"
     "        - {queue: q1, max_batch_size: 100, max_batch_timeout: 60s,\n"
     "           retry_delay: 12 hours, max_retries: 100,\n"
     "           max_concurrency: 250, message_retention: 14d}\n"
     "        - {queue: q2, max_batch_size: 1, max_batch_timeout: 0,\n"
     "           max_retries: 0, max_concurrency: 1, message_retention: 1m}\n"
     "        - {queue: q3, max_batch_timeout: 250ms,\n"
     "           retry_delay: \"1.5 minutes\"}\n",
     check_consumer_edges},
    /* producers to a consumed queue and to a dead-letter queue, across
     * plugins */
    {"plugins:\n"
     "  - name: p\n"
     "    path: p.so\n"
     "    queues:\n"
     "      producers:\n"
     "        - {binding: B1, queue: q}\n"
     "        - {binding: B2, queue: dlq}\n"
     "  - name: c\n"
     "    path: c.so\n"
     "    queues:\n"
     "      consumers:\n"
     "        - {queue: q, dead_letter_queue: dlq}\n",
     check_producers},
    /* a no-code consumer of one plugin, the workflow of a later one */
    {"plugins:\n"
     "  - name: p\n"
     "    path: p.so\n"
     "    queues:\n"
     "      consumers:\n"
     "        - {queue: jobs, workflow: job-flow, id_from: \"/job~1id\"}\n"
     "  - name: w\n"
     "    path: w.so\n"
     "    workflows:\n"
     "      - {name: job-flow, binding: J, class_name: C}\n",
     check_workflow_consumer},
    {CONSUMER_Q "          concurrency: {key: /account/id}\n"
                "        - queue: r\n"
                "          concurrency: {key: \"/a~1b\", limit: 7}\n",
     check_consumer_concurrency},
    {TRIGGERS_HEAD "      crons:\n"
                   "        - \"0 9 * * 1-5\"\n"
                   "        - 0 9 * * MON-FRI\n"
                   "        - '*/15 * * * *'\n",
     check_cron_strings},
    /* a no-code cron of one plugin, the workflow of a later one */
    {TRIGGERS_HEAD
     "      crons:\n"
     "        - schedule: \"30 2 L * ?\"\n"
     "          timezone: Europe/Berlin\n"
     "          workflow: report\n"
     "          id: \"report-{date}.{time}:{ts}_{datetime}\"\n"
     "          catch_up: all\n"
     "          max_catch_up: 10000\n"
     "          overlap: allow\n"
     "          params:\n"
     "            region: eu\n"
     "            limit: 100\n"
     "            ratio: 0.5\n"
     "            dry: false\n"
     "            code: \"007\"\n"
     "            tags: [a, 2, null]\n"
     "            nested: {deep: ~}\n"
     "        - {schedule: 30 2 L * ?, timezone: UTC, "
     "workflow: report,\n"
     "           catch_up: none, max_catch_up: 1, overlap: skip}\n"
     "        - {schedule: \"0 9 * * 2,7\"}\n"
     "  - name: w\n"
     "    path: w.so\n"
     "    workflows:\n"
     "      - {name: report, binding: R, class_name: C}\n",
     check_cron_mappings},
};

START_TEST(test_good) {
  const good_case *c = &good[_i];
  char err[512] = "";
  config *cfg = parse(c->yaml, err, sizeof err);
  ck_assert_msg(cfg != NULL, "row %d refused: %s", _i, err);
  c->check(cfg);
  config_free(cfg);
}
END_TEST

/* The example of the design, with every value it sets. */
static const char full_example[] =
    "storage:  { path: var/duro.db, synchronous: full }   # full | normal\n"
    "http:     { listen: 127.0.0.1:8787, token_env: DURO_TOKEN, "
    "allow_insecure: false, max_body_bytes: 1048576 }\n"
    "engine:   { workers: 8, max_step_result: 1048576 }\n"
    "plugins:\n"
    "  - name: orders\n"
    "    path: build/plugins/orders/liborders.so\n"
    "    workflows:\n"
    "      - { name: order-flow, binding: ORDER_FLOW, class_name: OrderFlow,\n"
    "          retention: 30d, limits: { steps: 10000, concurrency: 100 } }\n"
    "    triggers:\n"
    "      crons: [\"*/5 * * * *\"]\n";

/* `path` as config_load() resolves it beside a config in `dir`, or as
 * written when dir is NULL (config_parse). */
static void assert_path(const char *got, const char *dir, const char *path) {
  char want[1024];
  snprintf(want, sizeof want, "%s%s%s", dir ? dir : "", dir ? "/" : "", path);
  ck_assert_str_eq(got, want);
}

static void check_full_example(const config *cfg, const char *file,
                               const char *dir) {
  ck_assert_str_eq(cfg->file, file);
  assert_path(cfg->storage.path, dir, "var/duro.db");
  ck_assert_int_eq(cfg->storage.synchronous_full, 1);
  ck_assert_str_eq(cfg->http.listen, "127.0.0.1:8787");
  ck_assert_str_eq(cfg->http.token_env, "DURO_TOKEN");
  ck_assert_int_eq(cfg->http.allow_insecure, 0);
  ck_assert_int_eq(cfg->http.max_body_bytes, 1048576);
  ck_assert_uint_eq(cfg->engine.workers, 8);
  ck_assert_int_eq(cfg->engine.max_step_result, 1048576);

  ck_assert_uint_eq(cfg->n_plugins, 1);
  const config_plugin *pl = &cfg->plugins[0];
  ck_assert_str_eq(pl->name, "orders");
  assert_path(pl->path, dir, "build/plugins/orders/liborders.so");
  ck_assert_int_eq(pl->pos.line, 5);
  ck_assert_int_eq(pl->pos.column, 5);

  ck_assert_uint_eq(pl->n_workflows, 1);
  const config_workflow *w = &pl->workflows[0];
  ck_assert_str_eq(w->name, "order-flow");
  ck_assert_str_eq(w->binding, "ORDER_FLOW");
  ck_assert_str_eq(w->class_name, "OrderFlow");
  ck_assert_int_eq(w->retention_ms, 30 * DAY_MS);
  ck_assert_uint_eq(w->max_steps, 10000);
  ck_assert_uint_eq(w->concurrency, 100);
  ck_assert_int_eq(w->pos.line, 8);
  ck_assert_int_eq(w->pos.column, 9);

  ck_assert_uint_eq(pl->n_producers, 0);
  ck_assert_uint_eq(pl->n_consumers, 0);
  ck_assert_uint_eq(pl->n_crons, 1);
  ck_assert_str_eq(pl->crons[0].schedule, "*/5 * * * *");
  ck_assert_int_eq(pl->crons[0].schedule_pos.line, 11);
  ck_assert_int_eq(pl->crons[0].schedule_pos.column, 16);
}

START_TEST(test_full_example) {
  char err[512] = "";
  config *cfg = config_parse("config/duro.yaml", full_example,
                             strlen(full_example), err, sizeof err);
  ck_assert_msg(cfg != NULL, "refused: %s", err);
  check_full_example(cfg, "config/duro.yaml", NULL);
  config_free(cfg);
}
END_TEST

START_TEST(test_find_workflow) {
  static const char yaml[] = "plugins:\n"
                             "  - name: p1\n"
                             "    path: p1.so\n"
                             "    workflows:\n"
                             "      - {name: a, binding: A, class_name: CA}\n"
                             "  - name: p2\n"
                             "    path: p2.so\n"
                             "    workflows:\n"
                             "      - {name: b, binding: B, class_name: CB}\n"
                             "      - {name: c, binding: C, class_name: CC}\n";
  char err[256] = "";
  config *cfg = parse(yaml, err, sizeof err);
  ck_assert_msg(cfg != NULL, "refused: %s", err);

  const config_plugin *pl = NULL;
  const config_workflow *w = config_find_workflow(cfg, "c", &pl);
  ck_assert_ptr_nonnull(w);
  ck_assert_str_eq(w->class_name, "CC");
  ck_assert_ptr_eq(pl, &cfg->plugins[1]);

  w = config_find_workflow(cfg, "a", NULL);
  ck_assert_ptr_eq(w, &cfg->plugins[0].workflows[0]);

  pl = &cfg->plugins[0];
  ck_assert_ptr_null(config_find_workflow(cfg, "nope", &pl));
  ck_assert_ptr_null(pl);
  ck_assert_ptr_null(config_find_workflow(cfg, "A", NULL)); /* a binding */
  ck_assert_ptr_null(config_find_workflow(NULL, "a", NULL));
  config_free(cfg);
  config_free(NULL);
}
END_TEST

/* ---- Files ------------------------------------------------------------- */

/* Writes `text` to a fresh temporary file and returns its malloc'ed path. */
static char *write_temp(const char *text) {
  const char *dir = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
  size_t n = strlen(dir) + 32;
  char *path = malloc(n);
  ck_assert_ptr_nonnull(path);
  snprintf(path, n, "%s/duro-config-XXXXXX", dir);
  int fd = mkstemp(path);
  ck_assert_int_ge(fd, 0);
  size_t len = strlen(text);
  ck_assert_int_eq(write(fd, text, len), (ssize_t)len);
  close(fd);
  return path;
}

START_TEST(test_load_file) {
  char *path = write_temp(full_example);
  char err[512] = "";
  config *cfg = config_load(path, err, sizeof err);
  ck_assert_msg(cfg != NULL, "refused: %s", err);
  char *dir = realpath(getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp", NULL);
  ck_assert_ptr_nonnull(dir);
  check_full_example(cfg, path, dir);
  free(dir);
  config_free(cfg);
  unlink(path);
  free(path);
}
END_TEST

START_TEST(test_load_error_names_file) {
  char *path = write_temp("engine:\n  workers: many\n");
  char err[512] = "";
  char expected[600];
  snprintf(expected, sizeof expected, "%s:2:12: \"workers\" must be an integer",
           path);
  ck_assert_ptr_null(config_load(path, err, sizeof err));
  ck_assert_str_eq(err, expected);
  unlink(path);
  free(path);
}
END_TEST

START_TEST(test_load_missing_file) {
  char err[512] = "";
  ck_assert_ptr_null(config_load("no/such/dir/duro.yaml", err, sizeof err));
  ck_assert_str_eq(err, "no/such/dir/duro.yaml: cannot read: No such file or "
                        "directory");
}
END_TEST

START_TEST(test_load_directory) {
  char err[512] = "";
  ck_assert_ptr_null(config_load(".", err, sizeof err));
  ck_assert_str_eq(err, ".: cannot read: Is a directory");
}
END_TEST

START_TEST(test_load_empty_file) {
  char *path = write_temp("");
  char err[512] = "";
  config *cfg = config_load(path, err, sizeof err);
  ck_assert_msg(cfg != NULL, "refused: %s", err);
  ck_assert_str_eq(cfg->file, path);
  ck_assert_uint_eq(cfg->n_plugins, 0);
  config_free(cfg);
  unlink(path);
  free(path);
}
END_TEST

/* ---- Did you mean ------------------------------------------------------ */

typedef struct suggest_case {
  const char *yaml;
  const char *error; /* the whole message */
} suggest_case;

/* An unknown key names the nearest known key of its own mapping when it is
 * a few edits away, and none when nothing is close. */
static const suggest_case suggest_cases[] = {
    {"plugins:\n"
     "  - name: p\n"
     "    path: p.so\n"
     "    workflows:\n"
     "      - name: w\n"
     "        binding: W\n"
     "        clas_name: W\n",
     "t.yaml:7:9: unknown key \"clas_name\" in workflow — did you mean "
     "\"class_name\"?"},
    {"storge: {}\n",
     "t.yaml:1:1: unknown key \"storge\" at the top level — did you mean "
     "\"storage\"?"},
    /* a swap of neighbours is one edit; case is ignored */
    {"engine:\n  wrokers: 2\n",
     "t.yaml:2:3: unknown key \"wrokers\" in engine — did you mean "
     "\"workers\"?"},
    {"http:\n  Max_Wait: 5s\n",
     "t.yaml:2:3: unknown key \"Max_Wait\" in http — did you mean "
     "\"max_wait\"?"},
    {"http:\n  allowed_host: [a.test]\n",
     "t.yaml:2:3: unknown key \"allowed_host\" in http — did you mean "
     "\"allowed_hosts\"?"},
    /* the nearest of several: "retention", not "versioning" */
    {"plugins:\n"
     "  - name: p\n"
     "    path: p.so\n"
     "    workflows:\n"
     "      - {name: w, binding: W, class_name: C, retension: 1d}\n",
     "t.yaml:5:46: unknown key \"retension\" in workflow — did you mean "
     "\"retention\"?"},
    /* only the keys of that mapping: "path" is a storage key, not http's */
    {"http:\n  path: x\n", "t.yaml:2:3: unknown key \"path\" in http"},
    /* too far for their length: no guess */
    {"storage:\n  sync: full\n", "t.yaml:2:3: unknown key \"sync\" in storage"},
    {"http:\n  ssl: true\n", "t.yaml:2:3: unknown key \"ssl\" in http"},
    {"plugins:\n"
     "  - name: p\n"
     "    path: p.so\n"
     "    triggers:\n"
     "      crons:\n"
     "        - {schedule: \"* * * * *\", overlap_allow: true}\n",
     "t.yaml:6:35: unknown key \"overlap_allow\" in cron"},
};

START_TEST(test_unknown_key_suggests) {
  const suggest_case *c = &suggest_cases[_i];
  char err[512] = "";
  config *cfg = parse(c->yaml, err, sizeof err);
  ck_assert_msg(cfg == NULL, "row %d accepted", _i);
  ck_assert_str_eq(err, c->error);
}
END_TEST

/* ---- Several errors ---------------------------------------------------- */

typedef struct multi_case {
  const char *yaml;
  const char *errors; /* every message, one per line, in file order */
} multi_case;

/* One pass reports every error it can, each at its own line and column,
 * in file order (the checks across plugins, which run after the walk,
 * among the others), and what one refused value would make wrong is not
 * reported on top of it. */
static const multi_case multi_cases[] = {
    /* an unknown key, a wrong type, a bad duration: each section goes on */
    {"storage:\n"
     "  sync: full\n"
     "engine:\n"
     "  workers: \"8\"\n"
     "  shutdown_grace: soon\n",
     "t.yaml:2:3: unknown key \"sync\" in storage\n"
     "t.yaml:4:12: \"workers\" must be an integer\n"
     "t.yaml:5:19: \"shutdown_grace\" is not a valid duration: \"soon\""},
    /* a missing field, a duplicate name, a producer to an unknown queue
     * (found last, placed at its line), a bad cron and a bad zone */
    {"plugins:\n"
     "  - name: p\n"
     "    path: p.so\n"
     "    workflows:\n"
     "      - {name: a, binding: A}\n"
     "      - {name: a, binding: B, class_name: C}\n"
     "    queues:\n"
     "      producers:\n"
     "        - {binding: Q, queue: nowhere}\n"
     "    triggers:\n"
     "      crons:\n"
     "        - \"61 * * * *\"\n"
     "        - {schedule: \"* * * * *\", timezone: \"America/New York\"}\n",
     "t.yaml:5:9: workflow \"a\" is missing \"class_name\"\n"
     "t.yaml:6:16: duplicate workflow name \"a\" (first at 5:16)\n"
     "t.yaml:9:31: producer \"Q\" sends to queue \"nowhere\", which no "
     "consumer consumes or names as its dead_letter_queue\n"
     "t.yaml:12:12: invalid cron expression \"61 * * * *\": minute field: 61 "
     "is out of range 0-59\n"
     "t.yaml:13:45: time zone \"America/New York\" has a character no zone "
     "name has"},
    /* a bad entry is skipped, the next one read */
    {"plugins:\n"
     "  - just a name\n"
     "  - name: q\n"
     "    path: q.so\n"
     "    paht: x\n"
     "  - {name: q, path: r.so}\n",
     "t.yaml:2:5: each entry of \"plugins\" must be a mapping\n"
     "t.yaml:5:5: unknown key \"paht\" in plugin — did you mean \"path\"?\n"
     "t.yaml:6:12: duplicate plugin name \"q\" (first at 3:11)"},
    /* a misspelt required key is reported as such, not as missing too */
    {"plugins:\n"
     "  - name: p\n"
     "    path: p.so\n"
     "    workflows:\n"
     "      - name: w\n"
     "        bindng: W\n"
     "        class_name: C\n"
     "        retention: forever\n",
     "t.yaml:6:9: unknown key \"bindng\" in workflow — did you mean "
     "\"binding\"?\n"
     "t.yaml:8:20: \"retention\" is not a valid duration: \"forever\""},
    /* the consumers may be under the misspelt key: the producer's queue
     * is not refused on top */
    {"plugins:\n"
     "  - name: p\n"
     "    path: p.so\n"
     "    queues:\n"
     "      producers: [{binding: B, queue: q}]\n"
     "      consumer: [{queue: q}]\n",
     "t.yaml:6:7: unknown key \"consumer\" in queues — did you mean "
     "\"consumers\"?"},
    /* nor when the consumer's queue name was the one refused */
    {"plugins:\n"
     "  - name: p\n"
     "    path: p.so\n"
     "    queues:\n"
     "      producers: [{binding: B, queue: q}]\n"
     "      consumers: [{queue: \"a b\", max_retries: lots}]\n",
     "t.yaml:6:27: queue names are 1-100 characters of A-Z a-z 0-9 _ . : -, "
     "not \"a b\"\n"
     "t.yaml:6:47: \"max_retries\" must be an integer"},
    /* the errors of the document, then the second document's */
    {"engine: {workers: 0}\n---\nengine: {}\n",
     "t.yaml:1:19: \"workers\" must be between 1 and 1024\n"
     "t.yaml:3:1: only one YAML document is allowed"},
};

START_TEST(test_several_errors) {
  const multi_case *c = &multi_cases[_i];
  char err[2048] = "";
  config *cfg = parse(c->yaml, err, sizeof err);
  if (cfg)
    config_free(cfg);
  ck_assert_msg(cfg == NULL, "row %d accepted", _i);
  ck_assert_msg(strcmp(err, c->errors) == 0,
                "row %d:\n  got\n%s\n  expected\n%s", _i, err, c->errors);
}
END_TEST

/* Past 50 errors the rest are counted, not listed: the 50 earliest in the
 * file are kept, whatever order they were found in (the producers' are
 * found after the engine's at the end of the file, yet come first). */
START_TEST(test_error_cap) {
  size_t cap = 16384, o = 0;
  char *text = malloc(cap);
  ck_assert_ptr_nonnull(text);
  o += (size_t)snprintf(text + o, cap - o,
                        "plugins:\n  - name: p\n    path: p.so\n"
                        "    queues:\n      producers:\n");
  for (int i = 0; i < 60; i++)
    o += (size_t)snprintf(text + o, cap - o,
                          "        - {binding: B%02d, queue: q}\n", i);
  o += (size_t)snprintf(text + o, cap - o, "engine: {workers: 0}\n");
  ck_assert_uint_lt(o, cap);

  errlist errs = {0};
  ck_assert_ptr_null(config_parse_all("t.yaml", text, o, &errs));
  ck_assert_uint_eq(errlist_total(&errs), 61);
  ck_assert_uint_eq(errs.n, ERRLIST_MAX);
  ck_assert_uint_eq(errs.more, 11);
  ck_assert_str_eq(errs.items[0].text,
                   "t.yaml:6:33: producer \"B00\" sends to queue \"q\", which "
                   "no consumer consumes or names as its dead_letter_queue");
  ck_assert_str_eq(errs.items[49].text,
                   "t.yaml:55:33: producer \"B49\" sends to queue \"q\", which "
                   "no consumer consumes or names as its dead_letter_queue");
  char err[16384];
  errlist_join(&errs, err, sizeof err);
  const char *last = strrchr(err, '\n');
  ck_assert_ptr_nonnull(last);
  ck_assert_str_eq(last + 1, "and 11 more errors");
  errlist_clear(&errs);
  free(text);
}
END_TEST

/* ---- Paths ------------------------------------------------------------- */

typedef struct path_case {
  const char *dir, *path, *want;
} path_case;

static const path_case path_cases[] = {
    {"/etc/duro", "libx.so", "/etc/duro/libx.so"},
    {"/etc/duro", "./libx.so", "/etc/duro/libx.so"},
    {"/etc/duro", ".//./libx.so", "/etc/duro/libx.so"},
    {"/etc/duro/", "libx.so", "/etc/duro/libx.so"},
    {"/etc/duro", "../build/libx.so", "/etc/build/libx.so"},
    {"/etc/duro", "../../../x.db", "/x.db"}, /* no higher than the root */
    {"/", "var/duro.db", "/var/duro.db"},
    {"/", "../x", "/x"},
    {"/etc/duro", "/opt/libx.so", "/opt/libx.so"}, /* absolute: as is */
    {"/etc/duro", "..", "/etc"},
    {"/etc/duro", ".", "/etc/duro"},
    /* a ".." after a name stays: the name may be a symbolic link */
    {"/etc/duro", "lib/../libx.so", "/etc/duro/lib/../libx.so"},
};

START_TEST(test_resolve_path) {
  const path_case *c = &path_cases[_i];
  char *got = config_resolve_path(c->dir, c->path);
  ck_assert_str_eq(got, c->want);
  free(got);
}
END_TEST

/* A fresh directory (realpath'ed) with a "conf" directory in it; the
 * caller removes both. */
static char *temp_tree(void) {
  const char *tmp = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
  char tmpl[512];
  snprintf(tmpl, sizeof tmpl, "%s/duro-paths-XXXXXX", tmp);
  ck_assert_ptr_nonnull(mkdtemp(tmpl));
  char *dir = realpath(tmpl, NULL);
  ck_assert_ptr_nonnull(dir);
  char conf[600];
  snprintf(conf, sizeof conf, "%s/conf", dir);
  ck_assert_int_eq(mkdir(conf, 0755), 0);
  return dir;
}

static void remove_tree(const char *dir, const char *file) {
  char p[700];
  snprintf(p, sizeof p, "%s/conf/%s", dir, file);
  unlink(p);
  snprintf(p, sizeof p, "%s/conf", dir);
  rmdir(p);
  rmdir(dir);
}

/* Relative paths in a file are resolved against the file's directory, from
 * whatever directory the file is loaded: here the current directory is
 * elsewhere each time, and a bare "libx.so" lands beside the config. */
/* A pipeline with its required keys only gets the documented defaults;
 * every key given is read. */
START_TEST(test_resources_parsed) {
  char err[512] = "";
  static const char text[] =
      "resources:\n"
      "  - {name: payments, concurrency: 10, rate: {limit: 50, period: 1s}}\n"
      "  - name: search\n"
      "    rate: {limit: 100, period: 1m, burst: 20}\n";
  config *cfg = config_parse("t.yaml", text, strlen(text), err, sizeof err);
  ck_assert_msg(cfg != NULL, "%s", err);
  ck_assert_uint_eq(cfg->n_resources, 2);
  const config_resource *a = &cfg->resources[0], *b = &cfg->resources[1];
  ck_assert_str_eq(a->name, "payments");
  ck_assert_uint_eq(a->concurrency, 10);
  ck_assert_uint_eq(a->rate.limit, 50);
  ck_assert_int_eq(a->rate.period_ms, 1000);
  ck_assert_uint_eq(a->rate.burst, 0);
  ck_assert_str_eq(b->name, "search");
  ck_assert_uint_eq(b->concurrency, 0);
  ck_assert_uint_eq(b->rate.limit, 100);
  ck_assert_int_eq(b->rate.period_ms, 60000);
  ck_assert_uint_eq(b->rate.burst, 20);
  config_free(cfg);
}
END_TEST

START_TEST(test_pipeline_defaults) {
  char err[512] = "";
  static const char text[] =
      "pipelines:\n"
      "  - {name: a, binding: A, sink: {files: {path: out}}}\n"
      "  - name: b\n"
      "    binding: B\n"
      "    sink: {files: {path: /srv/b, partition: \"dt={yyyy}-{mm}-{dd}\"}}\n"
      "    format: jsonl\n"
      "    compression: none\n"
      "    roll: {size: 64KiB, interval: 2s}\n"
      "    max_backlog: 2MiB\n"
      "    max_retry_delay: 5s\n"
      "  - name: c\n"
      "    binding: C\n"
      "    sink: {files: {path: out}}\n"
      "    format: csv\n"
      "    columns: [page, /user/id]\n";
  config *cfg = config_parse("t.yaml", text, strlen(text), err, sizeof err);
  ck_assert_msg(cfg != NULL, "%s", err);
  ck_assert_uint_eq(cfg->n_pipelines, 3);
  const config_pipeline *c = &cfg->pipelines[2];
  ck_assert_int_eq(c->format, CONFIG_FORMAT_CSV);
  ck_assert_uint_eq(c->n_columns, 2);
  ck_assert_str_eq(c->columns[0], "page");
  ck_assert_str_eq(c->columns[1], "/user/id");
  ck_assert_int_eq(cfg->pipelines[0].format, CONFIG_FORMAT_JSONL);
  ck_assert_uint_eq(cfg->pipelines[0].n_columns, 0);
  const config_pipeline *a = &cfg->pipelines[0], *b = &cfg->pipelines[1];
  ck_assert_str_eq(a->path, "out");
  ck_assert_str_eq(a->partition, "{yyyy}/{mm}/{dd}/{hh}");
  ck_assert_int_eq(a->compression, CONFIG_COMPRESSION_GZIP);
  ck_assert_int_eq(a->roll_size, 100000000);
  ck_assert_int_eq(a->roll_interval_ms, 300000);
  ck_assert_int_eq(a->max_backlog, 1000000000);
  ck_assert_str_eq(b->partition, "dt={yyyy}-{mm}-{dd}");
  ck_assert_int_eq(b->compression, CONFIG_COMPRESSION_NONE);
  ck_assert_int_eq(b->roll_size, 64 * 1024);
  ck_assert_int_eq(b->roll_interval_ms, 2000);
  ck_assert_int_eq(b->max_backlog, 2 * 1024 * 1024);
  ck_assert_int_eq(a->max_retry_delay_ms, 60000);
  ck_assert_int_eq(b->max_retry_delay_ms, 5000);
  ck_assert_ptr_null(a->s3.bucket);
  config_free(cfg);
}
END_TEST

/* An s3 sink: every key read, the defaults of those left out. */
START_TEST(test_pipeline_s3_sink) {
  char err[512] = "";
  static const char text[] =
      "pipelines:\n"
      "  - name: a\n"
      "    binding: A\n"
      "    sink:\n"
      "      s3: {endpoint: \"http://127.0.0.1:4569\", bucket: my-events,\n"
      "           prefix: events/, region: auto, access_key_env: S3_KEY,\n"
      "           secret_key_env: S3_SECRET, partition: \"{yyyy}-{mm}\"}\n"
      "  - name: b\n"
      "    binding: B\n"
      "    sink:\n"
      "      s3: {endpoint: \"https://[::1]/\", bucket: b.k-t,\n"
      "           access_key_env: K, secret_key_env: _S}\n";
  config *cfg = config_parse("t.yaml", text, strlen(text), err, sizeof err);
  ck_assert_msg(cfg != NULL, "%s", err);
  const config_pipeline *a = &cfg->pipelines[0], *b = &cfg->pipelines[1];
  ck_assert_ptr_null(a->path);
  ck_assert_str_eq(a->s3.endpoint, "http://127.0.0.1:4569");
  ck_assert_str_eq(a->s3.bucket, "my-events");
  ck_assert_str_eq(a->s3.prefix, "events/");
  ck_assert_str_eq(a->s3.region, "auto");
  ck_assert_str_eq(a->s3.access_key_env, "S3_KEY");
  ck_assert_str_eq(a->s3.secret_key_env, "S3_SECRET");
  ck_assert_str_eq(a->partition, "{yyyy}-{mm}");
  ck_assert_str_eq(b->s3.endpoint, "https://[::1]/");
  ck_assert_ptr_null(b->s3.prefix);
  ck_assert_str_eq(b->s3.region, "us-east-1");
  ck_assert_str_eq(b->partition, "{yyyy}/{mm}/{dd}/{hh}");
  config_free(cfg);
}
END_TEST

START_TEST(test_load_resolves_beside_config) {
  char *dir = temp_tree();
  char file[800], conf[700];
  snprintf(conf, sizeof conf, "%s/conf", dir);
  snprintf(file, sizeof file, "%s/duro.yaml", conf);
  FILE *f = fopen(file, "w");
  ck_assert_ptr_nonnull(f);
  fputs("storage: { path: var/duro.db }\n"
        "plugins:\n"
        "  - { name: bare, path: libx.so }\n"
        "  - { name: up, path: ../build/liby.so }\n"
        "  - { name: abs, path: /opt/duro/libz.so }\n"
        "pipelines:\n"
        "  - { name: ev, binding: EV, sink: { files: { path: out/ev } } }\n",
        f);
  ck_assert_int_eq(fclose(f), 0);

  /* From "/", by absolute path; from the tree's root, by "conf/duro.yaml";
   * from the config's own directory, by "duro.yaml". */
  const char *cwds[] = {"/", dir, conf};
  const char *names[] = {file, "conf/duro.yaml", "duro.yaml"};
  for (int i = 0; i < 3; i++) {
    ck_assert_int_eq(chdir(cwds[i]), 0);
    char err[512] = "";
    config *cfg = config_load(names[i], err, sizeof err);
    ck_assert_msg(cfg != NULL, "from %s: %s", cwds[i], err);
    ck_assert_str_eq(cfg->file, names[i]); /* messages keep the name given */
    assert_path(cfg->storage.path, conf, "var/duro.db");
    assert_path(cfg->plugins[0].path, conf, "libx.so");
    assert_path(cfg->plugins[1].path, dir, "build/liby.so");
    ck_assert_str_eq(cfg->plugins[2].path, "/opt/duro/libz.so");
    assert_path(cfg->pipelines[0].path, conf, "out/ev");
    config_free(cfg);
  }
  ck_assert_int_eq(chdir("/"), 0);
  remove_tree(dir, "duro.yaml");
  free(dir);
}
END_TEST

/* The default database, not written in the file, is beside it too. */
START_TEST(test_load_default_storage_beside_config) {
  char *dir = temp_tree();
  char file[800], conf[700];
  snprintf(conf, sizeof conf, "%s/conf", dir);
  snprintf(file, sizeof file, "%s/empty.yaml", conf);
  FILE *f = fopen(file, "w");
  ck_assert_ptr_nonnull(f);
  ck_assert_int_eq(fclose(f), 0);
  ck_assert_int_eq(chdir("/"), 0);
  char err[512] = "";
  config *cfg = config_load(file, err, sizeof err);
  ck_assert_msg(cfg != NULL, "%s", err);
  assert_path(cfg->storage.path, conf, "var/duro.db");
  config_free(cfg);
  remove_tree(dir, "empty.yaml");
  free(dir);
}
END_TEST

static Suite *config_suite(void) {
  Suite *s = suite_create("config");

  TCase *tc = tcase_create("refused");
  tcase_add_loop_test(tc, test_bad, 0, (int)(sizeof bad / sizeof bad[0]));
  tcase_add_test(tc, test_nul_in_text);
  tcase_add_test(tc, test_small_error_buffer);
  tcase_add_test(tc, test_depth_limit);
  tcase_add_test(tc, test_depth_hostile);
  tcase_add_loop_test(tc, test_unknown_key_suggests, 0,
                      (int)(sizeof suggest_cases / sizeof suggest_cases[0]));
  tcase_add_loop_test(tc, test_several_errors, 0,
                      (int)(sizeof multi_cases / sizeof multi_cases[0]));
  tcase_add_test(tc, test_error_cap);
  suite_add_tcase(s, tc);

  tc = tcase_create("accepted");
  tcase_add_loop_test(tc, test_good, 0, (int)(sizeof good / sizeof good[0]));
  tcase_add_test(tc, test_full_example);
  tcase_add_test(tc, test_find_workflow);
  suite_add_tcase(s, tc);

  tc = tcase_create("files");
  tcase_add_test(tc, test_load_file);
  tcase_add_test(tc, test_load_error_names_file);
  tcase_add_test(tc, test_load_missing_file);
  tcase_add_test(tc, test_load_directory);
  tcase_add_test(tc, test_load_empty_file);
  tcase_add_test(tc, test_load_resolves_beside_config);
  tcase_add_test(tc, test_pipeline_defaults);
  tcase_add_test(tc, test_resources_parsed);
  tcase_add_test(tc, test_pipeline_s3_sink);
  tcase_add_test(tc, test_load_default_storage_beside_config);
  suite_add_tcase(s, tc);

  tc = tcase_create("paths");
  tcase_add_loop_test(tc, test_resolve_path, 0,
                      (int)(sizeof path_cases / sizeof path_cases[0]));
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return suite_run(config_suite()); }
