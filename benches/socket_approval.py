#!/usr/bin/env python3
"""Approval latency over the host's socket, end to end:

  decision -> gate exits   a `decide` line written to .clowder/host.sock -> the waiting
                           `clowder gate` (Claude Code's PreToolUse hook) has exited
  decision -> reply        the same `decide` -> the host's `reply` line read back

A headless fleet of one idle lane runs in a temporary repository; a client connects to its
socket. Each of N requests (default 50) is asked by a `clowder gate` started in the
repository, seen in a `requests` message on the socket (not timed), then approved over the
socket. Prints the median and p99 of each. Usage: python3 benches/socket_approval.py [N]
Builds the release binary into ${CARGO_TARGET_DIR:-target} unless CLOWDER_BIN names one.
"""
import json
import os
import shutil
import signal
import socket
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
count = int(sys.argv[1]) if len(sys.argv) > 1 else 50
work = tempfile.mkdtemp(prefix="clowder-sockbench-")
env = dict(os.environ, GIT_CONFIG_NOSYSTEM="1", GIT_CONFIG_GLOBAL="/dev/null")
for name in ("CLOWDER_LANE", "CLOWDER_APPROVALS_DIR", "CLOWDER_GATE_RULES", "CLOWDER_GATE_RULES_SHA256"):
    env.pop(name, None)


def percentile(values, p):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(p / 100 * (len(ordered) - 1))))]


def git(*args):
    subprocess.run(["git", "-C", work, *args], check=True, env=env, capture_output=True)


class Lines:
    """The socket, read a JSON line at a time."""

    def __init__(self, path):
        self.sock = socket.socket(socket.AF_UNIX)
        self.sock.connect(path)
        self.sock.settimeout(60)
        self.file = self.sock.makefile("rb")

    def next(self):
        line = self.file.readline()
        if not line:
            sys.exit("the host hung up")
        return json.loads(line)

    def send(self, message):
        self.sock.sendall((json.dumps(message) + "\n").encode())


def stop(signum, _frame):
    sys.exit(128 + signum)  # runs the clean-up below


signal.signal(signal.SIGTERM, stop)
host = gate = None
try:
    git("init", "--quiet", "--initial-branch=main")
    git("-c", "user.name=Bench", "-c", "user.email=bench@example.com", "commit", "--quiet",
        "--allow-empty", "-m", "first")
    with open(os.path.join(work, "PROMPT.md"), "w") as f:
        f.write("wait\n")
    with open(os.path.join(work, "harness.toml"), "w") as f:
        f.write('[agent]\ncommand = "sh"\nargs = ["-c", "sleep 3600"]\n'
                '[session]\nmax_iterations = 1\n[watchdog]\nstale_timeout_mins = 120\n')
    subprocess.run([clowder, "lane", "add", "idle"], cwd=work, env=env, check=True,
                   capture_output=True)
    host = subprocess.Popen([clowder, "--headless", "--quiet"], cwd=work, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    path = os.path.join(work, ".clowder", "host.sock")
    deadline = time.time() + 30
    while True:
        try:
            client = Lines(path)
            break
        except OSError:
            if time.time() > deadline:
                sys.exit("the host never served its socket")
            time.sleep(0.05)
    decided, replied = [], []
    for i in range(count):
        command = f"git push origin bench-{i:04d}"
        hook = json.dumps({"session_id": "bench", "cwd": work, "hook_event_name": "PreToolUse",
                           "tool_name": "Bash", "tool_input": {"command": command},
                           "tool_use_id": f"toolu_{i}"})
        gate = subprocess.Popen([clowder, "gate", "--timeout", "60s"], cwd=work, env=env,
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.DEVNULL)
        gate.stdin.write(hook.encode())
        gate.stdin.close()
        request_id = None
        while request_id is None:
            message = client.next()
            if message["type"] in ("requests", "snapshot"):
                for pending in message["requests"]:
                    if command in json.dumps(pending["request"]):
                        request_id = pending["request"]["id"]
        started = time.perf_counter()
        client.send({"type": "decide", "re": i, "id": request_id,
                     "decision": {"decision": "approve"}, "by": "bench"})
        while True:
            message = client.next()
            if message["type"] == "reply" and message["re"] == i:
                replied.append(time.perf_counter() - started)
                if not message["ok"]:
                    sys.exit(f"{request_id}: {message['text']}")
                break
        gate.wait(timeout=30)
        decided.append(time.perf_counter() - started)
        out = gate.stdout.read()
        if gate.returncode != 0 or b'"allow"' not in out:
            sys.exit(f"{request_id}: the gate exited {gate.returncode}: {out!r}")
    for name, values in (("decision -> gate exits", decided), ("decision -> reply", replied)):
        print(f"{name:<24} median {statistics.median(values) * 1000:7.1f} ms   "
              f"p99 {percentile(values, 99) * 1000:7.1f} ms   ({len(values)} requests)")
finally:
    if gate is not None and gate.poll() is None:
        gate.kill()
        gate.wait()
    if host is not None:
        for _ in range(20):
            if host.poll() is not None:
                break
            host.send_signal(signal.SIGTERM)
            time.sleep(0.5)
        if host.poll() is None:
            host.kill()
        host.wait()
    shutil.rmtree(work, ignore_errors=True)
