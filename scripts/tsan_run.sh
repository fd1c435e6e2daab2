#!/usr/bin/env bash
# Run a command (ctest for the tsan preset) so that ThreadSanitizer binaries can start.
#
# usage: scripts/tsan_run.sh <build dir> <command> [args...]
#
# GCC 12's TSan runtime aborts at start-up with "FATAL: ThreadSanitizer: unexpected
# memory mapping" when the kernel randomises mmap with more bits than it expects
# (vm.mmap_rnd_bits = 32 on some kernels). Before running the command we build a
# trivial threaded TSan program with the tsan preset's compiler and start it a few
# times (the failure depends on where the mapping lands):
#   1. it works as is          -> run the command as is;
#   2. it works only with ASLR off -> run the command under `setarch <arch> -R`
#      (the personality is inherited, so every test ctest starts gets it too);
#   3. it fails both ways      -> stop with the probe's output: TSan is broken here.
# The probe takes ~1 s and lives in <build dir>/tsan-probe/.
set -euo pipefail

if (($# < 2)); then
  echo "usage: $0 <build dir> <command> [args...]" >&2
  exit 2
fi
build_dir=$1
shift

# The compiler the tsan preset configured, else what CMake would pick.
cxx=""
if [[ -f "$build_dir/CMakeCache.txt" ]]; then
  cxx=$(sed -n 's/^CMAKE_CXX_COMPILER:[A-Z]*=//p' "$build_dir/CMakeCache.txt")
fi
cxx=${cxx:-${CXX:-c++}}

probe_dir="$build_dir/tsan-probe"
mkdir -p "$probe_dir"
cat >"$probe_dir/probe.cpp" <<'EOF'
#include <atomic>
#include <thread>
int main() {
  std::atomic<int> x{0};
  std::thread t([&] { x.fetch_add(1); });
  t.join();
  return x.load() == 1 ? 0 : 1;
}
EOF
"$cxx" -std=c++20 -fsanitize=thread -O1 -g "$probe_dir/probe.cpp" -o "$probe_dir/probe" -pthread

probe_ok() {
  local i
  for i in 1 2 3 4 5; do
    "$@" "$probe_dir/probe" >"$probe_dir/probe.log" 2>&1 || return 1
  done
}

if probe_ok; then
  exec "$@"
fi
setarch_cmd=(setarch "$(uname -m)" -R)
if probe_ok "${setarch_cmd[@]}"; then
  echo "tsan: TSan binaries fail with ASLR on here (vm.mmap_rnd_bits=$(cat /proc/sys/vm/mmap_rnd_bits 2>/dev/null || echo '?'));" \
    "running under '${setarch_cmd[*]}'"
  exec "${setarch_cmd[@]}" "$@"
fi
echo "tsan: a trivial TSan program built with $cxx fails even with ASLR off:" >&2
cat "$probe_dir/probe.log" >&2
exit 1
