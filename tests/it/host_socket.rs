//! Every fleet host serves `.clowder/host.sock`: through the real binary, a
//! headless fleet of fake agents (`tests/agents/fleet-agent.sh`) in a real
//! temporary repository, and clients that speak the protocol by hand (JSON
//! lines on a Unix socket). Every line a client reads here is checked against
//! `docs/protocol.schema.json`.

use crate::common;

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Barrier, OnceLock};
use std::time::{Duration, Instant};

use common::fleet::{lane_session_group, lane_status};
use common::git::clowder_command;
use common::host::HostFleet;
use common::{DEADLINE, cannot_run, clowder_bin, stdout_of, wait_until, wait_with_deadline};
use serde_json::{Value, json};
use tempfile::TempDir;

/// A repository with lanes whose agent is the fleet's fake agent, and its host.
struct Fleet {
    base: HostFleet,
    host: Option<Child>,
}

impl std::ops::Deref for Fleet {
    type Target = HostFleet;

    fn deref(&self) -> &HostFleet {
        &self.base
    }
}

impl Fleet {
    /// `lanes`, each running `iterations` sessions.
    fn new(lanes: &[&str], iterations: u32) -> Fleet {
        Fleet::in_folder(tempfile::tempdir().expect("tempdir"), lanes, iterations)
    }

    fn in_folder(dir: TempDir, lanes: &[&str], iterations: u32) -> Fleet {
        Fleet {
            base: HostFleet::in_folder(dir, lanes, iterations),
            host: None,
        }
    }

    /// Starts the host and waits until its socket answers; its pid.
    fn start(&mut self, secs: u32, gate_lane: &str) -> u32 {
        let child = self.host_command(secs, gate_lane).spawn().expect("spawn");
        let pid = child.id();
        self.host = Some(child);
        let mut hello = Value::Null;
        let served = wait_until(DEADLINE, || {
            hello = self.try_connect().map_or(Value::Null, |mut c| c.next());
            hello["pid"] == pid
        });
        assert!(served, "the host (pid {pid}) never served: {hello}");
        pid
    }

    fn try_connect(&self) -> Option<Client> {
        connect_socket(&self.socket()).ok().map(Client::new)
    }

    /// A client that has read the hello and the snapshot.
    fn connect(&self) -> (Client, Value) {
        let mut client = self.try_connect().expect("connect to host.sock");
        let hello = client.next();
        assert_eq!(hello["type"], "hello", "{hello}");
        let snapshot = client.next();
        assert_eq!(snapshot["type"], "snapshot", "{snapshot}");
        (client, snapshot)
    }

    /// The host's resident memory, in kB.
    fn host_rss_kb(&self) -> u64 {
        let pid = self.host.as_ref().expect("a host").id();
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("status");
        status
            .lines()
            .find_map(|line| line.strip_prefix("VmRSS:"))
            .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
            .expect("VmRSS")
    }

    /// SIGTERM, as a user's `kill` would, again each half second: the first
    /// lets the sessions finish, the second stops them.
    fn stop(&mut self) -> std::process::Output {
        let mut child = self.host.take().expect("a host");
        terminate(&mut child);
        wait_with_deadline(child, DEADLINE)
    }
}

fn terminate(child: &mut Child) {
    let start = Instant::now();
    while child.try_wait().ok().flatten().is_none() && start.elapsed() < DEADLINE {
        // SAFETY: kill(2) with a pid and a signal number touches no memory.
        unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
        std::thread::sleep(Duration::from_millis(500));
    }
}

impl Drop for Fleet {
    fn drop(&mut self) {
        if let Some(mut child) = self.host.take() {
            terminate(&mut child);
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Connects to `path`; one too long for a socket address through its
/// folder's descriptor, as clowder's own clients do.
fn connect_socket(path: &Path) -> std::io::Result<UnixStream> {
    if path.as_os_str().len() < 108 {
        return UnixStream::connect(path);
    }
    let folder = std::fs::File::open(path.parent().expect("a folder"))?;
    let short = Path::new("/proc/self/fd")
        .join(std::os::fd::AsRawFd::as_raw_fd(&folder).to_string())
        .join(path.file_name().expect("a name"));
    UnixStream::connect(short)
}

/// The protocol's schema, as `docs/` keeps it: (server side, client side).
fn validators() -> &'static (jsonschema::Validator, jsonschema::Validator) {
    static VALIDATORS: OnceLock<(jsonschema::Validator, jsonschema::Validator)> = OnceLock::new();
    VALIDATORS.get_or_init(|| {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/protocol.schema.json");
        let text = std::fs::read_to_string(&path).expect("read docs/protocol.schema.json");
        let schema: Value = serde_json::from_str(&text).expect("the schema is JSON");
        let side = |name: &str| {
            jsonschema::validator_for(&schema[name])
                .unwrap_or_else(|err| panic!("the {name} schema is no JSON Schema: {err}"))
        };
        (side("server"), side("client"))
    })
}

fn assert_valid(validator: &jsonschema::Validator, message: &Value, side: &str) {
    let errors: Vec<String> = validator
        .iter_errors(message)
        .map(|err| format!("{err} at {}", err.instance_path()))
        .take(5)
        .collect();
    assert!(
        errors.is_empty(),
        "a {side} message the schema refuses: {errors:?}\n{message}"
    );
}

/// One connection, read line by line.
struct Client {
    reader: BufReader<UnixStream>,
    writer: UnixStream,
}

impl Client {
    fn new(stream: UnixStream) -> Client {
        stream.set_read_timeout(Some(DEADLINE)).expect("timeout");
        let writer = stream.try_clone().expect("clone");
        Client {
            reader: BufReader::new(stream),
            writer,
        }
    }

    /// The next line, checked against the schema; `Null` at the end.
    fn next(&mut self) -> Value {
        let mut text = String::new();
        match self.reader.read_line(&mut text) {
            Ok(0) => return Value::Null,
            Ok(_) => {}
            Err(err) => panic!("no line from the host: {err}"),
        }
        let message: Value = serde_json::from_str(&text)
            .unwrap_or_else(|err| panic!("the host sent no JSON line ({err}): {text:?}"));
        assert_valid(&validators().0, &message, "server");
        message
    }

    /// Reads until `wanted` holds for a message, which it returns.
    fn until(&mut self, what: &str, mut wanted: impl FnMut(&Value) -> bool) -> Value {
        let start = Instant::now();
        let mut seen = Vec::new();
        while start.elapsed() < DEADLINE {
            let message = self.next();
            if message.is_null() {
                break;
            }
            if wanted(&message) {
                return message;
            }
            seen.push(message["type"].as_str().unwrap_or("?").to_string());
        }
        panic!("never got {what}; got {seen:?}");
    }

    fn send_raw(&mut self, bytes: &[u8]) {
        self.writer.write_all(bytes).expect("write to the host");
    }

    /// Sends one message, which must be valid for the schema.
    fn send(&mut self, message: &Value) {
        assert_valid(&validators().1, message, "client");
        self.send_raw(format!("{message}\n").as_bytes());
    }

    /// Sends a message carrying `re` and returns the host's reply to it.
    fn ask(&mut self, mut message: Value, re: u64) -> Value {
        message["re"] = json!(re);
        self.send(&message);
        self.until(&format!("the reply to {re}"), |m| {
            m["type"] == "reply" && m["re"] == re
        })
    }

    fn ping(&mut self, re: u64) -> Value {
        self.ask(json!({"type": "ping"}), re)
    }
}

/// A lane's snapshot in a `host` message: (lane, snapshot).
fn lane_snapshot(message: &Value) -> Option<(&str, &Value)> {
    let lane = &message["msg"]["lane"];
    let snapshot = &lane["report"]["snapshot"]["snapshot"];
    let name = lane["lane"].as_str()?;
    (message["type"] == "host" && snapshot.is_object()).then_some((name, snapshot))
}

fn lane_names(snapshot: &Value) -> Vec<&str> {
    snapshot["lanes"]
        .as_array()
        .expect("lanes")
        .iter()
        .filter_map(|lane| lane["name"].as_str())
        .collect()
}

#[test]
fn a_client_gets_the_hello_then_the_snapshot_then_each_change_as_it_happens() {
    let mut fleet = Fleet::new(&["api", "docs"], 2);
    let pid = fleet.start(20, "");
    let mut client = fleet.try_connect().expect("connect");
    let hello = client.next();
    assert_eq!(hello["type"], "hello", "{hello}");
    assert_eq!(hello["protocol"], 1, "{hello}");
    assert_eq!(hello["pid"], pid, "{hello}");
    assert_eq!(hello["clowder"], env!("CARGO_PKG_VERSION"), "{hello}");
    let folder = PathBuf::from(hello["folder"].as_str().expect("folder"));
    assert_eq!(
        folder.canonicalize().expect("folder"),
        fleet.root().canonicalize().expect("root")
    );
    let snapshot = client.next();
    assert_eq!(snapshot["type"], "snapshot", "{snapshot}");
    assert_eq!(lane_names(&snapshot), ["api", "docs"], "{snapshot}");
    let facts = snapshot["facts"].as_array().expect("facts");
    assert!(
        facts
            .iter()
            .all(|f| f["lane"] == "api" || f["lane"] == "docs"),
        "{snapshot}"
    );
    // The lanes' output grows, and each change of a lane arrives.
    for lane in ["api", "docs"] {
        let mut first: Option<u64> = None;
        client.until(&format!("lane {lane}'s output growing"), |message| {
            let Some((name, snap)) = lane_snapshot(message).filter(|(name, _)| *name == lane)
            else {
                return false;
            };
            assert_eq!(name, lane);
            let bytes = snap["output_bytes"].as_u64().unwrap_or(0);
            let grew = first.is_some_and(|first| bytes > first);
            first.get_or_insert(bytes);
            grew && snap["state"] == "session_running"
        });
    }
}

/// A host offers changes in its snapshot; a client that asks for them gets a
/// writing lane's moving fields (`lane_changed`), smaller than its snapshot.
/// (That anything else moved goes whole is `LaneChange::between`'s unit test.)
#[test]
fn a_client_that_asks_for_changes_gets_a_writing_lanes_moved_fields_only() {
    let mut fleet = Fleet::new(&["api"], 1);
    fleet.start(4, "");
    let mut client = fleet.try_connect().expect("connect");
    assert_eq!(client.next()["type"], "hello");
    let snapshot = client.next();
    assert_eq!(snapshot["changes"], true, "{snapshot}");
    client.send(&json!({"type": "changes"}));
    let mut bytes = 0;
    let change = client.until("a lane_changed of api with its output grown", |message| {
        let grown = message["type"] == "lane_changed"
            && message["lane"] == "api"
            && message["output_bytes"].as_u64().is_some_and(|b| b > bytes);
        if let Some((_, snap)) = lane_snapshot(message) {
            bytes = snap["output_bytes"].as_u64().unwrap_or(0);
        }
        grown
    });
    assert!(change.get("state").is_none(), "{change}");
    assert!(change.to_string().len() < 600, "{change}");
}

#[test]
fn a_request_pauses_a_lane_and_one_for_an_unknown_lane_is_refused_with_the_reason() {
    let mut fleet = Fleet::new(&["api", "docs"], 1);
    fleet.start(30, "");
    lane_session_group(fleet.root(), "api");
    let (mut client, _) = fleet.connect();
    let pause =
        json!({"type": "request", "request": {"command": {"lane": "api", "command": "pause"}}});
    let reply = client.ask(pause, 1);
    assert_eq!(reply["ok"], true, "{reply}");
    client.until("api's snapshot saying paused", |message| {
        lane_snapshot(message).is_some_and(|(lane, snap)| lane == "api" && snap["paused"] == true)
    });
    let paused = wait_until(DEADLINE, || {
        lane_status(fleet.root(), "api").is_some_and(|status| status["paused"] == true)
    });
    assert!(paused, "{:?}", lane_status(fleet.root(), "api"));
    let docs = lane_status(fleet.root(), "docs").expect("docs status");
    assert_eq!(docs["paused"], false, "{docs}");

    let unknown =
        json!({"type": "request", "request": {"command": {"lane": "nope", "command": "pause"}}});
    let reply = client.ask(unknown, 2);
    assert_eq!(reply["ok"], false, "{reply}");
    let text = reply["text"].as_str().expect("text");
    assert!(
        text.contains("nope") && text.contains("not running"),
        "{text}"
    );

    let resume =
        json!({"type": "request", "request": {"command": {"lane": "api", "command": "resume"}}});
    assert_eq!(client.ask(resume, 3)["ok"], true);
    client.until("api's snapshot saying resumed", |message| {
        lane_snapshot(message).is_some_and(|(lane, snap)| lane == "api" && snap["paused"] == false)
    });
}

#[test]
fn two_clients_deciding_one_request_at_once_one_wins_and_the_other_hears_who() {
    let mut fleet = Fleet::new(&["api", "docs"], 1);
    fleet.start(30, "api");
    let (mut first, first_snapshot) = fleet.connect();
    let (mut second, second_snapshot) = fleet.connect();
    let mut id = String::new();
    let asked = |message: &Value| {
        !message["requests"]
            .as_array()
            .is_none_or(|requests| requests.is_empty())
    };
    for (client, snapshot) in [(&mut first, first_snapshot), (&mut second, second_snapshot)] {
        // In the snapshot if the gate asked before the client came, else as news.
        let requests = if asked(&snapshot) {
            snapshot
        } else {
            client.until("the gate's request", |message| {
                message["type"] == "requests" && asked(message)
            })
        };
        let request = &requests["requests"][0]["request"];
        assert!(
            request.to_string().contains("git push origin clowder/api"),
            "{requests}"
        );
        id = request["id"].as_str().expect("id").to_string();
    }
    let barrier = Arc::new(Barrier::new(2));
    let decide = |mut client: Client, by: &'static str| {
        let (barrier, id) = (Arc::clone(&barrier), id.clone());
        std::thread::spawn(move || {
            let decision =
                json!({"type": "decide", "id": id, "decision": {"decision": "approve"}, "by": by});
            barrier.wait();
            client.ask(decision, 1)
        })
    };
    let one = decide(first, "room one");
    let two = decide(second, "room two");
    let replies = [one.join().expect("room one"), two.join().expect("room two")];
    let won: Vec<&Value> = replies.iter().filter(|r| r["ok"] == true).collect();
    assert_eq!(won.len(), 1, "exactly one decision wins: {replies:?}");
    let winner = if replies[0]["ok"] == true {
        "room one"
    } else {
        "room two"
    };
    let lost = replies.iter().find(|r| r["ok"] == false).expect("a loser");
    let text = lost["text"].as_str().expect("text");
    assert!(
        text.contains("already approved") && text.contains(winner),
        "the loser is told who decided first: {text}"
    );
    let answered = wait_until(DEADLINE, || fleet.out("answer-api.json").contains("allow"));
    assert!(
        answered,
        "the gate's answer: {:?}",
        fleet.out("answer-api.json")
    );
}

/// A client that writes pings and reads nothing: its replies fill its queue.
fn stalled_client(fleet: &Fleet) -> (UnixStream, std::thread::JoinHandle<()>) {
    let stream = UnixStream::connect(fleet.socket()).expect("connect");
    let mut writer = stream.try_clone().expect("clone");
    let flood = std::thread::spawn(move || {
        for re in 0..30_000u64 {
            let line = format!("{{\"type\":\"ping\",\"re\":{re}}}\n");
            if writer.write_all(line.as_bytes()).is_err() {
                return;
            }
        }
    });
    (stream, flood)
}

#[test]
fn a_client_that_stops_reading_never_slows_the_host_and_is_told_what_it_missed() {
    let mut fleet = Fleet::new(&["api", "docs"], 1);
    fleet.start(40, "");
    lane_session_group(fleet.root(), "api");
    lane_session_group(fleet.root(), "docs");
    let rss_before = fleet.host_rss_kb();
    let (stalled, flood) = stalled_client(&fleet);
    let (mut watcher, _) = fleet.connect();
    let bytes = |lane| {
        lane_status(fleet.root(), lane).map_or(0, |s| s["output_bytes"].as_u64().unwrap_or(0))
    };
    let (api_before, docs_before) = (bytes("api"), bytes("docs"));
    // For 10 s the stalled client reads nothing, while the other one sees
    // every lane's changes and its pings answered.
    let start = Instant::now();
    let mut changes = 0;
    let mut re = 0;
    while start.elapsed() < Duration::from_secs(10) {
        watcher.until("a lane's change", |m| lane_snapshot(m).is_some());
        changes += 1;
        if changes % 10 == 0 {
            re += 1;
            assert_eq!(watcher.ping(re)["ok"], true);
        }
    }
    assert!(changes >= 10, "the watcher saw {changes} changes in 10 s");
    assert!(
        bytes("api") > api_before && bytes("docs") > docs_before,
        "the lanes went on"
    );
    let rss_after = fleet.host_rss_kb();
    eprintln!(
        "host RSS: {rss_before} kB before the stall, {rss_after} kB after; {changes} changes seen"
    );
    assert!(
        rss_after < rss_before + 50_000,
        "the host grew from {rss_before} kB to {rss_after} kB"
    );
    // Reading again, the stalled client is told it missed changes, then gets
    // the fleet as it is now.
    let mut stalled = Client::new(stalled);
    let hello = stalled.next();
    assert_eq!(hello["type"], "hello", "{hello}");
    let overflowed = stalled.until("overflowed", |m| m["type"] == "overflowed");
    assert!(
        overflowed["dropped"].as_u64().unwrap_or(0) > 0,
        "{overflowed}"
    );
    let next = stalled.until("the next line", |m| m["type"] != "reply");
    assert_eq!(next["type"], "snapshot", "{next}");
    assert_eq!(lane_names(&next), ["api", "docs"]);
    // Its pings unsent yet need not be: hanging up ends the flood.
    let _ = stalled.writer.shutdown(std::net::Shutdown::Both);
    flood.join().expect("flood");
}

#[test]
fn a_stale_socket_is_replaced_and_a_live_hosts_is_never_taken() {
    let mut fleet = Fleet::new(&["api"], 1);
    let first = fleet.start(60, "");
    let group = lane_session_group(fleet.root(), "api");
    // A second host in the same folder refuses, and leaves the first served.
    let second = wait_with_deadline(fleet.host_command(60, "").spawn().expect("spawn"), DEADLINE);
    let said = format!("{}{}", stdout_of(&second), common::stderr_of(&second));
    assert_eq!(second.status.code(), Some(2), "{said}");
    assert!(
        said.contains("another clowder loop is already running in this folder")
            && said.contains(&format!("PID {first}")),
        "names the running host: {said}"
    );
    let (mut client, _) = fleet.connect();
    assert_eq!(client.ping(1)["ok"], true);
    drop(client);
    let mut hello = fleet.try_connect().expect("connect");
    assert_eq!(hello.next()["pid"], first);
    // A host killed leaves its socket behind; the next host replaces it.
    let mut host = fleet.host.take().expect("host");
    host.kill().expect("SIGKILL");
    host.wait().expect("wait");
    // SAFETY: kill(2) with a group and a signal number touches no memory.
    unsafe { libc::kill(-group, libc::SIGKILL) };
    assert!(fleet.socket().exists(), "a killed host's socket stays");
    assert!(
        fleet.try_connect().is_none(),
        "nobody serves a dead host's socket"
    );
    let replacement = fleet.start(60, "");
    assert_ne!(replacement, first);
    let (mut client, snapshot) = fleet.connect();
    assert_eq!(lane_names(&snapshot), ["api"]);
    assert_eq!(client.ping(2)["ok"], true);
}

#[test]
fn hostile_lines_are_refused_and_the_host_goes_on() {
    let mut fleet = Fleet::new(&["api"], 1);
    fleet.start(60, "");
    let (mut client, _) = fleet.connect();
    client.send_raw(b"\x00\x01 not json at all\n");
    let refused = client.until("a refusal", |m| m["type"] == "refused");
    assert_eq!(refused["closing"], false, "{refused}");
    assert!(
        refused["reason"]
            .as_str()
            .expect("reason")
            .contains("one JSON object per line"),
        "{refused}"
    );
    assert_eq!(client.ping(1)["ok"], true, "the connection stays");

    client.send_raw(b"{\"type\":\"format_disk\"}\n");
    let refused = client.until("a refusal", |m| m["type"] == "refused");
    let reason = refused["reason"].as_str().expect("reason");
    assert!(
        reason.contains("hello, request, decide, ping, follow"),
        "names the expected types: {reason}"
    );
    assert_eq!(client.ping(2)["ok"], true, "the connection stays");

    // A client of another protocol version is told so, and hung up on.
    let (mut other, _) = fleet.connect();
    other.send(&json!({"type": "hello", "protocol": 99, "client": "a future room"}));
    let refused = other.until("a refusal", |m| m["type"] == "refused");
    assert_eq!(refused["closing"], true, "{refused}");
    let reason = refused["reason"].as_str().expect("reason");
    assert!(reason.contains("protocol 1, the client 99"), "{reason}");
    assert!(other.next().is_null(), "hung up on");

    // A line of 100 MB: refused after the first MiB, and hung up on.
    let (mut huge, _) = fleet.connect();
    let mut writer = huge.writer.try_clone().expect("clone");
    let flood = std::thread::spawn(move || {
        let chunk = vec![b'x'; 1 << 20];
        for _ in 0..100 {
            if writer.write_all(&chunk).is_err() {
                return false;
            }
        }
        true
    });
    let refused = huge.until("a refusal", |m| m["type"] == "refused");
    assert_eq!(refused["closing"], true, "{refused}");
    assert!(
        refused["reason"]
            .as_str()
            .expect("reason")
            .contains("longer than"),
        "{refused}"
    );
    // Then the end: the host closed with the rest of the line unread, which
    // the kernel tells a reader as a reset rather than as the end of the file.
    let mut rest = String::new();
    match huge.reader.read_to_string(&mut rest) {
        Ok(_) => assert!(rest.is_empty(), "nothing after the refusal: {rest}"),
        Err(err) => assert_eq!(err.kind(), std::io::ErrorKind::ConnectionReset, "{err}"),
    }
    assert!(!flood.join().expect("flood"), "the 100 MB were all taken");
    assert_eq!(client.ping(3)["ok"], true, "the host serves the others");
}

/// At least `wanted` file descriptors for this process (and the host it starts).
fn raise_open_files(wanted: u64) -> bool {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit write and read only `limit`.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) != 0 {
            return false;
        }
        if limit.rlim_cur >= wanted {
            return true;
        }
        limit.rlim_cur = wanted.min(limit.rlim_max);
        libc::setrlimit(libc::RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur >= wanted
    }
}

#[test]
fn a_thousand_connections_at_once_the_ones_beyond_the_cap_are_refused() {
    if !raise_open_files(4096) {
        return cannot_run("cannot raise RLIMIT_NOFILE to 4096");
    }
    let mut fleet = Fleet::new(&["api"], 1);
    fleet.start(60, "");
    lane_session_group(fleet.root(), "api");
    let streams: Vec<UnixStream> = (0..1000)
        .map(|n| {
            UnixStream::connect(fleet.socket())
                .unwrap_or_else(|err| panic!("connection {n}: {err}"))
        })
        .collect();
    let (mut served, mut refused) = (0, 0);
    for stream in streams.iter() {
        let mut client = Client::new(stream.try_clone().expect("clone"));
        let first = client.next();
        match first["type"].as_str() {
            Some("hello") => served += 1,
            Some("refused") => {
                let reason = first["reason"].as_str().expect("reason");
                assert!(reason.contains("at most 64 clients"), "{reason}");
                assert_eq!(first["closing"], true);
                assert!(client.next().is_null(), "hung up on");
                refused += 1;
            }
            _ => panic!("{first}"),
        }
    }
    assert!(
        served <= 64 && served > 0,
        "served {served}, refused {refused}"
    );
    assert_eq!(served + refused, 1000);
    drop(streams);
    // Afterwards, once the host has seen them go, a client is served, and the
    // lane runs on.
    let served = wait_until(DEADLINE, || {
        fleet
            .try_connect()
            .is_some_and(|mut client| client.next()["type"] == "hello")
    });
    assert!(served, "no client served after the thousand left");
    let (mut client, snapshot) = fleet.connect();
    assert_eq!(lane_names(&snapshot), ["api"]);
    assert_eq!(client.ping(1)["ok"], true);
    let mut first: Option<u64> = None;
    client.until("api's output growing", |message| {
        let Some((_, snap)) = lane_snapshot(message) else {
            return false;
        };
        let bytes = snap["output_bytes"].as_u64().unwrap_or(0);
        *first.get_or_insert(bytes) < bytes
    });
}

/// `clowder attach --stdio FOLDER` as uid 65534: its output and exit code.
fn attach_as_nobody(folder: &Path) -> (String, Option<i32>) {
    let output = Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .arg(clowder_bin())
        .args(["attach", "--stdio"])
        .arg(folder)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn setpriv");
    let output = wait_with_deadline(output, DEADLINE);
    (stdout_of(&output), output.status.code())
}

fn mode(path: &Path) -> u32 {
    std::fs::symlink_metadata(path)
        .expect("stat")
        .permissions()
        .mode()
        & 0o777
}

fn chmod(path: &Path, mode: u32) {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).expect("chmod");
}

#[test]
fn another_user_can_neither_reach_the_socket_nor_be_served_by_it() {
    let mut fleet = Fleet::new(&["api"], 1);
    fleet.start(60, "");
    let state = fleet.root().join(".clowder");
    assert_eq!(mode(&state), 0o700, "the .clowder folder");
    assert_eq!(mode(&fleet.socket()), 0o600, "the socket");
    // SAFETY: geteuid(2) touches no memory.
    if unsafe { libc::geteuid() } != 0 || Command::new("setpriv").arg("--help").output().is_err() {
        return cannot_run("needs root and setpriv to act as another user");
    }
    // Only .clowder's mode keeps the other user out: the folder above is open.
    chmod(fleet.root(), 0o755);
    let (said, code) = attach_as_nobody(fleet.root());
    assert_eq!(code, Some(1), "{said}");
    let refusal: Value = serde_json::from_str(said.trim()).expect("one JSON line");
    let reason = refusal["reason"].as_str().expect("reason");
    // A host of another user is not "no host": nothing to start there.
    assert!(
        reason.contains("Permission denied")
            && reason.contains("serves only the user it runs as")
            && !reason.contains("start one"),
        "{refusal}"
    );
    // With the modes opened, the host itself refuses the other uid, and
    // the bridge says it failed.
    chmod(&state, 0o755);
    chmod(&fleet.socket(), 0o666);
    let (said, code) = attach_as_nobody(fleet.root());
    assert_eq!(
        code,
        Some(1),
        "refused by the host, the bridge exited {code:?}: {said}"
    );
    let first: Value =
        serde_json::from_str(said.lines().next().unwrap_or("")).expect("a JSON line");
    assert_eq!(first["type"], "refused", "{said}");
    let reason = first["reason"].as_str().expect("reason");
    assert!(
        reason.contains("only its own user (uid 0)") && reason.contains("uid 65534"),
        "{reason}"
    );
    assert_eq!(said.lines().count(), 1, "nothing else is said: {said}");
    chmod(&state, 0o700);
    let (mut client, _) = fleet.connect();
    assert_eq!(client.ping(1)["ok"], true, "its own user is still served");
}

#[test]
fn the_socket_is_removed_when_the_host_ends() {
    let mut fleet = Fleet::new(&["api"], 1);
    fleet.start(1, "");
    let host = fleet.host.take().expect("host");
    let output = wait_with_deadline(host, DEADLINE);
    assert_eq!(output.status.code(), Some(0), "{}", stdout_of(&output));
    assert!(
        !fleet.socket().exists(),
        "the socket stays after a normal end"
    );
    // Stopped by a signal, too.
    let mut fleet = Fleet::new(&["api"], 1);
    fleet.start(60, "");
    lane_session_group(fleet.root(), "api");
    fleet.stop();
    assert!(!fleet.socket().exists(), "the socket stays after SIGTERM");
}

#[test]
fn attach_stdio_bridges_a_pipe_to_the_socket_and_says_why_when_no_host_runs() {
    let mut fleet = Fleet::new(&["api"], 1);
    fleet.start(60, "");
    let mut bridge = clowder_command(fleet.root(), &["attach", "--stdio"])
        .arg(fleet.root())
        .stdin(Stdio::piped())
        .spawn()
        .expect("spawn the bridge");
    let mut stdin = bridge.stdin.take().expect("stdin");
    stdin
        .write_all(b"{\"type\":\"ping\",\"re\":7}\n")
        .expect("write");
    drop(stdin);
    let output = wait_with_deadline(bridge, DEADLINE);
    assert_eq!(
        output.status.code(),
        Some(0),
        "{}",
        common::stderr_of(&output)
    );
    let lines: Vec<Value> = stdout_of(&output)
        .lines()
        .map(|line| serde_json::from_str(line).expect("a JSON line"))
        .collect();
    let types: Vec<&str> = lines.iter().filter_map(|m| m["type"].as_str()).collect();
    assert_eq!(types[..2], ["hello", "snapshot"], "{types:?}");
    let reply = lines
        .iter()
        .find(|m| m["type"] == "reply")
        .expect("a reply");
    assert_eq!(reply["re"], 7);
    assert_eq!(reply["text"], "pong");

    let empty = tempfile::tempdir().expect("tempdir");
    let output = wait_with_deadline(
        clowder_command(empty.path(), &["attach", "--stdio"])
            .arg(empty.path())
            .spawn()
            .expect("spawn"),
        DEADLINE,
    );
    assert_eq!(output.status.code(), Some(1));
    let refusal: Value = serde_json::from_str(stdout_of(&output).trim()).expect("one JSON line");
    assert_eq!(refusal["type"], "refused", "{refusal}");
    assert_eq!(refusal["closing"], true, "{refusal}");
    assert!(
        refusal["reason"]
            .as_str()
            .expect("reason")
            .contains("clowder --headless"),
        "{refusal}"
    );
}

#[test]
fn a_client_follows_a_lanes_output_and_nothing_outside_the_lanes_folder() {
    let mut fleet = Fleet::new(&["api", "docs"], 1);
    fleet.start(60, "");
    let (mut client, _) = fleet.connect();
    let mut files = std::collections::BTreeMap::new();
    client.until("both lanes' output files", |message| {
        if let Some((lane, snap)) = lane_snapshot(message)
            && let Some(file) = snap["output_file"].as_str()
        {
            files.insert(lane.to_string(), file.to_string());
        }
        files.len() == 2
    });
    client.send(&json!({"type": "follow", "lane": "api", "file": files["api"]}));
    let output = client.until("api's output", |m| {
        m["type"] == "output" && m["lines"].to_string().contains("tick")
    });
    assert_eq!(output["lane"], "api");
    assert_eq!(output["file"], files["api"].as_str());

    let lane_dir = fleet.root().join(".clowder/lanes/api");
    std::os::unix::fs::symlink("/etc/passwd", lane_dir.join("passwd")).expect("symlink");
    let outside = [
        "/etc/passwd".to_string(),
        format!("{}/../../../../../../etc/passwd", lane_dir.display()),
        lane_dir.join("passwd").display().to_string(),
        files["docs"].clone(),
        lane_dir.display().to_string(),
    ];
    for file in outside {
        client.send(&json!({"type": "follow", "lane": "api", "file": file}));
        let refused = client.until("a refusal", |m| m["type"] == "refused");
        let reason = refused["reason"].as_str().expect("reason");
        assert!(reason.contains("not followed"), "{file}: {reason}");
        assert_eq!(refused["closing"], false);
    }
    assert_eq!(client.ping(1)["ok"], true);
}

#[test]
fn a_host_whose_folder_is_too_deep_for_a_socket_address_still_serves() {
    let deep = tempfile::Builder::new()
        .prefix(&"deep".repeat(30))
        .tempdir()
        .expect("tempdir");
    let mut fleet = Fleet::in_folder(deep, &["api"], 1);
    assert!(fleet.socket().as_os_str().len() > 108);
    fleet.start(60, "");
    let (mut client, snapshot) = fleet.connect();
    assert_eq!(lane_names(&snapshot), ["api"]);
    assert_eq!(client.ping(1)["ok"], true);
    let mut bridge = clowder_command(fleet.root(), &["attach", "--stdio"])
        .arg(fleet.root())
        .stdin(Stdio::piped())
        .spawn()
        .expect("spawn the bridge");
    let mut stdin = bridge.stdin.take().expect("stdin");
    stdin
        .write_all(b"{\"type\":\"ping\",\"re\":2}\n")
        .expect("write");
    drop(stdin);
    let output = wait_with_deadline(bridge, DEADLINE);
    assert_eq!(
        output.status.code(),
        Some(0),
        "{}",
        common::stderr_of(&output)
    );
    assert!(
        stdout_of(&output).contains(r#""re":2,"ok":true"#),
        "{}",
        stdout_of(&output)
    );
    fleet.stop();
    assert!(
        !fleet.socket().exists(),
        "the deep socket is removed at the end"
    );
}
