#!/usr/bin/env bash
# Install-and-consume test: install a release build into a fresh prefix, build the
# tiny user project in tests/install against that prefix only, and run it.
#
# usage: scripts/install_test.sh            (from anywhere)
#
# Steps:
#   1. configure the `release` preset into a *fresh* build dir, build/install-test/corio,
#      with tests off (a user's first configure: a build dir configured twice can hide
#      variables that are only set, and cached, later in the first run);
#   2. build it and install it into build/install-test/prefix;
#   3. check the installed CMake package names no path in the source or build tree;
#   4. configure tests/install with CMAKE_PREFIX_PATH=<prefix> (package registries off),
#      check find_package(corio) found *that* prefix, build it, run it.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
work=$root/build/install-test
prefix=$work/prefix
jobs=${JOBS:-$(nproc)}

rm -rf "$work"
cmake --preset release -B "$work/corio" -DCORIO_BUILD_TESTS=OFF >/dev/null
cmake --build "$work/corio" -j "$jobs"
cmake --install "$work/corio" --prefix "$prefix"

pkgdir=$(find "$prefix" -type d -path '*/cmake/corio' | head -n 1)
if [[ -z "$pkgdir" ]]; then
  echo "install-test: no lib*/cmake/corio package directory under $prefix" >&2
  exit 1
fi
if grep -rn -e "$root/src" -e "$root/include" -e "$work/corio" "$pkgdir"; then
  echo "install-test: the installed package refers to the source or build tree (above)" >&2
  exit 1
fi

cmake -S tests/install -B "$work/consumer" -G Ninja \
  -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$prefix" \
  -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF \
  -DCMAKE_FIND_USE_SYSTEM_PACKAGE_REGISTRY=OFF
found=$(sed -n 's/^corio_DIR:[A-Z]*=//p' "$work/consumer/CMakeCache.txt")
if [[ "$found" != "$prefix"/* ]]; then
  echo "install-test: find_package(corio) used '$found', not the fresh prefix $prefix" >&2
  exit 1
fi
cmake --build "$work/consumer" -j "$jobs"
"$work/consumer/consumer"
echo "install-test: ok (consumer built against $prefix)"
