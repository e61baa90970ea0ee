//! `clowder serve --http` through the real binary and real HTTP, without a
//! browser: its refusals on the command line, a decision and a note that
//! reach the host, a request decided twice, and the `.clowder/web-url` it
//! keeps while it runs. The browser's side is tests/it/web_browser.rs.

use crate::common;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Stdio};

use common::git::clowder_command;
use common::host::{HostFleet, stop_host};
use common::{DEADLINE, send_signal, stderr_of, wait_until};
use serde_json::{Value, json};

/// A running `clowder serve --http`, and what it printed.
struct Page {
    child: Child,
    base: String,
    token: String,
    cookie: String,
}

impl Page {
    /// Serves the host of `root` on a free loopback port.
    fn start(root: &Path) -> Page {
        let mut child = clowder_command(root, &["serve", "--http", "127.0.0.1:0"])
            .stderr(Stdio::null())
            .spawn()
            .expect("start clowder serve");
        let stdout = child.stdout.take().expect("stdout");
        let mut line = String::new();
        BufReader::new(stdout)
            .read_line(&mut line)
            .expect("read the address");
        let url = line.trim().to_string();
        let (base, token) = url.split_once("?token=").expect("an address with a token");
        assert!(base.starts_with("http://127.0.0.1:"), "{url}");
        Page {
            child,
            base: base.to_string(),
            token: token.to_string(),
            cookie: format!("clowder_token={token}"),
        }
    }

    fn origin(&self) -> String {
        self.base.trim_end_matches('/').to_string()
    }

    fn state(&self) -> Value {
        let mut response = agent()
            .get(format!("{}api/state", self.base))
            .header("Cookie", &self.cookie)
            .call()
            .expect("GET /api/state");
        assert_eq!(response.status().as_u16(), 200);
        let text = response.body_mut().read_to_string().expect("body");
        serde_json::from_str(&text).expect("JSON state")
    }

    /// POSTs `body` as the page would; the status and the answer.
    fn post(&self, path: &str, body: Value) -> (u16, Value) {
        let csrf = self.state()["csrf"].as_str().expect("csrf").to_string();
        let mut response = agent()
            .post(format!("{}{path}", self.base))
            .header("Cookie", &self.cookie)
            .header("Origin", self.origin())
            .header("X-Clowder-Csrf", csrf)
            .send_json(body)
            .expect("POST");
        let status = response.status().as_u16();
        let text = response.body_mut().read_to_string().expect("body");
        (status, serde_json::from_str(&text).expect("JSON answer"))
    }

    /// Ends it as Ctrl-C would; it must exit 0.
    fn stop(mut self) {
        send_signal(self.child.id(), libc::SIGINT);
        let ended = wait_until(DEADLINE, || matches!(self.child.try_wait(), Ok(Some(_))));
        if !ended {
            let _ = self.child.kill();
        }
        let status = self.child.wait().expect("wait");
        assert!(ended, "clowder serve did not end on SIGINT");
        assert!(status.success(), "clowder serve exited with {status}");
    }
}

impl Drop for Page {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// HTTP that answers every status and follows no redirect.
fn agent() -> ureq::Agent {
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .max_redirects(0)
        .build()
        .into()
}

fn wait_for_state(page: &Page, what: &str, check: impl Fn(&Value) -> bool) -> Value {
    let mut last = Value::Null;
    let seen = wait_until(DEADLINE, || {
        last = page.state();
        check(&last)
    });
    assert!(seen, "never saw {what}; the last state: {last:#}");
    last
}

#[test]
fn the_address_opens_with_its_token_and_sets_a_strict_cookie() {
    let fleet = HostFleet::new(&["a"], 1);
    let host = fleet.host("none");
    let page = Page::start(fleet.root());
    let response = agent()
        .get(format!("{}?token={}", page.base, page.token))
        .call()
        .expect("GET");
    assert_eq!(response.status().as_u16(), 303);
    assert_eq!(response.headers()["location"], "/");
    let cookie = response.headers()["set-cookie"].to_str().expect("text");
    assert!(cookie.starts_with(&page.cookie), "{cookie}");
    assert!(
        cookie.contains("HttpOnly") && cookie.contains("SameSite=Strict"),
        "{cookie}"
    );
    assert_eq!(response.headers()["referrer-policy"], "no-referrer");
    let state = wait_for_state(&page, "lane a", |state| {
        state["view"]["lanes"][0]["name"] == "a"
    });
    assert_eq!(state["view"]["hosts"].as_array().map(Vec::len), Some(1));
    page.stop();
    stop_host(fleet.root(), host);
}

#[test]
fn a_decision_from_the_page_reaches_the_gate_and_is_taken_once() {
    let fleet = HostFleet::new(&["a", "b"], 1);
    let host = fleet.host("b");
    let page = Page::start(fleet.root());
    let state = wait_for_state(&page, "b's request", |state| {
        state["view"]["requests"][0]["lane"] == "b"
    });
    let request = &state["view"]["requests"][0];
    assert_eq!(request["subject"], "git push origin clowder/b");
    assert_eq!(request["tool"], "Bash");
    let id = request["id"].as_str().expect("id").to_string();
    let (status, answer) = page.post(
        "api/decide",
        json!({"id": id, "decision": "reject", "reason": "not on a Friday"}),
    );
    assert_eq!(status, 200, "{answer}");
    assert!(wait_until(DEADLINE, || fleet
        .answer("b")
        .contains("not on a Friday")));
    assert!(fleet.answer("b").contains("deny"), "{}", fleet.answer("b"));
    // Decided: the page says who decided, and a second decision is refused.
    let (status, again) = page.post("api/decide", json!({"id": id, "decision": "approve"}));
    assert_eq!(status, 409, "{again}");
    wait_for_state(&page, "the decision in the events", |state| {
        state["view"]["requests"]
            .as_array()
            .is_some_and(Vec::is_empty)
            && state["view"]["events"]
                .to_string()
                .contains("rejected by web 127.0.0.1:")
    });
    page.stop();
    stop_host(fleet.root(), host);
}

#[test]
fn a_note_from_the_page_waits_for_the_lanes_next_session() {
    let fleet = HostFleet::new(&["a"], 1);
    let host = fleet.host("none");
    let page = Page::start(fleet.root());
    wait_for_state(&page, "lane a", |state| {
        state["view"]["lanes"][0]["name"] == "a"
    });
    let (status, answer) = page.post(
        "api/tell",
        json!({"lane": "a", "text": "use the staging database"}),
    );
    assert_eq!(status, 200, "{answer}");
    let lane_dir = fleet.root().join(".clowder/lanes/a");
    assert!(
        wait_until(DEADLINE, || files_hold(
            &lane_dir,
            "use the staging database"
        )),
        "no note in {}",
        lane_dir.display()
    );
    let (status, answer) = page.post("api/tell", json!({"lane": "nope", "text": "x"}));
    assert_eq!(status, 409, "{answer}");
    page.stop();
    stop_host(fleet.root(), host);
}

#[test]
fn the_page_names_itself_beside_the_socket_while_it_runs() {
    let fleet = HostFleet::new(&["a"], 1);
    let host = fleet.host("none");
    let page = Page::start(fleet.root());
    let file = fleet.root().join(".clowder/web-url");
    let written = std::fs::read_to_string(&file).expect("web-url");
    assert_eq!(written.trim(), page.base);
    assert!(
        !written.contains(&page.token),
        "the token must not be written"
    );
    page.stop();
    assert!(!file.exists(), "web-url outlived the page");
    stop_host(fleet.root(), host);
}

#[test]
fn serve_refuses_what_it_cannot_serve_safely() {
    let dir = tempfile::tempdir().expect("tempdir");
    let open = clowder_command(dir.path(), &["serve", "--http", "0.0.0.0:0"])
        .output()
        .expect("run");
    assert_eq!(open.status.code(), Some(2));
    assert!(
        stderr_of(&open).contains("needs --token-file"),
        "{}",
        stderr_of(&open)
    );

    let token = dir.path().join("token");
    std::fs::write(&token, "short\n").expect("write");
    let token_arg = token.display().to_string();
    let short = clowder_command(
        dir.path(),
        &["serve", "--http", "0.0.0.0:0", "--token-file", &token_arg],
    )
    .output()
    .expect("run");
    assert_eq!(short.status.code(), Some(2));
    assert!(stderr_of(&short).contains("line 1: expected a token of at least 16"));

    let no_host = clowder_command(dir.path(), &["serve", "--http"])
        .output()
        .expect("run");
    assert_eq!(no_host.status.code(), Some(1));
    assert!(
        stderr_of(&no_host).contains("no clowder host"),
        "{}",
        stderr_of(&no_host)
    );

    let bad = clowder_command(dir.path(), &["serve", "--http", "not an address"])
        .output()
        .expect("run");
    assert_eq!(bad.status.code(), Some(2));
    assert!(
        stderr_of(&bad).contains("expected HOST:PORT"),
        "{}",
        stderr_of(&bad)
    );
}

/// Whether any file under `dir` holds `text`.
fn files_hold(dir: &Path, text: &str) -> bool {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return false;
    };
    entries.flatten().any(|entry| {
        let path = entry.path();
        if path.is_dir() {
            files_hold(&path, text)
        } else {
            std::fs::read_to_string(&path).is_ok_and(|content| content.contains(text))
        }
    })
}

/// A lane whose agent runs without the gate (here a Codex without hooks) says
/// why in the page's state (tests/it/web_browser.rs sees the row say it).
#[test]
fn an_ungated_lane_says_why_on_the_page() {
    let fleet = HostFleet::new(&["a"], 1);
    fleet.with_codex_without_hooks();
    let host = fleet.host("none");
    let page = Page::start(fleet.root());
    let state = wait_for_state(&page, "lane a ungated", |state| {
        state["view"]["lanes"][0]["ungated"].is_string()
    });
    let why = state["view"]["lanes"][0]["ungated"]
        .as_str()
        .unwrap_or_default();
    assert!(why.contains("Codex 0.101.0 runs no hooks"), "{why}");
    let script =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/web/app.js"))
            .expect("app.js");
    assert!(
        script.contains("lane.ungated ? \"UNGATED\""),
        "the row says it"
    );
    page.stop();
    stop_host(fleet.root(), host);
}
