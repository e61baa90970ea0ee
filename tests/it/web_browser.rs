//! The web inbox (`clowder serve --http`) in a real headless Chromium driven
//! over WebDriver (tests/common/browser.rs), and its refusals through real
//! HTTP: a headless fleet of fake agents (`tests/agents/web-agent.sh`), the
//! real binary serving it, and the page used as a person would. Needs
//! Debian's `chromium` and `chromium-driver` (`.ci/run` installs them).

#[path = "common/browser.rs"]
pub mod browser;
use crate::common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Child;
use std::time::Duration;

use browser::{Browser, DESKTOP, PHONE};
use clowder::fleet::link::LaneReport;
use common::git::clowder_command;
use common::host::{Asking, HostFleet, stop_host};
use common::{DEADLINE, clowder_bin, send_signal, wait_until};
use serde_json::Value;

/// `clowder serve --http 127.0.0.1:0` in a folder, ended (SIGTERM) on drop.
pub struct Served {
    child: Child,
    /// The page's address with its token, as printed.
    pub url: String,
    log: PathBuf,
}

impl Served {
    /// Starts it in `folder`, its stderr in `log`, and reads the URL it prints.
    pub fn start(folder: &Path, log: PathBuf) -> Served {
        let stderr = std::fs::File::create(&log).expect("create the serve log");
        let mut child = clowder_command(folder, &["serve", "--http", "127.0.0.1:0"])
            .stderr(stderr)
            .spawn()
            .expect("start clowder serve");
        let stdout = child.stdout.take().expect("piped stdout");
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut lines = BufReader::new(stdout).lines();
            let _ = tx.send(lines.next());
            // Nothing else is printed; reading on keeps a stray line from blocking it.
            for _ in lines {}
        });
        let first = rx.recv_timeout(DEADLINE);
        let url = match first {
            Ok(Some(Ok(line))) => line,
            other => panic!(
                "clowder serve printed no URL ({other:?}); stderr:\n{}",
                std::fs::read_to_string(&log).unwrap_or_default()
            ),
        };
        Served { child, url, log }
    }

    /// `127.0.0.1:PORT`.
    fn addr(&self) -> &str {
        let rest = self.url.strip_prefix("http://").expect("an http:// URL");
        rest.split('/').next().expect("a host")
    }

    /// The token after `#token=` (or an older `?token=`).
    fn token(&self) -> &str {
        self.url
            .split_once("#token=")
            .or_else(|| self.url.split_once("?token="))
            .map(|(_, token)| token)
            .expect("a token in the URL")
    }

    pub fn stderr(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Served {
    /// SIGTERM, as a service manager would stop it; its exit status.
    pub fn stop(mut self) -> std::process::ExitStatus {
        send_signal(self.child.id(), libc::SIGTERM);
        let ended = wait_until(DEADLINE, || matches!(self.child.try_wait(), Ok(Some(_))));
        assert!(
            ended,
            "clowder serve did not end on SIGTERM:\n{}",
            self.stderr()
        );
        self.child.wait().expect("wait for clowder serve")
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            send_signal(self.child.id(), libc::SIGTERM);
        }
        if !wait_until(DEADLINE, || matches!(self.child.try_wait(), Ok(Some(_)))) {
            let _ = self.child.kill();
        }
        let _ = self.child.wait();
    }
}

/// A repository with lanes of the web fake agent, its headless host, and
/// `clowder serve --http` over it.
pub struct WebFleet {
    pub base: HostFleet,
    host: Option<Child>,
    pub served: Option<Served>,
}

impl WebFleet {
    /// Lanes `lanes`; those in `gate_lanes` ask through the gate once told
    /// ([`WebFleet::go`]); `hostile` prints HTML and terminal escapes.
    pub fn start(lanes: &[&str], gate_lanes: &[&str], hostile: &str) -> WebFleet {
        WebFleet::start_with(lanes, gate_lanes, hostile, "", "")
    }

    /// As [`WebFleet::start`], with `commit_lanes` (`LANE:N`, space
    /// separated) whose agent commits N lines and ends, and `extra` TOML in
    /// harness.toml.
    pub fn start_with(
        lanes: &[&str],
        gate_lanes: &[&str],
        hostile: &str,
        commit_lanes: &str,
        extra: &str,
    ) -> WebFleet {
        let base = HostFleet::new(lanes, 1);
        let agent = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/agents/web-agent.sh");
        let config = format!(
            "[agent]\ncommand = \"sh\"\nargs = [{:?}]\n\n[session]\nmax_iterations = 1\n\n[watchdog]\nmin_output_bytes = 1\n\n{extra}",
            agent.display().to_string()
        );
        std::fs::write(base.root().join("harness.toml"), config).expect("write harness.toml");
        let log = |name: &str| std::fs::File::create(base.out_dir().join(name)).expect("log");
        let host = clowder_command(base.root(), &["--headless"])
            .env("WEB_AGENT_OUT", base.out_dir())
            .env("WEB_AGENT_GATE_LANES", gate_lanes.join(" "))
            .env("WEB_AGENT_HOSTILE_LANE", hostile)
            .env("WEB_AGENT_COMMIT_LANES", commit_lanes)
            .env("WEB_AGENT_SECS", "120")
            .env("WEB_AGENT_CLOWDER", clowder_bin())
            .stdout(log("host.out"))
            .stderr(log("host.err"))
            .spawn()
            .expect("start the host");
        let socket = base.socket();
        let up = wait_until(DEADLINE, || {
            std::os::unix::net::UnixStream::connect(&socket).is_ok()
        });
        assert!(up, "the host never served {}", socket.display());
        let served = Served::start(base.root(), base.out_dir().join("serve.err"));
        WebFleet {
            base,
            host: Some(host),
            served: Some(served),
        }
    }

    pub fn served(&self) -> &Served {
        self.served.as_ref().expect("served until drop")
    }

    /// Lets lane `lane`'s agent ask through the gate.
    fn go(&self, lane: &str) {
        std::fs::write(self.base.out_dir().join(format!("go-{lane}")), "").expect("write go");
    }

    /// The gate's answer in `lane` once the gate has exited: its decision,
    /// its reason and its exit status.
    fn gate_answer(&self, lane: &str) -> (String, String, String) {
        let exited = wait_until(DEADLINE, || {
            !self.base.out(&format!("gate-exit-{lane}")).is_empty()
        });
        assert!(
            exited,
            "the gate in {lane} never exited; serve said:\n{}",
            self.served().stderr()
        );
        let answer: Value = serde_json::from_str(&self.base.answer(lane))
            .unwrap_or_else(|e| panic!("the gate's answer in {lane} is not JSON: {e}"));
        let out = &answer["hookSpecificOutput"];
        let text = |key: &str| out[key].as_str().unwrap_or_default().to_string();
        let status = self
            .base
            .out(&format!("gate-exit-{lane}"))
            .trim()
            .to_string();
        (
            text("permissionDecision"),
            text("permissionDecisionReason"),
            status,
        )
    }

    /// A browser of `size` on the page, its first state drawn.
    pub fn open(&self, size: (u32, u32)) -> Browser {
        let browser = Browser::start(size);
        browser.goto(&self.served().url);
        browser.wait_for("body[data-ready='1']");
        browser
    }
}

impl Drop for WebFleet {
    fn drop(&mut self) {
        self.served.take();
        if let Some(host) = self.host.take() {
            stop_host(self.base.root(), host);
        }
    }
}

/// Waits for lane `lane`'s request card; its `data-id`.
fn request_of(browser: &Browser, lane: &str) -> String {
    let find = format!(
        "const card = [...document.querySelectorAll('#requests .request')]
             .find(c => c.querySelector('.req-lane').textContent === {lane:?});"
    );
    browser.wait_js(
        &format!("{lane}'s request"),
        &format!("{find} return !!card;"),
    );
    let id = browser.execute(&format!("{find} return card.dataset.id;"));
    id.as_str().expect("a request id").to_string()
}

/// 1, 2, 3: a phone opens the printed URL: the three lanes show; a request
/// made after the page loaded appears in it without a reload, and Approve
/// lets the waiting `clowder gate` exit with allow.
#[test]
fn a_phone_sees_the_lanes_and_approves_a_request_that_came_after_it_loaded() {
    let fleet = WebFleet::start(&["alpha", "beta", "gamma"], &["beta"], "");
    let browser = fleet.open(PHONE);
    for lane in ["alpha", "beta", "gamma"] {
        browser.wait_for(&format!("#lanes .lane[data-lane='{lane}'] .state"));
    }
    assert_eq!(browser.count("#lanes .lane"), 3, "{}", browser.page_text());
    assert_eq!(browser.count("#requests .request"), 0, "nothing asked yet");
    browser.execute("window.sameDocument = true;");

    fleet.go("beta");
    let id = request_of(&browser, "beta");
    let card = format!("#requests .request[data-id='{id}']");
    let subject = browser.text(&format!("{card} .req-subject"));
    assert_eq!(subject, "git push origin clowder/beta");
    assert_eq!(browser.text(&format!("{card} .req-tool")), "Bash");
    assert_eq!(
        browser.execute("return window.sameDocument === true;"),
        true,
        "the request came in without a reload"
    );

    browser.click(&format!("{card} button.approve"));
    let (decision, _, status) = fleet.gate_answer("beta");
    assert_eq!((decision.as_str(), status.as_str()), ("allow", "0"));
    browser.wait_js(
        "the card gone",
        &format!("return document.querySelector({card:?}) === null;"),
    );
    let flash = browser.text("#flash");
    assert!(!flash.is_empty(), "the decision is confirmed");
}

/// The keyboard alone: `j` and `k` move between two requests, `a`
/// approves the one selected, and the other one keeps waiting.
#[test]
fn the_keys_move_between_requests_and_approve_the_selected_one() {
    let fleet = WebFleet::start(&["alpha", "beta"], &["alpha", "beta"], "");
    let browser = fleet.open(DESKTOP);
    fleet.go("alpha");
    let first = request_of(&browser, "alpha");
    fleet.go("beta");
    let second = request_of(&browser, "beta");
    let selected = "return document.querySelector('#requests .request.selected').dataset.id;";
    assert_eq!(
        browser.execute(selected),
        first.as_str(),
        "the oldest is selected"
    );
    browser.keys("j");
    assert_eq!(browser.execute(selected), second.as_str());
    browser.keys("k");
    assert_eq!(browser.execute(selected), first.as_str());
    browser.keys("j");
    browser.keys("a");
    let (decision, _, status) = fleet.gate_answer("beta");
    assert_eq!((decision.as_str(), status.as_str()), ("allow", "0"));
    browser.wait_js(
        "beta's card gone, alpha's still there",
        &format!(
            "return document.querySelector('[data-id=\"{second}\"]') === null
                && document.querySelector('[data-id=\"{first}\"]') !== null;"
        ),
    );
    assert!(
        fleet.base.out("gate-exit-alpha").is_empty(),
        "alpha still waits"
    );
}

/// 4, 5 on a desktop: a rejection with a reason (by keyboard: `r`, the
/// reason, Enter) reaches the agent; a paused lane shows paused without a
/// reload; Tell leaves a note for the selected lane.
#[test]
fn a_desktop_rejects_by_keyboard_sees_a_lane_paused_and_tells_a_lane() {
    let fleet = WebFleet::start(&["alpha", "beta", "gamma"], &["beta"], "");
    let browser = fleet.open(DESKTOP);
    fleet.go("beta");
    let id = request_of(&browser, "beta");
    browser.keys("r");
    browser.wait_js(
        "the reason field focused",
        "return document.activeElement.classList.contains('reason');",
    );
    browser.keys("not now: the CI is red\u{E007}");
    let (decision, reason, status) = fleet.gate_answer("beta");
    assert_eq!(decision, "deny", "request {id}");
    assert!(
        reason.contains("not now: the CI is red"),
        "the agent is told why: {reason:?}"
    );
    assert_eq!(status, "0");
    browser.wait_js(
        "the card gone",
        "return document.querySelector('#requests .request') === null;",
    );

    browser.wait_for("#lanes .lane[data-lane='alpha'] .state");
    common::git::clowder_in(fleet.base.root(), &["lane", "pause", "alpha"]);
    browser.wait_text("#lanes .lane[data-lane='alpha'] .state", |t| t == "paused");

    pick_lane(&browser, "alpha");
    browser.send_keys("#tell-text", "keep the diff small");
    browser.click("#tell-send");
    browser.wait_text("#flash", |t| t.contains("left for the next session"));
    let lane_files = fleet.base.root().join(".clowder/lanes/alpha");
    assert!(
        wait_until(DEADLINE, || holds_text(&lane_files, "keep the diff small")),
        "the note is left for alpha's next session; the page says {:?}",
        browser.try_text("#flash")
    );
}

/// Whether a file under `dir` holds `text`.
fn holds_text(dir: &Path, text: &str) -> bool {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return false;
    };
    entries.filter_map(Result::ok).any(|entry| {
        let path = entry.path();
        if path.is_dir() {
            holds_text(&path, text)
        } else {
            std::fs::read_to_string(&path).is_ok_and(|content| content.contains(text))
        }
    })
}

/// A command that hides what it does in bidi and zero-width characters
/// shows them escaped, not reordered; a 100,028-character one says, under
/// its start, its length and how it ends.
#[test]
fn a_card_shows_invisible_characters_escaped_and_a_long_commands_end() {
    let fleet = WebFleet::start(&["alpha"], &[], "");
    let browser = fleet.open(PHONE);
    let root = fleet.base.root();
    let long = format!(
        "make deploy ARGS={} && ./release.sh --publish",
        "A".repeat(99_985)
    );
    let _asking = [
        Asking::start(root, "echo \u{202e}; ~ fr- mr\u{202c}"),
        Asking::start(root, &long),
    ];
    browser.wait_js(
        "two cards",
        "return document.querySelectorAll('#requests .request').length === 2;",
    );
    let subjects = browser.texts("#requests .req-subject");
    assert!(
        subjects.contains(&r"echo \u{202e}; ~ fr- mr\u{202c}".to_string()),
        "{:?}",
        subjects
            .iter()
            .map(|s| s.chars().take(60).collect::<String>())
            .collect::<Vec<_>>()
    );
    let ends = browser.texts("#requests .req-end");
    let said = ends
        .iter()
        .find(|end| !end.is_empty())
        .expect("a long command's end");
    assert!(
        said.starts_with("100,028 characters; it ends: …")
            && said.ends_with("AAA && ./release.sh --publish"),
        "{said}"
    );
    let shown = "return [...document.querySelectorAll('#requests .req-end')]
        .filter(e => e.offsetHeight > 0).length;";
    assert_eq!(
        browser.execute(shown),
        1,
        "only the long command's end shows"
    );
}

/// A request decided elsewhere (`clowder approve` in a terminal) leaves the
/// page without a reload, and a late decision from the page is refused with
/// 409, saying it was decided.
#[test]
fn a_request_approved_in_a_terminal_leaves_the_page_and_a_late_decision_is_refused() {
    let fleet = WebFleet::start(&["alpha"], &["alpha"], "");
    let browser = fleet.open(PHONE);
    fleet.go("alpha");
    let id = request_of(&browser, "alpha");
    let root = fleet.base.root();
    let queue = root.join(".clowder/approvals");
    common::git::clowder_in(root, &["approve", &id, "--dir", &queue.to_string_lossy()]);
    let (decision, _, _) = fleet.gate_answer("alpha");
    assert_eq!(decision, "allow");
    browser.wait_js(
        "the card gone",
        "return document.querySelector('#requests .request') === null;",
    );

    let served = fleet.served();
    let addr = served.addr();
    let auth = format!("Authorization: Bearer {}", served.token());
    let state = http(addr, "GET", "/api/state", std::slice::from_ref(&auth), "");
    let state: Value = serde_json::from_str(&state.body).expect("the state is JSON");
    let headers = [
        auth,
        "Content-Type: application/json".to_string(),
        format!("Origin: http://{addr}"),
        format!("X-Clowder-Csrf: {}", state["csrf"].as_str().expect("csrf")),
    ];
    let body = format!(r#"{{"id": {id:?}, "decision": "reject", "reason": "too late"}}"#);
    let late = http(addr, "POST", "/api/decide", &headers, &body);
    assert_eq!(late.status, 409, "{}", late.body);
    assert!(late.body.contains("decided"), "{}", late.body);
}

/// 6: a lane whose agent prints HTML: the page shows it as text, makes no
/// element of it and runs none of it.
#[test]
fn agent_output_with_html_shows_as_text_and_runs_nothing() {
    let fleet = WebFleet::start(&["alpha", "gamma"], &[], "gamma");
    let browser = fleet.open(PHONE);
    pick_lane(&browser, "gamma");
    let hostile = "<script>alert(1)</script><img src=x onerror=\"alert(2)\">";
    let lines = browser.wait_texts("#output .out-line", |t| t.contains("tick 1"));
    assert!(lines.lines().any(|line| line == hostile), "{lines}");
    assert_eq!(
        browser.count("#output *:not(.out-line):not(span[class^='sgr-'])"),
        0,
        "no element made of output but the page's own colour spans"
    );
    assert_eq!(browser.count("script"), 1, "only the page's own script");
    assert_eq!(browser.count("img"), 0);
    assert_eq!(browser.alert_text(), None, "no alert opened");
}

/// 6: terminal escapes an agent prints are not put on the page as they are:
/// colours (which the room draws) leave no `ESC[31m` behind, and the other
/// sequences are removed, as in the control room.
#[test]
fn agent_output_with_terminal_escapes_shows_colours_and_no_escape_codes() {
    let fleet = WebFleet::start(&["gamma"], &[], "gamma");
    let browser = fleet.open(DESKTOP);
    browser.wait_text("#output-title", |t| t.contains("gamma"));
    let lines = browser.wait_texts("#output .out-line", |t| t.contains("after"));
    let line = lines
        .lines()
        .find(|line| line.starts_with("esc "))
        .unwrap_or_default();
    assert!(
        !line.contains('\u{1b}') && !line.contains("[31m") && !line.contains('\u{7}'),
        "the line shows escape codes: {line:?}"
    );
    assert!(line.contains("red") && line.contains("after"), "{line:?}");
    // The colour the agent asked for is kept, as a class: the text stays text.
    let red = browser
        .try_text("#output .out-line .sgr-31")
        .unwrap_or_default();
    assert_eq!(red, "red");
}

/// A lane is picked with a press as long as a person's (300 ms), by finger
/// and by mouse, while the lanes write output and the page's state changes
/// several times a second. (A row replaced between press and release gets
/// no click.) The output pane is let grow to its full height first, so
/// that the layout no longer moves.
#[test]
fn a_lane_is_picked_with_a_press_while_the_fleet_is_busy() {
    let fleet = WebFleet::start(&["alpha", "beta", "gamma"], &[], "");
    for size in [PHONE, DESKTOP] {
        let browser = fleet.open(size);
        browser.wait_js(
            "the output pane at its full height",
            "const o = document.querySelector('#output'); return o.scrollHeight > o.clientHeight + 40;",
        );
        for lane in ["beta", "gamma", "alpha"] {
            let row = format!("#lanes .lane[data-lane='{lane}']");
            browser.press(&row, Duration::from_millis(300));
            let shown = browser.try_text("#output-title").unwrap_or_default();
            assert!(
                shown.contains(lane),
                "pressed {lane} at {size:?}; the page shows {shown:?}"
            );
        }
    }
}

/// One HTTP/1.1 answer: its status, its headers (names lowercased), its body.
struct Reply {
    status: u16,
    headers: Vec<(String, String)>,
    body: String,
}

impl Reply {
    fn header(&self, name: &str) -> Option<&str> {
        let found = self.headers.iter().find(|(key, _)| key == name);
        found.map(|(_, value)| value.as_str())
    }
}

/// `method path` to `addr` over a connection of its own, with `headers`
/// (`Name: value` lines) and `body`.
fn http(addr: &str, method: &str, path: &str, headers: &[String], body: &str) -> Reply {
    let mut stream = TcpStream::connect(addr).unwrap_or_else(|e| panic!("connect {addr}: {e}"));
    stream
        .set_read_timeout(Some(DEADLINE))
        .expect("read timeout");
    let mut request = format!("{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n");
    for header in headers {
        request.push_str(&format!("{header}\r\n"));
    }
    request.push_str(&format!("Content-Length: {}\r\n\r\n{body}", body.len()));
    stream.write_all(request.as_bytes()).expect("send");
    let mut answer = String::new();
    stream.read_to_string(&mut answer).expect("read the answer");
    let (head, body) = answer.split_once("\r\n\r\n").unwrap_or((&answer, ""));
    let mut lines = head.lines();
    let status_line = lines.next().unwrap_or_default();
    let status = status_line.split(' ').nth(1).and_then(|s| s.parse().ok());
    let headers = lines
        .filter_map(|line| line.split_once(':'))
        .map(|(key, value)| (key.trim().to_ascii_lowercase(), value.trim().to_string()))
        .collect();
    Reply {
        status: status.unwrap_or_else(|| panic!("no status in {answer:?}")),
        headers,
        body: body.to_string(),
    }
}

/// Through real HTTP: no state and no events without the token; the page
/// itself (which holds nothing) is served to anyone; `.clowder/web-url`
/// holds the address alone, 0600, and goes when the page ends.
#[test]
fn without_the_token_the_api_refuses_and_web_url_is_private() {
    let fleet = WebFleet::start(&["alpha"], &[], "");
    let served = fleet.served();
    let addr = served.addr();
    for path in ["/api/state", "/api/events"] {
        let reply = http(addr, "GET", path, &[], "");
        assert_eq!(reply.status, 401, "GET {path} without a token");
        assert!(reply.body.contains("open the address"), "{}", reply.body);
    }
    for path in ["/", "/app.js", "/app.css"] {
        let reply = http(addr, "GET", path, &[], "");
        assert_eq!(reply.status, 200, "GET {path}");
        assert_eq!(reply.header("set-cookie"), None);
        assert_eq!(reply.header("referrer-policy"), Some("no-referrer"));
    }
    let auth = format!("Authorization: Bearer {}", served.token());
    let state = http(addr, "GET", "/api/state", &[auth], "");
    assert_eq!(state.status, 200, "{}", state.body);
    let state: Value = serde_json::from_str(&state.body).expect("the state is JSON");
    assert!(
        state["csrf"].as_str().is_some_and(|csrf| csrf.len() >= 32),
        "{state}"
    );
    let web_url = fleet.base.root().join(".clowder/web-url");
    assert_eq!(read(&web_url), format!("http://{addr}/\n"));
    let mode = std::fs::metadata(&web_url).expect("web-url").permissions();
    assert_eq!(
        std::os::unix::fs::PermissionsExt::mode(&mode) & 0o777,
        0o600
    );
    let mut fleet = fleet;
    let status = fleet.served.take().expect("served").stop();
    assert!(status.success(), "SIGTERM ends it with 0: {status:?}");
    assert!(!web_url.exists(), "web-url is removed on exit");
}

/// A server on another port of 127.0.0.1 (a dev server an agent started)
/// that records the head of every request it is sent, and answers a page
/// that asks for an image of its own.
struct Recorder {
    addr: SocketAddr,
    heads: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
}

impl Recorder {
    fn start() -> Recorder {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = listener.local_addr().expect("address");
        let heads = std::sync::Arc::default();
        let kept = std::sync::Arc::clone(&heads);
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                Recorder::answer(stream, &kept);
            }
        });
        Recorder { addr, heads }
    }

    fn answer(mut stream: TcpStream, heads: &std::sync::Mutex<Vec<String>>) {
        let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
        let mut head = Vec::new();
        let mut byte = [0u8; 1];
        while !head.ends_with(b"\r\n\r\n") && stream.read(&mut byte).is_ok_and(|n| n == 1) {
            head.push(byte[0]);
        }
        if let Ok(mut heads) = heads.lock() {
            heads.push(String::from_utf8_lossy(&head).into_owned());
        }
        let body = "<!doctype html><title>dev</title><p id=dev>dev server</p><img src=/pixel.png>";
        let reply = format!(
            "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        );
        let _ = stream.write_all(reply.as_bytes());
    }

    fn heads(&self) -> Vec<String> {
        self.heads
            .lock()
            .map(|heads| heads.clone())
            .unwrap_or_default()
    }
}

/// Once the page is open (and reloaded: the tab keeps its token), a visit
/// to another server on 127.0.0.1 carries no credential of the page, and
/// every header that server was sent, replayed to the page, is refused.
#[test]
fn the_token_reaches_no_other_server_on_this_machine() {
    let fleet = WebFleet::start(&["alpha"], &["alpha"], "");
    let browser = fleet.open(DESKTOP);
    let served = fleet.served();
    let addr = served.addr();
    let bar = browser.execute("return location.href;");
    assert_eq!(
        bar,
        format!("http://{addr}/").as_str(),
        "the token left the address bar"
    );
    browser.goto(&format!("http://{addr}/"));
    browser.wait_for("body[data-ready='1']");
    // The older form of the address opens the page too.
    let older = Browser::start(PHONE);
    older.goto(&format!("http://{addr}/?token={}", served.token()));
    older.wait_for("body[data-ready='1']");
    let bar = older.execute("return location.href;");
    assert_eq!(bar, format!("http://{addr}/").as_str());
    drop(older);

    let recorder = Recorder::start();
    browser.goto(&format!("http://{}/", recorder.addr));
    browser.wait_for("#dev");
    assert!(
        wait_until(DEADLINE, || recorder.heads().len() >= 2),
        "the page and its image: {:?}",
        recorder.heads()
    );
    let heads = recorder.heads();
    for head in &heads {
        assert!(!head.contains(served.token()), "the token was sent: {head}");
        assert!(!head.to_lowercase().contains("clowder"), "{head}");
    }
    fleet.go("alpha");
    let id = wait_for_request(addr, served.token());
    let body = format!(r#"{{"id": {id:?}, "decision": "approve"}}"#);
    for head in &heads {
        let mut replayed: Vec<String> = head
            .lines()
            .skip(1)
            .filter(|line| line.contains(':'))
            .filter(|line| {
                let name = line.split(':').next().unwrap_or_default().to_lowercase();
                !["host", "connection", "content-length"].contains(&name.as_str())
            })
            .map(str::to_string)
            .collect();
        let state = http(addr, "GET", "/api/state", &replayed, "");
        assert_eq!(state.status, 401, "replayed {replayed:?}: {}", state.body);
        replayed.push(format!("Origin: http://{addr}"));
        replayed.push("Content-Type: application/json".to_string());
        let decided = http(addr, "POST", "/api/decide", &replayed, &body);
        assert_eq!(
            decided.status, 401,
            "replayed {replayed:?}: {}",
            decided.body
        );
    }
    assert!(
        fleet.base.out("gate-exit-alpha").is_empty(),
        "nothing approved"
    );

    // A second page on this machine, opened in the same tab, has its own
    // token: the first one still opens without its address.
    let second = Served::start(fleet.base.root(), fleet.base.out_dir().join("serve2.err"));
    assert_ne!(second.token(), served.token());
    browser.goto(&second.url);
    browser.wait_for("body[data-ready='1']");
    browser.goto(&format!("http://{addr}/"));
    browser.wait_for("body[data-ready='1']");
    assert_eq!(browser.try_text("#flash").unwrap_or_default(), "");
}

/// The id of the first request waiting, through the API with `token`.
fn wait_for_request(addr: &str, token: &str) -> String {
    let auth = format!("Authorization: Bearer {token}");
    let mut id = None;
    let seen = wait_until(DEADLINE, || {
        let state = http(addr, "GET", "/api/state", std::slice::from_ref(&auth), "");
        let state: Value = serde_json::from_str(&state.body).unwrap_or_default();
        id = state["view"]["requests"][0]["id"]
            .as_str()
            .map(str::to_string);
        id.is_some()
    });
    assert!(seen, "no request came");
    id.unwrap_or_default()
}

/// The host ends: the header says so (not `live`), and the events say it
/// once, however often it is retried.
#[test]
fn a_host_that_ends_shows_in_the_header_and_once_in_the_events() {
    let mut fleet = WebFleet::start(&["alpha"], &[], "");
    let browser = fleet.open(PHONE);
    browser.wait_text("#conn", |t| t == "live");
    let host = fleet.host.take().expect("the host");
    stop_host(fleet.base.root(), host);
    browser.wait_text("#conn", |t| t == "host gone, retrying");
    let said = "return [...document.querySelectorAll('#events .ev-text')]
        .filter(e => e.textContent.includes('unreachable')).length;";
    let watched = std::time::Instant::now();
    while watched.elapsed() < Duration::from_secs(3) {
        assert_eq!(browser.execute(said), 1, "{}", browser.text("#events"));
        std::thread::sleep(Duration::from_millis(250));
    }
    assert_eq!(browser.text("#conn"), "host gone, retrying");
}

/// A POST that changes things must come from the page: its own `Origin`
/// and the CSRF token of its state. Refused ones never reach the host.
#[test]
fn a_decision_from_another_origin_or_without_the_csrf_token_is_refused() {
    let fleet = WebFleet::start(&["alpha"], &[], "");
    let served = fleet.served();
    let addr = served.addr();
    let auth = format!("Authorization: Bearer {}", served.token());
    let state = http(addr, "GET", "/api/state", std::slice::from_ref(&auth), "");
    let state: Value = serde_json::from_str(&state.body).expect("the state is JSON");
    let csrf = state["csrf"].as_str().expect("a csrf token").to_string();
    let body = r#"{"id": "no-such-request", "decision": "approve"}"#;
    let post = |origin: Option<&str>, csrf: &str| {
        let mut headers = vec![auth.clone(), "Content-Type: application/json".to_string()];
        headers.extend(origin.map(|origin| format!("Origin: {origin}")));
        headers.push(format!("X-Clowder-Csrf: {csrf}"));
        http(addr, "POST", "/api/decide", &headers, body)
    };
    let own = format!("http://{addr}");
    for (origin, token, why) in [
        (
            Some("http://evil.example"),
            csrf.as_str(),
            "a foreign Origin",
        ),
        (Some("null"), csrf.as_str(), "an opaque Origin"),
        (None, csrf.as_str(), "no Origin"),
        (Some(own.as_str()), "stale", "a wrong CSRF token"),
        (Some(own.as_str()), "", "no CSRF token"),
    ] {
        let reply = post(origin, token);
        assert_eq!(reply.status, 403, "{why}: {}", reply.body);
    }
    let reply = post(Some(&own), &csrf);
    assert_ne!(
        reply.status, 403,
        "the page's own request passes: {}",
        reply.body
    );
    assert_ne!(reply.status, 401, "{}", reply.body);
    let mut headers = vec![
        "Content-Type: application/json".to_string(),
        format!("Origin: {own}"),
    ];
    headers.push(format!("X-Clowder-Csrf: {csrf}"));
    let without_token = http(addr, "POST", "/api/decide", &headers, body);
    assert_eq!(without_token.status, 401);
}

/// The fleet demo (`clowder demo --headless` in a scratch folder) served:
/// screenshots of the page at a phone's and a desktop's size while lane
/// `release` waits for its request (copied to docs/ when
/// CLOWDER_UPDATE_SCREENSHOTS=1), then Approve from the phone, and the lane
/// goes on: its agent prints the tool's result.
#[test]
fn the_demo_fleet_is_approved_from_a_phone_and_its_screenshots_are_taken() {
    let dir = tempfile::tempdir().expect("tempdir");
    let log = |name: &str| std::fs::File::create(dir.path().join(name)).expect("log file");
    let demo = clowder_command(dir.path(), &["demo", "--headless"])
        .env("DEMO_PACE", "0.1")
        .stdout(log("demo.out"))
        .stderr(log("demo.err"))
        .spawn()
        .expect("start clowder demo");
    let fleet = dir.path().join("target/demo/fleet");
    let made = wait_until(DEADLINE, || {
        std::os::unix::net::UnixStream::connect(fleet.join(".clowder/host.sock")).is_ok()
    });
    let demo = DemoHost {
        root: fleet.clone(),
        child: Some(demo),
    };
    assert!(
        made,
        "the demo's host never served: {}",
        read(&dir.path().join("demo.err"))
    );
    let served = Served::start(&fleet, dir.path().join("serve.err"));

    let phone = open_demo(&served, PHONE, "web-phone.png");
    drop(open_demo(&served, DESKTOP, "web-desktop.png"));

    let id = request_of(&phone, "release");
    let card = format!("#requests .request[data-id='{id}']");
    assert_eq!(
        phone.text(&format!("{card} .req-subject")),
        "./release.sh --publish"
    );
    // The tool's result shows until the lane's next session starts, which
    // can be a fraction of a second later on a busy machine: every line the
    // output pane is given is watched, not only those left when looked at.
    phone.execute(
        "window.published = false;
         new MutationObserver((changes) => changes.forEach((change) => change.addedNodes.forEach((node) => {
           if (node.textContent.includes('published v0.3.0')) window.published = true;
         }))).observe(document.querySelector('#output'), { childList: true });",
    );
    phone.click(&format!("{card} button.approve"));
    // Once approved, `release` no longer needs you and moves down the list: it
    // is picked after that move, and again if a move came under the press.
    let gone = format!("return document.querySelector({card:?}) === null;");
    phone.wait_js("the approved request's card to go", &gone);
    pick_lane(&phone, "release");
    phone.wait_js(
        "release's output to say published v0.3.0",
        "return window.published === true;",
    );
    drop(served);
    drop(demo);
}

/// Presses lane `lane`'s row until the output pane is that lane's: a row can
/// move between finding it and pressing it while the list reorders.
pub fn pick_lane(browser: &Browser, lane: &str) {
    // Already shown: nothing to press, and no time lost while its output runs.
    if browser.try_text("#output-title").as_deref() == Some(&format!("Lane {lane}")) {
        return;
    }
    let row = format!("#lanes .lane[data-lane='{lane}']");
    for _ in 0..5 {
        // In the middle of the screen, not under the page's sticky header.
        browser.wait_for(&row);
        browser.execute(&format!(
            "document.querySelector({row:?}).scrollIntoView({{block: 'center'}});"
        ));
        browser.click(&row);
        let shown = wait_until(Duration::from_secs(10), || {
            browser
                .try_text("#output-title")
                .is_some_and(|title| title.contains(lane))
        });
        if shown {
            return;
        }
    }
    panic!(
        "lane {lane} was never shown; the page reads:\n{}",
        browser.page_text()
    );
}

/// A browser of `size` on the demo's page once lane `release` asks, its
/// screenshot in target/screenshots/`name` (and docs/`name` when
/// CLOWDER_UPDATE_SCREENSHOTS=1).
fn open_demo(served: &Served, size: (u32, u32), name: &str) -> Browser {
    let browser = Browser::start(size);
    browser.goto(&served.url);
    request_of(&browser, "release");
    for lane in ["api", "docs", "release"] {
        browser.wait_for(&format!("#lanes .lane[data-lane='{lane}']"));
    }
    browser.wait_texts("#output .out-line", |t| t.contains("release.sh --publish"));
    screenshot(&browser, size, name);
    browser
}

/// A screenshot of the viewport in target/screenshots/`name`, and in
/// docs/`name` when CLOWDER_UPDATE_SCREENSHOTS=1.
pub fn screenshot(browser: &Browser, size: (u32, u32), name: &str) {
    let shot = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("target/screenshots")
        .join(name);
    browser.screenshot(&shot);
    let png = std::fs::read(&shot).expect("read the screenshot");
    assert_eq!(browser::png_size(&png), Some(size), "{name}");
    if std::env::var_os("CLOWDER_UPDATE_SCREENSHOTS").is_some_and(|v| v == "1") {
        let docs = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("docs")
            .join(name);
        std::fs::copy(&shot, &docs).expect("copy the screenshot to docs/");
    }
}

/// The demo's host, ended as a service manager would end it.
struct DemoHost {
    root: PathBuf,
    child: Option<Child>,
}

impl Drop for DemoHost {
    fn drop(&mut self) {
        if let Some(child) = self.child.take() {
            stop_host(&self.root, child);
        }
    }
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}

/// A page that answers a click, served by axum on a thread of its own.
fn serve_test_page() -> SocketAddr {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("local address");
    listener.set_nonblocking(true).expect("nonblocking");
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("tokio runtime");
        runtime.block_on(async move {
            let listener = tokio::net::TcpListener::from_std(listener).expect("tokio listener");
            const PAGE: &str = "<!doctype html><meta name=viewport content='width=device-width'>\
                 <input id=name><button id=go onclick=\"document.getElementById('out')\
                 .textContent = 'hello ' + document.getElementById('name').value\">Go</button>\
                 <p id=out></p>";
            let page = || async { axum::response::Html(PAGE) };
            let app = axum::Router::new().route("/", axum::routing::get(page));
            let _ = axum::serve(listener, app).await;
        });
    });
    addr
}

/// The browser helper itself: a phone-sized page, typing, a click, text read
/// back, a screenshot of the phone's size, and no browser process left once
/// it is dropped.
#[test]
fn the_browser_helper_clicks_reads_and_leaves_no_process() {
    let addr = serve_test_page();
    let browser = Browser::start(PHONE);
    browser.goto(&format!("http://{addr}/"));
    let viewport = browser.execute("return [window.innerWidth, window.innerHeight];");
    assert_eq!(viewport, serde_json::json!([390, 844]));
    browser.send_keys("#name", "phone");
    browser.press("#go", Duration::from_millis(300));
    assert_eq!(browser.wait_text("#out", |t| !t.is_empty()), "hello phone");
    browser.send_keys("#name", "!");
    browser.click("#go");
    assert_eq!(
        browser.wait_text("#out", |t| t.ends_with('!')),
        "hello phone!"
    );
    let dir = tempfile::tempdir().expect("tempdir");
    let shot = dir.path().join("shot.png");
    browser.screenshot(&shot);
    let png = std::fs::read(&shot).expect("read the screenshot");
    assert_eq!(browser::png_size(&png), Some(PHONE));

    let (driver, marker) = (browser.driver_pid(), browser.marker());
    assert!(browser.processes().len() > 2, "{:?}", browser.processes());
    drop(browser);
    let left = browser::browser_processes(driver, &marker);
    assert!(left.is_empty(), "left running after drop: {left:?}");
}

/// A lane whose agent runs without the gate says UNGATED on its row, and why
/// when the pointer rests on it.
#[test]
fn an_ungated_lane_says_so_on_its_row() {
    let fleet = HostFleet::new(&["a"], 1);
    fleet.with_codex_without_hooks();
    let host = fleet.host("none");
    let served = Served::start(fleet.root(), fleet.out_dir().join("serve.err"));
    let browser = Browser::start(DESKTOP);
    browser.goto(&served.url);
    browser.wait_for("body[data-ready='1']");
    let row = "#lanes .lane[data-lane='a'] .ungated";
    browser.wait_text(row, |text| text == "UNGATED");
    let why = browser.execute(&format!("return document.querySelector({row:?}).title;"));
    assert!(
        why.as_str()
            .is_some_and(|why| why.contains("Codex 0.101.0 runs no hooks")),
        "{why}"
    );
    drop(browser);
    drop(served);
    stop_host(fleet.root(), host);
}

/// Lanes of the simulated host (common/sim_host.rs): one in ten failed, one
/// in ten waiting for its session's approval.
const MANY: usize = 3000;

/// `clowder serve --http` over a simulated host of [`MANY`] lanes.
fn many_lanes() -> (tempfile::TempDir, common::sim_host::SimHost, Served) {
    let dir = tempfile::tempdir().expect("tempdir");
    let host = common::sim_host::SimHost::start(dir.path(), MANY);
    let served = Served::start(dir.path(), dir.path().join("serve.err"));
    (dir, host, served)
}

/// A browser of `size` on the page once every lane is listed.
fn open_many(served: &Served, size: (u32, u32)) -> Browser {
    let browser = Browser::start(size);
    browser.goto(&served.url);
    browser.wait_for("body[data-ready='1']");
    browser.wait_text("#summary", |t| t.starts_with("3,000 lanes"));
    browser
}

/// Whether every row drawn passes `test` (a JS expression of `row`), and
/// there are some.
fn every_row(browser: &Browser, test: &str) -> bool {
    let script = format!(
        "const rows = [...document.querySelectorAll('#lanes .lane')];
         return rows.length > 0 && rows.every(row => {test});"
    );
    browser.execute(&script) == Value::Bool(true)
}

/// With thousands of lanes, at a phone's size and a desktop's: only a window
/// of rows is in the DOM, those that need you first, scrolled to the end it
/// holds the last lane; the chips filter by state and the search by name.
#[test]
fn many_lanes_are_windowed_filtered_and_searched() {
    let (_dir, _host, served) = many_lanes();
    for size in [PHONE, DESKTOP] {
        let browser = open_many(&served, size);
        let drawn = browser.count("#lanes .lane");
        assert!(drawn > 0 && drawn < 60, "{drawn} rows drawn at {size:?}");
        assert!(
            every_row(&browser, "row.classList.contains('needs-you')"),
            "the lanes that need you come first: {:?}",
            browser.texts("#lanes .lane .name")
        );
        browser.execute(
            "const box = document.querySelector('#lanes'); box.scrollTop = box.scrollHeight;",
        );
        browser.wait_for("#lanes .lane[data-lane='l3000']");
        assert!(
            browser.count("#lanes .lane") < 60,
            "still a window at the end"
        );

        browser.click("#lane-filters button[data-filter='failed']");
        browser.wait_text("#lane-count", |t| t == "300 of 3,000");
        assert!(every_row(
            &browser,
            "row.querySelector('.state').textContent === 'failed'"
        ));
        // Waiting for you, and failed: both need you, as in the room.
        browser.click("#lane-filters button[data-filter='needs']");
        browser.wait_text("#lane-count", |t| t == "600 of 3,000");
        assert!(every_row(&browser, "row.classList.contains('needs-you')"));
        browser.click("#lane-filters button[data-filter='running']");
        browser.wait_text("#lane-count", |t| t == "2,400 of 3,000");
        assert!(every_row(
            &browser,
            "row.querySelector('.state').textContent === 'running'"
        ));

        browser.click("#lane-filters button[data-filter='all']");
        browser.send_keys("#lane-search", "l2999");
        browser.wait_text("#lane-count", |t| t == "1 of 3,000");
        assert_eq!(browser.texts("#lanes .lane .name"), ["l2999"]);
        browser.execute("document.querySelector('#lane-search').value = 'nothing like it'; document.querySelector('#lane-search').dispatchEvent(new Event('input'));");
        browser.wait_for("#no-lanes:not([hidden])");
        assert_eq!(browser.count("#lanes .lane"), 0);
    }
}

/// A lane that changes is updated in its row, the same element, on both
/// sizes; a page that comes back with the version it holds is sent only
/// what changed since.
#[test]
fn a_changed_lane_updates_in_place_and_a_page_is_sent_only_changes() {
    let (_dir, host, served) = many_lanes();
    let browsers: Vec<Browser> = [PHONE, DESKTOP]
        .into_iter()
        .map(|size| open_many(&served, size))
        .collect();
    for browser in &browsers {
        browser.send_keys("#lane-search", "l2991");
        browser.wait_text("#lane-count", |t| t == "1 of 3,000");
        browser.execute("document.querySelector(\".lane[data-lane='l2991']\").kept = true;");
    }
    let (epoch, since) = view_version(&served);
    host.report(
        2991,
        LaneReport::Snapshot {
            snapshot: common::sim_host::session(7, false),
            queued: false,
        },
    );
    host.report(2991, LaneReport::Ended(Err("exit 2".into())));
    for browser in &browsers {
        browser.wait_text(".lane[data-lane='l2991'] .state", |t| t == "failed");
        browser.wait_text(".lane[data-lane='l2991'] .iteration", |t| t == "#7/100");
        let kept = browser
            .execute("return document.querySelector(\".lane[data-lane='l2991']\").kept === true;");
        assert_eq!(kept, Value::Bool(true), "the row was made again");
    }
    let first = first_state(&served, &format!("epoch={epoch}&since={since}"));
    assert_eq!(first["view"]["full"], false, "{first}");
    let lanes = first["view"]["lanes"].as_array().expect("lanes");
    assert_eq!(lanes.len(), 1, "only l2991 changed: {first}");
    assert_eq!(lanes[0]["name"], "l2991");
    assert!(
        lanes[0].get("max_iterations").is_none(),
        "only its changed facts: {first}"
    );
    let whole = first_state(&served, &format!("epoch=another-run&since={since}"));
    assert_eq!(whole["view"]["full"], true);
}

/// The view's run and version, from `/api/state`.
fn view_version(served: &Served) -> (String, u64) {
    let auth = format!("Authorization: Bearer {}", served.token());
    let reply = http(served.addr(), "GET", "/api/state", &[auth], "");
    let state: Value = serde_json::from_str(&reply.body).expect("the state is JSON");
    let epoch = state["view"]["epoch"]
        .as_str()
        .expect("an epoch")
        .to_string();
    (epoch, state["view"]["v"].as_u64().expect("a version"))
}

/// The first `state` message of `/api/events?QUERY`, read over a raw
/// connection until it is whole.
fn first_state(served: &Served, query: &str) -> Value {
    let addr = served.addr();
    let mut stream = TcpStream::connect(addr).expect("connect");
    stream
        .set_read_timeout(Some(DEADLINE))
        .expect("read timeout");
    let request = format!(
        "GET /api/events?{query} HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {}\r\n\r\n",
        served.token()
    );
    stream.write_all(request.as_bytes()).expect("send");
    let mut got = Vec::new();
    let mut buffer = [0u8; 65536];
    loop {
        let text = String::from_utf8_lossy(&got).to_string();
        let data = text
            .split_once("event: state\ndata: ")
            .and_then(|(_, rest)| rest.split_once('\n'))
            .map(|(data, _)| data.to_string());
        if let Some(data) = data {
            return serde_json::from_str(&data).unwrap_or_else(|e| panic!("{e}: {data}"));
        }
        let read = stream.read(&mut buffer).expect("read the feed");
        assert!(read > 0, "the feed ended before a state: {text}");
        got.extend_from_slice(&buffer[..read]);
    }
}
