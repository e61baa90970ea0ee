#!/bin/sh
# A fake agent for plan tests. Its prompt (the first argument) is a list of
# directives, one a line; other lines are ignored:
#   ticks N          print a line every 0.1 s, N times, first
#   write FILE TEXT  write TEXT (default: the lane's name) to FILE and commit it
#   fail             end without the completion promise
#   fail-first       fail, unless the prompt tells of a previous failed attempt
#   exit CODE        end with that exit code (after its result line)
#   fail-unless FILE fail while FILE does not exist
# It ends with a stream-json result that says TASK_COMPLETE unless it failed.
# PLAN_AGENT_LOG=DIR: the prompt of each session is saved as DIR/LANE-GLOBAL.txt.
set -e
prompt="$1"
lane="${CLOWDER_LANE:-none}"
if [ -n "$PLAN_AGENT_LOG" ]; then
    printf '%s\n' "$prompt" > "$PLAN_AGENT_LOG/$lane-$HARNESS_GLOBAL_ITERATION.txt"
fi
echo '{"type":"system","subtype":"init","session_id":"plan-agent","model":"fake","tools":[]}'
fail=0
printf '%s\n' "$prompt" | while read -r verb arg rest; do
    case "$verb" in
    ticks)
        i=0
        while [ "$i" -lt "$arg" ]; do
            echo "{\"type\":\"assistant\",\"message\":{\"role\":\"assistant\",\"content\":[{\"type\":\"text\",\"text\":\"tick $i\"}]}}"
            sleep 0.1
            i=$((i + 1))
        done
        ;;
    write)
        printf '%s\n' "${rest:-$lane}" > "$arg"
        git add "$arg"
        git -c user.name=Agent -c user.email=agent@example.com -c commit.gpgsign=false \
            commit --quiet --allow-empty -m "$lane: $arg"
        ;;
    esac
done
has() { printf '%s\n' "$prompt" | grep -q "$@"; }
if has -x fail || { has -x fail-first && ! has "previous attempt"; }; then
    fail=1
fi
needed=$(printf '%s\n' "$prompt" | sed -n 's/^fail-unless \(.*\)$/\1/p' | head -n 1)
if [ -n "$needed" ] && [ ! -e "$needed" ]; then
    fail=1
fi
code=$(printf '%s\n' "$prompt" | sed -n 's/^exit \([0-9][0-9]*\)$/\1/p' | head -n 1)
if [ "$fail" = 1 ]; then
    echo '{"type":"result","subtype":"success","is_error":false,"result":"I could not do it: the tests are red","session_id":"plan-agent"}'
else
    echo '{"type":"result","subtype":"success","is_error":false,"result":"All done. TASK_COMPLETE","session_id":"plan-agent"}'
fi
exit "${code:-0}"
