#!/usr/bin/env bash
# make fuzz: builds the libFuzzer targets of fuzz/ with clang in
# build-fuzz/ (AddressSanitizer, UndefinedBehaviorSanitizer, libFuzzer's
# coverage on all of duro's code) and runs each for FUZZ_SECONDS (default
# 60) from its seed corpus (fuzz/corpus/TARGET, copied to
# build-fuzz/fuzz/corpus-TARGET, where what it finds accumulates).
# Prints a line per target with its executions and crashes; a crash's input
# is kept in build-fuzz/fuzz/artifacts-TARGET/.  Exits non-zero when any
# target crashed.  FUZZ_TARGETS="fuzz_config ..." runs only those.
set -uo pipefail
cd "$(dirname "$0")/.."
bash fuzz/deps.sh || exit 1
secs=${FUZZ_SECONDS:-60}
dir=build-fuzz
targets=(${FUZZ_TARGETS:-fuzz_config fuzz_duration fuzz_cron fuzz_worker_frame fuzz_http_request fuzz_http_route})
if [ ! -f "$dir/build.ninja" ]; then
  CC=clang meson setup "$dir" -Dfuzz=true -Dtests=false -Dwerror=false \
    -Db_sanitize=address,undefined -Db_lundef=false \
    --buildtype=debugoptimized >/dev/null || exit 1
fi
build=()
for t in "${targets[@]}"; do build+=("fuzz/$t"); done
ninja -C "$dir" "${build[@]}" >/dev/null || { ninja -C "$dir" "${build[@]}"; exit 1; }

export ASAN_OPTIONS=detect_leaks=1
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
failed=0
for t in "${targets[@]}"; do
  corpus="$dir/fuzz/corpus-$t" artifacts="$dir/fuzz/artifacts-$t"
  mkdir -p "$corpus" "$artifacts"
  cp -n fuzz/corpus/"$t"/* "$corpus"/ 2>/dev/null
  log="$dir/fuzz/$t.log"
  "$dir/fuzz/$t" -max_total_time="$secs" -print_final_stats=1 \
    -artifact_prefix="$artifacts/" -timeout=10 -rss_limit_mb=4096 \
    "$corpus" >"$log" 2>&1
  status=$?
  runs=$(sed -nE 's/^stat::number_of_executed_units: *([0-9]+).*/\1/p' "$log" | tail -1)
  crashes=$(find "$artifacts" -type f | wc -l)
  cov=$(grep -oE 'cov: [0-9]+' "$log" | tail -1)
  units=$(find "$corpus" -type f | wc -l)
  printf '%-18s %10s executions in %ss, %s crash(es), %s, corpus %s\n' \
    "$t" "${runs:-?}" "$secs" "$crashes" "${cov:-cov: ?}" "$units"
  if [ "$status" -ne 0 ] || [ "$crashes" -ne 0 ]; then
    failed=1
    grep -E 'ERROR|runtime error|SUMMARY|Test unit written' "$log" | head -10
    echo "  log: $log"
  fi
done
exit $failed
