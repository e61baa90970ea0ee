#!/usr/bin/env bash
# Runs every benchmark in turn and prints each figure; BENCHMARKS.md says what each
# one measures. Builds the release binary once, into ${CARGO_TARGET_DIR:-target}.
#
#   bash benches/run-all.sh            # the published figures: about 30 minutes
#   QUICK=1 bash benches/run-all.sh    # a smoke run: short windows, smaller sizes
#
# Ends by checking that no process started by the benchmarks is left behind.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
benches=$root/benches
cargo build --release --quiet --manifest-path "$root/Cargo.toml" || exit 1
target=${CARGO_TARGET_DIR:-$root/target}
case $target in /*) ;; *) target=$PWD/$target ;; esac
export CLOWDER_BIN=$target/release/clowder

if [ -n "${QUICK:-}" ]; then
  secs=5 size_mb=50 rounds=1 reaction_rounds=2 pending=1000 latency_requests=20 waiters=50
else
  secs=60 size_mb=200 rounds=3 reaction_rounds=10 pending=10000 latency_requests=200 waiters=300
fi

results=$(mktemp "${TMPDIR:-/tmp}/clowder-bench-results-XXXXXX")
trap 'rm -f "$results"' EXIT
failed=()
run() { # title, command...
  local title=$1; shift
  printf '\n== %s\n$ %s\n' "$title" "$*"
  printf '\n== %s\n' "$title" >> "$results"
  local started=$SECONDS
  if "$@" 2>&1 | tee -a "$results"; then
    printf '(%d s)\n' $((SECONDS - started))
  else
    echo "FAILED: $title" | tee -a "$results"
    failed+=("$title")
  fi
}

echo "clowder benchmarks: $(nproc) cores, $(uname -m), $(awk '/MemTotal/ {printf "%.0f GiB", $2 / 1048576}' /proc/meminfo)," \
  "$(uname -sr), load $(cut -d' ' -f1-3 /proc/loadavg), $(date -u +%Y-%m-%d)${QUICK:+ (QUICK)}"
run "output capture: direct vs shell loop with tee vs clowder" \
  env SIZE_MB=$size_mb ROUNDS=$rounds bash "$benches/capture.sh"
run "idle cost and the control room under load" env SECS=$secs bash "$benches/tui_load.sh"
run "idle cost of a shell loop with tee" env SECS=$secs bash "$benches/loop_compare.sh"
run "reaction: watchdog and double SIGINT" python3 "$benches/reaction.py" "$reaction_rounds"
run "$pending pending approvals: control room and clowder queue" \
  env COUNT=$pending SECS=$secs python3 "$benches/approvals_memory.py"
run "approval latency" python3 "$benches/approval_latency.py" "$latency_requests"
run "$waiters waiting asks: idle CPU and decision latency" \
  python3 "$benches/waiters.py" "$waiters" "$([ -n "${QUICK:-}" ] && echo 5 || echo 20)"
run "stream-json parse throughput against jq" bash "$benches/parse.sh"
run "a fleet of lanes, headless" bash "$benches/fleet.sh"
run "plan check on a long chain" bash "$benches/plan_check.sh"
run "the gate's decision time, and gate eval over 2,000 calls" \
  python3 "$benches/gate.py" "$([ -n "${QUICK:-}" ] && echo 50 || echo 300)"
run "one room attached to many hosts (simulated), and a real host's socket" \
  python3 "$benches/hosts.py" idle busy keys restart real scale
if command -v "${CHROMEDRIVER:-chromedriver}" > /dev/null && [ -x "${CHROMIUM:-/usr/bin/chromium}" ]; then
  run "the web inbox: request -> browser, CPU and memory per page" python3 "$benches/web.py"
else
  echo "(the web inbox benchmark needs chromium and chromedriver: skipped)" | tee -a "$results"
fi

# Nothing the benchmarks started may be left: no clowder of this build, and no process
# (agent, sleep, tee, tmux, Chromium) whose working folder is one of the benchmarks' temp folders.
leftovers=$(
  for proc in /proc/[0-9]*; do
    pid=${proc#/proc/}
    [ "$pid" = $$ ] && continue
    exe=$(readlink "$proc/exe" 2>/dev/null) || continue
    cwd=$(readlink "$proc/cwd" 2>/dev/null) || continue
    if [ "${exe% (deleted)}" = "$CLOWDER_BIN" ] ||
      [[ $cwd =~ /clowder-(capture|tui-load|loop-compare|reaction|approvals|latency|waiters|fleet|hosts|web)- ]]; then
      echo "  $pid $(tr '\0' ' ' < "$proc/cmdline")"
    fi
  done
  for socket in "${TMUX_TMPDIR:-/tmp}/tmux-$(id -u)"/clowder-*; do
    [ -S "$socket" ] && tmux -S "$socket" list-sessions > /dev/null 2>&1 && echo "  tmux server on $socket"
  done
)
printf '\n== summary\n'
grep -v '^$' "$results"
if [ -n "$leftovers" ]; then
  printf 'processes left behind:\n%s\n' "$leftovers"
  failed+=("clean-up")
else
  echo "no process left behind"
fi
if [ ${#failed[@]} -gt 0 ]; then
  echo "failed: ${failed[*]}"
  exit 1
fi
