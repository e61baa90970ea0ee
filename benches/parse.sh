#!/usr/bin/env bash
# Stream-json parse throughput: clowder's StreamParser (what the output pane and the
# session statistics use) on ~105 MB of generated Claude Code stream-json, against
# `jq -c . > /dev/null` and serde_json on the same file. Needs jq for the jq row.
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
