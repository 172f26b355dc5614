# Convenience targets; the build itself is meson's (meson.build).
.PHONY: all deps build run check test bench demo fuzz clean

all: build

deps:
	@bash .ci/deps

build: deps
	@[ -f build/build.ninja ] || meson setup build --buildtype=debugoptimized >/dev/null
	@ninja -C build

# The main job: the host on config/duro.yaml with the example plugin.
run: build
	./build/host/duro run config/duro.yaml

check: build
	./build/host/duro check config/duro.yaml

# Every test, under AddressSanitizer and UndefinedBehaviorSanitizer.
test: deps
	@tests/run.sh

clean:
	rm -rf build build-test

# The benchmarks (figures, not assertions); BENCH_ARGS="--csv" etc.
bench: build
	./build/bench/duro-bench $(BENCH_ARGS)

# 100 orders end to end through the CLI (examples/demo.sh).
demo: build
	@examples/demo.sh

# libFuzzer on the config loader, durations and HTTP (fuzz/run.sh): clang
# builds in build-fuzz/, FUZZ_SECONDS (default 60) per target.
fuzz:
	@bash fuzz/run.sh
