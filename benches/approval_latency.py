#!/usr/bin/env python3
"""Approval latency, end to end, with the control room running in tmux (120x40):

  on screen   `clowder ask` started -> its request is visible in the Approvals pane
  decision    `clowder approve ID` started -> the waiting `clowder ask` has exited

Each of N requests (default 200) is asked, waited for on screen (at most 30 s), then
approved. Prints the median and p99 of each, and the requests that never showed (the
run stops after 3 of those and exits 1). Usage: python3 benches/approval_latency.py [N]
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
    on_screen, decided, missed = [], [], []
    for i in range(count):
        title = f"bench-{i:04d}"
        started = time.perf_counter()
        ask = subprocess.Popen([clowder, "ask", "--title", title, "--timeout", "60s"], cwd=work,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        while title not in (screen := tmux("capture-pane", "-p").stdout):
            if time.perf_counter() - started > 30:
                header = screen.splitlines()[0].strip() if screen else ""
                print(f"{title} not on screen 30 s after `clowder ask` started (the header says: {header})",
                      file=sys.stderr, flush=True)
                missed.append(title)
                break
        else:
            on_screen.append(time.perf_counter() - started)
        if len(missed) >= 3:
            break
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
        if values:
            print(f"{name:<24} median {statistics.median(values) * 1000:7.1f} ms   "
                  f"p99 {percentile(values, 99) * 1000:7.1f} ms   ({len(values)} requests)")
    if missed:
        stopped = " (stopped after 3)" if len(missed) >= 3 else ""
        print(f"not on screen within 30 s: {len(missed)} of {len(on_screen) + len(missed)} requests{stopped}: "
              + ", ".join(missed))
        sys.exit(1)
finally:
    if ask is not None and ask.poll() is None:
        ask.kill()
        ask.wait()
    tmux("kill-server")
    try:
        os.unlink(os.path.join(os.environ.get("TMUX_TMPDIR") or "/tmp", f"tmux-{os.getuid()}", socket))
    except FileNotFoundError:
        pass
    shutil.rmtree(work, ignore_errors=True)
