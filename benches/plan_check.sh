#!/usr/bin/env bash
# `clowder plan check` on a generated chain plan: STEPS steps (default 20000),
# each depending on the one before, every other one sequential. Prints the best
# of ROUNDS (default 3) wall times; the plan file is removed afterwards.
#
#   bash benches/plan_check.sh
#   CLOWDER_BIN=/path/to/clowder STEPS=20000 bash benches/plan_check.sh
set -euo pipefail
source "$(dirname "$0")/common.sh"
steps=${STEPS:-20000}
rounds=${ROUNDS:-3}
dir=$(mktemp -d "${TMPDIR:-/tmp}/clowder-plan-check-XXXXXX")
trap 'rm -rf "$dir"' EXIT
awk -v n="$steps" 'BEGIN {
  print "[plan]\nname = \"chain\"\nbase = \"main\"\n"
  print "[[step]]\nid = \"s0\"\nprompt = \"Step 0.\"\n"
  for (i = 1; i < n; i++) {
    printf "[[step]]\nid = \"s%d\"\ndepends_on = [\"s%d\"]\n", i, i - 1
    if (i % 2) print "collaboration = \"sequential\""
    printf "prompt = \"Step %d.\"\n\n", i
  }
}' > "$dir/plan.toml"
# A step's default done_when is the completion promise, which `plan check` requires
# harness.toml (in the current folder) to set.
printf '[completion]\npromise = "TASK_COMPLETE"\n' > "$dir/harness.toml"
case $clowder in /*) ;; */*) clowder=$PWD/$clowder ;; esac # it is run from $dir
cd "$dir"
# Wall and CPU (user+sys) seconds of each run; the best of each is kept (the CPU
# time says more on a loaded machine).
best_wall=""
best_cpu=""
TIMEFORMAT='%R %U %S'
for _ in $(seq 1 "$rounds"); do
  # Only the times reach the pipe: clowder's own messages go to a file, shown if it fails.
  if ! times=$({ time "$clowder" plan check plan.toml > /dev/null 2> errors; } 2>&1); then
    cat errors >&2
    exit 1
  fi
  read -r wall user sys <<< "$times"
  cpu=$(awk -v u="$user" -v s="$sys" 'BEGIN { print u + s }')
  if [ -z "$best_wall" ] || awk -v t="$wall" -v b="$best_wall" 'BEGIN { exit !(t < b) }'; then best_wall=$wall; fi
  if [ -z "$best_cpu" ] || awk -v t="$cpu" -v b="$best_cpu" 'BEGIN { exit !(t < b) }'; then best_cpu=$cpu; fi
done
printf 'clowder plan check, a chain of %d steps: best of %d: %.3f s wall, %.3f s CPU (load %s)\n' \
  "$steps" "$rounds" "$best_wall" "$best_cpu" "$(cut -d' ' -f1 /proc/loadavg)"
