#!/usr/bin/env bash
# Build the libFuzzer targets (preset `fuzz`: clang 19, ASan + UBSan) and run each for a bounded time.
#
# usage: scripts/fuzz_run.sh [seconds per target]      (default: $FUZZ_SECONDS or 60)
#   env: JOBS   build parallelism (default: nproc)
#
# The corpus grows in build/fuzz/corpus/<target>/ and is reused by the next run. A crash (a model
# mismatch aborts) leaves its input in build/fuzz/artifacts/ and makes the script fail; reproduce it
# with build/fuzz/tests/fuzz/<target> <that file>.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
seconds=${1:-${FUZZ_SECONDS:-60}}
jobs=${JOBS:-$(nproc)}
cd "$root"

cmake --preset fuzz >/dev/null
cmake --build --preset fuzz -j "$jobs" --target channel_fuzz

for target in channel_fuzz; do
  corpus=build/fuzz/corpus/$target
  artifacts=build/fuzz/artifacts/
  mkdir -p "$corpus" "$artifacts"
  echo "fuzz: $target for ${seconds}s (corpus $corpus)"
  ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1} UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1} \
    "build/fuzz/tests/fuzz/$target" -max_total_time="$seconds" -max_len=512 -print_final_stats=1 \
    -artifact_prefix="$artifacts" "$corpus"
done
