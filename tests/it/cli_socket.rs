//! `clowder lanes`, `queue`, `approve` and `reject` ask the host that serves
//! the folder on `.clowder/host.sock`, and read the files when none does (or
//! with CLOWDER_NO_SOCKET=1): the same answers either way, for the same state.
//! A stand-in host on the socket shows that the socket is what was read, and
//! that a host that does not answer, or a socket left by a dead one, leaves
//! the command to the files.

use crate::common;

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::host::{HostFleet, stop_host};
use common::{DEADLINE, clowder_bin, stderr_of, stdout_of, wait_until};
use serde_json::Value;

/// A fleet whose host runs headless, and the CLI run both ways in it.
struct Fleet(HostFleet);

impl std::ops::Deref for Fleet {
    type Target = HostFleet;

    fn deref(&self) -> &HostFleet {
        &self.0
    }
}

impl Fleet {
    fn new(lanes: &[&str]) -> Fleet {
        Fleet(HostFleet::new(lanes, 3))
    }

    /// `clowder ARGS` here: through the host when `socket`, else on the files.
    fn clowder(&self, args: &[&str], socket: bool) -> Output {
        let mut command = Command::new(clowder_bin());
        command.args(args).current_dir(self.root());
        if socket {
            command.env_remove("CLOWDER_NO_SOCKET");
        } else {
            command.env("CLOWDER_NO_SOCKET", "1");
        }
        let child = command
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("run clowder");
        common::wait_with_deadline(child, DEADLINE)
    }

    /// The ids of the pending requests, as the files list them.
    fn pending_ids(&self) -> Vec<String> {
        let output = self.clowder(&["queue", "--json"], false);
        let listed: Value = serde_json::from_str(&stdout_of(&output)).unwrap_or(Value::Null);
        listed
            .as_array()
            .map(|all| {
                let ids = all.iter().filter_map(|r| r["id"].as_str());
                ids.map(str::to_string).collect()
            })
            .unwrap_or_default()
    }
}

/// What a command answered: exit code, stdout, stderr.
fn answer_of(output: &Output) -> (Option<i32>, String, String) {
    (output.status.code(), stdout_of(output), stderr_of(output))
}

/// Runs `args` through the host and on the files until both answer alike (a
/// listing shows ages in seconds, and a lane's output grows meanwhile);
/// returns the socket's answer.
fn same_both_ways(fleet: &Fleet, args: &[&str]) -> (Option<i32>, String, String) {
    let started = Instant::now();
    loop {
        let socket = answer_of(&fleet.clowder(args, true));
        let files = answer_of(&fleet.clowder(args, false));
        assert!(
            !socket.2.contains("note:"),
            "clowder {args:?} had trouble with the host: {}",
            socket.2
        );
        if socket == files {
            return socket;
        }
        assert!(
            started.elapsed() < DEADLINE,
            "clowder {args:?} answers differently:\nthrough the host: {socket:?}\nfrom the files: {files:?}"
        );
        std::thread::sleep(Duration::from_millis(300));
    }
}

fn stop(root: &Path, host: Child) {
    stop_host(root, host);
}

/// Waits until lane `docs` asks through the gate; returns the request's id.
fn wait_for_request(fleet: &Fleet) -> String {
    let mut ids = Vec::new();
    assert!(
        wait_until(DEADLINE, || {
            ids = fleet.pending_ids();
            !ids.is_empty()
        }),
        "lane docs never asked through the gate"
    );
    ids.remove(0)
}

#[test]
fn lanes_and_queue_answer_the_same_through_the_host_and_the_files() {
    let fleet = Fleet::new(&["api", "docs"]);
    let host = fleet.host("docs");
    wait_for_request(&fleet);
    // The host lists the request once it has read it again.
    assert!(
        wait_until(DEADLINE, || stdout_of(&fleet.clowder(&["queue"], true))
            .contains("[docs]")),
        "the host never listed the request"
    );
    let lanes = same_both_ways(&fleet, &["lanes"]);
    assert_eq!(lanes.0, Some(0), "{lanes:?}");
    assert!(
        lanes.1.contains("api") && lanes.1.contains("docs"),
        "{lanes:?}"
    );
    same_both_ways(&fleet, &["lanes", "--json"]);
    let queue = same_both_ways(&fleet, &["queue"]);
    assert!(queue.1.contains("[docs]"), "{queue:?}");
    same_both_ways(&fleet, &["queue", "--json"]);
    stop(fleet.root(), host);
    // No host now: the files answer, with no note about it.
    let files = answer_of(&fleet.clowder(&["lanes"], true));
    assert_eq!(files.0, Some(0));
    assert!(files.2.is_empty(), "{files:?}");
}

#[test]
fn approve_and_reject_answer_the_same_through_the_host_and_the_files() {
    let fleet = Fleet::new(&["api", "docs"]);
    let host = fleet.host("docs");
    let id = wait_for_request(&fleet);
    // No client has looked before: the host's first answer lists it, at once.
    let first = answer_of(&fleet.clowder(&["queue", "--json"], true));
    assert!(
        first.1.contains(&id),
        "the host's first listing missed {id}: {first:?}"
    );
    let unknown = same_both_ways(&fleet, &["approve", "q-nosuch"]);
    assert_eq!(unknown.0, Some(1), "{unknown:?}");

    let approved = answer_of(&fleet.clowder(&["approve", &id, "--reason", "fine"], true));
    assert_eq!(
        approved,
        (Some(0), format!("approved {id}\n"), String::new()),
        "approving through the host"
    );
    assert!(
        wait_until(DEADLINE, || fleet.answer("docs").contains("allow")),
        "approved through the host, the gate never allowed"
    );
    // Written by the host (its pid), under the CLI's name.
    let record = decided_record(fleet.root(), &id);
    let by = record["decision"]["decided_by"]
        .as_str()
        .unwrap_or_default();
    assert!(
        by.starts_with("clowder approve (user ") && by.ends_with(&format!("pid {})", host.id())),
        "{record}"
    );

    let again = same_both_ways(&fleet, &["approve", &id]);
    assert_eq!(again.0, Some(1), "{again:?}");
    assert!(again.2.contains("clowder approve: error:"), "{again:?}");
    let reject = same_both_ways(&fleet, &["reject", &id, "--reason", "no"]);
    assert_eq!(reject.0, Some(1), "{reject:?}");
    assert!(reject.2.contains("clowder reject: error:"), "{reject:?}");
    stop(fleet.root(), host);
}

/// The decided request's record in the default queue's done/.
fn decided_record(root: &Path, id: &str) -> Value {
    let done = root.join(".clowder/approvals/done");
    let found = std::fs::read_dir(&done)
        .into_iter()
        .flatten()
        .flatten()
        .map(|entry| entry.path())
        .find(|path| path.to_string_lossy().contains(id));
    let text = found
        .and_then(|path| std::fs::read_to_string(path).ok())
        .unwrap_or_default();
    serde_json::from_str(&text).unwrap_or(Value::Null)
}

/// The host's hello and snapshot lines, once the snapshot shows lane `api`'s
/// state and a pending request.
fn capture(fleet: &Fleet) -> (String, Value) {
    let mut captured = None;
    let ready = wait_until(DEADLINE, || {
        let Ok(stream) = UnixStream::connect(fleet.socket()) else {
            return false;
        };
        let _ = stream.set_read_timeout(Some(Duration::from_secs(10)));
        let mut reader = BufReader::new(stream);
        let (mut hello, mut snapshot) = (String::new(), String::new());
        let _ = reader.read_line(&mut hello);
        let _ = reader.read_line(&mut snapshot);
        let snapshot: Value = serde_json::from_str(&snapshot).unwrap_or(Value::Null);
        let api = api_facts(&snapshot).is_some_and(|facts| facts["snapshot"].is_object());
        let asked = snapshot["requests"]
            .as_array()
            .is_some_and(|r| !r.is_empty());
        if api && asked {
            captured = Some((hello.trim_end().to_string(), snapshot));
        }
        captured.is_some()
    });
    assert!(
        ready,
        "the host's snapshot never showed lane api and a request"
    );
    captured.expect("captured")
}

fn api_facts(snapshot: &Value) -> Option<&Value> {
    let facts = snapshot["facts"].as_array()?;
    facts.iter().find(|facts| facts["lane"] == "api")
}

/// A stand-in host on `socket`: says `hello` and `snapshot`, answers every
/// line with a reply that it was done, and keeps the lines it got.
fn stand_in(socket: &Path, hello: String, snapshot: Value) -> Arc<Mutex<Vec<String>>> {
    let _ = std::fs::remove_file(socket);
    let listener = UnixListener::bind(socket).expect("bind the stand-in");
    let heard = Arc::new(Mutex::new(Vec::new()));
    let kept = Arc::clone(&heard);
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let mut writer = stream.try_clone().expect("clone");
            let _ = writeln!(writer, "{hello}\n{snapshot}");
            for line in BufReader::new(stream).lines().map_while(Result::ok) {
                let message: Value = serde_json::from_str(&line).unwrap_or(Value::Null);
                let reply = serde_json::json!({
                    "type": "reply", "re": message["re"], "ok": true, "text": "done"
                });
                kept.lock().expect("lock").push(line);
                let _ = writeln!(writer, "{reply}");
            }
        }
    });
    heard
}

#[test]
fn a_served_folder_is_answered_from_the_socket_not_the_files() {
    let fleet = Fleet::new(&["api", "docs"]);
    let host = fleet.host("docs");
    let (hello, mut snapshot) = capture(&fleet);
    stop(fleet.root(), host);
    // What only the socket says: lane api at iteration 77 (newer than its
    // status file, which the stopped host wrote last), a request's title.
    let facts = snapshot["facts"].as_array_mut().expect("facts");
    for facts in facts.iter_mut().filter(|facts| facts["lane"] == "api") {
        facts["snapshot"]["iteration"] = Value::from(77);
        facts["snapshot"]["last_update"] = Value::from("2100-01-01T00:00:00Z");
    }
    let request = &mut snapshot["requests"][0]["request"];
    request["title"] = Value::from("asked through the socket");
    let id = request["id"].as_str().expect("an id").to_string();
    let heard = stand_in(&fleet.socket(), hello, snapshot);

    let lanes = answer_of(&fleet.clowder(&["lanes"], true));
    assert!(lanes.1.contains(" 77/"), "{lanes:?}");
    let files = answer_of(&fleet.clowder(&["lanes"], false));
    assert!(!files.1.contains(" 77/"), "{files:?}");

    let queue = answer_of(&fleet.clowder(&["queue"], true));
    assert!(queue.1.contains("asked through the socket"), "{queue:?}");

    let approved = answer_of(&fleet.clowder(&["approve", &id], true));
    assert_eq!(
        approved,
        (Some(0), format!("approved {id}\n"), String::new())
    );
    let lines = heard.lock().expect("lock").clone();
    let decide: Value = serde_json::from_str(lines.last().expect("a line")).expect("json");
    assert_eq!(decide["type"], "decide", "{lines:?}");
    assert_eq!(decide["id"], id.as_str());
    assert_eq!(decide["by"], "clowder approve");
    assert_eq!(decide["decision"]["decision"], "approve");
}

#[test]
fn a_host_that_does_not_answer_or_is_gone_leaves_the_answer_to_the_files() {
    let fleet = Fleet::new(&["api"]);
    let files = answer_of(&fleet.clowder(&["lanes"], false));
    std::fs::create_dir_all(fleet.socket().parent().expect("folder")).expect("mkdir");

    // A socket left by a dead host: the files answer, nothing is said.
    drop(UnixListener::bind(fleet.socket()).expect("bind"));
    assert_eq!(answer_of(&fleet.clowder(&["lanes"], true)), files);

    // A host that takes the connection and says nothing.
    std::fs::remove_file(fleet.socket()).expect("rm");
    let mute = UnixListener::bind(fleet.socket()).expect("bind");
    let started = Instant::now();
    let (code, stdout, stderr) = answer_of(&fleet.clowder(&["lanes"], true));
    assert_eq!((code, stdout), (files.0, files.1.clone()));
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.contains("note:") && stderr.contains("reading the files"),
        "{stderr}"
    );
    assert!(
        started.elapsed() < DEADLINE,
        "clowder lanes hung on a mute host"
    );
    drop(mute);
}
