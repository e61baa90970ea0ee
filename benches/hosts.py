#!/usr/bin/env python3
"""One control room attached to many hosts (`clowder attach NAME=DIR ...`), against
simulated hosts (benches/host_sim.rs: the real protocol, no agents), and the cost of a
real headless host's socket. Modes (default: all but `scale`):

  idle      HOSTS hosts x LANES idle lanes: the room's CPU over SECS s, RSS and peak RSS
  busy      the same with BUSY busy lanes spread over the hosts, each sending a snapshot
            RATE times a second
  keys      KEYS presses of j (then k) in the room over HOSTS x LANES with BUSY busy
            lanes: key press -> screen, timed two ways (see BENCHMARKS.md)
  restart   a host SIGKILLed, restarted after DOWN seconds (each of 0.2 0.5 1.5 3.5):
            restart -> its lanes on the room's screen again
  scale     100 hosts x 100 lanes (SCALE_HOSTS, SCALE_BUSY): CPU, RSS, key p99
  real      a real `clowder --headless` with REAL_LANES idle lanes (fake agents that
            sleep): the host's CPU over SECS s with no client, then with one room attached

The room runs in tmux at 200x60. CPU is utime+stime of the clowder process from
/proc/PID/stat; RSS is VmRSS at the end of the window, peak RSS VmHWM.

  python3 benches/hosts.py                       # HOSTS=10 LANES=100 BUSY=32 SECS=30 KEYS=100
  QUICK=1 python3 benches/hosts.py               # 3 hosts x 20 lanes, 4 busy, 5 s, 20 keys
  SECS=10 python3 benches/hosts.py idle keys scale

Builds the release binary and the simulator unless CLOWDER_BIN / HOST_SIM_BIN name them.
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

root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
quick = bool(os.environ.get("QUICK"))


def env_int(name, default, small):
    return int(os.environ.get(name, small if quick else default))


HOSTS = env_int("HOSTS", 10, 3)
LANES = env_int("LANES", 100, 20)
BUSY = env_int("BUSY", 32, 4)
RATE = float(os.environ.get("RATE", "5"))
SECS = env_int("SECS", 30, 5)
KEYS = env_int("KEYS", 100, 20)
SCALE_HOSTS = env_int("SCALE_HOSTS", 100, 10)
SCALE_BUSY = env_int("SCALE_BUSY", 32, 4)
REAL_LANES = env_int("REAL_LANES", 100, 10)
DOWNS = [float(d) for d in os.environ.get("DOWN", "0.2 0.5 1.5 3.5").split()]
CLK_TCK = os.sysconf("SC_CLK_TCK")


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
work = tempfile.mkdtemp(prefix="clowder-hosts-")
socket = f"clowder-hosts-{os.getpid()}"
sims = {}  # host index -> Popen


def tmux(*args):
    return subprocess.run(["tmux", "-L", socket, *args], capture_output=True, text=True)


def screen():
    return tmux("capture-pane", "-p", "-t", "room").stdout


def cpu_ticks(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
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


def percentile(values, p):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(p / 100 * (len(ordered) - 1))))]


def host_dir(index):
    return os.path.join(work, f"h{index + 1}")


def start_sim(index, lanes, busy, marker="sim-agent"):
    folder = host_dir(index)
    os.makedirs(folder, exist_ok=True)
    sock = os.path.join(folder, ".clowder", "host.sock")
    if os.path.exists(sock):
        os.unlink(sock)
    sims[index] = subprocess.Popen([SIM, folder, "--lanes", str(lanes), "--busy", str(busy),
                                    "--rate", str(RATE), "--marker", marker], cwd=folder)
    return sock


def start_sims(hosts, lanes, busy_total):
    socks = [start_sim(i, lanes, busy_total // hosts + (1 if i < busy_total % hosts else 0))
             for i in range(hosts)]
    deadline = time.time() + 30
    while not all(os.path.exists(s) for s in socks):
        if time.time() > deadline:
            sys.exit("the simulated hosts did not start")
        time.sleep(0.05)


def stop_sims():
    for proc in sims.values():
        proc.kill()
        proc.wait()
    sims.clear()


def start_room(hosts, want):
    """The room attached to every host, in tmux (200x60); its PID once `want` shows."""
    targets = " ".join(f"h{i + 1}={host_dir(i)}" for i in range(hosts))
    tmux("-f", "/dev/null", "new-session", "-d", "-s", "room", "-x", "200", "-y", "60",
         "-c", work, f"exec {CLOWDER} attach {targets}")
    pid = int(tmux("list-panes", "-t", "room", "-F", "#{pane_pid}").stdout.split()[0])
    started = time.perf_counter()
    while want not in screen():
        if time.perf_counter() - started > 120:
            print(screen(), file=sys.stderr)
            sys.exit(f"the room never showed {want!r}")
        time.sleep(0.05)
    return pid, time.perf_counter() - started


def stop_room():
    tmux("kill-server")


def window(pid, secs):
    before = cpu_ticks(pid)
    time.sleep(secs)
    ticks = cpu_ticks(pid) - before
    return ticks / CLK_TCK, status(pid, "VmRSS"), status(pid, "VmHWM")


def report(what, pid, secs):
    cpu, rss, hwm = window(pid, secs)
    print(f"{what}: CPU {cpu:.2f} s over {secs} s = {100 * cpu / secs:.2f}% of a core, "
          f"RSS {rss / 1024:.1f} MiB, peak {hwm / 1024:.1f} MiB (load {load()})", flush=True)


class PaneStream:
    """The bytes the room writes to its terminal, as tmux reads them (pipe-pane into a
    FIFO), each read stamped with the time it arrived."""

    def __init__(self):
        self.fifo = tempfile.mktemp(prefix="pane-", suffix=".fifo", dir=work)
        os.mkfifo(self.fifo)
        self.chunks = []
        self.lock = threading.Lock()
        tmux("pipe-pane", "-O", "-t", "room", f"cat > {self.fifo}")
        self.file = open(self.fifo, "rb", buffering=0)
        threading.Thread(target=self.read, daemon=True).start()

    def read(self):
        while True:
            data = self.file.read(65536)
            if not data:
                return
            with self.lock:
                self.chunks.append((time.perf_counter(), data))

    def mark(self):
        with self.lock:
            return len(self.chunks)

    def first_after(self, mark, needle, deadline):
        """When bytes holding `needle` arrived, after chunk number `mark`."""
        seen = b""
        while time.perf_counter() < deadline:
            with self.lock:
                fresh = self.chunks[mark:]
            for stamp, data in fresh:
                seen += data
                if needle in seen:
                    return stamp
            time.sleep(0.0005)
        return None

    def close(self):
        tmux("pipe-pane", "-t", "room")
        self.file.close()
        os.unlink(self.fifo)


def selected():
    """The lane the room's first line names."""
    words = screen().splitlines()[0].split()
    return words[words.index("lane") + 1] if "lane" in words else None


def key_latency(presses, label):
    """Each press of j (then k, back) timed until the room's first line names another
    lane: (a) from send-keys to the frame's bytes on the pane's stream, (b) from
    send-keys to capture-pane showing it; and capture-pane's own cost."""
    first = selected()
    if first is None:
        sys.exit(f"the header names no lane: {screen().splitlines()[0]!r}")
    stream = PaneStream()
    to_bytes, to_capture = [], []
    previous = first
    for i in range(presses):
        key = "j" if i % 2 == 0 else "k"
        mark = stream.mark()
        started = time.perf_counter()
        tmux("send-keys", "-t", "room", key)
        deadline = started + 5
        while (name := selected()) == previous:
            if time.perf_counter() > deadline:
                sys.exit(f"the screen never moved off lane {previous} ({key})")
        to_capture.append(time.perf_counter() - started)
        # Only changed cells are written: the first cell of the header's lane name
        # that differs, found by its cursor move (row 1, that column).
        header = screen().splitlines()[0]
        column = header.index("lane ") + 6 + len(os.path.commonprefix([previous, name]))
        stamp = stream.first_after(mark, f"\x1b[1;{column}H".encode(), started + 5)
        if stamp is not None:
            to_bytes.append(stamp - started)
        previous = name
        time.sleep(0.05)
    stream.close()
    noop = []
    for _ in range(50):
        started = time.perf_counter()
        screen()
        noop.append(time.perf_counter() - started)
    for name, values in (("send-keys -> frame bytes (pipe-pane)", to_bytes),
                         ("send-keys -> capture-pane shows it", to_capture),
                         ("one capture-pane (no change)", noop)):
        print(f"{label}: {name}: median {statistics.median(values) * 1000:.1f} ms, "
              f"p99 {percentile(values, 99) * 1000:.1f} ms, max {max(values) * 1000:.1f} ms "
              f"({len(values)})", flush=True)
    print(f"{label}: load {load()}", flush=True)


def settled(pid, started):
    """Seconds from `started` until the room has taken in what the hosts sent at
    start: its CPU over half a second falls under 10 % of a core."""
    while True:
        before = cpu_ticks(pid)
        time.sleep(0.5)
        if (cpu_ticks(pid) - before) / CLK_TCK < 0.05:
            return time.perf_counter() - started


def attached(hosts, lanes, busy, measure):
    start_sims(hosts, lanes, busy)
    try:
        pid, took = start_room(hosts, f"Lanes {hosts * lanes} ")
        started = time.perf_counter() - took
        print(f"{hosts} hosts x {lanes} lanes, {busy} busy: the room showed every lane "
              f"{took:.2f} s after it started, and had taken in every lane's state "
              f"{settled(pid, started):.2f} s after (CPU under 10 % over 0.5 s)", flush=True)
        time.sleep(2)
        measure(pid)
    finally:
        stop_room()
        stop_sims()


def mode_idle():
    attached(HOSTS, LANES, 0, lambda pid: report(f"room, {HOSTS} hosts x {LANES} idle lanes", pid, SECS))


def mode_busy():
    attached(HOSTS, LANES, BUSY, lambda pid: report(
        f"room, {HOSTS} hosts x {LANES} lanes, {BUSY} busy at {RATE:g}/s", pid, SECS))


def mode_keys():
    attached(HOSTS, LANES, BUSY, lambda pid: key_latency(KEYS, f"keys, {HOSTS}x{LANES}, {BUSY} busy"))


def mode_scale():
    def measure(pid):
        report(f"room, {SCALE_HOSTS} hosts x {LANES} lanes, {SCALE_BUSY} busy", pid, SECS)
        key_latency(KEYS, f"keys, {SCALE_HOSTS}x{LANES}, {SCALE_BUSY} busy")
    attached(SCALE_HOSTS, LANES, SCALE_BUSY, measure)


def mode_restart():
    """The host of the selected lane killed and restarted with another agent command,
    which the room's header then shows."""
    def measure(_pid):
        name = selected() or ""
        if not name.startswith("h") or "/" not in name:
            sys.exit(f"the header names no lane of a host: {name!r}")
        victim = int(name[1:name.index("/")]) - 1
        for round_, down in enumerate(DOWNS):
            sims[victim].kill()
            sims[victim].wait()
            time.sleep(down)
            marker = f"restarted-{round_}"
            restarted = time.perf_counter()
            start_sim(victim, LANES, 0, marker)
            while marker not in screen():
                if time.perf_counter() - restarted > 60:
                    sys.exit(f"h{victim + 1} not back on screen 60 s after its restart ({down} s down)")
                time.sleep(0.02)
            back = time.perf_counter() - restarted
            print(f"restart: host down {down:.1f} s, restart -> its lanes on screen {back:.2f} s, "
                  f"kill -> on screen {back + down:.2f} s", flush=True)
            time.sleep(1)
    targets_marker = "sim-agent"
    start_sims(HOSTS, LANES, 0)
    try:
        start_room(HOSTS, f"Lanes {HOSTS * LANES} ")
        # The selected lane's agent command shows in the header.
        if targets_marker not in screen():
            sys.exit("the selected lane's agent command is not on screen")
        measure(None)
    finally:
        stop_room()
        stop_sims()


def mode_real():
    """A real headless host with REAL_LANES lanes whose agent sleeps."""
    folder = os.path.join(work, "real")
    os.makedirs(folder)
    agent = os.path.join(work, "idle.sh")
    with open(agent, "w") as f:
        f.write("#!/bin/sh\necho '{\"type\":\"system\",\"subtype\":\"init\"}'\nexec sleep 100000\n")
    os.chmod(agent, 0o755)
    git = ["git", "-C", folder]
    subprocess.run(git + ["init", "-q", "-b", "main"], check=True)
    with open(os.path.join(folder, "PROMPT.md"), "w") as f:
        f.write("go\n")
    with open(os.path.join(folder, "harness.toml"), "w") as f:
        f.write(f'[session]\noutput_prefix = "claude-iteration"\n[agent]\ncommand = "{agent}"\n'
                f'args = []\n[watchdog]\nstale_timeout_mins = 600\n[fleet]\nmax_parallel = {REAL_LANES + 10}\n')
    subprocess.run(git + ["add", "-A"], check=True)
    subprocess.run(git + ["-c", "user.name=bench", "-c", "user.email=b@example.com", "commit", "-qm", "init"],
                   check=True)
    for i in range(REAL_LANES):
        subprocess.run([CLOWDER, "lane", "add", f"l{i + 1}"], cwd=folder, check=True, stdout=subprocess.DEVNULL)
    log = open(os.path.join(work, "real.log"), "w")
    host = subprocess.Popen([CLOWDER, "--headless"], cwd=folder, stdout=log, stderr=log)
    try:
        deadline = time.time() + 120
        while True:
            running = 0
            for i in range(REAL_LANES):
                try:
                    with open(os.path.join(folder, ".clowder", "lanes", f"l{i + 1}", "harness.status")) as f:
                        running += "session_running" in f.read()
                except FileNotFoundError:
                    pass
            if running == REAL_LANES:
                break
            if time.time() > deadline:
                sys.exit(f"only {running} of {REAL_LANES} lanes run a session")
            time.sleep(0.2)
        time.sleep(2)
        report(f"real host, {REAL_LANES} idle lanes, no client", host.pid, SECS)
        tmux("-f", "/dev/null", "new-session", "-d", "-s", "room", "-x", "200", "-y", "60",
             "-c", work, f"exec {CLOWDER} attach {folder}")
        deadline = time.time() + 60
        while f"Lanes {REAL_LANES} " not in screen():
            if time.time() > deadline:
                sys.exit("the attached room never showed every lane")
            time.sleep(0.05)
        time.sleep(2)
        room = int(tmux("list-panes", "-t", "room", "-F", "#{pane_pid}").stdout.split()[0])
        before = cpu_ticks(room)
        report(f"real host, {REAL_LANES} idle lanes, one room attached", host.pid, SECS)
        ticks = cpu_ticks(room) - before
        print(f"  (the attached room itself: {100 * ticks / CLK_TCK / SECS:.2f}% of a core)", flush=True)
    finally:
        stop_room()
        host.send_signal(signal.SIGINT)
        time.sleep(0.3)
        host.send_signal(signal.SIGINT)
        try:
            host.wait(timeout=20)
        except subprocess.TimeoutExpired:
            host.kill()
            host.wait()


MODES = {"idle": mode_idle, "busy": mode_busy, "keys": mode_keys, "restart": mode_restart,
         "scale": mode_scale, "real": mode_real}


def main():
    modes = sys.argv[1:] or ["idle", "busy", "keys", "restart", "real"]
    for mode in modes:
        if mode not in MODES:
            sys.exit(f"unknown mode {mode} ({', '.join(MODES)})")
    print(f"{os.cpu_count()} cores, load {load()}", flush=True)
    for mode in modes:
        MODES[mode]()


def stop(signum, _frame):
    sys.exit(128 + signum)  # runs the clean-up below


signal.signal(signal.SIGTERM, stop)
signal.signal(signal.SIGHUP, stop)
try:
    main()
finally:
    stop_room()
    stop_sims()
    try:
        os.unlink(os.path.join(os.environ.get("TMUX_TMPDIR") or "/tmp", f"tmux-{os.getuid()}", socket))
    except FileNotFoundError:
        pass
    shutil.rmtree(work, ignore_errors=True)
