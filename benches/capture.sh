#!/usr/bin/env bash
# Output capture overhead: a fake agent writing SIZE_MB of stream-json lines, run
#   - as `sh -c 'agent > file'`                    (the floor: the kernel writing a file)
#   - as one turn of a shell loop, `agent | tee -a file` (ralph-wiggums-loop.sh style)
#   - under `clowder --headless --quiet 1`
# each ROUNDS times. Prints the best wall time of each with its CPU (user+sys, children
# included), and the ratios to the direct run.
#
#   bash benches/capture.sh            # 200 MB, 3 rounds
#   SIZE_MB=50 ROUNDS=1 bash benches/capture.sh
#
# Builds the release binary into ${CARGO_TARGET_DIR:-target} unless CLOWDER_BIN names one.
set -euo pipefail
size_mb=${SIZE_MB:-200}
rounds=${ROUNDS:-3}
. "$(dirname "$0")/common.sh"
work=$(mktemp -d "${TMPDIR:-/tmp}/clowder-capture-XXXXXX")
trap 'rm -rf "$work"' EXIT

cat > "$work/agent.sh" <<AGENT
#!/usr/bin/env bash
line='{"type":"assistant","message":{"id":"msg_1","content":[{"type":"text","text":"0123456789012345678901234567890123456789012345678901234567890123456789"}]}}'
yes "\$line" | head -c $((size_mb * 1000 * 1000))
AGENT
chmod +x "$work/agent.sh"
# One turn of the loop: the shape of ralph-wiggums-loop.sh, stopped after one session.
cat > "$work/loop.sh" <<LOOP
#!/usr/bin/env bash
n=0
while [ \$n -lt 1 ]; do
  n=\$((n + 1))
  '$work/agent.sh' | tee -a '$work/loop.log'
done
LOOP
chmod +x "$work/loop.sh"
printf 'go\n' > "$work/PROMPT.md"
cat > "$work/harness.toml" <<TOML
[agent]
command = "$work/agent.sh"
args = []
[backoff]
initial_delay_secs = 0
TOML

measure() { # name, label, command...
  local name=$1 label=$2; shift 2
  local best_wall="" best_cpu="" wall user sys cpu
  for _ in $(seq 1 "$rounds"); do
    rm -f "$work"/agent-iteration-*.jsonl "$work/direct.out" "$work/loop.log" "$work/.iteration_counter"
    /usr/bin/time -f '%e %U %S' -o "$work/time" "$@" > /dev/null
    read -r wall user sys < "$work/time"
    cpu=$(awk "BEGIN{print $user + $sys}")
    if [ -z "$best_wall" ] || awk "BEGIN{exit !($wall < $best_wall)}"; then best_wall=$wall; best_cpu=$cpu; fi
  done
  printf '%-32s wall %6.2f s   cpu %6.2f s   (best of %s)\n' "$label" "$best_wall" "$best_cpu" "$rounds"
  printf -v "${name}_wall" '%s' "$best_wall"
  printf -v "${name}_cpu" '%s' "$best_cpu"
}

cd "$work"
measure direct "sh -c 'agent > file'" sh -c "'$work/agent.sh' > '$work/direct.out'"
measure loop "shell loop: agent | tee -a file" "$work/loop.sh"
measure clowder "clowder --headless --quiet 1" "$clowder" --headless --quiet 1
ratio() { awk -v a="$1" -v b="$2" 'BEGIN{ if (b > 0) printf "%.2f", a / b; else printf "n/a" }'; }
info="$size_mb MB, $(nproc) cores, $(uname -m), load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "ratio tee-loop/direct: wall $(ratio "$loop_wall" "$direct_wall"), cpu $(ratio "$loop_cpu" "$direct_cpu")"
echo "ratio clowder/direct:  wall $(ratio "$clowder_wall" "$direct_wall"), cpu $(ratio "$clowder_cpu" "$direct_cpu")  ($info)"
