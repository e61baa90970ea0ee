#!/bin/sh
# A fake agent for fleet tests: records who it is in its working folder and
# commits it, so each lane's branch holds its own agent's commits only.
# COMMIT_AGENT_TICKS=N writes a line every 0.1 s, N times, before it commits;
# COMMIT_AGENT_BACKGROUND=1 leaves a `sleep 600` running in its group;
# in lane COMMIT_AGENT_LIMITED_LANE it says RATE-LIMITED and exits 1 (only
# once, with COMMIT_AGENT_LIMIT_ONCE naming a file it then creates).
# COMMIT_AGENT_TRANSCRIPT names a file it prints first (e.g. one reporting a cost);
# COMMIT_AGENT_ASK names the clowder binary: it asks (`clowder ask`) before it commits.
# COMMIT_AGENT_IGNORE_TERM=1 ignores SIGTERM (only SIGKILL ends it).
# COMMIT_AGENT_DAEMONS=N leaves N daemons as git's detached auto-maintenance
# does (own session, parent gone), which end 0.2 s later, each touching
# daemon-K.done in the agent's folder.
set -e
[ "${COMMIT_AGENT_IGNORE_TERM:-0}" != 1 ] || trap '' TERM
[ -z "$COMMIT_AGENT_TRANSCRIPT" ] || cat "$COMMIT_AGENT_TRANSCRIPT"
lane="${CLOWDER_LANE:-none}"
echo "lane=$lane global=$HARNESS_GLOBAL_ITERATION approvals=$CLOWDER_APPROVALS_DIR"
if [ -n "$COMMIT_AGENT_LIMITED_LANE" ] && [ "$lane" = "$COMMIT_AGENT_LIMITED_LANE" ] &&
    ! [ -e "${COMMIT_AGENT_LIMIT_ONCE:-/nonexistent}" ]; then
    [ -z "$COMMIT_AGENT_LIMIT_ONCE" ] || : > "$COMMIT_AGENT_LIMIT_ONCE"
    echo "RATE-LIMITED until later"
    exit 1
fi
if [ -n "$COMMIT_AGENT_ASK" ]; then
    # From the worktree: the question must reach the fleet's one queue.
    "$COMMIT_AGENT_ASK" ask --title "may lane $lane commit?" --timeout 60s
fi
k=0
while [ "$k" -lt "${COMMIT_AGENT_DAEMONS:-0}" ]; do
    (setsid sh -c 'sleep 0.2; : > "$1"' sh "$PWD/daemon-$k.done" </dev/null >/dev/null 2>&1 &)
    k=$((k + 1))
done
if [ "${COMMIT_AGENT_BACKGROUND:-0}" = 1 ]; then
    sleep 600 &
fi
i=0
while [ "$i" -lt "${COMMIT_AGENT_TICKS:-0}" ]; do
    echo "tick $i"
    sleep 0.1
    i=$((i + 1))
done
echo "$lane $HARNESS_GLOBAL_ITERATION" >> "work-$lane.txt"
git add "work-$lane.txt"
git -c user.name=Agent -c user.email=agent@example.com -c commit.gpgsign=false \
    commit --quiet -m "$lane: session $HARNESS_GLOBAL_ITERATION"
echo "committed"
