#!/usr/bin/env python3
"""The gate's own decision time, and `clowder gate eval` over a large corpus.

  decision   `clowder gate` started with a Bash call on stdin -> exited with its answer,
             for a call a rule allows: `ls -la`, and a chain of six commands
  reviewer   a call no rule decides, allowed by `[approvals.reviewer]` answering from a
             local server on 127.0.0.1 at once (what the reviewer step itself adds)
  eval       `clowder gate eval` over N calls (the project's corpus, repeated)

Each decision is timed N times (default 300) after 20 warm-up runs; prints the median
and p99. Usage: python3 benches/gate.py [N]
Builds the release binary into ${CARGO_TARGET_DIR:-target} unless CLOWDER_BIN names one.
"""
import http.server
import json
import os
import threading
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
count = int(sys.argv[1]) if len(sys.argv) > 1 else 300
work = tempfile.mkdtemp(prefix="clowder-gate-bench-")
fixtures = os.path.join(root, "tests", "fixtures", "gate")
shutil.copy(os.path.join(fixtures, "harness.toml"), os.path.join(work, "harness.toml"))


def percentile(values, p):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(p / 100 * (len(ordered) - 1))))]


def hook(command):
    return json.dumps({
        "session_id": "s-1",
        "hook_event_name": "PreToolUse",
        "tool_name": "Bash",
        "tool_input": {"command": command},
        "tool_use_id": "toolu_1",
        "cwd": work,
    }).encode()


class Reviewer(http.server.BaseHTTPRequestHandler):
    """Chat Completions answering every question with an allow, at once."""

    def do_POST(self):
        self.rfile.read(int(self.headers.get("content-length", 0)))
        verdict = json.dumps({"verdict": "allow", "reason": "part of the task"})
        body = json.dumps({
            "choices": [{"message": {"role": "assistant", "content": verdict}}],
            "usage": {"prompt_tokens": 900, "completion_tokens": 20},
        }).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def with_reviewer():
    """A folder whose gate asks the local reviewer, and the server's address."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Reviewer)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    folder = os.path.join(work, "reviewed")
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "harness.toml"), "w") as f:
        f.write(open(os.path.join(work, "harness.toml")).read())
        f.write(f'\n[approvals.reviewer]\napi = "openai"\nbase_url = "http://127.0.0.1:{server.server_port}/v1"\nmodel = "bench"\n')
    return folder, server


def decide(command, folder=None):
    folder = folder or work
    data = hook(command)
    for _ in range(20):
        subprocess.run([clowder, "gate"], input=data, cwd=folder, capture_output=True, check=True)
    times = []
    for _ in range(count):
        start = time.perf_counter()
        done = subprocess.run([clowder, "gate"], input=data, cwd=folder, capture_output=True, check=True)
        times.append((time.perf_counter() - start) * 1000)
        if b'"allow"' not in done.stdout:
            sys.exit(f"not allowed: {command}: {done.stdout!r} {done.stderr!r}")
    print(f"{command[:48]:<50} median {statistics.median(times):6.2f} ms   p99 {percentile(times, 99):6.2f} ms")


def evaluate(calls):
    with open(os.path.join(fixtures, "corpus.jsonl")) as f:
        corpus = [line for line in f if line.strip()]
    lines = (corpus * (calls // len(corpus) + 1))[:calls]
    path = os.path.join(work, "corpus.jsonl")
    with open(path, "w") as f:
        f.writelines(lines)
    start = time.perf_counter()
    done = subprocess.run([clowder, "gate", "eval", "corpus.jsonl"], cwd=work, capture_output=True, text=True)
    took = time.perf_counter() - start
    print(f"gate eval over {calls} calls: {took:.2f} s (exit {done.returncode})")
    print(done.stdout)


try:
    print(f"{count} decisions each, {os.cpu_count()} cores, load {os.getloadavg()[0]:.2f}")
    decide("ls -la")
    decide("git status && git diff --stat && ls -la src | grep rs | sort | head -5")
    folder, server = with_reviewer()
    print("with [approvals.reviewer] on a local server that answers at once:")
    decide("ls -la", folder)
    decide("cargo build --release", folder)
    server.shutdown()
    evaluate(2000)
finally:
    shutil.rmtree(work, ignore_errors=True)
