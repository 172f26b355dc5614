# Convenience targets; the build itself is meson's (meson.build).
.PHONY: all deps build host run check test bench bench-http bench-pg bench-dbos bench-overload bench-ipc demo chaos chaos-pg chaos-failover chaos-failover-async chaos-pg-hosts chaos-storms chaos-pipelines chaos-s3 fuzz clean install

all: build

deps:
	@bash .ci/deps

build: deps
	@[ -f build/build.ninja ] || meson setup build --buildtype=debugoptimized >/dev/null
	@ninja -C build

# The host and the example plugins alone, what `make run` and `make check`
# run (the tests and benchmarks build with `make test` and `make bench`).
host: deps
	@[ -f build/build.ninja ] || meson setup build --buildtype=debugoptimized >/dev/null
	@ninja -C build host/duro examples/liborders.so examples/libjobs.so examples/libnightly.so examples/libfanout.so

# The main job: the host on config/duro.yaml with the example plugins.
run: host
	./build/host/duro run config/duro.yaml

check: host
	./build/host/duro check config/duro.yaml

# The host `duro`, duro.h, duro-plugin.pc, duro(1), the plugin template and
# an example systemd unit under PREFIX (default /usr/local), staged under
# DESTDIR when given: `sudo make install`, `make install
# PREFIX=$$HOME/.local`, `make install PREFIX=/usr DESTDIR=/tmp/pkg`.
# build/ is configured for PREFIX only when it names another, so that a
# `sudo make install` after `make` does not regenerate build/ as root.
PREFIX ?= /usr/local
build_prefix = $(shell meson introspect build --buildoptions | python3 -c \
  'import json, sys; print(next(o["value"] for o in json.load(sys.stdin) if o["name"] == "prefix"))')
install: build
	$(if $(filter-out $(PREFIX),$(build_prefix)),meson configure build --prefix "$(PREFIX)")
	meson install -C build $(if $(DESTDIR),--destdir "$(abspath $(DESTDIR))")

# Every test, under AddressSanitizer and UndefinedBehaviorSanitizer.
test: deps
	@tests/run.sh

clean:
	rm -rf build build-test

# The benchmarks (figures, not assertions): the engine in-process
# (bench/bench.c; BENCH_ARGS="--csv --only W1,Q1" etc.), then Q2, the queue
# through a real host over HTTP (bench/q2.c; BENCH_Q2_ARGS="--quick" etc.),
# then H1-H6, creations, workloads and an overload through HTTP measured
# with wrk (bench-http below; about 2 minutes).
bench: build
	./build/bench/duro-bench $(BENCH_ARGS)
	./build/bench/duro-bench-q2 $(BENCH_Q2_ARGS)
	@$(MAKE) --no-print-directory bench-http

# One bare PostgreSQL commit of one row, mean p50 p99 over 2000 commits on
# a throwaway cluster with fsync on (bench/pg_commit.c; BENCH_PG_ARGS=
# "--commits 10000", "--csv"): the reference a PostgreSQL journal's W2 is
# measured against; then W1-W3 with the engine's journal on a throwaway
# cluster of their own (duro-bench --postgresql auto; BENCH_PG_ENGINE_ARGS=
# "--csv", "--sleepers 10000").  Built only when libpq is found (make deps
# installs it).
bench-pg: build
	@[ -x build/bench/duro-bench-pg ] || { echo "build/bench/duro-bench-pg is missing: libpq was not found when build/ was configured (meson setup --reconfigure build)" >&2; exit 1; }
	./build/bench/duro-bench-pg $(BENCH_PG_ARGS)
	./build/bench/duro-bench --postgresql auto --only W1,W2,W3 $(BENCH_PG_ENGINE_ARGS)
	./build/bench/duro-bench --postgresql auto --only W1,W2,W3 --hosts 3 $(BENCH_PG_ENGINE_ARGS)
	./build/bench/duro-bench --postgresql auto --only H1 $(BENCH_PG_ENGINE_ARGS)

# The same W1-W3 on DBOS Transact (its TypeScript SDK, pinned in
# bench/dbos/package.json) against a throwaway cluster of the same kind, for
# figures beside bench-pg's measured on this machine (bench/dbos/run.sh;
# BENCH_DBOS_ARGS="--sleepers 100000", "--pool 64", "--csv").  Installs
# nodejs and npm when missing and the SDK with npm ci.
bench-dbos:
	bench/dbos/run.sh $(BENCH_DBOS_ARGS)

# H1-H6 alone (bench/http/run.sh; BENCH_HTTP_ARGS="--quick", "--perf",
# "--only H1,H3", "--synchronous normal"); installs wrk if missing.
bench-http: build
	@bash bench/http/deps.sh
	bench/http/run.sh $(BENCH_HTTP_ARGS)

# I1-I4: one worker-to-engine round trip over a socketpair and over
# shared-memory rings (bench/ipc/ipc_bench.c; BENCH_IPC_ARGS="--size 4096").
bench-ipc: build
	./build/bench/duro-bench-ipc $(BENCH_IPC_ARGS)

# H6 alone for 10 minutes: RSS and completions under sustained overload.
bench-overload: build
	@bash bench/http/deps.sh
	bench/http/run.sh --only H6 --overload-seconds 600

# 100 orders end to end through the CLI (examples/demo.sh).
demo: build
	@examples/demo.sh

# libFuzzer on the config loader, durations and HTTP (fuzz/run.sh): clang
# builds in build-fuzz/, FUZZ_SECONDS (default 60) per target.
fuzz:
	@bash fuzz/run.sh

# The long durability run (tests/chaos.c): the host SIGKILLed CHAOS_KILLS
# times (default 1000) under an HTTP workload, then checked; CHAOS_SEED
# picks the random choices (both from the environment or the command line,
# `make chaos CHAOS_KILLS=20`).  Not part of `make test`.
chaos: deps
	@[ -f build/build.ninja ] || meson setup build --buildtype=debugoptimized >/dev/null
	@ninja -C build chaos >/dev/null || ninja -C build chaos
	./build/tests/chaos

# Pipelines under 100 kill -9s of the engine while two senders send and
# files are written (tests/test_pipeline_host.c's kill case, which `make
# test` runs with 3, and the suite's other cases): every acknowledged
# record in exactly one file, each sender's in order; each engine killed
# once ready started again after 0.1 s.  67-78 s on the 2-core
# development machine (the engine answering again 120-155 ms after each
# kill).  DURO_PIPELINE_KILLS sets the count.
chaos-pipelines: deps
	@[ -f build/build.ninja ] || meson setup build --buildtype=debugoptimized >/dev/null
	@ninja -C build tests/test_pipeline_host >/dev/null || ninja -C build tests/test_pipeline_host
	DURO_PIPELINE_KILLS=$${DURO_PIPELINE_KILLS:-100} ./build/tests/test_pipeline_host

# A pipeline's S3-compatible endpoint down for 30 s while records are sent
# (tests/test_pipeline_s3.c's endpoint_down_then_back case, which `make
# test` runs with 3 s, and the suite's other cases): every send answered
# 202 (up to max_backlog), then every record in exactly one object, in
# order, uploaded within the case's max_retry_delay (2 s) of the server's
# return.  About 50 s on the 2-core development machine.
# DURO_S3_OUTAGE_S sets the seconds.
chaos-s3: deps
	@[ -f build/build.ninja ] || meson setup build --buildtype=debugoptimized >/dev/null
	@ninja -C build tests/test_pipeline_s3 >/dev/null || ninja -C build tests/test_pipeline_s3
	DURO_S3_OUTAGE_S=$${DURO_S3_OUTAGE_S:-30} ./build/tests/test_pipeline_s3

# PostgreSQL failing over under load (tests/test_pg_failover.c, which
# `make test` runs with one failover of 46 instances): two hosts on a
# primary and its synchronous standby, 1,000 instances x 10 steps, six
# waiting for an event, creates and queue sends all along; the primary
# killed DURO_FAILOVER_KILLS times (default 3), the standby promoted after
# 0.3-3 s (DURO_FAILOVER_SEED's draw; the first after 2 s) and the old
# primary made its standby: every acknowledged create and send completes,
# no completed step runs again, no host loses its lease.
chaos-failover: deps
	@[ -f build/build.ninja ] || meson setup build --buildtype=debugoptimized >/dev/null
	@ninja -C build tests/test_pg_failover >/dev/null || ninja -C build tests/test_pg_failover
	DURO_FAILOVER_KILLS=$${DURO_FAILOVER_KILLS:-3} DURO_FAILOVER_FAULTS=$${DURO_FAILOVER_FAULTS:-1000} ./build/tests/test_pg_failover

# The storms at full size: tests/test_faults.c, tests/test_breaker.c and
# tests/test_workers.c built without the sanitizers, whose sizes `make
# test`'s sanitizer build cuts (test_faults' bad_deploy_storm 200 poisoned
# and 1,000 healthy instances, not 10 and 300; test_breaker's
# storm_spares_others 1,000 healthy, not 300, rare_crash_holds_nothing
# 2,000 instances, not 1,000, outside_kills_hold_nothing 150, not 80;
# test_workers' two_kills_do_not_wedge 100, not 50), and the suites'
# other cases.
chaos-storms: deps
	@[ -f build/build.ninja ] || meson setup build --buildtype=debugoptimized >/dev/null
	@ninja -C build tests/test_faults tests/test_breaker tests/test_workers >/dev/null || ninja -C build tests/test_faults tests/test_breaker tests/test_workers
	./build/tests/test_faults
	./build/tests/test_breaker
	./build/tests/test_workers

# tests/test_pg_hosts.c with its repeated rounds (`make test` runs one
# freeze of each of frozen_host_runs_no_completed_step_again's two runs
# and two rounds of hosts_starting_at_once_on_an_empty_database_come_up):
# DURO_FROZEN_ROUNDS (default 3) freezes of the host past its lease while
# its instances run, DURO_EMPTY_ROUNDS (default 5) starts of three hosts at
# once on an empty database, and the suite's other cases.
chaos-pg-hosts: deps
	@[ -f build/build.ninja ] || meson setup build --buildtype=debugoptimized >/dev/null
	@ninja -C build tests/test_pg_hosts >/dev/null || ninja -C build tests/test_pg_hosts
	DURO_FROZEN_ROUNDS=$${DURO_FROZEN_ROUNDS:-3} DURO_EMPTY_ROUNDS=$${DURO_EMPTY_ROUNDS:-5} ./build/tests/test_pg_hosts

# The same run on PostgreSQL (tests/chaos.c with CHAOS_PG=1): three hosts
# on one database of a throwaway cluster (tests/pg/cluster.sh, stopped at
# the end), each request to a random host, each kill of a random one.
# Needs libpq and the server (bash .ci/deps).  Not part of `make test`.
# The same with an asynchronous standby: what a failover loses, counted
# (acknowledged creates and sends gone, completed steps run again), and
# every instance the new primary has completes.
chaos-failover-async: deps
	@[ -f build/build.ninja ] || meson setup build --buildtype=debugoptimized >/dev/null
	@ninja -C build tests/test_pg_failover >/dev/null || ninja -C build tests/test_pg_failover
	DURO_PG_STANDBY=async DURO_FAILOVER_KILLS=$${DURO_FAILOVER_KILLS:-3} DURO_FAILOVER_FAULTS=$${DURO_FAILOVER_FAULTS:-1000} ./build/tests/test_pg_failover

chaos-pg: deps
	@[ -f build/build.ninja ] || meson setup build --buildtype=debugoptimized >/dev/null
	@ninja -C build chaos >/dev/null || ninja -C build chaos
	CHAOS_PG=1 ./build/tests/chaos
