#!/bin/sh
# A fake agent for the fleet's control-room tests: it commits a file in its
# lane's worktree; in lane FLEET_AGENT_GATE_LANE (once, marked in
# FLEET_AGENT_OUT) it asks through `clowder gate` as Claude Code's PreToolUse
# hook would, the answer going to FLEET_AGENT_OUT/answer-LANE.json; then it
# writes a line every 0.2 s for FLEET_AGENT_SECS seconds.
set -e
lane="${CLOWDER_LANE:-none}"
echo "lane=$lane global=$HARNESS_GLOBAL_ITERATION"
echo "$lane $HARNESS_GLOBAL_ITERATION" >> "work-$lane.txt"
git add "work-$lane.txt"
git -c user.name=Agent -c user.email=agent@example.com -c commit.gpgsign=false \
    commit --quiet -m "$lane: session $HARNESS_GLOBAL_ITERATION"
echo "committed"
if [ "$lane" = "$FLEET_AGENT_GATE_LANE" ] && ! [ -e "$FLEET_AGENT_OUT/asked-$lane" ]; then
    : > "$FLEET_AGENT_OUT/asked-$lane"
    printf '{"session_id":"s-1","cwd":"%s","hook_event_name":"PreToolUse","tool_name":"Bash","tool_input":{"command":"git push origin clowder/%s"},"tool_use_id":"toolu_1"}' \
        "$PWD" "$lane" |
        "$FLEET_AGENT_CLOWDER" gate --timeout 120s > "$FLEET_AGENT_OUT/answer-$lane.json"
    echo "gate answered"
fi
i=0
while [ "$i" -lt $((${FLEET_AGENT_SECS:-60} * 5)) ]; do
    echo "tick $i"
    sleep 0.2
    i=$((i + 1))
done
