#!/usr/bin/env python3
"""The approval queue with many pending requests (default 10,000):

  control room  `clowder 1` in tmux (120x40), the agent idle (`fake-agent.sh hang`):
                time until the Approvals pane shows the requests, then clowder's CPU
                (utime+stime from /proc/PID/stat) over SECS seconds and its peak RSS
                (VmHWM). The same with an empty queue, for comparison.
  watchdog      the same control room with a 6 s stale limit: the agent's last byte ->
                `watchdog_kill`, and how long after `loop_start` the session started
                (the queue is listed on a blocking thread, off the loop's)
  queue         `clowder queue` and `clowder queue --json` listing them: wall time and
                peak RSS (from wait4's rusage), best of 3.
  ask           one `clowder ask` waiting for an answer (as `clowder gate` waits for each
                held tool call), no control room: its CPU over SECS seconds.

The requests are written straight into `.clowder/approvals/pending/` in the format
`clowder gate` uses (pretty JSON, `<id>.json`, folders 0700, files 0600): Bash tool calls,
created over the last hour.

Usage: python3 benches/approvals_memory.py          (COUNT=10000, SECS=60)
       COUNT=1000 SECS=10 python3 benches/approvals_memory.py
Builds the release binary into ${CARGO_TARGET_DIR:-target} unless CLOWDER_BIN names one.
"""
import datetime
import json
import os
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
count = int(os.environ.get("COUNT", "10000"))
secs = int(os.environ.get("SECS", "60"))
clk_tck = os.sysconf("SC_CLK_TCK")
socket = f"clowder-approvals-{os.getpid()}"


def tmux(*args):
    return subprocess.run(["tmux", "-L", socket, *args], capture_output=True, text=True)


def screen():
    return tmux("capture-pane", "-p").stdout


def cpu_ticks(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


def status_kb(pid, key):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    raise KeyError(key)


def make_project(pending_count):
    work = tempfile.mkdtemp(prefix="clowder-approvals-")
    with open(os.path.join(work, "PROMPT.md"), "w") as f:
        f.write("go\n")
    with open(os.path.join(work, "harness.toml"), "w") as f:
        # Output files are named after the agent's command unless the prefix is set.
        f.write('[session]\noutput_prefix = "claude-iteration"\n'
                f'[agent]\ncommand = "{fake_agent}"\nargs = ["hang"]\n'
                "[watchdog]\nstale_timeout_mins = 60\n")
    queue = os.path.join(work, ".clowder", "approvals")
    for sub in ("", "pending", "decided", "done"):
        os.makedirs(os.path.join(queue, sub), mode=0o700, exist_ok=True)
        os.chmod(os.path.join(queue, sub), 0o700)
    os.chmod(os.path.join(work, ".clowder"), 0o700)
    now = datetime.datetime.now(datetime.timezone.utc)
    for i in range(pending_count):
        request_id = f"bench-{i:05d}"
        created = now - datetime.timedelta(seconds=3600 * (pending_count - i) / max(pending_count, 1))
        request = {
            "id": request_id,
            "created": created.strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
            "kind": "tool",
            "title": f"Bash: cargo test -p crate_{i:05d}",
            "tool_name": "Bash",
            "tool_input": {
                "command": f"cargo test -p crate_{i:05d} -- --nocapture 2>&1 | tail -n 50",
                "description": "Run the crate's tests",
            },
            "session_id": "3f2a9c1e-bench-session",
            "cwd": work,
            "body": None,
        }
        path = os.path.join(queue, "pending", f"{request_id}.json")
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(json.dumps(request, indent=2) + "\n")
    return work


def run_measured(args, cwd):
    """Wall time (s), peak RSS (kB, from wait4) and the stdout of a child that must succeed."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        started = time.perf_counter()
        child = subprocess.Popen(args, cwd=cwd, stdout=out, stderr=err)
        _, status, usage = os.wait4(child.pid, 0)
        wall = time.perf_counter() - started
        child.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        output, errors = out.read(), err.read().decode(errors="replace")
    if child.returncode != 0:
        raise RuntimeError(f"{' '.join(args)} exited {child.returncode}: {errors}")
    return wall, usage.ru_maxrss, output


def measure_queue(work):
    results = {}
    for label, args in (("clowder queue", [clowder, "queue"]),
                        ("clowder queue --json", [clowder, "queue", "--json"])):
        runs = [run_measured(args, work) for _ in range(3)]
        best = min(runs, key=lambda r: r[0])
        results[label] = runs
        listed = runs[0][2]
        shown = (len(json.loads(listed)) if "--json" in args
                 else sum(1 for line in listed.decode().splitlines() if "bench-" in line))
        print(f"{label:<22} {count} pending: wall {best[0] * 1000:6.0f} ms (best of 3, median "
              f"{statistics.median(r[0] for r in runs) * 1000:.0f} ms)   peak RSS {max(r[1] for r in runs) / 1024:5.1f} MiB"
              f"   ({shown} listed)", flush=True)
        if shown != count:
            raise RuntimeError(f"{label} listed {shown} requests, expected {count}")
    return results


def events(work):
    try:
        with open(os.path.join(work, "harness-events.jsonl")) as f:
            lines = f.read().split("\n")[:-1]
    except FileNotFoundError:
        return []
    found = []
    for line in lines:
        try:
            found.append(json.loads(line))
        except ValueError:
            pass
    return found


def wait_event(work, name, timeout):
    deadline = time.monotonic() + timeout
    while True:
        for event in events(work):
            if event.get("event") == name:
                return event
        if time.monotonic() >= deadline:
            return None
        time.sleep(0.05)


def timestamp(ts):
    whole, _, fraction = ts.rstrip("Z").partition(".")
    seconds = datetime.datetime.fromisoformat(whole).replace(tzinfo=datetime.timezone.utc).timestamp()
    return seconds + (float("0." + fraction) if fraction else 0.0)


def set_stale_timeout(work, minutes):
    with open(os.path.join(work, "harness.toml"), "w") as f:
        # Output files are named after the agent's command unless the prefix is set.
        f.write('[session]\noutput_prefix = "claude-iteration"\n'
                f'[agent]\ncommand = "{fake_agent}"\nargs = ["hang"]\n'
                f"[watchdog]\nstale_timeout_mins = {minutes}\n")
    for name in os.listdir(work):
        if name.startswith("claude-iteration-") or name in ("harness-events.jsonl", ".iteration_counter",
                                                              "harness.status"):
            os.unlink(os.path.join(work, name))


class ControlRoom:
    """`clowder 1` in tmux, in `work`; stopped and cleaned up on exit."""

    def __init__(self, work):
        self.work = work
        self.pid = self.pgid = None

    def __enter__(self):
        self.started = time.monotonic()
        started = tmux("-f", "/dev/null", "new-session", "-d", "-x", "120", "-y", "40", "-c", self.work,
                       f"'{clowder}' 1; echo clowder exited $?; read line")
        if started.returncode != 0:
            raise RuntimeError(f"tmux new-session failed: {started.stderr}")
        start = wait_event(self.work, "loop_start", 30)
        if not start:
            raise RuntimeError(f"the control room did not start:\n{screen()}")
        self.pid = start["pid"]
        return self

    def __exit__(self, *_):
        if self.pgid is None:
            session = wait_event(self.work, "session_start", 0)
            self.pgid = session and session["pgid"]
        if self.pid and wait_event(self.work, "loop_end", 0):
            tmux("send-keys", "q")  # the loop is over: the control room waits for `q`
            deadline = time.monotonic() + 3
            while time.monotonic() < deadline and os.path.exists(f"/proc/{self.pid}"):
                time.sleep(0.05)
        if self.pid:
            for _ in range(2):
                try:
                    os.kill(self.pid, signal.SIGINT)
                except ProcessLookupError:
                    break
                time.sleep(0.3)
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline and os.path.exists(f"/proc/{self.pid}"):
                time.sleep(0.1)
            try:
                os.kill(self.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        if self.pgid:
            try:
                os.killpg(self.pgid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        tmux("kill-server")
        deadline = time.monotonic() + 5  # the next session must not reach this server
        while tmux("list-sessions").returncode == 0 and time.monotonic() < deadline:
            time.sleep(0.05)


def measure_control_room(work, pending_count):
    """CPU and peak RSS of the control room with the agent idle."""
    set_stale_timeout(work, 60)
    label = f"control room, {pending_count} pending"
    with ControlRoom(work) as room:
        expected = f"Approvals ({pending_count} waiting)" if pending_count else "nothing waiting for you"
        while expected not in screen():
            if time.monotonic() - room.started > 120:
                raise RuntimeError(f"`{expected}` not on screen after 120 s:\n{screen()}")
            time.sleep(0.05)
        shown_after = time.monotonic() - room.started
        time.sleep(2)
        before = cpu_ticks(room.pid)
        time.sleep(secs)
        used = (cpu_ticks(room.pid) - before) / clk_tck
        peak, rss = status_kb(room.pid, "VmHWM"), status_kb(room.pid, "VmRSS")
        text = screen()
        print(f"{label:<30} on screen after {shown_after:4.1f} s; CPU {used:.2f} s over {secs} s = "
              f"{100 * used / secs:.2f}% of a core; peak RSS {peak / 1024:.1f} MiB (now {rss / 1024:.1f} MiB)",
              flush=True)
        if pending_count:
            # At 120 columns the pane shortens each command at a word
            # (`cargo test -p…`); wider, the oldest request's name shows whole.
            tmux("resize-window", "-x", "200", "-y", "50")
            time.sleep(1)
            text = screen()
            if "cargo test -p crate_00000" not in text:
                raise RuntimeError(f"the oldest request is not on screen:\n{text}")
            shown = [line[line.index(mark):].rstrip("│╮ ")
                     for line in text.splitlines() for mark in ("Approvals (", "▶ Bash") if mark in line]
            for line in shown[:3]:
                print("  on screen: " + line, flush=True)


def measure_watchdog(work, pending_count, limit_mins=0.1, patience=180):
    """How late the control room's watchdog is with this queue: the agent writes one
    line and sleeps; its last byte -> `watchdog_kill`, against the limit."""
    set_stale_timeout(work, limit_mins)
    label = f"control room, {pending_count} pending"
    limit = limit_mins * 60
    with ControlRoom(work) as room:
        session = wait_event(work, "session_start", patience)
        if not session:
            print(f"{label:<30} no session started within {patience} s", flush=True)
            return
        room.pgid = session["pgid"]
        start_delay = timestamp(session["ts"]) - timestamp(wait_event(work, "loop_start", 0)["ts"])
        killed = wait_event(work, "watchdog_kill", limit + patience)
        last_byte = os.stat(os.path.join(work, "claude-iteration-1.jsonl")).st_mtime
        stale = wait_event(work, "watchdog_stale", 0)
        stale_text = f"watchdog_stale after {timestamp(stale['ts']) - last_byte:.2f} s" if stale else "no watchdog_stale"
        if killed:
            kill_text = f"last byte -> watchdog_kill {timestamp(killed['ts']) - last_byte:.2f} s"
        else:
            kill_text = f"no watchdog_kill within {limit + patience:.0f} s of the last byte"
        print(f"{label:<30} watchdog (limit {limit:.0f} s): {kill_text} ({stale_text}); "
              f"loop_start -> session_start {start_delay:.2f} s", flush=True)


def measure_waiting_ask(work):
    """CPU of one `clowder ask` waiting for an answer (what `clowder gate` does per held tool call)."""
    ask = subprocess.Popen([clowder, "ask", "--title", "waiting", "--timeout", "1h"], cwd=work,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        time.sleep(2)
        before = cpu_ticks(ask.pid)
        time.sleep(secs)
        used = (cpu_ticks(ask.pid) - before) / clk_tck
        print(f"{'clowder ask, waiting':<30} CPU {used:.2f} s over {secs} s = {100 * used / secs:.2f}% of a core; "
              f"peak RSS {status_kb(ask.pid, 'VmHWM') / 1024:.1f} MiB", flush=True)
    finally:
        ask.terminate()
        try:
            ask.wait(timeout=10)
        except subprocess.TimeoutExpired:
            ask.kill()
            ask.wait()


def main():
    work = make_project(count)
    empty = make_project(0)
    try:
        print(f"{count} pending requests, {os.cpu_count()} cores; control room over {secs} s", flush=True)
        measure_queue(work)
        measure_control_room(work, count)
        measure_control_room(empty, 0)
        measure_watchdog(work, count)
        measure_watchdog(empty, 0)
        measure_waiting_ask(empty)
    finally:
        tmux("kill-server")
        try:
            os.unlink(os.path.join(os.environ.get("TMUX_TMPDIR") or "/tmp", f"tmux-{os.getuid()}", socket))
        except FileNotFoundError:
            pass
        shutil.rmtree(work, ignore_errors=True)
        shutil.rmtree(empty, ignore_errors=True)


def stop(signum, _frame):
    sys.exit(128 + signum)  # runs the clean-ups in the finally blocks


signal.signal(signal.SIGTERM, stop)
signal.signal(signal.SIGHUP, stop)
main()
