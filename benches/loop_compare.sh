#!/usr/bin/env bash
# The cost of a shell loop in the style of ralph-wiggums-loop.sh, for comparison with
# clowder's (benches/tui_load.sh measures clowder the same way):
#
#   n=0; while [ $n -lt 1 ]; do n=$((n+1)); agent | tee -a output.log; done
#
# CPU (utime+stime from /proc/PID/stat) of the loop's bash plus its tee over SECS
# seconds; the agent's own CPU is not counted, as it is not for clowder.
#   idle      the agent prints one line and sleeps (tests/agents/fake-agent.sh hang);
#             tee's stdout is /dev/null
#   1mbps     the agent writes ~1 MB/s of stream-json; tee's stdout is /dev/null
#   1mbps-tty the same with tee writing to a terminal (tmux 120x40), as when the loop
#             runs in one; the terminal's own work is not counted
# (The capture cost of `agent | tee -a file` is measured by benches/capture.sh.)
#
#   bash benches/loop_compare.sh             # all, SECS=60
#   SECS=10 bash benches/loop_compare.sh idle
set -euo pipefail
secs=${SECS:-60}
modes=${*:-idle 1mbps 1mbps-tty}
clk_tck=$(getconf CLK_TCK)
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/clowder-loop-compare-XXXXXX")
socket="clowder-loop-$$"
loop_pid=""
cleanup() {
  [ -n "$loop_pid" ] && kill -KILL -- "-$loop_pid" 2>/dev/null || true
  tmux -L "$socket" kill-server 2>/dev/null || true
  rm -f "${TMUX_TMPDIR:-/tmp}/tmux-$(id -u)/$socket"
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

cpu_ticks() { awk '{ sub(/^.*\) /, ""); print $12 + $13 }' "/proc/$1/stat"; }

line='{"type":"assistant","message":{"id":"msg_1","content":[{"type":"tool_use","id":"t1","name":"Bash","input":{"command":"cargo test --all 2>&1 | tail -n 50"}}]}}'
cat > "$work/1mbps.sh" <<AGENT
#!/usr/bin/env bash
while true; do yes '$line' | head -c 100000; sleep 0.1; done
AGENT
chmod +x "$work/1mbps.sh"

run_case() { # mode
  local mode=$1 agent dir="$work/$1"
  case $mode in
    idle) agent="'$root/tests/agents/fake-agent.sh' hang" ;;
    *) agent="'$work/1mbps.sh'" ;;
  esac
  mkdir -p "$dir"
  cat > "$dir/loop.sh" <<LOOP
#!/usr/bin/env bash
echo \$\$ > '$dir/loop.pid'
n=0
while [ \$n -lt 1 ]; do
  n=\$((n + 1))
  $agent | tee -a '$dir/output.log'
done
LOOP
  if [ "$mode" = 1mbps-tty ]; then
    tmux -L "$socket" -f /dev/null new-session -d -x 120 -y 40 -c "$dir" "exec bash '$dir/loop.sh'"
  else
    (cd "$dir" && exec setsid bash "$dir/loop.sh" > /dev/null 2>&1) &
  fi
  for _ in $(seq 1 100); do [ -s "$dir/loop.pid" ] && break; sleep 0.1; done
  loop_pid=$(cat "$dir/loop.pid")
  local tee_pid=""
  for _ in $(seq 1 100); do tee_pid=$(pgrep -P "$loop_pid" -x tee || true); [ -n "$tee_pid" ] && break; sleep 0.1; done
  [ -n "$tee_pid" ] || { echo "no tee under the loop $loop_pid" >&2; exit 1; }
  sleep 2
  local before after
  before=$(( $(cpu_ticks "$loop_pid") + $(cpu_ticks "$tee_pid") ))
  sleep "$secs"
  after=$(( $(cpu_ticks "$loop_pid") + $(cpu_ticks "$tee_pid") ))
  awk -v t=$((after - before)) -v hz="$clk_tck" -v s="$secs" -v m="$mode" \
    -v b="$(du -h "$dir/output.log" | cut -f1)" \
    'BEGIN{printf "shell loop %-10s bash+tee CPU %.2f s over %d s = %.2f%% of a core (output.log %s)\n", m, t/hz, s, 100*t/hz/s, b}'
  kill -TERM -- "-$loop_pid" 2>/dev/null || true
  sleep 0.3
  kill -KILL -- "-$loop_pid" 2>/dev/null || true
  loop_pid=""
  tmux -L "$socket" kill-server 2>/dev/null || true
  wait 2>/dev/null || true
  rm -rf "$dir"
}

for mode in $modes; do run_case "$mode"; done
