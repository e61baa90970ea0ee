#!/usr/bin/env python3
"""Reaction times of the supervisor (headless, release build), N rounds each:

  watchdog  the agent's last byte (its output file's mtime) -> `watchdog_kill` in the
            event log, against the configured limit (stale_timeout_mins = 0.1, i.e. 6 s;
            check_interval_secs = 1). The agent writes its last line 0.5-2.5 s after it
            starts (random), so the last byte falls anywhere between two polls.
  sigint    the second SIGINT -> no live process of the agent's group left in /proc,
            and -> clowder exited

Usage: python3 benches/reaction.py [N]      (default 5)
Builds the release binary into ${CARGO_TARGET_DIR:-target} unless CLOWDER_BIN names one.
"""
import datetime
import json
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
clowder = os.environ.get("CLOWDER_BIN")
if not clowder:
    subprocess.run(["cargo", "build", "--release", "--quiet"], cwd=root, check=True)
    target = os.path.abspath(os.environ.get("CARGO_TARGET_DIR") or os.path.join(root, "target"))
    clowder = os.path.join(target, "release", "clowder")
fake_agent = os.path.join(root, "tests", "agents", "fake-agent.sh")
rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 5
limit_mins = 0.1
limit = limit_mins * 60
check_interval = 1

# Prints a line, writes its last line after DELAY seconds, then stays silent.
LATE_AGENT = """#!/usr/bin/env bash
echo '{"type":"system","subtype":"init","session_id":"bench"}'
sleep "$1"
echo '{"type":"assistant","message":{"id":"msg_1","content":[{"type":"text","text":"last words"}]}}'
exec sleep 100000
"""


def project(command, args, extra):
    work = tempfile.mkdtemp(prefix="clowder-reaction-")
    with open(os.path.join(work, "PROMPT.md"), "w") as f:
        f.write("go\n")
    with open(os.path.join(work, "harness.toml"), "w") as f:
        # Output files are named after the agent's command unless the prefix is set.
        f.write(f'[session]\noutput_prefix = "claude-iteration"\n'
                f"[agent]\ncommand = {json.dumps(command)}\nargs = {json.dumps(args)}\n{extra}")
    return work


def events(work, name):
    """The complete events called `name` logged so far (a line still being written is skipped)."""
    try:
        with open(os.path.join(work, "harness-events.jsonl")) as f:
            lines = f.read().split("\n")[:-1]
    except FileNotFoundError:
        return []
    found = []
    for line in lines:
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if event.get("event") == name:
            found.append(event)
    return found


def wait_event(work, name, timeout=30):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = events(work, name)
        if found:
            return found[0]
        time.sleep(0.01)
    raise RuntimeError(f"no {name} event within {timeout} s in {work}")


def timestamp(ts):
    """Seconds since the epoch of an RFC 3339 UTC time with up to 9 fractional digits."""
    if not ts.endswith("Z"):
        raise ValueError(f"not a UTC time: {ts}")
    whole, _, fraction = ts[:-1].partition(".")
    seconds = datetime.datetime.fromisoformat(whole).replace(tzinfo=datetime.timezone.utc).timestamp()
    return seconds + (float("0." + fraction) if fraction else 0.0)


def stat_fields(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def group_members(pgid):
    """The live (not zombie) processes whose process group is `pgid`."""
    members = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        fields = stat_fields(pid)
        if fields and int(fields[2]) == pgid and fields[0] not in ("Z", "X"):
            members.append(int(pid))
    return members


def still_member(pid, pgid):
    fields = stat_fields(pid)
    return bool(fields) and int(fields[2]) == pgid and fields[0] not in ("Z", "X")


def kill_all(loop, pgid):
    """Leaves nothing behind: the loop and every process of the agent's group."""
    if loop is not None and loop.poll() is None:
        loop.kill()
        loop.wait()
    if pgid:
        try:
            os.killpg(pgid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def watchdog_round():
    agent = os.path.join(tempfile.gettempdir(), f"clowder-reaction-agent-{os.getpid()}.sh")
    delay = f"{random.uniform(0.5, 2.5):.3f}"
    work = project(agent, [delay], f"[watchdog]\nstale_timeout_mins = {limit_mins}\n"
                                   f"check_interval_secs = {check_interval}\n")
    loop, pgid = None, None
    try:
        loop = subprocess.Popen([clowder, "--headless", "--quiet", "1"], cwd=work,
                                stdout=subprocess.DEVNULL, start_new_session=True)
        pgid = wait_event(work, "session_start")["pgid"]
        loop.wait(timeout=limit + 30)
        last_byte = os.stat(os.path.join(work, "claude-iteration-1.jsonl")).st_mtime
        stale = timestamp(wait_event(work, "watchdog_stale")["ts"])
        killed = timestamp(wait_event(work, "watchdog_kill")["ts"])
        return stale - last_byte, killed - last_byte
    finally:
        kill_all(loop, pgid)
        shutil.rmtree(work, ignore_errors=True)


def sigint_round():
    work = project(fake_agent, ["hang"], "[watchdog]\nstale_timeout_mins = 60\n")
    loop, pgid = None, None
    try:
        log = open(os.path.join(work, "clowder.log"), "w")
        loop = subprocess.Popen([clowder, "--headless", "1"], cwd=work,
                                stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        pgid = wait_event(work, "session_start")["pgid"]
        time.sleep(0.5)  # the agent is running (and has exec'd its sleep)
        members = group_members(pgid)
        if not members:
            raise RuntimeError("the agent's group is already empty")
        first = time.time()
        loop.send_signal(signal.SIGINT)
        time.sleep(0.3)
        second = time.time()
        started = time.perf_counter()
        loop.send_signal(signal.SIGINT)
        while any(still_member(pid, pgid) for pid in members):
            if time.perf_counter() - started > 15:
                with open(os.path.join(work, "clowder.log")) as f:
                    output = f.read()
                stamp = lambda t: datetime.datetime.fromtimestamp(t, datetime.timezone.utc).strftime("%H:%M:%S.%f")
                print(f"sigint: the group was still alive 15 s after the second SIGINT "
                      f"(SIGINTs sent at {stamp(first)} and {stamp(second)}); clowder said:\n{output}",
                      file=sys.stderr)
                return None, None
            time.sleep(0.0005)
        emptied = time.perf_counter() - started
        loop.wait(timeout=30)
        exited = time.perf_counter() - started
        if group_members(pgid):
            raise RuntimeError(f"group {pgid} gained a process that survived")
        return emptied, exited
    finally:
        kill_all(loop, pgid)
        shutil.rmtree(work, ignore_errors=True)


def main():
    agent = os.path.join(tempfile.gettempdir(), f"clowder-reaction-agent-{os.getpid()}.sh")
    with open(agent, "w") as f:
        f.write(LATE_AGENT)
    os.chmod(agent, 0o755)
    try:
        measure()
    finally:
        os.unlink(agent)


def measure():
    stale, killed, emptied, exited, missed = [], [], [], [], []
    for i in range(rounds):
        s, k = watchdog_round()
        e, x = sigint_round()
        stale.append(s)
        killed.append(k)
        if e is None:
            missed.append(i + 1)
            continue
        emptied.append(e)
        exited.append(x)
        print(f"round {i + 1}/{rounds}: last byte -> kill {k:.2f} s (stale {s:.2f} s); "
              f"2nd SIGINT -> group empty {e * 1000:.0f} ms, clowder exited {x * 1000:.0f} ms",
              file=sys.stderr, flush=True)
    over = [k - limit for k in killed]
    print(f"watchdog: last byte -> watchdog_kill  median {statistics.median(killed):.2f} s  "
          f"max {max(killed):.2f} s  (limit {limit:.2f} s: over by median {statistics.median(over):.2f} s, "
          f"max {max(over):.2f} s; target <= check_interval {check_interval} s + 1 s; {rounds} rounds)")
    print(f"watchdog: last byte -> watchdog_stale median {statistics.median(stale):.2f} s  max {max(stale):.2f} s")
    if missed:
        print(f"sigint:   the second SIGINT did not kill the session in round(s) {missed}")
    if not emptied:
        return
    print(f"sigint:   2nd SIGINT -> group empty    median {statistics.median(emptied) * 1000:.0f} ms  "
          f"max {max(emptied) * 1000:.0f} ms  ({len(emptied)} rounds)")
    print(f"sigint:   2nd SIGINT -> clowder exited median {statistics.median(exited) * 1000:.0f} ms  "
          f"max {max(exited) * 1000:.0f} ms")


def stop(signum, _frame):
    sys.exit(128 + signum)  # runs the clean-ups in the finally blocks


signal.signal(signal.SIGTERM, stop)
signal.signal(signal.SIGHUP, stop)
main()
