//! `[ui] notify_url` is POSTed by the host, in ntfy's format, on each call for
//! attention: a gate's request and lanes that end name their lane; the page's
//! link is added while `.clowder/web-url` says where it is served; a server
//! that fails gets three attempts in all, said on the console; and a URL
//! nobody answers holds nothing up. Through the real binary, against a local
//! HTTP server.

use crate::common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::sync::{Arc, Mutex};

use common::git::{clowder_command, clowder_in, init_with_one_commit};
use common::{DEADLINE, clowder_bin, stdout_of, wait_until, wait_with_deadline};
use serde_json::Value;

/// One POST the server was sent.
#[derive(Debug, Clone)]
struct Post {
    title: String,
    body: String,
}

/// A local HTTP server that answers every request with `status`, recording it.
struct Server {
    url: String,
    posts: Arc<Mutex<Vec<Post>>>,
}

impl Server {
    fn start(status: u16) -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = listener.local_addr().expect("address").port();
        let posts = Arc::new(Mutex::new(Vec::new()));
        let seen = Arc::clone(&posts);
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                if let Some(post) = answer(stream, status) {
                    seen.lock().expect("lock").push(post);
                }
            }
        });
        Server {
            url: format!("http://127.0.0.1:{port}/clowder-topic"),
            posts,
        }
    }

    fn posts(&self) -> Vec<Post> {
        self.posts.lock().expect("lock").clone()
    }

    fn wait_for(&self, found: impl Fn(&Post) -> bool, what: &str) -> Post {
        let mut hit = None;
        let seen = wait_until(DEADLINE, || {
            hit = self.posts().into_iter().find(|post| found(post));
            hit.is_some()
        });
        assert!(seen, "no POST for {what}; got {:?}", self.posts());
        hit.expect("found")
    }
}

/// Reads one request (headers, then `Content-Length` bytes) and answers it.
fn answer(stream: TcpStream, status: u16) -> Option<Post> {
    let mut reader = BufReader::new(stream.try_clone().ok()?);
    let mut title = String::new();
    let mut length = 0;
    let mut line = String::new();
    reader.read_line(&mut line).ok()?;
    let post = line.starts_with("POST ");
    loop {
        line.clear();
        if reader.read_line(&mut line).ok()? == 0 || line == "\r\n" {
            break;
        }
        let (name, value) = line.split_once(':')?;
        match name.to_ascii_lowercase().as_str() {
            "content-length" => length = value.trim().parse().ok()?,
            "title" => title = value.trim().to_string(),
            _ => {}
        }
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body).ok()?;
    let reply = format!("HTTP/1.1 {status} X\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok");
    let _ = (&stream).write_all(reply.as_bytes());
    let body = String::from_utf8_lossy(&body).into_owned();
    post.then_some(Post { title, body })
}

/// A port nothing listens on.
fn closed_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    listener.local_addr().expect("address").port()
}

fn ui_section(url: &str) -> String {
    format!("[ui]\nnotify = \"off\"\nnotify_url = {url:?}\n")
}

/// A fleet of `lanes` with the fleet agent, `[ui]` set to POST to `url`.
fn fleet(root: &Path, lanes: &[&str], url: &str) {
    init_with_one_commit(root);
    std::fs::write(root.join("PROMPT.md"), "Do the work.\n").expect("write");
    let agent = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/agents/fleet-agent.sh");
    let config = format!(
        "[agent]\ncommand = {:?}\n\n[session]\nmax_iterations = 1\n\n[watchdog]\nmin_output_bytes = 1\n\n{}",
        agent.display().to_string(),
        ui_section(url)
    );
    std::fs::write(root.join("harness.toml"), config).expect("write");
    for lane in lanes {
        clowder_in(root, &["lane", "add", lane]);
    }
}

fn headless_host(root: &Path, out: &Path, gate_lane: &str) -> std::process::Child {
    Command::new(clowder_bin())
        .arg("--headless")
        .current_dir(root)
        .env("FLEET_AGENT_SECS", "1")
        .env("FLEET_AGENT_OUT", out)
        .env("FLEET_AGENT_GATE_LANE", gate_lane)
        .env("FLEET_AGENT_CLOWDER", clowder_bin())
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env_remove("http_proxy")
        .env_remove("HTTP_PROXY")
        .env_remove("ALL_PROXY")
        .env_remove("all_proxy")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start the host")
}

/// A single loop in `root` whose agent exits with `code`, POSTing to `url`.
fn single_loop(root: &Path, code: u8, url: &str) -> Output {
    let agent = root.join("agent.sh");
    std::fs::write(&agent, format!("#!/bin/sh\necho 'working'\nexit {code}\n")).expect("write");
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&agent, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    std::fs::write(root.join("PROMPT.md"), "Do the work.\n").expect("write");
    let config = format!(
        "[agent]\ncommand = {:?}\nargs = []\n\n[session]\nmax_iterations = 1\n\n[watchdog]\nmin_output_bytes = 1\n\n{}",
        agent.display().to_string(),
        ui_section(url)
    );
    std::fs::write(root.join("harness.toml"), config).expect("write");
    let child = Command::new(clowder_bin())
        .arg("--headless")
        .current_dir(root)
        .env_remove("http_proxy")
        .env_remove("HTTP_PROXY")
        .env_remove("ALL_PROXY")
        .env_remove("all_proxy")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start clowder");
    wait_with_deadline(child, DEADLINE)
}

fn folder_name(root: &Path) -> String {
    let full = root.canonicalize().expect("canonical");
    full.file_name()
        .expect("a name")
        .to_string_lossy()
        .into_owned()
}

fn approve_all(root: &Path) {
    let mut ids = Vec::new();
    let listed = wait_until(DEADLINE, || {
        let output = clowder_command(root, &["queue", "--json"])
            .output()
            .expect("clowder queue");
        let listed: Value = serde_json::from_slice(&output.stdout).unwrap_or(Value::Null);
        let requests = listed
            .as_array()
            .or_else(|| listed["requests"].as_array())
            .cloned()
            .unwrap_or_default();
        ids = requests
            .iter()
            .filter_map(|r| r["id"].as_str().map(str::to_string))
            .collect();
        !ids.is_empty()
    });
    assert!(listed, "no pending request listed");
    for id in &ids {
        clowder_in(root, &["approve", id]);
    }
}

/// A headless fleet POSTs the gate's request, titled and worded with its
/// lane, and each lane's end, once; without `.clowder/web-url`, no link.
#[test]
fn a_headless_fleet_posts_its_requests_and_ended_lanes() {
    let server = Server::start(200);
    let repo = tempfile::tempdir().expect("tempdir");
    let out = tempfile::tempdir().expect("tempdir");
    let root = repo.path();
    fleet(root, &["alpha", "beta"], &server.url);
    let host = headless_host(root, out.path(), "alpha");
    let asked = server.wait_for(
        |post| post.body.contains("approval requested"),
        "the request",
    );
    assert_eq!(asked.title, "clowder: alpha");
    assert!(
        asked.body.starts_with("alpha: approval requested: "),
        "{asked:?}"
    );
    assert!(asked.body.contains("git push origin"), "{asked:?}");
    approve_all(root);
    let output = wait_with_deadline(host, DEADLINE * 2);
    assert!(output.status.success(), "{}", common::stderr_of(&output));
    // The host lets its last POSTs go before it exits: no wait here.
    let posts = server.posts();
    for lane in ["alpha", "beta"] {
        let done = format!("lane {lane} is done");
        let count = posts.iter().filter(|p| p.body == done).count();
        assert_eq!(count, 1, "{done:?} in {posts:?}");
        let title = format!("clowder: {lane}");
        assert!(posts.iter().any(|p| p.body == done && p.title == title));
    }
    assert_eq!(posts.len(), 3, "{posts:?}");
}

/// While `.clowder/web-url` names the page, the text ends with its link (and
/// never a token); a lane that fails is posted as failed.
#[test]
fn the_text_links_to_the_page_while_it_is_served() {
    let server = Server::start(200);
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path();
    std::fs::create_dir_all(root.join(".clowder")).expect("mkdir");
    std::fs::write(
        root.join(".clowder/web-url"),
        "http://127.0.0.1:7700/?token=s3cret\n",
    )
    .expect("write");
    single_loop(root, 3, &server.url);
    let name = folder_name(root);
    let failed = server.wait_for(|post| post.body.contains("is failed"), "the failure");
    assert_eq!(
        failed.body,
        format!("lane {name} is failed — open http://127.0.0.1:7700/")
    );
    assert_eq!(failed.title, format!("clowder: {name}"));
    assert!(!failed.body.contains("s3cret"));
}

/// A server that answers 500 gets three attempts in all; each failure is
/// said on the console and the fleet ends as it would have.
#[test]
fn a_failing_server_gets_three_attempts_and_the_host_goes_on() {
    let server = Server::start(500);
    let repo = tempfile::tempdir().expect("tempdir");
    let out = tempfile::tempdir().expect("tempdir");
    let root = repo.path();
    fleet(root, &["solo"], &server.url);
    let host = headless_host(root, out.path(), "none");
    let output = wait_with_deadline(host, DEADLINE * 2);
    let stdout = stdout_of(&output);
    assert!(output.status.success(), "{stdout}");
    let posts = server.posts();
    assert_eq!(posts.len(), 3, "{posts:?}");
    assert!(
        posts.iter().all(|p| p.body == "lane solo is done"),
        "{posts:?}"
    );
    let said = format!("notify_url: POST {} failed: it answered 500", server.url);
    let retrying = stdout.matches(&format!("{said}; retrying")).count();
    assert_eq!(retrying, 2, "{stdout}");
    assert!(
        stdout.contains(&format!("{said}; gave up after 3 attempts")),
        "{stdout}"
    );
}

/// A URL nobody listens on holds nothing up: the loop ends as it would have,
/// and says that it gave up.
#[test]
fn an_unreachable_url_never_holds_the_loop() {
    let dir = tempfile::tempdir().expect("tempdir");
    let url = format!("http://127.0.0.1:{}/topic", closed_port());
    let output = single_loop(dir.path(), 0, &url);
    let stdout = stdout_of(&output);
    assert!(output.status.success(), "{stdout}");
    assert!(
        stdout.contains(&format!("notify_url: POST {url} failed: ")),
        "{stdout}"
    );
    assert!(stdout.contains("gave up after 3 attempts"), "{stdout}");
}
