#!/usr/bin/env bash
# usage: scripts/timed.sh NAME COMMAND [ARG...]
# Runs COMMAND and exits with its status. When KARPY_PHASE_TIMES names a file (the test
# command sets it), appends "NAME<TAB>seconds" to it, "NAME<TAB>seconds<TAB>failed" when
# COMMAND failed: scripts/test.sh prints those lines as its time per phase.
set -uo pipefail
name=$1
shift
began=$EPOCHREALTIME
"$@"
status=$?
if [ -n "${KARPY_PHASE_TIMES:-}" ]; then
  seconds=$(awk -v a="$began" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }')
  if [ "$status" = 0 ]; then
    printf '%s\t%s\n' "$name" "$seconds" >>"$KARPY_PHASE_TIMES"
  else
    printf '%s\t%s\tfailed\n' "$name" "$seconds" >>"$KARPY_PHASE_TIMES"
  fi
fi
exit "$status"
