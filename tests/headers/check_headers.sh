#!/usr/bin/env bash
# Header self-containment check: every public header compiles on its own.
#
# usage: tests/headers/check_headers.sh [build dir]      (default: build/headers)
#   env: CXXS   compilers to check with  (default: "g++ clang++-19")
#        JOBS   parallel compiles        (default: nproc)
#
# For each include/corio/**/*.hpp (detail/ too) and each compiler, this compiles a
# translation unit holding only `#include <corio/that.hpp>`, with the library's own
# warning flags plus -fsyntax-only. A header that leans on something its includer
# happened to include first fails here. Output of every failure is printed; the exit
# status is 1 if any header failed, and also if there are no headers (a check that
# checks nothing should not pass).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
out=${1:-$root/build/headers}
read -r -a cxxs <<<"${CXXS:-g++ clang++-19}"
jobs=${JOBS:-$(nproc)}
flags=(-std=c++20 -Wall -Wextra -Wpedantic -Werror -fsyntax-only -I "$root/include")

mapfile -t headers < <(cd "$root/include" && find corio -name '*.hpp' | LC_ALL=C sort)
if ((${#headers[@]} == 0)); then
  echo "headers: no headers under $root/include/corio" >&2
  exit 1
fi

rm -rf "$out"
mkdir -p "$out"

# One line per (compiler, header) job; each job writes <out>/<compiler>/<header>.{cpp,log,ok}.
for cxx in "${cxxs[@]}"; do
  command -v "$cxx" >/dev/null || { echo "headers: compiler '$cxx' not found" >&2; exit 1; }
  for h in "${headers[@]}"; do
    printf '%s\t%s\n' "$cxx" "$h"
  done
done | xargs -P "$jobs" -d '\n' -n 1 bash -c '
  set -u
  IFS=$'"'"'\t'"'"' read -r cxx h <<<"${!#}"
  set -- "${@:1:$#-1}"
  tu="$0/$cxx/${h%.hpp}.cpp"
  mkdir -p "$(dirname "$tu")"
  printf "#include <%s>\n" "$h" >"$tu"
  if "$cxx" "$@" "$tu" >"${tu%.cpp}.log" 2>&1; then touch "${tu%.cpp}.ok"; fi
' "$out" "${flags[@]}"

failed=0
for cxx in "${cxxs[@]}"; do
  for h in "${headers[@]}"; do
    base="$out/$cxx/${h%.hpp}"
    if [[ ! -f "$base.ok" ]]; then
      failed=$((failed + 1))
      echo "---- $cxx: <$h> does not compile on its own:"
      cat "$base.log"
    fi
  done
done

total=$((${#headers[@]} * ${#cxxs[@]}))
if ((failed)); then
  echo "headers: $failed of $total checks failed" >&2
  exit 1
fi
echo "headers: ${#headers[@]} headers x ${#cxxs[@]} compilers self-contained"
