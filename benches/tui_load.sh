#!/usr/bin/env bash
# The control room under load, in a real terminal (tmux 120x40):
#   idle     an agent that prints one line and sleeps: clowder's CPU over SECS seconds
#   1mbps    an agent writing ~1 MB/s of stream-json: clowder's CPU over SECS seconds
#   1gb      an agent writing 1 GB as fast as it can: clowder's peak RSS while following it
# Also runs the same idle and 1mbps measurements headless, for comparison.
#
#   bash benches/tui_load.sh            # all, SECS=60
#   SECS=20 bash benches/tui_load.sh idle
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
secs=${SECS:-60}
modes=${*:-idle 1mbps 1gb}
cargo build --release --quiet --manifest-path "$root/Cargo.toml"
clowder="$root/target/release/clowder"
ticks=$(getconf CLK_TCK)
work=$(mktemp -d)
socket="clowder-bench-$$"
trap 'tmux -L "$socket" kill-server 2>/dev/null; rm -rf "$work"' EXIT

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
printf 'go\n' > "$work/PROMPT.md"

cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
clowder_pid() { pgrep -n -x clowder; }

run_case() { # mode, ui|headless
  local mode=$1 ui=$2 dir="$work/$1-$2"
  mkdir -p "$dir"; cp "$work/PROMPT.md" "$dir/"
  printf '[agent]\ncommand = "%s"\nargs = []\n[watchdog]\nstale_timeout_mins = 60\n' "$work/$mode.sh" > "$dir/harness.toml"
  if [ "$ui" = ui ]; then
    tmux -L "$socket" -f /dev/null new-session -d -x 120 -y 40 -c "$dir" "$clowder 1; sleep 600"
  else
    (cd "$dir" && setsid "$clowder" --headless --quiet 1 > /dev/null 2>&1 &)
  fi
  sleep 2
  local pid; pid=$(clowder_pid)
  if [ "$mode" = 1gb ]; then
    while [ "$(stat -c %s "$dir/claude-iteration-1.jsonl" 2>/dev/null || echo 0)" -lt 1000000000 ]; do sleep 1; done
    sleep 3
    printf '%-8s %-9s peak RSS %s while following a %s output file\n' "$mode" "$ui" \
      "$(awk '/VmHWM/ {print $2, $3}' "/proc/$pid/status")" "$(du -h "$dir/claude-iteration-1.jsonl" | cut -f1)"
  else
    local before after
    before=$(cpu_ticks "$pid"); sleep "$secs"; after=$(cpu_ticks "$pid")
    awk -v t=$((after - before)) -v hz="$ticks" -v s="$secs" -v m="$mode" -v u="$ui" \
      'BEGIN{printf "%-8s %-9s CPU %.2f s over %d s = %.2f%% of a core\n", m, u, t/hz, s, 100*t/hz/s}'
    printf '%-8s %-9s peak RSS %s\n' "$mode" "$ui" "$(awk '/VmHWM/ {print $2, $3}' "/proc/$pid/status")"
  fi
  kill -INT "$pid"; sleep 0.3; kill -INT "$pid" 2>/dev/null || true
  for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  tmux -L "$socket" kill-server 2>/dev/null || true
}

for mode in $modes; do
  run_case "$mode" ui
  [ "$mode" = 1gb ] || run_case "$mode" headless
done
