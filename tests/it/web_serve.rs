//! `clowder serve --http` through the real binary and real HTTP, without a
//! browser: its refusals on the command line, the token that only a header
//! carries, a decision and a note that reach the host, a request decided
//! twice, how request cards say what they hold, a host that ends, the
//! brake on wrong tokens, half-open connections, and the `.clowder/web-url`
//! it keeps while it runs. The browser's side is tests/it/web_browser.rs.

use crate::common;

use std::path::Path;

use common::git::clowder_command;
use common::host::{Asking, HostFleet, stop_host};
use common::page::{Page, agent};
use common::{DEADLINE, stderr_of, wait_until};
use serde_json::{Value, json};

/// GET `path` with `headers`; the status, the `set-cookie` and the body.
fn get(page: &Page, path: &str, headers: &[(&str, &str)]) -> (u16, Option<String>, String) {
    let mut request = agent().get(format!("{}{}", page.base, path.trim_start_matches('/')));
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let mut response = request.call().expect("GET");
    let cookie = response
        .headers()
        .get("set-cookie")
        .map(|value| value.to_str().unwrap_or_default().to_string());
    let status = response.status().as_u16();
    (
        status,
        cookie,
        response.body_mut().read_to_string().unwrap_or_default(),
    )
}

/// The page itself holds nothing secret and sets no cookie; its API answers
/// only the token in an `Authorization` header, never one in a cookie or
/// the query (which a browser sends to other servers or keeps in history).
#[test]
fn the_api_takes_the_token_only_in_a_header_and_no_cookie_is_ever_set() {
    let fleet = HostFleet::new(&["a"], 1);
    let host = fleet.host("none");
    let page = Page::start(fleet.root());
    let cookie = format!("clowder_token={}", page.token);
    let query = format!("/?token={}", page.token);
    for (path, headers) in [
        ("/", vec![]),
        (query.as_str(), vec![]),
        ("/app.js", vec![]),
        ("/api/state", vec![("Authorization", page.auth.as_str())]),
    ] {
        let (status, set_cookie, _) = get(&page, path, &headers);
        assert_eq!(status, 200, "GET {path}");
        assert_eq!(set_cookie, None, "GET {path} sets no cookie");
    }
    let state_query = format!("/api/state?token={}", page.token);
    let wrong = format!("Bearer {}x", page.token);
    for (path, headers, why) in [
        ("/api/state", vec![], "no token"),
        ("/api/state", vec![("Cookie", cookie.as_str())], "a cookie"),
        (state_query.as_str(), vec![], "the query"),
        (
            "/api/events",
            vec![("Authorization", wrong.as_str())],
            "a wrong token",
        ),
    ] {
        let (status, _, body) = get(&page, path, &headers);
        assert_eq!(status, 401, "GET {path} with {why}: {body}");
    }
    let state = page.wait_for_state("lane a", |state| state["view"]["lanes"][0]["name"] == "a");
    assert_eq!(state["view"]["hosts"].as_array().map(Vec::len), Some(1));
    page.stop();
    stop_host(fleet.root(), host);
}

#[test]
fn a_decision_from_the_page_reaches_the_gate_and_is_taken_once() {
    let fleet = HostFleet::new(&["a", "b"], 1);
    let host = fleet.host("b");
    let page = Page::start(fleet.root());
    let state = page.wait_for_state("b's request", |state| {
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
    page.wait_for_state("the decision in the events", |state| {
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
    page.wait_for_state("lane a", |state| state["view"]["lanes"][0]["name"] == "a");
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

/// The issue's phone: a lane whose agent reads its stdin while it runs (the
/// fake agent's `stdin` mode, as Claude Code with stream-json input) is in a
/// long Bash call; a note sent from the page enters that session at once, and
/// the page and the lane's events both say "told now".
#[test]
fn a_note_from_the_page_reaches_a_running_session_now() {
    let fleet = HostFleet::new(&["a"], 1);
    let agent = common::fake_agent_script().display().to_string();
    let config = format!(
        "[agent]\ncommand = {agent:?}\nargs = [\"stdin\", \"60\", \"--input-format\", \"stream-json\", \"--replay-user-messages\"]\n\n[session]\nmax_iterations = 1\n\n[watchdog]\nmin_output_bytes = 1\n"
    );
    std::fs::write(fleet.root().join("harness.toml"), config).expect("write harness.toml");
    let host = fleet.host("none");
    let lane_dir = fleet.root().join(".clowder/lanes/a");
    assert!(
        wait_until(DEADLINE, || files_hold(&lane_dir, "toolu_long")),
        "the lane's Bash call never started"
    );
    let page = Page::start(fleet.root());
    page.wait_for_state("lane a", |state| state["view"]["lanes"][0]["name"] == "a");
    let note = "stop editing the migrations; fix the test first";
    let (status, answer) = page.post("api/tell", json!({"lane": "a", "text": note}));
    assert_eq!(status, 200, "{answer}");
    assert!(
        answer
            .to_string()
            .contains("lane a: told now (the session reads it at its next step)"),
        "{answer}"
    );
    // In the session's output, where the agent took it.
    assert!(wait_until(DEADLINE, || files_hold(
        &lane_dir,
        "Read the note."
    )));
    page.wait_for_state("the note in the events", |state| {
        state["view"]["events"].to_string().contains("told now")
    });
    page.stop();
    stop_host(fleet.root(), host);
}

/// The page names itself in `.clowder/web-url`; a second page in the same
/// folder neither overwrites the name nor removes it when it ends.
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
    let second = Page::start(fleet.root());
    assert_ne!(second.base, page.base);
    let named = std::fs::read_to_string(&file).expect("web-url");
    assert_eq!(named.trim(), page.base, "the second page took the name");
    second.stop();
    let named = std::fs::read_to_string(&file).unwrap_or_default();
    assert_eq!(
        named.trim(),
        page.base,
        "the second page removed the first one's name"
    );
    page.stop();
    assert!(!file.exists(), "web-url outlived the page");
    stop_host(fleet.root(), host);
}

/// A command with bidi and zero-width characters shows them escaped (as
/// `clowder queue` does), not reordered; a 100,028-character one says its
/// length and how it ends.
#[test]
fn request_cards_show_invisible_characters_and_the_end_of_a_long_command() {
    let fleet = HostFleet::new(&["a"], 1);
    let host = fleet.host("none");
    let page = Page::start(fleet.root());
    let sneaky = "echo \u{202e}; ~ fr- mr\u{202c}\u{200b}";
    let long = format!(
        "make deploy ARGS={} && ./release.sh --publish",
        "A".repeat(99_985)
    );
    assert_eq!(long.chars().count(), 100_028);
    let _asking = [
        Asking::start(fleet.root(), sneaky),
        Asking::start(fleet.root(), &long),
    ];
    let state = page.wait_for_state("both requests", |state| {
        state["view"]["requests"].as_array().map(Vec::len) == Some(2)
    });
    let requests = state["view"]["requests"].as_array().expect("requests");
    let find = |start: &str| {
        requests
            .iter()
            .find(|r| r["subject"].as_str().is_some_and(|s| s.starts_with(start)))
            .unwrap_or_else(|| panic!("no request starts with {start:?}: {requests:#?}"))
    };
    let shown = find("echo")["subject"].as_str().expect("subject");
    assert_eq!(shown, r"echo \u{202e}; ~ fr- mr\u{202c}\u{200b}");
    let long_card = find("make deploy");
    assert_eq!(long_card["subject_chars"], 100_028);
    let end = long_card["subject_end"].as_str().expect("the end said");
    assert!(end.ends_with("AAAA && ./release.sh --publish"), "{end}");
    assert_eq!(find("echo")["subject_end"], Value::Null);
    page.stop();
    stop_host(fleet.root(), host);
}

/// A host that ends is said once in the events, and that line is kept
/// current, not repeated at every retry; its host is marked lost.
#[test]
fn a_host_that_ends_is_said_once_while_it_is_retried() {
    let fleet = HostFleet::new(&["a"], 1);
    let host = fleet.host("none");
    let page = Page::start(fleet.root());
    page.wait_for_state("lane a", |state| state["view"]["lanes"][0]["name"] == "a");
    stop_host(fleet.root(), host);
    page.wait_for_state("the host lost", |state| {
        state["view"]["hosts"][0]["lost"].is_string()
    });
    // Local hosts are retried every half second: six retries at least.
    let watched = std::time::Instant::now();
    while watched.elapsed() < std::time::Duration::from_secs(3) {
        let state = page.state();
        let said = state["view"]["events"]
            .as_array()
            .expect("events")
            .iter()
            .filter(|event| {
                event["text"]
                    .as_str()
                    .is_some_and(|t| t.contains("unreachable"))
            })
            .count();
        assert_eq!(said, 1, "{:#}", state["view"]["events"]);
        std::thread::sleep(std::time::Duration::from_millis(250));
    }
    page.stop();
}

/// Ten wrong tokens from 127.0.0.1 (where every local process and SSH
/// tunnel comes from) never lock the right one out: it works at once while
/// the wrong ones after the tenth are answered later and later.
#[test]
fn a_right_token_always_works_while_wrong_ones_are_braked() {
    let fleet = HostFleet::new(&["a"], 1);
    let host = fleet.host("none");
    let page = Page::start(fleet.root());
    let wrong = format!("Bearer {}0", page.token);
    for _ in 0..10 {
        let (status, _, _) = get(&page, "/api/state", &[("Authorization", &wrong)]);
        assert_eq!(status, 401);
    }
    let braked: Vec<_> = (0..3)
        .map(|_| {
            let (base, wrong) = (page.base.clone(), wrong.clone());
            std::thread::spawn(move || {
                let started = std::time::Instant::now();
                let response = agent()
                    .get(format!("{base}api/state"))
                    .header("Authorization", &wrong)
                    .call()
                    .expect("GET");
                (response.status().as_u16(), started.elapsed())
            })
        })
        .collect();
    for _ in 0..5 {
        let started = std::time::Instant::now();
        let (status, _, body) = get(&page, "/api/state", &[("Authorization", &page.auth)]);
        assert_eq!(status, 200, "the right token is refused: {body}");
        assert!(
            started.elapsed() < std::time::Duration::from_millis(900),
            "the right token waited {:?}",
            started.elapsed()
        );
    }
    for thread in braked {
        let (status, took) = thread.join().expect("a wrong attempt");
        assert_eq!(status, 429);
        assert!(
            took >= std::time::Duration::from_millis(900),
            "answered after {took:?}"
        );
    }
    page.stop();
    stop_host(fleet.root(), host);
}

/// 2,000 connections that never finish their request: the page keeps few
/// of them open, answers the right token meanwhile, and closes every one.
#[test]
fn half_open_connections_never_keep_the_page_away() {
    raise_descriptor_limit(4_096);
    let fleet = HostFleet::new(&["a"], 1);
    let host = fleet.host("none");
    let page = Page::start(fleet.root());
    let addr = page
        .base
        .trim_start_matches("http://")
        .trim_end_matches('/');
    let mut open: Vec<std::net::TcpStream> = (0..2_000)
        .map(|_| {
            let mut stream = std::net::TcpStream::connect(addr).expect("connect");
            std::io::Write::write_all(&mut stream, b"GET /api/state HTTP/1.1\r\nHost: x\r\n")
                .expect("send half a request");
            stream
        })
        .collect();
    let (status, _, body) = get(&page, "/api/state", &[("Authorization", &page.auth)]);
    assert_eq!(status, 200, "{body}");
    let held = std::fs::read_dir(format!("/proc/{}/fd", page.pid()))
        .expect("the page's descriptors")
        .count();
    assert!(held < 200, "the page holds {held} descriptors");
    let all_closed = wait_until(DEADLINE, || {
        open.retain_mut(|stream| !closed(stream));
        open.is_empty()
    });
    assert!(all_closed, "{} connections still open", open.len());
    page.stop();
    stop_host(fleet.root(), host);
}

/// Whether the server closed `stream` (an end of file or a reset), without waiting.
fn closed(stream: &mut std::net::TcpStream) -> bool {
    let _ = stream.set_nonblocking(true);
    let mut byte = [0u8; 1024];
    match std::io::Read::read(stream, &mut byte) {
        Ok(0) => true,
        Ok(_) => false,
        Err(err) => err.kind() != std::io::ErrorKind::WouldBlock,
    }
}

/// Lets this test process hold `wanted` descriptors, if its hard limit allows.
fn raise_descriptor_limit(wanted: u64) {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit and setrlimit only read and write the struct given.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) == 0 && limit.rlim_cur < wanted {
            limit.rlim_cur = wanted.min(limit.rlim_max);
            libc::setrlimit(libc::RLIMIT_NOFILE, &limit);
        }
    }
}

/// Bound to every address (`0.0.0.0`), it prints addresses another machine
/// can open: this machine's own, each of its interfaces'. (The test reaches
/// the page on loopback only.)
#[test]
fn bound_to_every_address_it_prints_the_machines_own() {
    let fleet = HostFleet::new(&["a"], 1);
    let host = fleet.host("none");
    let token_file = fleet.out_dir().join("web-token");
    std::fs::write(&token_file, "0123456789abcdef0123456789abcdef\n").expect("write");
    let token_arg = token_file.display().to_string();
    let mut page = Page::start_with(
        fleet.root(),
        &["serve", "--http", "0.0.0.0:0", "--token-file", &token_arg],
    );
    assert!(!page.base.contains("0.0.0.0"), "{}", page.base);
    assert_eq!(page.token, "0123456789abcdef0123456789abcdef");
    let printed: std::net::SocketAddr = page
        .base
        .trim_start_matches("http://")
        .trim_end_matches('/')
        .parse()
        .expect("an IP address and a port");
    let machines: Vec<std::net::IpAddr> = nix::ifaddrs::getifaddrs()
        .expect("the machine's addresses")
        .filter_map(|interface| interface.address?.as_sockaddr_in().map(|a| a.ip().into()))
        .collect();
    assert!(
        machines.contains(&printed.ip()),
        "{printed} is none of {machines:?}"
    );
    page.base = format!("http://127.0.0.1:{}/", printed.port());
    let (status, _, body) = get(&page, "/api/state", &[("Authorization", &page.auth)]);
    assert_eq!(status, 200, "{body}");
    page.stop();
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
    let state = page.wait_for_state("lane a ungated", |state| {
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
