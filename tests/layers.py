#!/usr/bin/env python3
"""The layering check: which folders of the tree may include headers from
which (doc/ARCHITECTURE.md).  Prints every include that breaks a rule as

    FILE:LINE: includes X (folder A may not include folder B)

and exits 1 when there is one.

Each rule is one line of RULES: a folder, then either "only" and the
folders (or header files) it may include from, or "not" and the ones it
may not.  A rule covers every C file under its folder.  A header of the
standard or another installed library (one the tree does not hold) is
always allowed.  A rule marked TARGET is one the code is being made to
follow: its breaks are printed as "(target)" but do not fail the check,
and once it has none the check says so, so that it can become a rule.

An include names a file as the build finds it (`#include "journal.h"`,
with one -I per folder of host/): the checker resolves it to the tree's
file of that name, the one beside the including file first.  <...>
includes are a library's unless no system header has the name.
duro_config.h is made by the build (host/meson.build) and counts as
folder GENERATED."""

import os
import re
import subprocess
import sys

GENERATED = "(generated)"
PLUGIN_API = "plugin-api"
RULE, TARGET = "rule", "target"

# folder, "only" | "not", folders or files, rule | target
RULES = [
    # base/ is under everything: it includes nothing else of the host.
    ("host/base", "only", ["host/base", PLUGIN_API, GENERATED], RULE),
    # The journal and its backends know no engine, server or client.
    ("host/store", "only", ["host/store", "host/base", PLUGIN_API, GENERATED],
     RULE),
    # The client talks HTTP to a host: it never includes the engine or the
    # server (cli_lib in host/meson.build is built without them on its
    # include path).
    ("host/cli", "only",
     ["host/cli", "host/config", "host/store", "host/base", PLUGIN_API,
      GENERATED], RULE),
    # The configuration is read with base/ alone, and checks cron
    # expressions with cron's parser (which uses only base/).
    ("host/config", "only",
     ["host/config", "host/base", "host/cron/expr.h", PLUGIN_API, GENERATED],
     RULE),
    ("host/cron/expr.c", "only",
     ["host/cron/expr.h", "host/cron/tz.h", "host/base", GENERATED],
     RULE),
    # Plugins see the host through duro.h alone (and their tests through
    # the test kit's duro-test.h).
    ("plugins", "only", ["plugins", PLUGIN_API], RULE),
    ("examples", "only", ["examples", PLUGIN_API, "testkit/duro-test.h"],
     RULE),
    # A feature uses the engine through core.h and its driver interface
    # (engine/driver.h), never the engine's internals.
    ("host/queues", "not", ["host/engine/engine_internal.h"], RULE),
    ("host/cron", "not", ["host/engine/engine_internal.h"], RULE),
    ("host/children", "not", ["host/engine/engine_internal.h"], RULE),
    ("host/pipelines", "not", ["host/engine/engine_internal.h"], RULE),
    ("host/telemetry", "not", ["host/engine/engine_internal.h"], RULE),
    ("host/tail", "not", ["host/engine/engine_internal.h"], RULE),
    ("host/flow", "not", ["host/engine/engine_internal.h"], RULE),
    ("host/resources", "not", ["host/engine/engine_internal.h"], RULE),
    ("host/outcomes", "not", ["host/engine/engine_internal.h"], RULE),
    ("host/bulk", "not", ["host/engine/engine_internal.h"], RULE),
    ("host/keys", "not", ["host/engine/engine_internal.h"], RULE),
    # The core names no feature: features reach it as drivers.
    ("host/engine", "not", ["host/queues", "host/cron", "host/children",
                            "host/pipelines", "host/telemetry",
                            "host/tail", "host/flow", "host/resources",
                            "host/outcomes", "host/bulk", "host/keys"],
     RULE),
    # The views make JSON of the public answers (engine.h, queue.h,
    # trigger.h), never of the engine's internals.
    ("host/views", "not", ["host/engine/engine_internal.h"], RULE),
    # The core and the features answer in structs: the JSON of them is the
    # views', which they never include.
    ("host/engine", "not", ["host/views"], RULE),
    ("host/bulk", "not", ["host/views"], RULE),
    # The worker process (worker_main.c, worker_api.c, worker_calls.c,
    # worker_limits.c) holds plugin code
    # and none of the engine: it speaks to the engine over its channel
    # only, and loads builds with the loader.  The engine's side of the
    # workers (worker_pool.c, worker_proxy.c) uses the step runner
    # through its face (step.h) and the host's API table.
    ("host/worker/worker_main.c", "only",
     ["host/worker", "host/base", "host/loader", PLUGIN_API, GENERATED], RULE),
    ("host/worker/worker_api.c", "only",
     ["host/worker", "host/base", PLUGIN_API, GENERATED], RULE),
    ("host/worker/worker_calls.c", "only",
     ["host/worker", "host/base", PLUGIN_API, GENERATED], RULE),
    ("host/worker/worker_limits.c", "only",
     ["host/worker", "host/base", PLUGIN_API, GENERATED], RULE),
    # A worker's cgroup is files under /sys/fs/cgroup: nothing of the
    # engine's or of a plugin's.
    ("host/worker/worker_cgroup.c", "only", ["host/worker", "host/base"],
     RULE),
    # The decoder of a worker's frames is pure: the protocol and its own
    # header, nothing of either side.
    ("host/worker/worker_frame.c", "only",
     ["host/worker/worker_frame.h", "host/worker/worker_proto.h",
      "host/base", GENERATED], RULE),
    ("host/worker", "only",
     ["host/worker", "host/base", "host/loader", "host/api/api.h",
      "host/engine/step.h", PLUGIN_API, GENERATED], RULE),
    # The engine never names the workers: a build's run() and context are
    # what reload/ hands it.
    ("host/engine", "not", ["host/worker"], RULE),
    ("host/queues", "not", ["host/views"], RULE),
    ("host/cron", "not", ["host/views"], RULE),
    ("host/children", "not", ["host/views"], RULE),
    ("host/pipelines", "not", ["host/views"], RULE),
    ("host/telemetry", "not", ["host/views"], RULE),
    ("host/tail", "not", ["host/views"], RULE),
    ("host/flow", "not", ["host/views"], RULE),
    ("host/outcomes", "not", ["host/views"], RULE),
    ("host/keys", "not", ["host/views"], RULE),
    # The crash-storm breaker holds builds through the engine's public
    # face (engine.h) and rolls back through a hook the host gives it: it
    # names neither the reloader nor the workers, and nothing of the
    # engine names it.
    ("host/breaker", "only",
     ["host/breaker", "host/base", "host/config", "host/engine/engine.h",
      PLUGIN_API, GENERATED], RULE),
    ("host/engine", "not", ["host/breaker"], RULE),
    ("host/reload", "not", ["host/breaker"], RULE),
    # The test kit drives the engine as a host does, through its public
    # face and the drivers' dispatch calls: none of the engine's insides,
    # and nothing of the host's serving parts (config, reload, workers).
    # Its import of an exported instance (kit_replay.c) reads the export's
    # document (view_journal.h) and writes the rows into the test's own
    # journal through the journal's API (journal.h) while its engine is
    # closed, as a host's journal is written: the store's face, never a
    # backend.
    ("testkit", "only",
     ["testkit", "host/engine/engine.h", "host/api/api.h", "host/loader",
      "host/base", "host/views/view_instance.h", "host/views/view_journal.h",
      "host/store/journal.h", "host/children/children.h",
      "host/queues/queue.h", "host/pipelines/pipeline.h",
      "host/cron/trigger.h", PLUGIN_API, GENERATED],
     RULE),
]

# A folder's *_internal.h is what its own files share: no file of another
# folder of host/ includes one (tests may).
PRIVATE = ("host", "private", ["*_internal.h"], RULE)

SYSTEM_DIRS = ["/usr/include", "/usr/local/include",
               "/usr/include/x86_64-linux-gnu", "/usr/include/aarch64-linux-gnu"]
INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]')


def tree_files(root):
    """The C files of the tree, as paths relative to root."""
    try:
        # Files not yet added too: a new file is checked before its commit.
        out = subprocess.run(["git", "ls-files", "--cached", "--others",
                              "--exclude-standard", "*.c", "*.h"], cwd=root,
                             capture_output=True, text=True, check=True)
        files = out.stdout.split()
    except (OSError, subprocess.CalledProcessError):
        files = []
        for d, _, names in os.walk(root):
            if "/build" in d or "/." in d:
                continue
            files += [os.path.relpath(os.path.join(d, n), root)
                      for n in names if n.endswith((".c", ".h"))]
    # Files still on disk only: a deleted, not yet committed file is gone.
    return sorted(f for f in files if os.path.isfile(os.path.join(root, f)))


def resolve(name, angle, src, by_tail):
    """The tree's file an include names, GENERATED, or None for a
    library's header."""
    if name == "duro_config.h":
        return GENERATED
    if angle and any(os.path.exists(os.path.join(d, name))
                     for d in SYSTEM_DIRS):
        return None
    beside = os.path.normpath(os.path.join(os.path.dirname(src), name))
    cands = by_tail.get(os.path.basename(name), [])
    if beside in cands:
        return beside
    cands = [c for c in cands if c == name or c.endswith("/" + name)]
    if not cands:
        return None
    # The nearest one: most leading folders shared with the includer.
    def shared(c):
        a, b = c.split("/"), src.split("/")
        n = 0
        while n < min(len(a), len(b)) and a[n] == b[n]:
            n += 1
        return n
    return max(cands, key=shared)


def under(path, folder):
    return path == folder or path.startswith(folder + "/")


def allowed(target, how, listed):
    hit = any(under(target, f) for f in listed)
    return hit if how == "only" else not hit


def breaks(root):
    """(file, line, name, target, rule) of every include a rule forbids."""
    files = tree_files(root)
    by_tail = {}
    for f in files:
        by_tail.setdefault(os.path.basename(f), []).append(f)
    found = []
    for src in files:
        rules = [r for r in RULES if under(src, r[0])]
        private = under(src, PRIVATE[0])
        if not rules and not private:
            continue
        with open(os.path.join(root, src), encoding="utf-8",
                  errors="replace") as fh:
            for lineno, line in enumerate(fh, 1):
                m = INCLUDE.match(line)
                if not m:
                    continue
                target = resolve(m.group(2), m.group(1) == "<", src, by_tail)
                if target is None:
                    continue
                for rule in rules:
                    if not allowed(target, rule[1], rule[2]):
                        found.append((src, lineno, m.group(2), target, rule))
                if (private and target != GENERATED and
                        target.endswith("_internal.h") and
                        os.path.dirname(target) != os.path.dirname(src)):
                    found.append((src, lineno, m.group(2), target, PRIVATE))
    return found


def folder_of(target):
    return target if target == GENERATED else os.path.dirname(target)


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "..")
    found = breaks(root)
    failed = False
    for src, lineno, name, target, rule in found:
        folder, how, listed, kind = rule
        if how == "private":
            what = "another folder's " + os.path.basename(target)
        elif how == "not":
            named = next(f for f in listed if under(target, f))
            what = named if named == target else "folder " + named
        else:
            what = "folder " + folder_of(target)
        print("%s:%d: includes %s (folder %s may not include %s)%s" %
              (src, lineno, name, folder, what,
               " (target)" if kind == TARGET else ""))
        failed = failed or kind == RULE
    for rule in RULES:
        if rule[3] == TARGET and not any(r is rule for *_, r in found):
            print("target now holds, make it a rule: %s %s %s" %
                  (rule[0], rule[1], " ".join(rule[2])))
    targets = sum(1 for *_, r in found if r[3] == TARGET)
    rules = len(found) - targets
    print("layers: %d break%s of a rule, %d of a target" %
          (rules, "" if rules == 1 else "s", targets))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
