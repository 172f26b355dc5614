#!/usr/bin/env bash
# run.sh — H1-H6, the HTTP figures: a real `duro run` (build/host/duro) of
# the bench plugin (bench/http/bench_plugin.c: One, Ten, Nap), started by
# this script on a config it writes into a directory of its own under
# bench-data/ (on the disk the figures are about, not a tmpfs), HTTP on a
# port the kernel picks (read back from the host's "ready ... http on port
# N" line), storage `synchronous: full` unless --synchronous normal, the
# engine's default threads (8 with the plugin in a worker, 64 with
# --plugin-workers 0).  A fresh host for each figure:
#
#   H1 single creates  wrk (single.lua), 64 connections, 10 s of
#                      POST /workflows/One/instances {"params": {...}};
#                      creates/s and latency p50/p99 (wrk's distribution)
#   H2 batch creates   wrk (batch.lua), 16 connections, 10 s of
#                      POST /workflows/One/instances/batch of 100;
#                      instances/s; for H1 and H2 also the instances
#                      completed during the run (/metrics)
#   H3 W1 via HTTP     duro-bench-http-drive: 1000 instances of Ten (10
#                      steps) created on 32 connections, then each one's
#                      result learned (GET .../instances/{id}, with
#                      ?wait=30s if the host holds such a request, else
#                      polled); steps/s = 10,000 / the whole time
#   H4 W3 via HTTP     duro-bench-http-drive: 10,000 creates of Nap (one
#                      step, then sleep an hour) on 64 connections
#   H5 create-and-wait duro-bench-http-drive --create-wait: one connection,
#                      1000 times in sequence a create of One that waits
#                      for its end (POST .../instances?wait=10s, one round
#                      trip); then as H5-get the same with a create and
#                      GET .../instances/{id}?wait=10s until complete (two
#                      round trips); create-to-result latency p50/p99/max
#   H6 overload        duro-bench-http-drive --overload: creates of Ten at
#                      the maximum rate on 64 connections for 60 s, every
#                      5 s a line of the engine's VmRSS (its pid from the
#                      host's "engine started (pid N)") and /metrics's
#                      duro_backlog, duro_backlog_in_journal and complete
#                      instances; then creates/s accepted, completions/s,
#                      RSS start/peak/end, the backlog at the end
#   P1 pipeline sends  wrk (records.lua), 16 connections, 10 s of
#                      POST /pipelines/events of a JSON array of 100
#                      records of 100 bytes; records/s accepted (each
#                      answered once durable) and latency p50/p99; then
#                      the seconds until the flusher wrote every one
#                      (GET /pipelines: backlog empty)
#
# The plugin's code runs in one worker process (plugins[].workers: 1, the
# default); --plugin-workers 0 runs it in the engine's process, as before
# workers, for a comparison on the same build.
#
# One line per figure, "NAME  value unit  [setting]".  --quick: a smoke run
# (1 s each, 100 and 1000 instances, H5 100, H6 10 s); --overload-seconds N
# sets H6's length (`make bench-overload`: --only H6 --overload-seconds 600).  --perf: `perf record -g` of the
# engine process during H1, its top symbols printed after.  --keep keeps
# the host directories.  Figures, never assertions: an HTTP error or a host
# that does not exit 0 on SIGTERM ends the run with exit 1 (files kept).
set -euo pipefail
cd "$(dirname "$0")/../.."
here=bench/http
build=${BUILD_DIR:-build}
duro=$build/host/duro
plugin=$(realpath "$build/bench/libbench.so")
drive=$build/bench/duro-bench-http-drive

quick=0 sync=full keep=0 perf=0 parent=bench-data only="H1,H2,H3,H4,H5,H6,P1"
plugin_workers=1
h6_override=""
threads=${BENCH_WRK_THREADS:-2}
while [ $# -gt 0 ]; do
  case $1 in
    --quick) quick=1 ;;
    --keep) keep=1 ;;
    --perf) perf=1 ;;
    --synchronous) sync=$2; shift ;;
    --dir) parent=$2; shift ;;
    --only) only=$2; shift ;;
    --threads) threads=$2; shift ;;
    --plugin-workers) plugin_workers=$2; shift ;;
    --overload-seconds) h6_override=$2; shift ;;
    *) echo "usage: run.sh [--quick] [--synchronous full|normal] [--only H1,H3]" \
            "[--threads N] [--perf] [--keep] [--dir DIR] [--plugin-workers N]" \
            "[--overload-seconds N]  (H1-H6, P1)" >&2; exit 2 ;;
  esac
  shift
done
for f in "$duro" "$plugin" "$drive"; do
  [ -x "$f" ] || [ -f "$f" ] || { echo "run.sh: $f is not built" >&2; exit 1; }
done
command -v wrk >/dev/null || { echo "run.sh: wrk is missing (bench/http/deps.sh)" >&2; exit 1; }
if [ $quick = 1 ]; then
  secs=1 h3_n=100 h4_n=1000 h5_n=100 h6_secs=10
else
  secs=10 h3_n=1000 h4_n=10000 h5_n=1000 h6_secs=60
fi
[ -n "$h6_override" ] && h6_secs=$h6_override
export BENCH_LUA_DIR=$PWD/$here

mkdir -p "$parent"
dir="" host_pid="" port=""
fail() {
  echo "run.sh: $*${dir:+ (host files kept in $dir)}" >&2
  [ -n "$host_pid" ] && kill -KILL "$host_pid" 2>/dev/null
  exit 1
}
trap '[ -n "$host_pid" ] && kill -KILL "$host_pid" 2>/dev/null; true' EXIT

start_host() {
  dir=$(realpath "$(mktemp -d "$parent/http.XXXXXX")")
  cat >"$dir/duro.yaml" <<YAML
storage: { path: $dir/duro.db, synchronous: $sync }
http: { listen: "127.0.0.1:0" }
engine: { max_crashes: 3 }
plugins:
  - name: bench
    path: $plugin
    workers: $plugin_workers
    workflows:
      - { name: One, binding: ONE, class_name: One }
      - { name: Ten, binding: TEN, class_name: Ten }
      - { name: Nap, binding: NAP, class_name: Nap }
pipelines:
  - name: events
    binding: EVENTS
    sink: { files: { path: $dir/events } }
    roll: { size: 8MB, interval: 1s }
    max_backlog: 4GB
YAML
  "$duro" run "$dir/duro.yaml" >"$dir/host.log" 2>&1 &
  host_pid=$!
  port=""
  for _ in $(seq 2000); do
    port=$(sed -n 's/.*http on port \([0-9]*\).*/\1/p' "$dir/host.log" | head -1)
    [ -n "$port" ] && return 0
    kill -0 "$host_pid" 2>/dev/null || break
    sleep 0.01
  done
  cat "$dir/host.log" >&2
  fail "$duro did not get ready"
}

# SIGTERM: the host must exit 0 within 30 s.
stop_host() {
  kill -TERM "$host_pid"
  local st=0
  timeout 30 tail --pid="$host_pid" -f /dev/null || fail "the host did not stop within 30 s"
  wait "$host_pid" || st=$?
  host_pid=""
  [ $st = 0 ] || fail "the host ended with status $st after SIGTERM"
  [ $keep = 1 ] || rm -rf "$dir"
}

wants() { [[ ",$only," == *",$1,"* ]]; }

# NAME: the instances the host completed while wrk created them (the
# creates it accepted faster than it ran are the difference), from
# /metrics's duro_instances{status="complete"}, read over bash's /dev/tcp.
report_completed() {
  exec 3<>"/dev/tcp/127.0.0.1/$port"
  printf 'GET /metrics HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n' >&3
  awk -v name="$1 completed meanwhile" -v secs="$secs" -v sync="$sync" '
    /^duro_instances\{.*status="complete"/ { n += $NF }
    END { printf "%-28s %12.3f %-10s [synchronous=%s http wrk %ss]\n",
                 name, n / secs, "inst/s", sync, secs }' <&3
  exec 3<&-
}

# GET PATH over bash's /dev/tcp: the body.
http_get() {
  exec 3<>"/dev/tcp/127.0.0.1/$port"
  printf 'GET %s HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n' "$1" >&3
  sed '1,/^\r$/d' <&3
  exec 3<&-
}

# wrk SCRIPT NAME CONNECTIONS PER_REQUEST PATH: one figure's run, whose
# errors (written by report.lua's done) fail the bench.
run_wrk() {
  local script=$1 name=$2 c=$3 per=$4 path=$5
  local t=$threads
  [ "$t" -gt "$c" ] && t=$c
  BENCH_NAME=$name BENCH_PER_REQUEST=$per BENCH_ERRFILE=$dir/wrk.errors \
  BENCH_SETTING="synchronous=$sync http wrk -t$t -c$c ${secs}s" \
    wrk -t"$t" -c"$c" -d"${secs}s" --timeout 30s -s "$here/$script" \
      "http://127.0.0.1:$port$path" >"$dir/wrk.out" 2>"$dir/wrk.err" ||
    { cat "$dir/wrk.out" "$dir/wrk.err" >&2; fail "wrk failed"; }
  # wrk's own summary first, then done()'s lines: keep only ours.
  grep "^$name " "$dir/wrk.out"
  [ ! -s "$dir/wrk.errors" ] || { cat "$dir/wrk.out" "$dir/wrk.err" >&2; fail "$name: errors"; }
}

if wants H1; then
  start_host
  if [ $perf = 1 ]; then
    engine=$(ps -o pid= --ppid "$host_pid" | head -1 | tr -d ' ')
    perf record -g -o "$dir/perf.data" -p "$engine" -- sleep "$secs" \
      >/dev/null 2>"$dir/perf.err" &
    perf_pid=$!
  fi
  run_wrk single.lua H1 64 1 /workflows/One/instances
  report_completed H1
  if [ $perf = 1 ]; then
    wait "$perf_pid" || true
    perf report -i "$dir/perf.data" --no-children --percent-limit 1 \
      --sort sym --stdio -g none 2>/dev/null | grep -v '^#' | grep -v '^$' |
      head -25 >"$dir/perf.top"
    perf report -i "$dir/perf.data" --no-children --sort dso --stdio \
      -g none 2>/dev/null | grep -v '^#' | grep -v '^$' | head -8 >"$dir/perf.dso"
    perf_dir=$dir
    echo "H1 perf of the engine (pid $engine): $dir/perf.data; top symbols:"
    sed 's/^/  /' "$dir/perf.top"
    echo "H1 perf by object:"
    sed 's/^/  /' "$dir/perf.dso"
  fi
  keep_h1=$keep
  [ -z "${perf_dir:-}" ] || keep=1 # the profile stays, and its host's files
  stop_host
  keep=$keep_h1
fi

if wants H2; then
  start_host
  run_wrk batch.lua H2 16 100 /workflows/One/instances/batch
  report_completed H2
  stop_host
fi

if wants H3; then
  start_host
  "$drive" --port "$port" --wf Ten -n "$h3_n" -c 32 --await --steps 10 \
    --name H3 --setting "synchronous=$sync http drive -c32 $h3_n x Ten" ||
    fail "H3 failed"
  stop_host
fi

if wants H4; then
  start_host
  "$drive" --port "$port" --wf Nap -n "$h4_n" -c 64 \
    --name H4 --setting "synchronous=$sync http drive -c64 $h4_n x Nap" ||
    fail "H4 failed"
  stop_host
fi
if wants H5; then
  start_host
  "$drive" --port "$port" --wf One -n "$h5_n" -c 1 --create-wait \
    --name H5 --setting "synchronous=$sync http drive -c1 $h5_n x One" ||
    fail "H5 failed"
  "$drive" --port "$port" --wf One -n "$h5_n" -c 1 --create-wait --then-get \
    --prefix g --name H5-get \
    --setting "synchronous=$sync http drive -c1 $h5_n x One, then GET" ||
    fail "H5-get failed"
  stop_host
fi

if wants H6; then
  start_host
  engine=""
  for _ in $(seq 500); do
    engine=$(sed -n 's/.*engine started (pid \([0-9]*\)).*/\1/p' "$dir/host.log" | tail -1)
    [ -n "$engine" ] && break
    sleep 0.01
  done
  [ -n "$engine" ] || fail "H6: no \"engine started (pid N)\" in the host log"
  "$drive" --port "$port" --wf Ten -c 64 --overload "$h6_secs" --every 5 \
    --engine-pid "$engine" --name H6 \
    --setting "synchronous=$sync http drive -c64 ${h6_secs}s x Ten" ||
    fail "H6 failed"
  stop_host
fi
if wants P1; then
  start_host
  BENCH_RATE="accepted" BENCH_UNIT="records/s" \
    run_wrk records.lua P1 16 100 /pipelines/events
  # The flusher's part: how long after wrk's end its backlog is empty.
  t0=$(date +%s%N)
  for _ in $(seq 6000); do
    http_get /pipelines/events | grep -q '"backlog":{"records":0,' && break
    sleep 0.01
  done
  http_get /pipelines/events | grep -q '"backlog":{"records":0,' ||
    fail "P1: the backlog is not written after 60 s"
  printf "%-28s %12.3f %-10s [synchronous=%s http wrk %ss]\n" \
    "P1 written after wrk's end" "$((($(date +%s%N) - t0) / 1000000))e-3" s \
    "$sync" "$secs"
  stop_host
fi
[ $keep = 1 ] || [ -n "${perf_dir:-}" ] || rmdir "$parent" 2>/dev/null || true
