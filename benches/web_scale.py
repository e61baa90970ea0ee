#!/usr/bin/env python3
"""The web inbox (`clowder serve --http`) over 10,000 lanes (issue 37): one simulated
host (benches/host_sim.rs: the real protocol, no agents) of LANES lanes, BUSY of them
sending a fresh snapshot RATE times a second as a session that writes output does, and
PAGES headless Chromium pages open on it (one chromedriver, one Chromium per page), all
in one run:

  first paint   a page at a phone's viewport (390x844, Chromium's mobile emulation):
                navigation start -> the page's `clowder-drawn` mark (its first view
                drawn, lanes listed), PAINTS times, each in a fresh tab
  cpu           utime+stime (/proc/PID/stat) of the serve process over SECS s with the
                PAGES pages open (and the probe below), and of the Chromium processes
  feed          what one page's event stream is sent over those SECS s: a raw HTTP client
                that reads /api/events from the version it got with /api/state, as a
                page does, counting bytes (headers and SSE framing included)
  dom           the lane rows each page holds in its DOM

  python3 benches/web_scale.py                 # LANES=10000 BUSY=32 PAGES=5 SECS=60
  QUICK=1 python3 benches/web_scale.py         # 1000 lanes, 8 busy, 10 s

Builds the release binary and host_sim unless CLOWDER_BIN and HOST_SIM_BIN name them.
Chromium (/usr/bin/chromium, or CHROMIUM) and chromedriver (CHROMEDRIVER) must be installed.
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
import urllib.error
import urllib.parse
import urllib.request

root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
quick = bool(os.environ.get("QUICK"))


def env_num(name, default, small):
    return type(default)(os.environ.get(name, small if quick else default))


LANES = env_num("LANES", 10000, 1000)
BUSY = env_num("BUSY", 32, 8)
RATE = env_num("RATE", 5.0, 5.0)
PAGES = env_num("PAGES", 5, 2)
SECS = env_num("SECS", 60, 10)
PAINTS = env_num("PAINTS", 5, 2)
CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
CHROMEDRIVER = os.environ.get("CHROMEDRIVER", "/usr/bin/chromedriver")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--disable-dev-shm-usage"]
CLK_TCK = os.sysconf("SC_CLK_TCK")
started = []  # every Popen of ours, for the clean-up


def binaries():
    clowder = os.environ.get("CLOWDER_BIN")
    if not clowder:
        subprocess.run(["cargo", "build", "--release", "--quiet"], cwd=root, check=True)
        target = os.path.abspath(os.environ.get("CARGO_TARGET_DIR") or os.path.join(root, "target"))
        clowder = os.path.join(target, "release", "clowder")
    sim = os.environ.get("HOST_SIM_BIN")
    if not sim:
        out = subprocess.run(["cargo", "bench", "--no-run", "--quiet", "--bench", "host_sim",
                              "--message-format=json"], cwd=root, check=True,
                             capture_output=True, text=True).stdout
        for line in out.splitlines():
            message = json.loads(line)
            if message.get("target", {}).get("name") == "host_sim" and message.get("executable"):
                sim = message["executable"]
    if not sim:
        sys.exit("cannot find the host_sim bench binary")
    return clowder, sim


CLOWDER, SIM = binaries()
work = tempfile.mkdtemp(prefix="clowder-web-scale-")
folder = os.path.join(work, "fleet")
os.makedirs(folder)


def cpu_ticks(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except (FileNotFoundError, ProcessLookupError):
        return 0
    return int(fields[11]) + int(fields[12])


def descendants(pid):
    children = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                parent = int(f.read().rsplit(")", 1)[1].split()[1])
        except (FileNotFoundError, ProcessLookupError, IndexError):
            continue
        children.setdefault(parent, []).append(int(entry))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def load():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


class Server:
    """`clowder serve --http 127.0.0.1:0 FOLDER`."""

    def __init__(self):
        log = open(os.path.join(work, "serve.log"), "w")
        self.proc = subprocess.Popen([CLOWDER, "serve", "--http", "127.0.0.1:0", folder], cwd=work,
                                     stdout=subprocess.PIPE, stderr=log, text=True)
        started.append(self.proc)
        self.url = self.proc.stdout.readline().strip()
        if not self.url.startswith("http://"):
            sys.exit(f"serve --http printed {self.url!r}, not the page's URL")
        parsed = urllib.parse.urlsplit(self.url)
        self.port = parsed.port
        self.token = urllib.parse.parse_qs(parsed.fragment or parsed.query)["token"][0]

    def state(self):
        request = urllib.request.Request(f"http://127.0.0.1:{self.port}/api/state",
                                         headers={"Authorization": f"Bearer {self.token}"})
        with urllib.request.urlopen(request, timeout=60) as response:
            body = response.read()
        return json.loads(body), len(body)

    def wait_for_lanes(self):
        deadline = time.time() + 120
        while True:
            state, size = self.state()
            if len(state["view"]["lanes"]) == LANES:
                return state, size
            if time.time() > deadline:
                sys.exit(f"/api/state never showed {LANES} lanes")
            time.sleep(0.5)


class Feed:
    """One page's event stream, read raw from the version /api/state gave."""

    def __init__(self, server):
        state, _ = server.state()
        view = state["view"]
        query = urllib.parse.urlencode({"epoch": view["epoch"], "since": view["v"]})
        self.sock = socket.create_connection(("127.0.0.1", server.port))
        self.sock.sendall((f"GET /api/events?{query} HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\n"
                           f"Authorization: Bearer {server.token}\r\n\r\n").encode())
        self.sock.settimeout(0.2)

    def read(self, secs):
        data = b""
        end = time.time() + secs
        while time.time() < end:
            try:
                chunk = self.sock.recv(65536)
                if not chunk:
                    break
                data += chunk
            except socket.timeout:
                pass
        return data


class Driver:
    """One chromedriver; each session is one Chromium."""

    def __init__(self):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        log = open(os.path.join(work, "chromedriver.log"), "w")
        self.proc = subprocess.Popen([CHROMEDRIVER, f"--port={port}"], stdout=log, stderr=log, cwd=work)
        started.append(self.proc)
        self.base = f"http://127.0.0.1:{port}"
        deadline = time.time() + 30
        while True:
            try:
                if self.call("GET", "/status")["value"]["ready"]:
                    break
            except OSError:
                pass
            if time.time() > deadline:
                sys.exit("chromedriver never became ready")
            time.sleep(0.1)
        self.sessions = []

    def call(self, method, path, body=None):
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.base + path, data=data, method=method,
                                         headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=120) as response:
                return json.loads(response.read())
        except urllib.error.HTTPError as err:
            sys.exit(f"WebDriver {method} {path}: {err.code} {err.read()[:500]!r}")

    def new_session(self, phone):
        profile = tempfile.mkdtemp(prefix="profile-", dir=work)
        options = {"binary": CHROMIUM, "args": CHROMIUM_ARGS + [f"--user-data-dir={profile}"]}
        if phone:
            options["mobileEmulation"] = {"deviceMetrics": {"width": 390, "height": 844, "pixelRatio": 3}}
        else:
            options["args"].append("--window-size=1280,800")
        caps = {"capabilities": {"alwaysMatch": {"browserName": "chrome", "goog:chromeOptions": options}}}
        session = self.call("POST", "/session", caps)["value"]["sessionId"]
        self.sessions.append(session)
        return session

    def run(self, session, script):
        return self.call("POST", f"/session/{session}/execute/sync", {"script": script, "args": []})["value"]

    def open(self, session, url):
        """Opens the page; milliseconds from navigation start to its first view drawn."""
        self.call("POST", f"/session/{session}/url", {"url": url})
        deadline = time.time() + 120
        while True:
            drawn = self.run(session, "const m = performance.getEntriesByName('clowder-drawn')[0];"
                                      "return m ? m.startTime : null;")
            if drawn is not None:
                return drawn
            if time.time() > deadline:
                sys.exit("the page never drew its first view")
            time.sleep(0.05)

    def new_tab(self, session):
        handle = self.call("POST", f"/session/{session}/window/new", {"type": "tab"})["value"]["handle"]
        self.call("POST", f"/session/{session}/window", {"handle": handle})

    def quit(self):
        for session in self.sessions:
            try:
                self.call("DELETE", f"/session/{session}")
            except (OSError, SystemExit):
                pass
        self.sessions = []


def main():
    print(f"web_scale: {LANES} lanes, {BUSY} busy at {RATE}/s, {PAGES} pages, {SECS} s windows; "
          f"{os.cpu_count()} CPUs, load {load()}", flush=True)
    sim_log = open(os.path.join(work, "sim.log"), "w")
    sim = subprocess.Popen([SIM, folder, "--lanes", str(LANES), "--busy", str(BUSY), "--rate", str(RATE)],
                           stdout=sim_log, stderr=sim_log)
    started.append(sim)
    while not os.path.exists(os.path.join(folder, ".clowder", "host.sock")):
        time.sleep(0.05)
    server = Server()
    state, size = server.wait_for_lanes()
    print(f"whole view (/api/state): {size / 1e6:.2f} MB", flush=True)

    driver = Driver()
    phone = driver.new_session(phone=True)
    paints = []
    for index in range(PAINTS):
        if index:
            driver.new_tab(phone)
        paints.append(driver.open(phone, server.url))
    print(f"first paint, phone viewport (390x844): median {statistics.median(paints):.0f} ms, "
          f"max {max(paints):.0f} ms ({', '.join(f'{p:.0f}' for p in paints)})", flush=True)
    pages = [phone]
    for _ in range(PAGES - 1):
        session = driver.new_session(phone=False)
        driver.open(session, server.url)
        pages.append(session)
    rows = [driver.run(session, "return document.querySelectorAll('#lanes .lane').length;") for session in pages]
    print(f"lane rows in each page's DOM: {rows}", flush=True)

    feed = Feed(server)
    feed.read(2)  # the first message and anything queued before the window
    browsers = descendants(driver.proc.pid)
    before = (cpu_ticks(server.proc.pid), sum(cpu_ticks(pid) for pid in browsers), time.time())
    data = feed.read(SECS)
    after = (cpu_ticks(server.proc.pid), sum(cpu_ticks(pid) for pid in browsers), time.time())
    wall = after[2] - before[2]
    serve_pct = 100 * (after[0] - before[0]) / CLK_TCK / wall
    browsers_pct = 100 * (after[1] - before[1]) / CLK_TCK / wall
    states = data.count(b"event: state")
    print(f"serve: {serve_pct:.1f} % of a core over {wall:.0f} s ({PAGES} pages and the probe open); "
          f"Chromium, all {PAGES} pages: {browsers_pct:.0f} % of a core", flush=True)
    print(f"one page's feed: {len(data) / wall / 1000:.2f} KB/s ({states} state messages, "
          f"{len(data)} bytes in {wall:.0f} s); load {load()}", flush=True)
    driver.quit()


def clean_up():
    for proc in reversed(started):
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
    shutil.rmtree(work, ignore_errors=True)


def stop(signum, _frame):
    sys.exit(128 + signum)


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    try:
        main()
    finally:
        clean_up()
