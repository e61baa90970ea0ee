#!/bin/sh
# A fake agent that records its prompt: appends "=== session GLOBAL ===" and
# the prompt to LOG, prints Claude-style stream-json, and, while the file
# LOG.hold exists, waits (up to 120 s) before it exits.
# Usage: prompt-log.sh LOG PROMPT
log="$1"
printf '=== session %s ===\n%s\n' "${HARNESS_GLOBAL_ITERATION:-?}" "$2" >> "$log"
echo '{"type":"system","subtype":"init","session_id":"s","model":"m","tools":[],"cwd":"/tmp"}'
echo '{"type":"assistant","message":{"id":"m1","role":"assistant","content":[{"type":"text","text":"working on it"}],"usage":{"input_tokens":1,"output_tokens":1}}}'
i=0
while [ -e "$log.hold" ] && [ "$i" -lt 1200 ]; do
    sleep 0.1
    i=$((i + 1))
done
echo '{"type":"result","subtype":"success","is_error":false,"num_turns":1,"duration_ms":10,"total_cost_usd":0.001,"result":"done","session_id":"s"}'
