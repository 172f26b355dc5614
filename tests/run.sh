#!/usr/bin/env bash
# Builds duro with AddressSanitizer and UndefinedBehaviorSanitizer and runs
# every test suite.  Prints each Check suite's summary, then one line
# "N passed, N failed" counting test cases (a suite that is not a Check
# suite counts as one case).  Exits non-zero when anything failed.
#
# When duro was built with PostgreSQL (libpq found), the engine suites run
# a second time with their journal on a throwaway PostgreSQL cluster
# (tests/pg/cluster.sh, DURO_TEST_PG); their lines say "(postgresql)".
set -uo pipefail
cd "$(dirname "$0")/.."
dir=${DURO_TEST_BUILD:-build-test}
if [ ! -f "$dir/build.ninja" ]; then
  meson setup "$dir" -Db_sanitize=address,undefined -Db_lundef=false \
    --buildtype=debugoptimized >/dev/null || exit 1
fi
ninja -C "$dir" >/dev/null || { ninja -C "$dir"; exit 1; }

export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
export ASAN_OPTIONS=detect_leaks=1

# The suites whose engines the harness opens on DURO_TEST_PG's server
# (tests/harness.h); the others open SQLite files of their own.
engine_suites=(test_steps test_restart test_delete test_attributes test_bulk test_limits test_random test_queues
               test_queue_keys
               test_cron test_versions test_ledger test_deadline
               test_children test_parallel test_rollback test_pipelines
               test_flow test_flow_rate test_flow_order test_flow_singleton
               test_flow_debounce test_outcomes
               test_logs test_tail test_event_cursor test_resources
               test_encryption test_keys)

passed=0 failed=0 status=0 logs=()

# tally LOG LABEL: prints one line a test of LOG, named as meson and the
# doc/tests.md name it (Check suites with their summary, the other
# tests with their result; LABEL after the name), and adds its cases to
# the counts.
tally() {
  local log=$1 label=$2 check_suites=0 n f e ok bad other_ok checks
  awk -v label="$label" '/^Running suite\(s\): / { name = "test_" $3 label }
       /^[0-9]+%: Checks: / { printf "  %-16s %s\n", name, $0 }' "$log"
  # Meson's result line for every test that is not a Check suite
  # (out_of_tree, unchecked_result, format, test_dashboard): no Check suite
  # of its name said "Running suite(s)".
  checks=" $(sed -nE 's/^Running suite\(s\): ([a-z0-9_]+).*/test_\1/p' "$log" | tr '\n' ' ')"
  sed -nE 's/^ *[0-9]+\/[0-9]+ +([a-z0-9_]+) +(OK|FAIL|TIMEOUT|SKIP)( .*|$)/\1 \2/p' "$log" |
    awk -v label="$label" -v checks="$checks" \
      'index(checks, " " $1 " ") == 0 { printf "  %-16s %s\n", $1 label, $2 }'
  while read -r n f e; do
    check_suites=$((check_suites + 1))
    passed=$((passed + n - f - e))
    failed=$((failed + f + e))
  done < <(sed -nE 's/^[0-9]+%: Checks: ([0-9]+), Failures: ([0-9]+), Errors: ([0-9]+).*/\1 \2 \3/p' "$log")
  # meson's own tally covers suites that are not Check suites, and Check
  # suites that died before printing a summary.
  ok=$(sed -nE 's/^Ok: +([0-9]+).*/\1/p' "$log" | tail -1)
  bad=$(awk '/^(Fail|Timeout): +[0-9]+/ {n += $2} END {print n + 0}' "$log")
  ok=${ok:-0} bad=${bad:-0}
  other_ok=$((ok - check_suites))
  [ "$other_ok" -gt 0 ] && passed=$((passed + other_ok))
  if [ "$bad" -gt 0 ] && [ "$failed" -eq 0 ]; then failed=$bad; fi
  logs+=("$log")
}

log=$(mktemp)
meson test -C "$dir" --no-rebuild --print-errorlogs --verbose \
  --num-processes 2 >"$log" 2>&1 || status=1
tally "$log" ""
# kept: the PostgreSQL pass below writes meson's log again (each test's
# duration is in it)
cp "$dir/meson-logs/testlog.json" "$dir/meson-logs/testlog-first.json" \
  2>/dev/null

# grep reads the whole list (no -q): under pipefail, a grep that quits at
# the first match can fail the pipeline with meson's SIGPIPE.
if meson test -C "$dir" --list 2>/dev/null | grep -x test_pg_journal >/dev/null; then
  # The cluster's directory must be reachable by the server's own user.
  pgdir=$(mktemp -d) && chmod 755 "$pgdir"
  pglog=$(mktemp)
  if conn=$(tests/pg/cluster.sh start "$pgdir/cluster" 2>"$pglog"); then
    DURO_TEST_PG=$conn meson test -C "$dir" --no-rebuild --print-errorlogs \
      --verbose --num-processes 2 "${engine_suites[@]}" >>"$pglog" 2>&1 ||
      status=1
    tests/pg/cluster.sh stop "$pgdir/cluster" >/dev/null 2>&1
    tally "$pglog" " (postgresql)"
  else
    cat "$pglog" >&2
    echo "  the engine suites on PostgreSQL: no cluster (see above)"
    status=1 failed=$((failed + 1))
  fi
  rm -rf "$pgdir"
fi

if [ "$status" -ne 0 ] || [ "$failed" -ne 0 ]; then
  for l in "${logs[@]}"; do
    grep -E ':[FE]:|FAIL|TIMEOUT|ERROR: |runtime error|Sanitizer' "$l" | head -60
    echo "full log: $l"
  done
fi
echo "$passed passed, $failed failed"
[ "$status" -eq 0 ] && [ "$failed" -eq 0 ]
