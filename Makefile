# corio: two entry points (plus clean). Everything they make goes under build/.
#
#   make test    what CI runs (.ci/run), about 28 minutes on 2 cores:
#                  deps -> header self-containment (g++, clang++-19) -> the lab's own unit tests
#                  -> presets dev (ASan+UBSan), tsan, release: configure, build, ctest
#                  -> preset clang (clang++-19): build, ctest
#                  -> fuzz (libFuzzer, clang 19): channel operations against a sequential model, 60 s
#                  -> install-and-consume test -> `make bench QUICK=1` as a smoke run
#                Stops at the first failure; prints a banner and a time per stage.
#   make bench   the lab: build the library (release preset), install it to build/prefix, run
#                bench/lab.py against it.  ONLY=a,b runs only those experiments (the
#                report keeps the others' last full runs, from docs/bench/data/);
#                QUICK=1 runs the short version (under build/lab-quick/ only).
#   make clean   remove build/.
#
# Knobs: JOBS (build and ctest parallelism, default: nproc),
#        TEST_TIMEOUT (ctest per-test default, seconds; tests that set TIMEOUT keep theirs),
#        ASAN_OPTIONS / UBSAN_OPTIONS / TSAN_OPTIONS (defaults below, yours win),
#        ECHO_SECONDS (the echo experiment's window per run, default 5; 3 takes its full run from
#        about 27 to about 17 minutes, see bench/scenarios.md).

SHELL := /bin/bash
.SHELLFLAGS := -euo pipefail -c
.ONESHELL:
.DEFAULT_GOAL := test
.PHONY: test bench clean

JOBS ?= $(shell nproc)
TEST_TIMEOUT ?= 300
PYTHON := /usr/bin/python3
PREFIX := $(CURDIR)/build/prefix
STAGE := bash $(CURDIR)/scripts/stage.sh
STAGE_LOG := $(CURDIR)/build/stage-times.tsv

# Toolchains that live off the default PATH (scripts/deps.sh checks the same places).
export PATH := $(PATH):/usr/local/go/bin:$(HOME)/.cargo/bin

# Sanitizer defaults: stop at the first report, with a stack.
export ASAN_OPTIONS ?= detect_leaks=1:abort_on_error=0
export UBSAN_OPTIONS ?= print_stacktrace=1:halt_on_error=1
export TSAN_OPTIONS ?= halt_on_error=1:second_deadlock_stack=1

CTEST_FLAGS := -j $(JOBS) --timeout $(TEST_TIMEOUT) --no-tests=error
# Named apart from $(MAKE) on purpose: a recipe that spells out $(MAKE) is run even
# under `make -n`, and with .ONESHELL that would be the whole of `make test`.
SUBMAKE = $(MAKE) --no-print-directory
LAB_ARGS := $(if $(ONLY),--only $(ONLY)) $(if $(filter-out 0,$(QUICK)),--quick)

# $(call preset,<name>,<ctest launcher>): configure, build and test one CMake preset.
define preset
$(STAGE) "preset $(1): configure + build + ctest" \
  'cmake --preset $(1) && cmake --build --preset $(1) -j $(JOBS) && $(2) ctest --preset $(1) $(CTEST_FLAGS)'
endef

test: export CORIO_STAGE_LOG := $(STAGE_LOG)
test:
	mkdir -p build && : >"$(STAGE_LOG)"
	trap '$(STAGE) --summary' EXIT
	$(STAGE) "deps (test)" bash scripts/deps.sh test
	$(STAGE) "headers: each public header compiles alone" bash tests/headers/check_headers.sh
	$(STAGE) "lab: unit tests of the report's bookkeeping" '$(PYTHON) -m unittest discover -s tests/lab'
	$(call preset,dev)
	$(call preset,tsan,bash scripts/tsan_run.sh build/tsan)
	$(call preset,release)
	$(call preset,clang)
	$(STAGE) "fuzz: channel operations against a model (clang 19 libFuzzer, 60 s)" 'JOBS=$(JOBS) bash scripts/fuzz_run.sh 60'
	$(STAGE) "install-and-consume (release)" bash scripts/install_test.sh
	$(STAGE) "bench smoke: make bench QUICK=1" '$(SUBMAKE) bench QUICK=1'

bench:
	$(STAGE) "deps (bench)" bash scripts/deps.sh bench
	$(STAGE) "bench: build release, install to build/prefix" \
	  'cmake --preset release && cmake --build --preset release --target corio -j $(JOBS) && rm -rf "$(PREFIX)" && cmake --install build/release --prefix "$(PREFIX)"'
	$(STAGE) "bench: lab" '$(PYTHON) bench/lab.py --prefix "$(PREFIX)" $(LAB_ARGS)'

clean:
	rm -rf build
