#!/bin/sh
# A fake agent for the web inbox's browser tests (tests/it/web_browser.rs). In
# each lane named in WEB_AGENT_GATE_LANES it waits for the test's word (the
# file WEB_AGENT_OUT/go-LANE), so that the page is open before the request
# is, then asks through `clowder gate` as Claude Code's PreToolUse hook would;
# the answer goes to WEB_AGENT_OUT/answer-LANE.json, the gate's exit status
# to WEB_AGENT_OUT/gate-exit-LANE. In lane WEB_AGENT_HOSTILE_LANE it prints
# HTML and terminal escapes. In a lane named LANE:N in WEB_AGENT_COMMIT_LANES
# it commits LANE.txt of N lines, reports a cost of $0.42 as Claude Code's
# result line does, and ends. Else it writes a line every 0.2 s for
# WEB_AGENT_SECS seconds.
lane="${CLOWDER_LANE:-none}"
out="${WEB_AGENT_OUT:?}"
echo "lane=$lane"
for entry in ${WEB_AGENT_COMMIT_LANES:-}; do
    case "$entry" in
    "$lane":*)
        seq 1 "${entry#*:}" | sed 's/^/line /' > "$lane.txt"
        git add "$lane.txt"
        git -c user.name=Agent -c user.email=agent@example.com -c commit.gpgsign=false \
            commit --quiet -m "$lane: ${entry#*:} lines"
        echo '{"type":"result","subtype":"success","is_error":false,"result":"committed","session_id":"web-1","total_cost_usd":0.42}'
        exit 0
        ;;
    esac
done
if [ "$lane" = "${WEB_AGENT_HOSTILE_LANE:-}" ]; then
    printf '<script>alert(1)</script><img src=x onerror="alert(2)">\n'
    printf 'esc \033[31mred\033[0m \033]0;title\007 \033[2Jafter\n'
fi
case " ${WEB_AGENT_GATE_LANES:-} " in
*" $lane "*)
    n=0
    while ! [ -e "$out/go-$lane" ] && [ "$n" -lt 1200 ]; do
        sleep 0.1
        n=$((n + 1))
    done
    printf '{"session_id":"s-1","cwd":"%s","hook_event_name":"PreToolUse","tool_name":"Bash","tool_input":{"command":"git push origin clowder/%s"},"tool_use_id":"toolu_1"}' \
        "$PWD" "$lane" |
        "$WEB_AGENT_CLOWDER" gate --timeout 120s > "$out/answer-$lane.json"
    echo $? > "$out/gate-exit-$lane"
    echo "gate answered"
    ;;
esac
i=0
while [ "$i" -lt $((${WEB_AGENT_SECS:-60} * 5)) ]; do
    echo "tick $i"
    sleep 0.2
    i=$((i + 1))
done
