#!/usr/bin/env bash
# Builds duro with AddressSanitizer and UndefinedBehaviorSanitizer and runs
# every test suite.  Prints each Check suite's summary, then one line
# "N passed, N failed" counting test cases (a suite that is not a Check
# suite counts as one case).  Exits non-zero when anything failed.
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
log=$(mktemp)
meson test -C "$dir" --no-rebuild --print-errorlogs --verbose \
  --num-processes 2 >"$log" 2>&1
status=$?

# Each Check suite prints "NN%: Checks: N, Failures: F, Errors: E".
# One line a test, named as meson and the README's test table name it:
# Check suites with their summary, the other tests with their result.
awk '/^Running suite\(s\): / { name = "test_" $3 }
     /^[0-9]+%: Checks: / { printf "  %-16s %s\n", name, $0 }' "$log"
sed -nE 's/^ *[0-9]+\/[0-9]+ +([a-z0-9_]+) +(OK|FAIL|TIMEOUT|SKIP)( .*|$)/\1 \2/p' "$log" |
  awk '$1 !~ /^test_/ { printf "  %-16s %s\n", $1, $2 }'
passed=0 failed=0 check_suites=0
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

if [ "$status" -ne 0 ] || [ "$failed" -ne 0 ]; then
  grep -E ':[FE]:|FAIL|TIMEOUT|ERROR: |runtime error|Sanitizer' "$log" | head -60
  echo "full log: $log"
fi
echo "$passed passed, $failed failed"
[ "$status" -eq 0 ] && [ "$failed" -eq 0 ]
