#!/usr/bin/env bash
# Run one stage of `make test` / `make bench` under a banner and time it.
#
# usage: scripts/stage.sh "<title>" <command> [args...]
#        scripts/stage.sh --summary        # print the times recorded so far
#
# A single command string runs under `bash -euo pipefail -c`, so a stage may be an
# `a && b && c` chain; several arguments run as one command, as given. The exit
# status is passed through unchanged (the Makefile stops at the first failure).
# When CORIO_STAGE_LOG names a file, "<seconds>\t<status>\t<depth>\t<title>" is appended
# to it; depth counts stages running inside another (`make bench` inside `make test`),
# and the summary indents those and leaves them out of the total.
set -euo pipefail

log=${CORIO_STAGE_LOG:-}
depth=${CORIO_STAGE_DEPTH:-0}

if [[ ${1:-} == --summary ]]; then
  [[ -n "$log" && -f "$log" ]] || exit 0
  total=0
  echo
  echo "==================== stage times ===================="
  while IFS=$'\t' read -r secs status d title; do
    printf '  %5ss  %-4s  %*s%s\n' "$secs" "$status" $((2 * d)) '' "$title"
    ((d > 0)) || total=$((total + secs))
  done <"$log"
  printf '  %5ss        total (%dm%02ds)\n' "$total" $((total / 60)) $((total % 60))
  echo "====================================================="
  exit 0
fi

if (($# < 2)); then
  echo "usage: $0 \"<title>\" <command> [args...]" >&2
  exit 2
fi

title=$1
shift
bar='============================================================================'
printf '\n%s\n== %s\n%s\n' "$bar" "$title" "$bar"

export CORIO_STAGE_DEPTH=$((depth + 1))
start=$(date +%s)
status=0
if (($# == 1)); then
  bash -euo pipefail -c "$1" || status=$?
else
  "$@" || status=$?
fi
secs=$(($(date +%s) - start))

if ((status == 0)); then
  printf '== %s: ok (%ds)\n' "$title" "$secs"
  [[ -z "$log" ]] || printf '%d\tok\t%d\t%s\n' "$secs" "$depth" "$title" >>"$log"
else
  printf '== %s: FAILED with status %d after %ds\n' "$title" "$status" "$secs" >&2
  [[ -z "$log" ]] || printf '%d\tFAIL\t%d\t%s\n' "$secs" "$depth" "$title" >>"$log"
fi
exit "$status"
