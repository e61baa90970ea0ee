#!/usr/bin/env python3
"""The web page's actions against their targets, in headless Chromium at a phone's size
(390x844), over a real headless host of LANES lanes and `clowder serve --http`; the
fleet, the server and the WebDriver client are benches/web.py's.

  press     lane l1 selected; PRESSES times, Pause (then Resume) is clicked in the
            page: Date.now() at the click -> the page shows the lane paused (its
            Resume button is in the DOM), through POST /api/act, the host, the lane's
            loop, its snapshot and the page's event stream. Target: p99 < 300 ms.
  diff      lane l1's branch gets a commit of a 5,000-line file; the Work tab is
            clicked: the click -> the patch's lines in the DOM (and -> the next
            animation frame), REPEAT times, the tab left and opened again between.
            Target: < 500 ms.
  soak      the page left open over the LANES lanes, whose agents write a line every
            2 s, for MINUTES minutes: each minute, the server's VmRSS and the page's
            JS heap after a garbage collection, and its DOM nodes. Target: both flat.

  python3 benches/web_actions.py press diff         # LANES=100 PRESSES=100 REPEAT=20
  MINUTES=60 python3 benches/web_actions.py soak    # the hour of the issue
  QUICK=1 python3 benches/web_actions.py            # 10 lanes, 20 presses, 5 repeats, 3 minutes
"""
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import web  # noqa: E402  (the fleet, the server, chromedriver and the clean-up)

PRESSES = web.env_int("PRESSES", 100, 20)
REPEAT = web.env_int("REPEAT", 20, 5)
MINUTES = web.env_int("MINUTES", 60, 3)
PHONE = ["--window-size=390,844"]

# The agent of every lane: it says it started, then writes a line every 2 s (the soak's
# churn) in a session that does not end on its own.
AGENT = """#!/bin/sh
echo '{"type":"system","subtype":"init"}'
i=0
while :; do
  i=$((i + 1))
  echo "{\\"type\\":\\"assistant\\",\\"message\\":{\\"content\\":[{\\"type\\":\\"text\\",\\"text\\":\\"step $i\\"}]}}"
  sleep 2
done
"""


def make_fleet():
    web.make_fleet()
    with open(os.path.join(web.work, "idle.sh"), "w") as f:
        f.write(AGENT)


def phone(driver):
    """A Chromium at a phone's size, with the garbage collector callable."""
    args = web.CHROMIUM_ARGS
    web.CHROMIUM_ARGS = [a for a in args if not a.startswith("--window-size")] + PHONE + [
        "--js-flags=--expose-gc", "--enable-precise-memory-info"]
    try:
        return driver.new_session()
    finally:
        web.CHROMIUM_ARGS = args


def select(driver, session, lane):
    driver.run(session, """
        const row = [...document.querySelectorAll('#lanes .lane')].find(r => r.dataset.lane === arguments[0]);
        if (row) row.click();
        return !!row;""", lane)
    wait(driver, session, "return document.querySelector('#output-title').textContent === 'Lane ' + arguments[0]",
         f"lane {lane} selected", lane)


def wait(driver, session, script, what, *args, secs=30):
    deadline = time.time() + secs
    while not driver.run(session, script, *args):
        if time.time() > deadline:
            sys.exit(f"the page never showed {what}")
        time.sleep(0.01)


# Clicks an action's button (twice when it asks to confirm) and stamps the click; an
# observer stamps when the button of the other state appears.
PRESS = """
const [action, then] = arguments;
window.__shown = null;
const look = () => {
  if (window.__shown === null && document.querySelector(`#lane-actions button[data-action="${then}"]`)) {
    window.__shown = Date.now();
  }
};
const observer = new MutationObserver(look);
observer.observe(document.body, {childList: true, subtree: true, attributes: true});
window.__observer = observer;
const button = document.querySelector(`#lane-actions button[data-action="${action}"]`);
if (!button) return null;
window.__pressed = Date.now();
button.click();
return window.__pressed;
"""


def press(driver, session):
    select(driver, session, "l1")
    times = []
    for i in range(PRESSES):
        action, then = ("pause", "resume") if i % 2 == 0 else ("resume", "pause")
        wait(driver, session, f"return !!document.querySelector('#lane-actions button[data-action=\"{action}\"]')"
                              " && !document.querySelector('#lane-actions button[disabled]')",
             f"the {action} button")
        if driver.run(session, PRESS, action, then) is None:
            sys.exit(f"no {action} button on lane l1")
        wait(driver, session, "return window.__shown !== null", f"lane l1 after {action}")
        shown, pressed = driver.run(session, "window.__observer.disconnect(); return [window.__shown, window.__pressed]")
        times.append(shown - pressed)
        time.sleep(0.1)
    print(f"press -> the host acts -> the page shows it ({PRESSES} presses, pause and resume): "
          f"{web.spread(times)} (load {web.load()})", flush=True)
    p99 = web.percentile(times, 99)
    print(f"target p99 < 300 ms: {'met' if p99 < 300 else 'MISSED'} ({p99:.0f} ms)", flush=True)


def commit_five_thousand_lines():
    worktree = os.path.join(web.folder, ".clowder", "worktrees", "l1")
    with open(os.path.join(worktree, "big.txt"), "w") as f:
        f.writelines(f"line {n}: the quick brown fox jumps over the lazy dog\n" for n in range(5000))
    git = ["git", "-C", worktree, "-c", "user.name=bench", "-c", "user.email=b@example.com"]
    subprocess.run(git + ["add", "big.txt"], check=True, env=web.env)
    subprocess.run(git + ["commit", "-qm", "five thousand lines"], check=True, env=web.env)


OPEN_WORK = """
window.__ready = null; window.__frame = null;
const done = () => {
  const lines = document.querySelectorAll('#diff .dl');
  if (window.__ready === null && lines.length > 0) {
    window.__ready = Date.now();
    requestAnimationFrame(() => { window.__frame = Date.now(); });
  }
};
const observer = new MutationObserver(done);
observer.observe(document.body, {childList: true, subtree: true});
window.__observer = observer;
window.__clicked = Date.now();
document.querySelector('#tab-work').click();
return window.__clicked;
"""


def diff(driver, session):
    commit_five_thousand_lines()
    select(driver, session, "l1")
    ready, frames = [], []
    for _ in range(REPEAT):
        # Each time as a reader comes to it: from another lane, so that the
        # work is read from the host and drawn afresh.
        driver.run(session, "document.querySelector('#tab-output').click(); return true")
        select(driver, session, "l2")
        select(driver, session, "l1")
        if driver.run(session, "return document.querySelectorAll('#diff .dl').length"):
            sys.exit("the diff was still drawn before Work was clicked")
        time.sleep(0.2)
        driver.run(session, OPEN_WORK)
        wait(driver, session, "return window.__frame !== null", "the 5,000-line diff")
        clicked, shown, frame = driver.run(
            session, "window.__observer.disconnect(); return [window.__clicked, window.__ready, window.__frame]")
        if os.environ.get("VERBOSE"):
            print("  fetch / draw (ms): " + str(driver.run(
                session, "const p = document.querySelector('#pane-work'); return [p.dataset.fetchMs, p.dataset.renderMs]")),
                flush=True)
        ready.append(shown - clicked)
        frames.append(frame - clicked)
    if os.environ.get("VERBOSE"):
        print("each, in order (ms): " + " ".join(f"{v:.0f}" for v in frames), flush=True)
        print("fetch / draw of the last (the page's own figures): " + str(driver.run(
            session, "const p = document.querySelector('#pane-work'); return [p.dataset.fetchMs, p.dataset.renderMs]")),
            flush=True)
    overflow = driver.run(session, "return document.documentElement.scrollWidth - window.innerWidth")
    print(f"a 5,000-line diff at 390x844, Work clicked -> its lines in the DOM: {web.spread(ready)}", flush=True)
    print(f"                                  Work clicked -> next frame: {web.spread(frames)}; "
          f"page wider than the screen by {overflow} px", flush=True)
    worst = max(frames)
    print(f"target < 500 ms: {'met' if worst < 500 else 'MISSED'} (slowest {worst:.0f} ms to a frame)", flush=True)


MEMORY = """
if (window.gc) window.gc();
return [performance.memory.usedJSHeapSize, document.getElementsByTagName('*').length];
"""


def soak(driver, session, server):
    select(driver, session, "l1")
    rows = []
    for minute in range(MINUTES + 1):
        if minute:
            time.sleep(60)
        heap, nodes = driver.run(session, MEMORY)
        rss = web.status(server.proc.pid, "VmRSS")
        live = driver.run(session, "return document.querySelector('#conn').textContent")
        rows.append((minute, rss, heap, nodes))
        print(f"minute {minute:3d}: server VmRSS {rss / 1024:6.1f} MB, page JS heap {heap / 1e6:6.2f} MB, "
              f"DOM nodes {nodes}, feed {live!r}", flush=True)
    first, last = rows[min(5, len(rows) - 1)], rows[-1]
    print(f"over {MINUTES} min with {web.LANES} lanes (from minute {first[0]}): server VmRSS "
          f"{first[1] / 1024:.1f} -> {last[1] / 1024:.1f} MB, page JS heap {first[2] / 1e6:.2f} -> "
          f"{last[2] / 1e6:.2f} MB, DOM nodes {first[3]} -> {last[3]}", flush=True)


def main(modes):
    make_fleet()
    web.start_host()
    server = web.Server()
    server.wait_for_lanes()
    driver = web.Driver()
    session = phone(driver)
    driver.open(session, server.url)
    if "press" in modes:
        press(driver, session)
    if "diff" in modes:
        diff(driver, session)
    if "soak" in modes:
        soak(driver, session, server)
    driver.quit()


if __name__ == "__main__":
    web.run(["press", "diff", "soak"], main)
