#!/usr/bin/env bash
# Stream-json parse throughput on ~105 MB of generated Claude Code stream-json:
# clowder's StreamParser (display lines + statistics, as the control room reads;
# statistics only; classification + statistics in one pass, as a session's reader
# reads), the same typed event read with serde_json and with sonic-rs (the decoder
# choice), and `jq -c . > /dev/null` and a whole value per line with each crate on the
# same file. Needs jq for the jq row.
#
#   bash benches/parse.sh
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
cargo test --release --quiet --lib agent::stream::tests::more::throughput_report -- --ignored --nocapture 2>&1 \
  | grep -E '^(input|StreamParser|classification|serde_json|sonic|decoder|stats)'
file=$(dirname "$(mktemp -u)")/clowder_stream_bench.jsonl
if command -v jq > /dev/null; then
  size=$(stat -c %s "$file")
  best=""
  for _ in 1 2 3; do
    start=$(date +%s.%N)
    jq -c . "$file" > /dev/null
    end=$(date +%s.%N)
    t=$(awk -v a="$start" -v b="$end" 'BEGIN{print b - a}')
    if [ -z "$best" ] || awk -v t="$t" -v b="$best" 'BEGIN{exit !(t < b)}'; then best=$t; fi
  done
  awk -v t="$best" -v s="$size" 'BEGIN{printf "jq -c . > /dev/null: best of 3 %.3f s = %.0f MB/s\n", t, s / 1e6 / t}'
else
  echo "jq: not installed (apt-get install -y jq), row skipped"
fi
rm -f "$file"
