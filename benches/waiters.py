#!/usr/bin/env python3
"""Many waiters: N `clowder ask` processes (default 300) wait at once on one queue.

  idle        the CPU time all N waiters use together over SECS seconds (default 20)
              while nothing is decided, from /proc/PID/stat, as a share of one core
  decision    each request approved in turn (`clowder approve ID`, one after another):
              the decision's `decided_at` (written by `clowder approve`) -> its `ask`
              has exited; median, p99 and max, and how many asks timed out first

Every ask waits with `--timeout 60s` after the last one was queued, so a timeout is
a missed decision, not a slow start. Usage: python3 benches/waiters.py [N] [SECS]
Builds the release binary into ${CARGO_TARGET_DIR:-target} unless CLOWDER_BIN names one.
"""
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from datetime import datetime

root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
clowder = os.environ.get("CLOWDER_BIN")
if not clowder:
    subprocess.run(["cargo", "build", "--release", "--quiet"], cwd=root, check=True)
    target = os.path.abspath(os.environ.get("CARGO_TARGET_DIR") or os.path.join(root, "target"))
    clowder = os.path.join(target, "release", "clowder")
count = int(sys.argv[1]) if len(sys.argv) > 1 else 300
secs = float(sys.argv[2]) if len(sys.argv) > 2 else 20.0
work = tempfile.mkdtemp(prefix="clowder-waiters-")
ticks_per_sec = os.sysconf("SC_CLK_TCK")


def percentile(values, p):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(p / 100 * (len(ordered) - 1))))]


def cpu_ticks(pid):
    """utime + stime of a live process, or None once it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except (FileNotFoundError, ProcessLookupError):
        return None
    return int(fields[11]) + int(fields[12])


def queue_json():
    out = subprocess.run([clowder, "queue", "--json"], cwd=work, capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def stop(signum, _frame):
    sys.exit(128 + signum)  # runs the clean-up below


signal.signal(signal.SIGTERM, stop)
signal.signal(signal.SIGHUP, stop)
asks = {}
exited = {}  # pid -> wall-clock time of exit
try:
    # Spawning waits a little between asks so a slow start is not a timeout.
    for i in range(count):
        title = f"waiter-{i:04d}"
        proc = subprocess.Popen([clowder, "ask", "--title", title, "--timeout", f"{60 + count // 10}s"],
                                cwd=work, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        asks[title] = proc

    def watch_exits():
        # pidfds become readable when their process exits; nothing is reaped here.
        import select
        fds = {os.pidfd_open(p.pid): p for p in asks.values()}
        poller = select.poll()
        for fd in fds:
            poller.register(fd, select.POLLIN)
        while fds:
            for fd, _ in poller.poll():
                exited[fds[fd].pid] = time.time()
                poller.unregister(fd)
                os.close(fd)
                del fds[fd]

    watcher = threading.Thread(target=watch_exits, daemon=True)
    watcher.start()
    deadline = time.time() + 120
    while len(listed := queue_json()) < count:
        if time.time() > deadline:
            sys.exit(f"only {len(listed)} of {count} requests queued after 120 s")
        time.sleep(0.2)
    ids = {r["title"]: r["id"] for r in listed}
    time.sleep(2)  # let the last starters settle

    before = {p.pid: cpu_ticks(p.pid) for p in asks.values()}
    started = time.time()
    time.sleep(secs)
    elapsed = time.time() - started
    used = sum((cpu_ticks(pid) or t) - t for pid, t in before.items() if t is not None)
    share = used / ticks_per_sec / elapsed * 100
    resolution = 100 / ticks_per_sec / elapsed
    print(f"idle: {count} waiting asks used {used} ticks in {elapsed:.1f} s = {share:.2f} % of one core"
          f" (one tick = {resolution:.2f} %)")

    for title in sorted(asks):
        subprocess.run([clowder, "approve", ids[title]], cwd=work,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    watcher.join(timeout=120)
    latencies, timed_out, failed = [], 0, 0
    for title, proc in asks.items():
        code = proc.wait(timeout=10)
        when = exited.get(proc.pid)
        if code == 3:
            timed_out += 1
            continue
        if code != 0 or when is None:
            failed += 1
            continue
        with open(os.path.join(work, ".clowder/approvals/done", ids[title] + ".json")) as f:
            decided_at = datetime.fromisoformat(json.load(f)["decision"]["decided_at"]).timestamp()
        latencies.append(when - decided_at)
    if latencies:
        print(f"decision -> ask exits: median {statistics.median(latencies) * 1000:.1f} ms   "
              f"p99 {percentile(latencies, 99) * 1000:.1f} ms   max {max(latencies) * 1000:.1f} ms   "
              f"({len(latencies)} approved)")
    print(f"timed out: {timed_out} of {count}" + (f"; other exits: {failed}" if failed else ""))
    if timed_out or failed:
        sys.exit(1)
finally:
    for proc in asks.values():
        if proc.poll() is None:
            proc.kill()
    for proc in asks.values():
        try:
            proc.wait(timeout=10)
        except (subprocess.TimeoutExpired, ChildProcessError):
            pass
    shutil.rmtree(work, ignore_errors=True)
