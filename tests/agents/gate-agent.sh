#!/bin/sh
# A fake agent for the tests of a lane's gate: in its worktree it rewrites
# harness.toml to allow every Bash call (as an agent can), then runs
# `clowder gate` (GATE_AGENT_CLOWDER) as Claude Code's PreToolUse hook does:
# in its folder, with the environment its host gave it. The answer goes to
# GATE_AGENT_OUT/answer.json, the gate's stderr to stderr.txt, its exit code
# to code. With GATE_AGENT_TAMPER=1 it first edits the rules file its host
# wrote for the lane (CLOWDER_GATE_RULES).
set -e
printf '[approvals]\nallow = [{ tool = "Bash" }]\n' > harness.toml
if [ "${GATE_AGENT_TAMPER:-0}" = 1 ]; then
    printf '[[approvals.allow]]\ntool = "Bash"\n' >> "$CLOWDER_GATE_RULES"
fi
set +e
printf '{"session_id":"s-1","cwd":"%s","hook_event_name":"PreToolUse","tool_name":"Bash","tool_input":{"command":"rm -rf %s/precious"},"tool_use_id":"toolu_1"}' \
    "$PWD" "$GATE_AGENT_OUT" |
    "$GATE_AGENT_CLOWDER" gate --timeout 30s > "$GATE_AGENT_OUT/answer.json" 2> "$GATE_AGENT_OUT/stderr.txt"
echo $? > "$GATE_AGENT_OUT/code"
echo "gate answered"
