#!/usr/bin/env python3
"""doc_commands.py — the `duro` commands of README.md and doc/guide.md,
run as written against a real host.

The host runs config/duro.yaml (the example plugins) with its journal in
a temporary directory and its HTTP on a free port, which DURO_URL names,
as the guide says a user may.  Each distinct `duro ...` line of a sh
block is run once, in document order, and must exit 0.  A line of
alternatives (`pause|resume|terminate`) runs each in turn; an optional
flag (`[--full]`) runs without it and with it; an optional placeholder
(`[PLUGIN]`) is left out.  Lines that hold another placeholder
(`'{...}'`, `NEW.so`) or need another setup (`duro run`/`duro check` of
the template's folder, the template's `hello` workflow, `duro migrate`
to a PostgreSQL server) are listed as skipped with the reason.

usage: doc_commands.py SOURCE_DIR DURO_BIN EXAMPLES_DIR
"""
import os
import re
import shlex
import subprocess
import sys
import tempfile
import time

SKIPS = [
    ("{...}", "a placeholder for params"),
    ("NEW.so", "a placeholder build"),
    ("duro migrate", "needs a PostgreSQL server"),
    ("duro run", "the template's folder (tests/out_of_tree.sh builds it)"),
    ("duro check duro.yaml", "the template's folder (tests/out_of_tree.sh)"),
    (" hello ", "the template's workflow"),
    ("duro pipelines", "config/duro.yaml has no pipeline "
     "(tests/test_pipeline_host.c runs these verbs)"),
    ("--follow", "follows the instance until it ends "
     "(tests/test_observe.c runs it)"),
]


def commands(path):
    """The `duro ...` lines of the sh blocks of `path`, comments cut."""
    text = open(path, encoding="utf-8").read()
    for block in re.finditer(r"```(?:sh|bash|console|shell)\n(.*?)```", text,
                             re.S):
        for line in block.group(1).splitlines():
            line = re.sub(r"\s{2,}#.*$", "", line.strip())
            if line.startswith("duro "):
                yield line


def variants(line):
    """The commands one documented line stands for."""
    line = re.sub(r"\s*\[[A-Z_]+\]", "", line)
    m = re.search(r"\s*\[(-[^\]]*)\]", line)
    if m:
        return (variants(line[:m.start()] + line[m.end():]) +
                variants(line[:m.start()] + " " + m.group(1) +
                         line[m.end():]))
    m = re.search(r"\b([a-z-]+(?:\|[a-z-]+)+)\b", line)
    if m and not line.startswith("duro cron"):
        return [v for alt in m.group(1).split("|")
                for v in variants(line[:m.start()] + alt + line[m.end():])]
    return [line]


def start_host(src, duro, examples, tmp):
    config = open(os.path.join(src, "config", "duro.yaml"),
                  encoding="utf-8").read()
    config = config.replace("path: ../var/duro.db",
                            "path: " + os.path.join(tmp, "duro.db"))
    config = config.replace("listen: 127.0.0.1:8787", "listen: 127.0.0.1:0")
    config = config.replace("../build/examples/", examples + "/")
    path = os.path.join(tmp, "duro.yaml")
    with open(path, "w", encoding="utf-8") as f:
        f.write(config)
    log = open(os.path.join(tmp, "host.log"), "w+", encoding="utf-8")
    host = subprocess.Popen([duro, "run", path], stdout=log,
                            stderr=subprocess.STDOUT)
    deadline = time.time() + 30
    while time.time() < deadline:
        log.seek(0)
        m = re.search(r"ready: .* http on port (\d+)", log.read())
        if m:
            return host, int(m.group(1)), log
        if host.poll() is not None:
            break
        time.sleep(0.1)
    log.seek(0)
    sys.exit("the host did not start:\n" + log.read())


def main():
    src, duro, examples = sys.argv[1:4]
    seen, failed, ran = set(), 0, 0
    with tempfile.TemporaryDirectory(prefix="duro-doc-") as tmp:
        host, port, log = start_host(src, duro, examples, tmp)
        env = dict(os.environ, DURO_URL="http://127.0.0.1:%d" % port)
        env.pop("DURO_TOKEN", None)
        try:
            for doc in ("README.md", os.path.join("doc", "guide.md")):
                for line in (v for documented in commands(os.path.join(src, doc))
                             for v in variants(documented)):
                    if line in seen:
                        continue
                    seen.add(line)
                    why = next((w for s, w in SKIPS if s in line), None)
                    if why:
                        print("skip  %s: %s (%s)" % (doc, line, why))
                        continue
                    argv = [duro] + shlex.split(line)[1:]
                    r = subprocess.run(argv, env=env, cwd=src,
                                       capture_output=True, text=True,
                                       timeout=60)
                    ran += 1
                    ok = r.returncode == 0
                    failed += not ok
                    print("%s  %s: %s" % ("ok  " if ok else "FAIL", doc, line))
                    if not ok:
                        print("  exit %d\n  %s%s" % (r.returncode, r.stdout,
                                                     r.stderr))
        finally:
            host.terminate()
            host.wait(timeout=30)
            if failed:
                log.seek(0)
                print(log.read())
    print("%d command(s) run, %d failed" % (ran, failed))
    return 1 if failed or ran == 0 else 0


if __name__ == "__main__":
    sys.exit(main())
