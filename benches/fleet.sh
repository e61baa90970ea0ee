#!/usr/bin/env bash
# What a fleet of lanes costs, headless (one `clowder --headless` running every lane):
#   registry   `clowder lane add` x LANES, then `clowder lanes` and `clowder lanes --json`
#   idle       LANES lanes whose agent prints one line and sleeps: clowder's CPU over SECS
#              seconds once every session runs, and its peak RSS
#   stream     BUSY lanes whose agent writes ~64 KB/s of stream-json each: clowder's CPU
#              over SECS seconds, and its peak RSS
#   room-idle    as idle, with the control room over every lane on screen (tmux 120x40)
#   room-stream  as stream, with the control room on screen
#   room-keys    BUSY busy lanes, control room on screen: KEYS presses of j / k in the
#                Lanes pane, each timed from send-keys until the header names the newly
#                selected lane in capture-pane (tmux's own round trips included); p50, p99
# CPU is utime+stime of the clowder process from /proc/PID/stat (agents not included);
# peak RSS is its VmHWM.
#
#   bash benches/fleet.sh                        # LANES=100 BUSY=32 SECS=30 KEYS=200
#   QUICK=1 bash benches/fleet.sh                # a smoke run: 10 lanes, 4 busy, 5 s, 20 keys
#   LANES=50 SECS=10 bash benches/fleet.sh idle room-idle
#
# Builds the release binary into ${CARGO_TARGET_DIR:-target} unless CLOWDER_BIN names one.
set -euo pipefail
if [ -n "${QUICK:-}" ]; then
  lanes=${LANES:-10} busy=${BUSY:-4} secs=${SECS:-5} keys=${KEYS:-20}
else
  lanes=${LANES:-100} busy=${BUSY:-32} secs=${SECS:-30} keys=${KEYS:-200}
fi
modes=${*:-registry idle stream room-idle room-stream room-keys}
. "$(dirname "$0")/common.sh"
work=$(mktemp -d "${TMPDIR:-/tmp}/clowder-fleet-XXXXXX")
fleet_pid=""
socket="clowder-fleet-bench-$$"
cleanup() {
  [ -n "$fleet_pid" ] && stop_fleet
  tmux -L "$socket" kill-server 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# One assistant line of a real transcript (tests/fixtures), ~400 bytes; the busy agent
# writes a 32 KB chunk of whole lines every half second.
line=$(grep -m 1 '"type":"assistant"' "$root/tests/fixtures/transcripts/claude_parallel_tools.jsonl")
chunk=$work/chunk.jsonl
while [ "$(stat -c %s "$chunk" 2>/dev/null || echo 0)" -lt 32768 ]; do printf '%s\n' "$line" >> "$chunk"; done
cat > "$work/idle.sh" <<AGENT
#!/usr/bin/env bash
echo '{"type":"system","subtype":"init"}'; exec sleep 100000
AGENT
cat > "$work/stream.sh" <<AGENT
#!/usr/bin/env bash
while true; do cat '$chunk'; sleep 0.5; done
AGENT
chmod +x "$work"/*.sh

# A git repository with a harness.toml running AGENT, and COUNT lanes: `make_fleet DIR AGENT COUNT`.
make_fleet() {
  local dir=$1 agent=$2 count=$3
  mkdir -p "$dir"
  git -C "$dir" init -q -b main
  printf 'go\n' > "$dir/PROMPT.md"
  printf '[session]\noutput_prefix = "claude-iteration"\n[agent]\ncommand = "%s"\nargs = []\n[watchdog]\nstale_timeout_mins = 600\n[fleet]\nmax_parallel = %d\n' \
    "$agent" $((count + 10)) > "$dir/harness.toml"
  git -C "$dir" add -A
  git -C "$dir" -c user.name=bench -c user.email=bench@example.com commit -qm init
  local i
  for i in $(seq 1 "$count"); do
    (cd "$dir" && "$clowder" lane add "l$i" > /dev/null)
  done
}

# Every process whose working folder is under $work (agents, their sleeps and cats).
work_processes() {
  local proc cwd
  for proc in /proc/[0-9]*; do
    cwd=$(readlink "$proc/cwd" 2>/dev/null) || continue
    case $cwd in "$work"/*) [ "${proc#/proc/}" = $$ ] || echo "${proc#/proc/}" ;; esac
  done
}

# Ends the fleet like a user would (SIGINT twice), then checks that nothing it started is left.
stop_fleet() {
  stop_loop "$fleet_pid"
  wait "$fleet_pid" 2>/dev/null || true
  fleet_pid=""
  local left
  for _ in $(seq 1 50); do
    left=$(work_processes)
    [ -z "$left" ] && return 0
    sleep 0.1
  done
  echo "left behind after the fleet stopped:" >&2
  for pid in $left; do echo "  $pid $(tr '\0' ' ' < "/proc/$pid/cmdline" 2>/dev/null)" >&2; kill -KILL "$pid" 2>/dev/null || true; done
  return 1
}

# Starts `clowder --headless` in DIR and waits until COUNT lanes run a session.
start_fleet() {
  local dir=$1 count=$2 running=0
  (cd "$dir" && exec "$clowder" --headless > "$dir/fleet.log" 2>&1) &
  fleet_pid=$!
  for _ in $(seq 1 1200); do
    running=$(cat "$dir"/.clowder/lanes/*/harness.status 2>/dev/null | grep -c session_running || true)
    [ "$running" -ge "$count" ] && return 0
    kill -0 "$fleet_pid" 2>/dev/null || break
    sleep 0.1
  done
  echo "only $running of $count lanes running a session after 120 s; clowder's log ends:" >&2
  tail -n 20 "$dir/fleet.log" >&2
  return 1
}

# Starts `clowder` with the control room in tmux (120x40) in DIR, and waits until COUNT
# lanes run a session; fleet_pid is the clowder process (from a lane's status file).
start_room() {
  local dir=$1 count=$2 running=0
  tmux -L "$socket" -f /dev/null new-session -d -s room -x 120 -y 40 -c "$dir" "exec '$clowder'"
  for _ in $(seq 1 1200); do
    running=$(cat "$dir"/.clowder/lanes/*/harness.status 2>/dev/null | grep -c session_running || true)
    [ "$running" -ge "$count" ] && break
    sleep 0.1
  done
  fleet_pid=$(grep -o -m 1 "\"pid\": *[0-9]*" "$dir/.clowder/lanes/l1/harness.status" | grep -o "[0-9]*$")
  if [ "$running" -lt "$count" ] || [ -z "$fleet_pid" ]; then
    echo "only $running of $count lanes running a session after 120 s; the screen:" >&2
    tmux -L "$socket" capture-pane -p -t room >&2 || true
    return 1
  fi
}

# The header's first line.
room_header() { tmux -L "$socket" capture-pane -p -t room -S 0 -E 0; }

# KEYS presses of j and k in turn, each timed until the header names the lane it selects.
key_latency() {
  local n=$1 i key want t0 t1 deadline out=$work/latency.txt
  : > "$out"
  # The Lanes pane has the focus at start; l1 is selected.
  for i in $(seq 1 "$n"); do
    if [ $((i % 2)) = 1 ]; then key=j want='lane l2  '; else key=k want='lane l1  '; fi
    t0=$(date +%s%N)
    deadline=$((t0 + 5000000000))
    tmux -L "$socket" send-keys -t room "$key"
    until room_header | grep -qF "$want"; do
      [ "$(date +%s%N)" -lt "$deadline" ] || { echo "the screen never showed '$want'" >&2; return 1; }
    done
    t1=$(date +%s%N)
    echo $(((t1 - t0) / 1000)) >> "$out"
  done
  sort -n "$out" | awk '{v[NR] = $1} END {
    p50 = v[int(NR * 0.50 + 0.5)]; p99 = v[int(NR * 0.99 + 0.5)]; if (p99 == "") p99 = v[NR]
    printf "%.1f ms p50, %.1f ms p99, %.1f ms max (%d presses)", p50 / 1000, p99 / 1000, v[NR] / 1000, NR }'
}

# Seconds (3 decimals) a command takes.
timed() {
  local t0 t1
  t0=$(date +%s%N); "$@" > /dev/null; t1=$(date +%s%N)
  awk -v d=$((t1 - t0)) 'BEGIN{printf "%.3f s", d / 1e9}'
}

measure() { # mode, count
  local mode=$1 count=$2 dir="$work/$1" before after
  if [ "$mode" = registry ]; then
    local t0 t1
    t0=$(date +%s%N); make_fleet "$dir" "$work/idle.sh" "$count"; t1=$(date +%s%N)
    awk -v d=$((t1 - t0)) -v n="$count" 'BEGIN{printf "registry  lane add x%d: %.2f s (%.0f ms a lane)\n", n, d / 1e9, d / 1e6 / n}'
    printf 'registry  clowder lanes (%d lanes): %s\n' "$count" "$(cd "$dir" && timed "$clowder" lanes)"
    printf 'registry  clowder lanes --json (%d lanes): %s\n' "$count" "$(cd "$dir" && timed "$clowder" lanes --json)"
    rm -rf "$dir"
    return 0
  fi
  local agent=${mode#room-}
  [ "$agent" = keys ] && agent=stream
  make_fleet "$dir" "$work/$agent.sh" "$count"
  case $mode in
    room-*) start_room "$dir" "$count" ;;
    *) start_fleet "$dir" "$count" ;;
  esac
  sleep 2
  if [ "$mode" = room-keys ]; then
    printf '%-11s %d busy lanes: key press to screen %s\n' "$mode" "$count" "$(key_latency "$keys")"
    stop_fleet
    tmux -L "$socket" kill-server 2>/dev/null || true
    rm -rf "$dir"
    return 0
  fi
  before=$(cpu_ticks "$fleet_pid"); sleep "$secs"; after=$(cpu_ticks "$fleet_pid")
  awk -v t=$((after - before)) -v hz="$clk_tck" -v s="$secs" -v m="$mode" -v n="$count" \
    'BEGIN{printf "%-9s %d lanes: CPU %.2f s over %d s = %.2f%% of a core\n", m, n, t/hz, s, 100*t/hz/s}'
  printf '%-9s %d lanes: peak RSS %s, %d open fds, %d threads, load %s\n' "$mode" "$count" \
    "$(peak_rss "$fleet_pid")" "$(ls "/proc/$fleet_pid/fd" | wc -l)" \
    "$(awk '/^Threads/ {print $2}' "/proc/$fleet_pid/status")" "$(cut -d' ' -f1-3 /proc/loadavg)"
  printf '%-9s %d lanes: %d inotify instances; %d warning or error lines in the log%s\n' "$mode" "$count" \
    "$(find "/proc/$fleet_pid/fd" -lname 'anon_inode:inotify' 2>/dev/null | wc -l)" \
    "$(grep -c -E '\[(WARN|ERROR)\]' "$dir/fleet.log" 2>/dev/null || true)" \
    "$(grep -m 1 -E '\[(WARN|ERROR)\]' "$dir/fleet.log" 2>/dev/null | sed 's/^/, first: /' || true)"
  if [ "$mode" != "${mode#room-}" ]; then
    printf '%-9s %d lanes: the screen shows %s\n' "$mode" "$count" \
      "$(tmux -L "$socket" capture-pane -p -t room | grep -m 1 -o 'Lanes [0-9]*[^━]*' || echo 'no Lanes pane')"
  fi
  if [ "$mode" != "${mode#*stream}" ]; then
    printf '%-9s %d lanes: %s written to the output files\n' "$mode" "$count" \
      "$(du -shc "$dir"/.clowder/lanes/*/claude-iteration-*.jsonl | tail -n 1 | cut -f1)"
  fi
  stop_fleet
  tmux -L "$socket" kill-server 2>/dev/null || true
  rm -rf "$dir"
}

for mode in $modes; do
  case $mode in
    registry | idle | room-idle) measure "$mode" "$lanes" ;;
    stream | room-stream | room-keys) measure "$mode" "$busy" ;;
    *) echo "unknown mode $mode (registry, idle, stream, room-idle, room-stream, room-keys)" >&2; exit 2 ;;
  esac
done
