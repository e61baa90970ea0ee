#!/usr/bin/env python3
"""Approval latency, end to end, with the control room running in tmux (120x40):

  on screen   `clowder ask` started -> its request is visible in the Approvals pane
  decision    `clowder approve ID` started -> the waiting `clowder ask` has exited

Each of N requests (default 200) is asked, waited for on screen, then approved.
Prints the median and p99 of each. Usage: python3 benches/approval_latency.py [N]
Builds the release binary into ${CARGO_TARGET_DIR:-target} unless CLOWDER_BIN names one.
"""
import json
import os
import signal
import shutil
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
agent = os.path.join(root, "tests", "agents", "fake-agent.sh")
count = int(sys.argv[1]) if len(sys.argv) > 1 else 200
work = tempfile.mkdtemp(prefix="clowder-latency-")
socket = f"clowder-latency-{os.getpid()}"


def tmux(*args, **kwargs):
    return subprocess.run(["tmux", "-L", socket, *args], capture_output=True, text=True, **kwargs)


def percentile(values, p):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(p / 100 * (len(ordered) - 1))))]


def stop(signum, _frame):
    sys.exit(128 + signum)  # runs the clean-up below


signal.signal(signal.SIGTERM, stop)
signal.signal(signal.SIGHUP, stop)
ask = None
try:
    with open(os.path.join(work, "PROMPT.md"), "w") as f:
        f.write("wait\n")
    with open(os.path.join(work, "harness.toml"), "w") as f:
        f.write(f'[agent]\ncommand = "{agent}"\nargs = ["hang"]\n[watchdog]\nstale_timeout_mins = 60\n')
    tmux("-f", "/dev/null", "new-session", "-d", "-x", "120", "-y", "40", "-c", work, f"{clowder} 1; sleep 600")
    deadline = time.time() + 30
    while "Approvals" not in tmux("capture-pane", "-p").stdout:
        if time.time() > deadline:
            sys.exit("the control room did not start")
        time.sleep(0.05)
    on_screen, decided = [], []
    for i in range(count):
        title = f"bench-{i:04d}"
        started = time.perf_counter()
        ask = subprocess.Popen([clowder, "ask", "--title", title, "--timeout", "60s"], cwd=work,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        while title not in tmux("capture-pane", "-p").stdout:
            if time.perf_counter() - started > 30:
                sys.exit(f"{title} never appeared on screen")
        on_screen.append(time.perf_counter() - started)
        pending = json.loads(subprocess.run([clowder, "queue", "--json"], cwd=work,
                                            capture_output=True, text=True, check=True).stdout)
        request_id = next(r["id"] for r in pending if r["title"] == title)
        started = time.perf_counter()
        subprocess.run([clowder, "approve", request_id], cwd=work, check=True, stdout=subprocess.DEVNULL)
        code = ask.wait(timeout=30)
        decided.append(time.perf_counter() - started)
        if code != 0:
            sys.exit(f"{title}: ask exited {code}")
    for name, values in (("request -> on screen", on_screen), ("decision -> ask exits", decided)):
        print(f"{name:<24} median {statistics.median(values) * 1000:7.1f} ms   "
              f"p99 {percentile(values, 99) * 1000:7.1f} ms   ({len(values)} requests)")
finally:
    if ask is not None and ask.poll() is None:
        ask.kill()
        ask.wait()
    tmux("kill-server")
    shutil.rmtree(work, ignore_errors=True)
