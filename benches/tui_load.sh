#!/usr/bin/env bash
# The control room under load, in a real terminal (tmux 120x40):
#   idle     an agent that prints one line and sleeps: clowder's CPU over SECS seconds
#   1mbps    an agent writing ~1 MB/s of stream-json: clowder's CPU over SECS seconds
#   1gb      an agent writing 1 GB as fast as it can: clowder's peak RSS while following it
# Also runs the same idle and 1mbps measurements headless, for comparison.
# CPU is utime+stime of the clowder process from /proc/PID/stat (the agent not included),
# then each thread's share from its schedstat; peak RSS is its VmHWM.
#
#   bash benches/tui_load.sh            # all, SECS=60
#   SECS=20 bash benches/tui_load.sh idle
#
# Builds the release binary into ${CARGO_TARGET_DIR:-target} unless CLOWDER_BIN names one.
set -euo pipefail
secs=${SECS:-60}
modes=${*:-idle 1mbps 1gb}
. "$(dirname "$0")/common.sh"
work=$(mktemp -d "${TMPDIR:-/tmp}/clowder-tui-load-XXXXXX")
socket="clowder-bench-$$"
loop_pid="" agent_pgid=""
cleanup() {
  [ -n "$loop_pid" ] && stop_loop "$loop_pid" "$agent_pgid"
  tmux -L "$socket" kill-server 2>/dev/null || true
  rm -f "${TMUX_TMPDIR:-/tmp}/tmux-$(id -u)/$socket"
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

line='{"type":"assistant","message":{"id":"msg_1","content":[{"type":"tool_use","id":"t1","name":"Bash","input":{"command":"cargo test --all 2>&1 | tail -n 50"}}]}}'
cat > "$work/idle.sh" <<AGENT
#!/usr/bin/env bash
echo '$line'; exec sleep 100000
AGENT
cat > "$work/1mbps.sh" <<AGENT
#!/usr/bin/env bash
while true; do yes '$line' | head -c 100000; sleep 0.1; done
AGENT
cat > "$work/1gb.sh" <<AGENT
#!/usr/bin/env bash
yes '$line' | head -c 1000000000; exec sleep 100000
AGENT
chmod +x "$work"/*.sh

run_case() { # mode, ui|headless
  local mode=$1 ui=$2 dir="$work/$1-$2"
  mkdir -p "$dir"
  printf 'go\n' > "$dir/PROMPT.md"
  printf '[session]\noutput_prefix = "claude-iteration"\n[agent]\ncommand = "%s"\nargs = []\n[watchdog]\nstale_timeout_mins = 60\n' "$work/$mode.sh" > "$dir/harness.toml"
  if [ "$ui" = ui ]; then
    tmux -L "$socket" -f /dev/null new-session -d -x 120 -y 40 -c "$dir" "'$clowder' 1; sleep 600"
  else
    (cd "$dir" && exec setsid "$clowder" --headless --quiet 1 > /dev/null 2>&1) &
  fi
  loop_pid=$(event_field "$dir" loop_start pid)
  agent_pgid=$(event_field "$dir" session_start pgid)
  sleep 2
  if [ "$mode" = 1gb ]; then
    while [ "$(stat -c %s "$dir/claude-iteration-1.jsonl" 2>/dev/null || echo 0)" -lt 1000000000 ]; do sleep 1; done
    sleep 3
    printf '%-8s %-9s peak RSS %s while following a %s output file\n' "$mode" "$ui" \
      "$(peak_rss "$loop_pid")" "$(du -h "$dir/claude-iteration-1.jsonl" | cut -f1)"
  else
    local before after
    thread_ns "$loop_pid" > "$work/threads.before"
    before=$(cpu_ticks "$loop_pid"); sleep "$secs"; after=$(cpu_ticks "$loop_pid")
    thread_ns "$loop_pid" > "$work/threads.after"
    awk -v t=$((after - before)) -v hz="$clk_tck" -v s="$secs" -v m="$mode" -v u="$ui" \
      'BEGIN{printf "%-8s %-9s CPU %.2f s over %d s = %.2f%% of a core\n", m, u, t/hz, s, 100*t/hz/s}'
    printf '%-8s %-9s by thread: %s\n' "$mode" "$ui" "$(thread_share "$work/threads.before" "$work/threads.after" "$secs")"
    printf '%-8s %-9s peak RSS %s\n' "$mode" "$ui" "$(peak_rss "$loop_pid")"
  fi
  stop_loop "$loop_pid" "$agent_pgid"
  loop_pid="" agent_pgid=""
  tmux -L "$socket" kill-server 2>/dev/null || true
  wait 2>/dev/null || true
  rm -rf "$dir"
}

for mode in $modes; do
  run_case "$mode" ui
  [ "$mode" = 1gb ] || run_case "$mode" headless
done
