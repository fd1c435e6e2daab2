#!/usr/bin/env bash
# Check, and install where we can, what `make test` or `make bench` needs on Debian 12.
#
# usage: scripts/deps.sh <test|bench>
#
# Debian packages are checked with dpkg-query, one at a time, so a machine that has
# everything costs no network and well under a second. When something is missing:
#   - as root: `apt-get update` once, then install only the missing packages;
#   - otherwise: print the one `sudo apt-get install` line to run, and exit 1.
# Toolchains that do not come from Debian (Go and cargo) are checked on PATH and in
# their usual install locations; each is one `need_tool` line below. The JDK and Maven
# (for the Kotlin peer) are taken from PATH when there, else installed from Debian.
set -euo pipefail

mode=${1:-}

# Everything the library, its tests and the C++ lab peers build against (liburing-dev: the library's
# io_uring reactor backend).
bench_pkgs=(
  cmake ninja-build g++ libgtest-dev liburing-dev python3-matplotlib
  libboost-context-dev libboost-dev libconcurrentqueue-dev
  libasio-dev  # the echo experiment's Asio server (standalone Asio, C++20 coroutines)
)
# `make test` also builds with clang 19 and ends with a bench smoke run.
test_pkgs=("${bench_pkgs[@]}" clang-19 libclang-rt-19-dev)

case "$mode" in
  test)  pkgs=("${test_pkgs[@]}") ;;
  bench) pkgs=("${bench_pkgs[@]}") ;;
  *) echo "usage: $0 <test|bench>" >&2; exit 2 ;;
esac

# --- Debian packages --------------------------------------------------------------
missing=()
for p in "${pkgs[@]}"; do
  status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
  [[ "$status" == "install ok installed" ]] || missing+=("$p")
done

# The lab's Kotlin peer (both modes: `make test` ends with a bench smoke run) needs a JDK 17+ and
# Maven 3.6.3+. A JDK or Maven already on PATH (SDKMAN, /opt) is used as it is; otherwise Debian's.
java_major() {  # `java -version` prints `openjdk version "17.0.15" ...` (or "1.8.0_..." for 8) on stderr
  local version
  version=$(java -version 2>&1 | sed -n '1s/.*version "\([^"]*\)".*/\1/p')
  [[ $version == 1.* ]] && version=${version#1.}
  echo "${version%%[.+-]*}"
}
maven_version() {  # `mvn -v` starts with `Apache Maven 3.8.7 (...)`, possibly in colour
  mvn -v 2>/dev/null | sed -n '1s/.*Apache Maven \([0-9][0-9.]*\).*/\1/p'
}
if ! command -v java >/dev/null 2>&1 || (($(java_major || echo 0) < 17)); then
  missing+=(openjdk-17-jdk-headless)
fi
if ! command -v mvn >/dev/null 2>&1 && [[ ! -x /opt/maven/bin/mvn ]]; then
  missing+=(maven)
elif command -v mvn >/dev/null 2>&1 && ! printf '3.6.3\n%s\n' "$(maven_version)" | sort -V -C; then
  echo "deps: Maven $(maven_version) is older than 3.6.3, which the Kotlin build needs; install a newer one" >&2
  exit 1
fi

if ((${#missing[@]})); then
  echo "deps: missing Debian packages: ${missing[*]}"
  if ((EUID == 0)); then
    apt-get update
    DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}"
  else
    echo "deps: not root; run this, then retry:" >&2
    echo "sudo apt-get install -y --no-install-recommends ${missing[*]}" >&2
    exit 1
  fi
fi

# --- Toolchains outside Debian ----------------------------------------------------
# need_tool <command> <directory it is often installed in, off PATH> <how to install>
# The Makefile puts those directories on PATH, so finding the tool there is enough.
tool_errors=0
need_tool() {
  local cmd=$1 dir=$2 how=$3
  if command -v "$cmd" >/dev/null 2>&1 || [[ -x "$dir/$cmd" ]]; then
    return 0
  fi
  echo "deps: '$cmd' not found on PATH nor in $dir; $how" >&2
  tool_errors=$((tool_errors + 1))
}

need_tool go /usr/local/go/bin "install Go 1.22+ from https://go.dev/dl/ (tar -C /usr/local -xzf go*.linux-amd64.tar.gz)"
need_tool cargo "${CARGO_HOME:-$HOME/.cargo}/bin" "install Rust with https://rustup.rs (rustup default stable)"

if ((tool_errors)); then
  exit 1
fi
echo "deps ($mode): ok"
