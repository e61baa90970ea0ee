#!/usr/bin/env python3
"""The web inbox (`clowder serve --http`) against its three targets, with a real headless
host of LANES lanes whose agents sleep, and headless Chromium pages driven over
chromedriver's WebDriver HTTP API (standard library only).

  latency   one page open, a MutationObserver stamps Date.now() when a
            `.request[data-id]` appears; the first request of the fresh queue, then
            REQUESTS more, each asked by a `clowder gate` (Claude Code's PreToolUse hook)
            run in lane l(i)'s worktree with the environment its agent has: wall time
            just before the gate starts -> the card in the page's DOM (and -> the next
            animation frame); each approved over POST /api/decide before the next
  cpu       utime+stime (/proc/PID/stat; schedstat in brackets) of the host alone, then
            of the host and the serve process over SECS s with no page open, with PAGES
            (5) browsers open (one chromedriver session, one Chromium, one page each; also
            the browsers' own CPU), and with no page again at the end
  memory    VmRSS of the serve process with 0, 5 and 20 pages open (5 browsers x 4 tabs),
            then with each of the 20 following another lane's output
  probe     what a page is sent while the fleet idles: `state` messages and bytes on
            /api/events over PROBE_SECS s (a raw HTTP client, not a browser)

  python3 benches/web.py                 # LANES=100 REQUESTS=50 SECS=60
  QUICK=1 python3 benches/web.py         # 10 lanes, 10 requests, 10 s windows
  SECS=20 python3 benches/web.py cpu
  VERBOSE=1 python3 benches/web.py       # also every latency, the host's busiest threads

Everything runs in one fleet (host, serve, probe, latency, 5 browsers, 20 pages); the
modes named on the command line (default all) choose what is measured. Builds the release binary unless CLOWDER_BIN names one.
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


def env_int(name, default, small):
    return int(os.environ.get(name, small if quick else default))


LANES = env_int("LANES", 100, 10)
REQUESTS = env_int("REQUESTS", 50, 10)
SECS = env_int("SECS", 60, 10)
PROBE_SECS = env_int("PROBE_SECS", 20, 5)
PAGES = 5
TABS = 4  # per browser, for the 20 pages of the memory figure
CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
CHROMEDRIVER = os.environ.get("CHROMEDRIVER", "/usr/bin/chromedriver")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--disable-dev-shm-usage", "--window-size=1280,800"]
CLK_TCK = os.sysconf("SC_CLK_TCK")

clowder = os.environ.get("CLOWDER_BIN")
if not clowder:
    subprocess.run(["cargo", "build", "--release", "--quiet"], cwd=root, check=True)
    target = os.path.abspath(os.environ.get("CARGO_TARGET_DIR") or os.path.join(root, "target"))
    clowder = os.path.join(target, "release", "clowder")
work = tempfile.mkdtemp(prefix="clowder-web-")
folder = os.path.join(work, "fleet")
lanes_env = os.path.join(work, "lanes-env")
env = dict(os.environ, GIT_CONFIG_NOSYSTEM="1", GIT_CONFIG_GLOBAL="/dev/null")
for name in ("CLOWDER_LANE", "CLOWDER_APPROVALS_DIR", "CLOWDER_GATE_RULES", "CLOWDER_GATE_RULES_SHA256"):
    env.pop(name, None)
started = []  # every Popen of ours, for the clean-up
busiest_threads = None  # VERBOSE: the host's busiest threads in the last window


# ---- /proc ------------------------------------------------------------------

def cpu_ticks(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except (FileNotFoundError, ProcessLookupError):
        return 0
    return int(fields[11]) + int(fields[12])


def status(pid, key):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    return 0


def load():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def descendants(pid):
    """Every live process under `pid` (its children's children too)."""
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


def ours():
    """Live processes started by this run: our work folder in their command line or
    working folder (Chromium's --user-data-dir, the agents, the gates), or this build of
    clowder."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmdline = f.read().replace(b"\0", b" ").decode(errors="replace")
            cwd = os.readlink(f"/proc/{entry}/cwd")
            exe = os.readlink(f"/proc/{entry}/exe")
        except (FileNotFoundError, ProcessLookupError, PermissionError):
            continue
        if work in cmdline or cwd.startswith(work) or exe.removesuffix(" (deleted)") == clowder:
            found.append((int(entry), cmdline.strip()))
    return found


def percentile(values, p):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(p / 100 * (len(ordered) - 1))))]


def spread(values):
    return (f"p50 {statistics.median(values):.0f} ms, p95 {percentile(values, 95):.0f} ms, "
            f"p99 {percentile(values, 99):.0f} ms, max {max(values):.0f} ms ({len(values)})")


# ---- the fleet and the page's server -------------------------------------------

def make_fleet():
    os.makedirs(folder)
    os.makedirs(lanes_env)
    agent = os.path.join(work, "idle.sh")
    with open(agent, "w") as f:
        # What a lane gives its agent (environment, folder), for the gates started as if
        # the agent ran them.
        f.write(f"#!/bin/sh\nenv -0 > {lanes_env}/$CLOWDER_LANE.env\npwd > {lanes_env}/$CLOWDER_LANE.cwd\n"
                "echo '{\"type\":\"system\",\"subtype\":\"init\"}'\nexec sleep 100000\n")
    os.chmod(agent, 0o755)
    git = ["git", "-C", folder]
    subprocess.run(git + ["init", "-q", "-b", "main"], check=True, env=env)
    with open(os.path.join(folder, "PROMPT.md"), "w") as f:
        f.write("go\n")
    with open(os.path.join(folder, "harness.toml"), "w") as f:
        f.write(f'[session]\noutput_prefix = "claude-iteration"\n[agent]\ncommand = "{agent}"\n'
                f'args = []\n[watchdog]\nstale_timeout_mins = 600\n[fleet]\nmax_parallel = {LANES + 10}\n')
    subprocess.run(git + ["add", "-A"], check=True, env=env)
    subprocess.run(git + ["-c", "user.name=bench", "-c", "user.email=b@example.com", "commit", "-qm", "init"],
                   check=True, env=env)
    for i in range(LANES):
        subprocess.run([clowder, "lane", "add", f"l{i + 1}"], cwd=folder, check=True, env=env,
                       stdout=subprocess.DEVNULL)


def start_host():
    log = open(os.path.join(work, "host.log"), "w")
    host = subprocess.Popen([clowder, "--headless"], cwd=folder, env=env, stdout=log, stderr=log,
                            start_new_session=True)
    started.append(host)
    deadline = time.time() + 180
    while True:
        running = 0
        for i in range(LANES):
            try:
                with open(os.path.join(folder, ".clowder", "lanes", f"l{i + 1}", "harness.status")) as f:
                    running += "session_running" in f.read()
            except FileNotFoundError:
                pass
        if running == LANES:
            return host
        if host.poll() is not None or time.time() > deadline:
            sys.exit(f"only {running} of {LANES} lanes run a session")
        time.sleep(0.2)


class Server:
    """`clowder serve --http 127.0.0.1:0 FOLDER`, and a client of its API."""

    def __init__(self):
        log = open(os.path.join(work, "serve.log"), "w")
        self.proc = subprocess.Popen([clowder, "serve", "--http", "127.0.0.1:0", folder], cwd=work,
                                     env=env, stdout=subprocess.PIPE, stderr=log, text=True)
        started.append(self.proc)
        self.url = self.proc.stdout.readline().strip()
        if not self.url.startswith("http://"):
            sys.exit(f"serve --http printed {self.url!r}, not the page's URL")
        parsed = urllib.parse.urlsplit(self.url)
        self.origin = f"{parsed.scheme}://{parsed.netloc}"
        self.port = parsed.port
        # The token comes after `#token=` (a browser sends the fragment nowhere).
        self.token = urllib.parse.parse_qs(parsed.fragment or parsed.query)["token"][0]
        self.csrf = None

    def call(self, path, body=None):
        headers = {"Authorization": f"Bearer {self.token}"}
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers.update({"Content-Type": "application/json", "Origin": self.origin,
                            "X-Clowder-Csrf": self.csrf})
        request = urllib.request.Request(self.origin + path, data=data, headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                return response.status, json.loads(response.read())
        except urllib.error.HTTPError as err:
            return err.code, err.read().decode(errors="replace")

    def wait_for_lanes(self):
        deadline = time.time() + 120
        while True:
            code, state = self.call("/api/state")
            if code == 200:
                self.csrf = state["csrf"]
                lanes = state["view"]["lanes"]
                if len(lanes) == LANES and all(lane["state"] == "running" for lane in lanes):
                    return
            if time.time() > deadline:
                sys.exit(f"/api/state never showed {LANES} running lanes: {code} {str(state)[:300]}")
            time.sleep(0.2)


def probe(server, secs):
    """`state` messages and their bytes on one event stream over `secs` s, after the
    first (which every page gets when it connects)."""
    sock = socket.create_connection(("127.0.0.1", server.port))
    sock.sendall((f"GET /api/events HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\n"
                  f"Authorization: Bearer {server.token}\r\nAccept: text/event-stream\r\n\r\n").encode())
    seen = b""
    deadline = time.time() + 10
    while b"event: state" not in seen and b"event:state" not in seen:
        if time.time() > deadline:
            sys.exit("the event stream sent no first state")
        sock.settimeout(1)
        try:
            seen += sock.recv(65536)
        except socket.timeout:
            pass
    time.sleep(0.5)
    sock.settimeout(0.2)
    try:
        while sock.recv(65536):
            pass
    except socket.timeout:
        pass
    data = b""
    end = time.time() + secs
    while time.time() < end:
        try:
            chunk = sock.recv(65536)
            if not chunk:
                break
            data += chunk
        except socket.timeout:
            pass
    sock.close()
    states = data.count(b"event: state") + data.count(b"event:state")
    outputs = data.count(b"event: output") + data.count(b"event:output")
    print(f"probe, {LANES} idle lanes: one event stream got {states} state and {outputs} output "
          f"messages, {len(data)} bytes, in {secs} s (a state message is about "
          f"{len(json.dumps(server.call('/api/state')[1]))} bytes)", flush=True)


# ---- WebDriver ----------------------------------------------------------------------

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

    def new_session(self):
        profile = tempfile.mkdtemp(prefix="profile-", dir=work)
        caps = {"capabilities": {"alwaysMatch": {"browserName": "chrome", "goog:chromeOptions": {
            "binary": CHROMIUM, "args": CHROMIUM_ARGS + [f"--user-data-dir={profile}"]}}}}
        session = self.call("POST", "/session", caps)["value"]["sessionId"]
        self.sessions.append(session)
        return session

    def run(self, session, script, *args):
        return self.call("POST", f"/session/{session}/execute/sync",
                         {"script": script, "args": list(args)})["value"]

    def open(self, session, url):
        """Opens the page and waits until it has drawn its first state and its event
        stream is up."""
        self.call("POST", f"/session/{session}/url", {"url": url})
        deadline = time.time() + 60
        while not self.run(session, "return document.body.dataset.ready === '1' && "
                                    "document.querySelector('#conn').textContent === 'live' && "
                                    "document.querySelectorAll('#output-title').length > 0"):
            if time.time() > deadline:
                sys.exit("the page never came up live")
            time.sleep(0.1)

    def new_tab(self, session, url):
        handle = self.call("POST", f"/session/{session}/window/new", {"type": "tab"})["value"]["handle"]
        self.call("POST", f"/session/{session}/window", {"handle": handle})
        self.open(session, url)

    def browsers(self):
        return descendants(self.proc.pid)

    def quit(self):
        for session in self.sessions:
            try:
                self.call("DELETE", f"/session/{session}")
            except (OSError, SystemExit):
                pass
        self.sessions = []


OBSERVER = """
window.__shown = [];
const seen = new Set();
const look = () => {
  for (const card of document.querySelectorAll('#requests .request[data-id]')) {
    if (seen.has(card.dataset.id)) continue;
    seen.add(card.dataset.id);
    const entry = {id: card.dataset.id, dom: Date.now(), frame: null,
                   subject: (card.querySelector('.req-subject') || {}).textContent || ''};
    window.__shown.push(entry);
    requestAnimationFrame(() => { entry.frame = Date.now(); });
  }
};
new MutationObserver(look).observe(document.body, {childList: true, subtree: true});
look();
return true;
"""


def lane_env(lane):
    """The environment and folder of lane `lane`'s agent."""
    with open(os.path.join(lanes_env, f"{lane}.env"), "rb") as f:
        pairs = [item.split(b"=", 1) for item in f.read().split(b"\0") if b"=" in item]
    with open(os.path.join(lanes_env, f"{lane}.cwd")) as f:
        cwd = f.read().strip()
    return {k.decode(): v.decode() for k, v in pairs}, cwd


def ask_and_approve(driver, session, server, i):
    """One request asked by a gate in lane l(i), as its agent would: (created -> DOM,
    created -> frame) in ms, once the gate has been approved and the card is gone."""
    lane = f"l{i % LANES + 1}"
    agent_env, cwd = lane_env(lane)
    marker = f"bench-{i:04d}-{os.getpid()}"
    command = f"git push origin {marker}"
    hook = json.dumps({"session_id": "bench", "cwd": cwd, "hook_event_name": "PreToolUse",
                       "tool_name": "Bash", "tool_input": {"command": command},
                       "tool_use_id": f"toolu_{i}"})
    created = time.time() * 1000
    gate = subprocess.Popen([clowder, "gate", "--timeout", "60s"], cwd=cwd, env=agent_env,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    started.append(gate)
    gate.stdin.write(hook.encode())
    gate.stdin.close()
    deadline = time.time() + 30
    entry = None
    while entry is None or entry["frame"] is None:
        shown = driver.run(session, "return window.__shown.filter(e => e.subject.includes(arguments[0]))",
                           marker)
        entry = shown[0] if shown else None
        if time.time() > deadline:
            sys.exit(f"request {i} ({command}) never showed in the page")
        if entry is None or entry["frame"] is None:
            time.sleep(0.02)
    code, answer = server.call("/api/decide", {"id": entry["id"], "decision": "approve", "reason": ""})
    if code != 200:
        sys.exit(f"POST /api/decide {entry['id']}: {code} {answer}")
    gate.wait(timeout=30)
    out = gate.stdout.read()
    if gate.returncode != 0 or b'"allow"' not in out:
        sys.exit(f"{entry['id']}: the gate exited {gate.returncode}: {out!r}")
    # The card leaves the page before the next request is asked.
    while driver.run(session, "return document.querySelectorAll('#requests .request').length"):
        if time.time() > deadline:
            sys.exit(f"request {i} stayed on the page after its approval")
        time.sleep(0.02)
    return entry["dom"] - created, entry["frame"] - created


def latency(driver, session, server):
    """The first request of a folder whose queue has never held one, then REQUESTS more."""
    driver.run(session, OBSERVER)
    first_dom, _ = ask_and_approve(driver, session, server, 0)
    print(f"the first request in a fresh folder: created -> card in the page's DOM {first_dom:.0f} ms",
          flush=True)
    to_dom, to_frame = [], []
    for i in range(1, REQUESTS + 1):
        time.sleep(0.2)
        dom, frame = ask_and_approve(driver, session, server, i)
        to_dom.append(dom)
        to_frame.append(frame)
    if os.environ.get("VERBOSE"):
        print("each, in order (ms): " + " ".join(f"{v:.0f}" for v in to_dom), flush=True)
    print(f"the next {REQUESTS}: request created -> card in the page's DOM: {spread(to_dom)} "
          f"(load {load()})", flush=True)
    print(f"the next {REQUESTS}: request created -> next animation frame:  {spread(to_frame)}", flush=True)
    p99 = percentile(to_dom, 99)
    print(f"target p99 < 300 ms: {'met' if p99 < 300 else 'MISSED'} ({p99:.0f} ms over the {REQUESTS} "
          f"after the first; the first {first_dom:.0f} ms)", flush=True)


def cpu_ns(pid):
    """CPU time of every thread of a process, in ns (schedstat: exact, where the stat
    file counts 10 ms ticks; threads that ended are not counted)."""
    total = 0
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            try:
                with open(f"/proc/{pid}/task/{task}/schedstat") as f:
                    total += int(f.read().split()[0])
            except (FileNotFoundError, ProcessLookupError):
                pass
    except (FileNotFoundError, ProcessLookupError):
        pass
    return total


def threads_ns(pid):
    """{(tid, name): ns} for each thread of a process."""
    found = {}
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            try:
                with open(f"/proc/{pid}/task/{task}/comm") as f:
                    name = f.read().strip()
                with open(f"/proc/{pid}/task/{task}/schedstat") as f:
                    found[(task, name)] = int(f.read().split()[0])
            except (FileNotFoundError, ProcessLookupError):
                pass
    except (FileNotFoundError, ProcessLookupError):
        pass
    return found


def window(pids, secs):
    """CPU of each process over `secs` s, in % of one core: (from utime+stime, from
    schedstat). With VERBOSE, the first process's busiest threads too."""
    before = {pid: (cpu_ticks(pid), cpu_ns(pid)) for pid in pids}
    threads = threads_ns(pids[0])
    time.sleep(secs)
    if os.environ.get("VERBOSE"):
        after = threads_ns(pids[0])
        by_name = {}
        for key, ns in after.items():
            if key in threads:
                by_name[key[1]] = by_name.get(key[1], 0) + ns - threads[key]
        busiest = sorted(by_name.items(), key=lambda item: -item[1])[:6]
        global busiest_threads
        busiest_threads = "  threads of the host: " + ", ".join(f"{name} {ns / 1e7 / secs:.3f}%"
                                                             for name, ns in busiest)
    return {pid: (100 * (cpu_ticks(pid) - before[pid][0]) / CLK_TCK / secs,
                  (cpu_ns(pid) - before[pid][1]) / 1e7 / secs) for pid in pids}


def cpu_window(label, host, server=None, driver=None):
    pids = [host.pid] + ([server.proc.pid] if server else [])
    browsers = driver.browsers() if driver else []
    shares = window(pids + browsers, SECS)
    (host_cpu, host_exact), (serve_cpu, serve_exact) = shares[host.pid], shares.get(
        server.proc.pid if server else None, (0.0, 0.0))
    browser_cpu = sum(shares[pid][0] for pid in browsers)
    what = (f"host {host_cpu:.2f}%" + (f", serve {serve_cpu:.2f}%, together {host_cpu + serve_cpu:.2f}%"
                                       if server else "") + f" of a core over {SECS} s")
    exact = f"host {host_exact:.3f}%" + (f", serve {serve_exact:.3f}%" if server else "")
    print(f"cpu, {label}: {what} [schedstat: {exact}]"
          + (f"; the browsers ({len(browsers)} processes) {browser_cpu:.1f}%" if driver else "")
          + f" (load {load()})", flush=True)
    if busiest_threads:
        print(busiest_threads, flush=True)
    return host_cpu + serve_cpu


def connections(port):
    """Established TCP connections to the server's port."""
    count = 0
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table) as f:
                for line in list(f)[1:]:
                    fields = line.split()
                    if int(fields[1].split(":")[1], 16) == port and fields[3] == "01":
                        count += 1
        except FileNotFoundError:
            pass
    return count


def rss(label, server, pages):
    time.sleep(3)
    kb = status(server.proc.pid, "VmRSS")
    print(f"memory, {pages} pages open: serve RSS {kb / 1024:.1f} MiB, peak "
          f"{status(server.proc.pid, 'VmHWM') / 1024:.1f} MiB, {connections(server.port)} connections "
          f"to it ({label})", flush=True)
    return kb


def follow_each(driver, server):
    """Each of the pages shows another lane's output (l1, l2, ...): one follower each."""
    lane = 0
    for session in driver.sessions:
        for handle in driver.call("GET", f"/session/{session}/window/handles")["value"]:
            lane += 1
            name = f"l{(lane - 1) % LANES + 1}"
            driver.call("POST", f"/session/{session}/window", {"handle": handle})
            driver.run(session, "document.querySelector(`.lane[data-lane='${arguments[0]}']`).click()", name)
            deadline = time.time() + 30
            while not driver.run(session, "return document.querySelector('#output-title').textContent"
                                          ".includes(arguments[0]) && "
                                          "document.querySelector('#conn').textContent === 'live'", name):
                if time.time() > deadline:
                    sys.exit(f"the page never showed lane {name}'s output")
                time.sleep(0.1)


def main(modes):
    print(f"{os.cpu_count()} cores, load {load()}; {LANES} idle lanes, {clowder}", flush=True)
    make_fleet()
    host = start_host()
    if "cpu" in modes:
        time.sleep(3)
        alone = cpu_window("no serve --http", host)
    server = Server()
    server.wait_for_lanes()
    time.sleep(3)
    idle = cpu_window("serve --http, 0 pages", host, server) if "cpu" in modes else None
    rss0 = rss("no page", server, 0)
    if "probe" in modes:
        probe(server, PROBE_SECS)
    driver = Driver()
    first = driver.new_session()
    driver.open(first, server.url)
    if "latency" in modes:
        latency(driver, first, server)
    for _ in range(PAGES - 1):
        driver.open(driver.new_session(), server.url)
    time.sleep(3)
    if "cpu" in modes:
        busy = cpu_window(f"{PAGES} browsers, one page each", host, server, driver)
        more = busy - idle
        print(f"target < 1% of a core more with {PAGES} browsers: {'met' if more < 1 else 'MISSED'} "
              f"({more:+.2f}%; {busy - alone:+.2f}% against the host with no serve --http)", flush=True)
    if "memory" in modes:
        rss5 = rss(f"{PAGES} browsers", server, PAGES)
        for session in driver.sessions:
            for _ in range(TABS - 1):
                driver.new_tab(session, server.url)
        rss20 = rss(f"{PAGES} browsers x {TABS} tabs", server, PAGES * TABS)
        first5 = (rss5 - rss0) / PAGES
        next15 = (rss20 - rss5) / (PAGES * TABS - PAGES)
        per_page = (rss20 - rss0) / (PAGES * TABS)
        print(f"memory per page: {per_page:.0f} kB over 20 pages (the first 5: {first5:.0f} kB each, "
              f"the next 15: {next15:.0f} kB each)", flush=True)
        print(f"target < 1 MB per page: {'met' if per_page < 1024 else 'MISSED'}", flush=True)
        follow_each(driver, server)
        rss_each = rss("each page following another lane", server, PAGES * TABS)
        print(f"memory per page following a lane of its own: {(rss_each - rss0) / (PAGES * TABS):.0f} kB",
              flush=True)
    driver.quit()
    if "cpu" in modes:
        # The host's own cost drifts in its first minutes: a window with no page after
        # the pages, so that the comparison is not only against the earliest window.
        time.sleep(3)
        after = cpu_window("serve --http, 0 pages again (every browser closed)", host, server)
        print(f"{PAGES} browsers against 0 pages after them: {busy - after:+.2f}% "
              f"(target < 1%: {'met' if busy - after < 1 else 'MISSED'})", flush=True)


def stop(signum, _frame):
    sys.exit(128 + signum)  # runs the clean-up below


def clean_up():
    for proc in reversed(started):
        if proc.poll() is not None:
            continue
        if proc.args[:2] == [clowder, "--headless"]:
            proc.send_signal(signal.SIGINT)
            time.sleep(0.3)
            proc.send_signal(signal.SIGINT)
        else:
            proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    # Chromium's processes outlive a killed chromedriver; agents a killed host.
    deadline = time.time() + 10
    while (left := ours()) and time.time() < deadline:
        time.sleep(0.2)
    if left:
        print("left behind, killed: " + "; ".join(f"{pid} {cmd[:80]}" for pid, cmd in left), file=sys.stderr)
        for pid, _cmd in left:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
    shutil.rmtree(work, ignore_errors=True)


def run(modes, measure):
    """Runs `measure` with the modes named on the command line (default all of
    `modes`), cleaning up whatever happens; a bench of the page built on this one
    calls it too."""
    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGHUP, stop)
    chosen = sys.argv[1:] or modes
    for mode in chosen:
        if mode not in modes:
            sys.exit(f"unknown mode {mode} ({', '.join(modes)})")
    try:
        measure(chosen)
    finally:
        clean_up()


if __name__ == "__main__":
    run(["latency", "cpu", "memory", "probe"], main)
