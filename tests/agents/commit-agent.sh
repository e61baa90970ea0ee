#!/bin/sh
# A fake agent for fleet tests: records who it is in its working folder and
# commits it, so each lane's branch holds its own agent's commits only.
# COMMIT_AGENT_SLEEP (seconds, default 0) keeps the session running a while.
set -e
lane="${CLOWDER_LANE:-none}"
echo "lane=$lane global=$HARNESS_GLOBAL_ITERATION approvals=$CLOWDER_APPROVALS_DIR"
sleep "${COMMIT_AGENT_SLEEP:-0}"
echo "$lane $HARNESS_GLOBAL_ITERATION" >> "work-$lane.txt"
git add "work-$lane.txt"
git -c user.name=Agent -c user.email=agent@example.com -c commit.gpgsign=false \
    commit --quiet -m "$lane: session $HARNESS_GLOBAL_ITERATION"
echo "committed"
