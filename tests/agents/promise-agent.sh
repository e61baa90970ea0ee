#!/bin/sh
# A fake agent playing Claude Code (link it as `claude`) in a project set up by
# `clowder init`: it asks its gate about one command when PROMISE_AGENT_GATE
# names the clowder binary (what the gate said goes to
# $PROMISE_AGENT_LOG/gate-LANE.txt), commits work-LANE.txt, and ends with a
# stream-json result that keeps the promise TASK_COMPLETE. Where clowder handed
# it its gate (`--settings`, with CLOWDER_GATE_HANDED set), it asks that one, as
# Claude Code runs the hook it was handed.
set -e
lane="${CLOWDER_LANE:-loop}"
echo '{"type":"system","subtype":"init","session_id":"promise-agent","model":"fake","tools":[]}'
if [ -n "$PROMISE_AGENT_GATE" ]; then
    printf '%s' '{"tool_name":"Bash","tool_input":{"command":"make deploy"}}' |
        "$PROMISE_AGENT_GATE" gate ${CLOWDER_GATE_HANDED:+--handed} --timeout 1s >/dev/null \
            2>>"$PROMISE_AGENT_LOG/gate-$lane.txt" || true
fi
echo "$lane $HARNESS_GLOBAL_ITERATION" >> "work-$lane.txt"
git add "work-$lane.txt"
git -c user.name=Agent -c user.email=agent@example.com -c commit.gpgsign=false \
    commit --quiet -m "$lane: session $HARNESS_GLOBAL_ITERATION"
echo '{"type":"assistant","message":{"role":"assistant","content":[{"type":"text","text":"committed my work"}]}}'
echo '{"type":"result","subtype":"success","is_error":false,"result":"All done. TASK_COMPLETE","session_id":"promise-agent","total_cost_usd":0.01}'
