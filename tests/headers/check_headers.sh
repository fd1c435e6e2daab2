#!/usr/bin/env bash
# Header checks: every public header compiles on its own, and <corio/corio.hpp> includes
# every public one.
#
# usage: tests/headers/check_headers.sh [build dir]      (default: build/headers)
#   env: CXXS   compilers to check with  (default: "g++ clang++-19")
#        JOBS   parallel compiles        (default: nproc)
#
# For each include/corio/**/*.hpp (detail/ too) and each compiler, this compiles a
# translation unit holding only `#include <corio/that.hpp>`, with the library's own
# warning flags plus -fsyntax-only. A header that leans on something its includer
# happened to include first fails here. Then each header outside detail/ must appear
# in <corio/corio.hpp>, which promises the whole public API: a new header is easily
# left out of it, and nothing else would notice. Output of every failure is printed;
# the exit status is 1 if any check failed, and also if there are no headers (a check
# that checks nothing should not pass).
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

umbrella=corio/corio.hpp
left_out=0
for h in "${headers[@]}"; do
  if [[ $h != corio/detail/* && $h != "$umbrella" ]] && ! grep -qxF "#include <$h>" "$root/include/$umbrella"; then
    left_out=$((left_out + 1))
    echo "---- <$umbrella> does not include the public header <$h>"
  fi
done

total=$((${#headers[@]} * ${#cxxs[@]}))
if ((failed || left_out)); then
  echo "headers: $failed of $total checks failed; $left_out public headers missing from <$umbrella>" >&2
  exit 1
fi
echo "headers: ${#headers[@]} headers x ${#cxxs[@]} compilers self-contained; <$umbrella> includes every public one"
