#!/usr/bin/env bash
# Output capture overhead: a fake agent writing SIZE_MB of stream-json lines, run once
# under `clowder --headless 1` and once as `sh -c 'agent > file'`, each ROUNDS times.
# Prints wall time and CPU (user+sys, children included) of each, and their ratio.
#
#   bash benches/capture.sh            # 200 MB, 3 rounds
#   SIZE_MB=50 ROUNDS=1 bash benches/capture.sh
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
size_mb=${SIZE_MB:-200}
rounds=${ROUNDS:-3}
cargo build --release --quiet --manifest-path "$root/Cargo.toml"
clowder="$root/target/release/clowder"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

cat > "$work/agent.sh" <<AGENT
#!/usr/bin/env bash
line='{"type":"assistant","message":{"id":"msg_1","content":[{"type":"text","text":"0123456789012345678901234567890123456789012345678901234567890123456789"}]}}'
yes "\$line" | head -c $((size_mb * 1000 * 1000))
AGENT
chmod +x "$work/agent.sh"
printf 'go\n' > "$work/PROMPT.md"
cat > "$work/harness.toml" <<TOML
[agent]
command = "$work/agent.sh"
args = []
[backoff]
initial_delay_secs = 0
TOML

measure() { # label, command...
  local label=$1; shift
  local best_wall="" best_cpu=""
  for _ in $(seq 1 "$rounds"); do
    rm -f "$work"/claude-iteration-*.jsonl "$work/direct.out" "$work/.iteration_counter"
    /usr/bin/time -f '%e %U %S' -o "$work/time" "$@" > /dev/null
    read -r wall user sys < "$work/time"
    cpu=$(awk "BEGIN{print $user + $sys}")
    if [ -z "$best_wall" ] || awk "BEGIN{exit !($wall < $best_wall)}"; then best_wall=$wall; best_cpu=$cpu; fi
  done
  printf '%-28s wall %6.2f s   cpu %6.2f s   (best of %s)\n' "$label" "$best_wall" "$best_cpu" "$rounds"
  eval "${label//[^a-z]/_}_wall=$best_wall; ${label//[^a-z]/_}_cpu=$best_cpu"
}

cd "$work"
measure "direct" sh -c "'$work/agent.sh' > '$work/direct.out'"
measure "clowder" "$clowder" --headless --quiet 1
awk -v cw="$clowder_wall" -v dw="$direct_wall" -v cc="$clowder_cpu" -v dc="$direct_cpu" \
  -v info="$size_mb MB, $(nproc) cores, $(uname -m)" \
  'BEGIN{printf "ratio clowder/direct: wall %.3f, cpu %.3f  (%s)\n", cw/dw, (dc > 0 ? cc/dc : 0), info}'
