//! The approval queue's files are untrusted input: hostile files in `pending/` are
//! refused or shown escaped, never followed, never block, and nothing is written
//! outside the queue folder. A burst of requests is listed exactly once each.

use crate::common;

use std::collections::{BTreeMap, HashSet};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use common::*;

const QUEUE: &str = ".clowder/approvals";

fn request(id: &str, title: &str) -> serde_json::Value {
    serde_json::json!({
        "id": id,
        "created": chrono::Utc::now().to_rfc3339(),
        "kind": "tool",
        "title": title,
        "tool_name": "Bash",
        "tool_input": {"command": "ls"},
        "session_id": "s",
        "cwd": "/p",
        "body": null
    })
}

/// Writes `bytes` as `pending/<name>` the way producers do: a temporary name in
/// the queue folder, then a rename.
fn put_pending(project: &Project, name: &str, bytes: &[u8]) {
    let temp = project.path(&format!("{QUEUE}/.tmp-test-{name}"));
    std::fs::write(&temp, bytes).expect("write temp");
    std::fs::rename(&temp, project.path(&format!("{QUEUE}/pending/{name}"))).expect("rename");
}

fn create_queue(project: &Project) {
    let output = project.run(&["queue"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr_of(&output));
    assert!(stdout_of(&output).starts_with("no pending requests"));
}

/// Runs clowder reading its output while it runs (a listing of 1,000 requests is
/// larger than a pipe buffer), killing it at the deadline.
fn run_draining(project: &Project, args: &[&str]) -> std::process::Output {
    use std::io::Read;
    let mut child = project.spawn(args);
    let mut stdout = child.stdout.take().expect("stdout");
    let mut stderr = child.stderr.take().expect("stderr");
    let out = std::thread::spawn(move || {
        let mut bytes = Vec::new();
        let _ = stdout.read_to_end(&mut bytes);
        bytes
    });
    let err = std::thread::spawn(move || {
        let mut bytes = Vec::new();
        let _ = stderr.read_to_end(&mut bytes);
        bytes
    });
    let mut output = wait_with_deadline(child, DEADLINE);
    output.stdout = out.join().expect("stdout reader");
    output.stderr = err.join().expect("stderr reader");
    output
}

fn listed_ids(output: &std::process::Output) -> Vec<String> {
    let listed: Vec<serde_json::Value> =
        serde_json::from_str(&stdout_of(output)).expect("queue --json is JSON");
    listed
        .iter()
        .map(|r| r["id"].as_str().expect("id").to_string())
        .collect()
}

/// Every file under `dir` with its bytes (symbolic links as their target).
fn snapshot(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut files = BTreeMap::new();
    for entry in std::fs::read_dir(dir).expect("read_dir").flatten() {
        let path = entry.path();
        let meta = std::fs::symlink_metadata(&path).expect("meta");
        let key = path.display().to_string();
        if meta.file_type().is_symlink() {
            files.insert(
                key,
                std::fs::read_link(&path)
                    .expect("link")
                    .display()
                    .to_string()
                    .into_bytes(),
            );
        } else if meta.is_dir() {
            files.extend(snapshot(&path));
        } else {
            files.insert(key, std::fs::read(&path).unwrap_or_default());
        }
    }
    files
}

#[test]
fn a_burst_of_a_thousand_requests_is_listed_once_each() {
    let project = Project::new("");
    create_queue(&project);
    // Ten waves of 100, each written while a listing runs.
    let (go_tx, go_rx) = std::sync::mpsc::channel::<()>();
    let writer = {
        let root = project.root().to_path_buf();
        std::thread::spawn(move || {
            for wave in 0..10 {
                go_rx.recv().expect("go");
                for i in wave * 100..(wave + 1) * 100 {
                    let id = format!("burst-{i:04}");
                    let temp = root.join(format!("{QUEUE}/.tmp-{id}"));
                    std::fs::write(&temp, request(&id, "burst").to_string()).expect("write");
                    std::fs::rename(&temp, root.join(format!("{QUEUE}/pending/{id}.json")))
                        .expect("rename");
                }
            }
        })
    };
    // Listings taken during the burst: never a duplicate, never a torn file.
    for _wave in 0..10 {
        go_tx.send(()).expect("send");
        let output = run_draining(&project, &["queue", "--json"]);
        assert_eq!(output.status.code(), Some(0));
        assert!(stderr_of(&output).is_empty(), "{}", stderr_of(&output));
        let ids = listed_ids(&output);
        let unique: HashSet<&String> = ids.iter().collect();
        assert_eq!(unique.len(), ids.len(), "a request was listed twice");
    }
    writer.join().expect("writer");
    let output = run_draining(&project, &["queue", "--json"]);
    let mut ids = listed_ids(&output);
    assert_eq!(ids.len(), 1000);
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), 1000, "each request exactly once");
    assert!(project.events_named("approval_rejected_file").is_empty());
}

#[test]
fn hostile_files_are_refused_escaped_and_never_followed() {
    let project = Project::new("");
    create_queue(&project);
    let outside = project.path("outside");
    std::fs::create_dir(&outside).expect("mkdir outside");
    std::fs::write(
        outside.join("secret.json"),
        request("secret", "secret").to_string(),
    )
    .expect("write");
    std::fs::write(
        outside.join("hard.json"),
        request("hard", "hard").to_string(),
    )
    .expect("write");
    let pending = project.path(&format!("{QUEUE}/pending"));

    // Over the size limit (valid JSON otherwise).
    let over = clowder::approvals::safe_read::MAX_FILE_BYTES as usize + 1000;
    put_pending(
        &project,
        "big.json",
        request("big", &"x".repeat(over)).to_string().as_bytes(),
    );
    // Invalid UTF-8.
    put_pending(
        &project,
        "utf8.json",
        b"{\"id\":\"utf8\",\"title\":\"\xff\xfe\"}",
    );
    // Not JSON.
    put_pending(&project, "badjson.json", b"{\"id\": \"badjson\",");
    // An unknown field.
    let mut unknown = request("unknown", "unknown");
    unknown["approved"] = serde_json::json!(true);
    put_pending(&project, "unknown.json", unknown.to_string().as_bytes());
    // A symbolic link to a valid request outside the queue.
    std::os::unix::fs::symlink(outside.join("secret.json"), pending.join("secret.json"))
        .expect("symlink");
    // A FIFO: reading it would block forever.
    nix::unistd::mkfifo(
        &pending.join("fifo.json"),
        nix::sys::stat::Mode::from_bits_truncate(0o600),
    )
    .expect("mkfifo");
    // A hard link to a valid request outside the queue.
    std::fs::hard_link(outside.join("hard.json"), pending.join("hard.json")).expect("link");
    // A directory.
    std::fs::create_dir(pending.join("dir.json")).expect("mkdir");
    // An id with ../ inside, and an id that is not the file name.
    put_pending(
        &project,
        "evil.json",
        request("../evil", "evil").to_string().as_bytes(),
    );
    put_pending(
        &project,
        "mismatch.json",
        request("other", "mismatch").to_string().as_bytes(),
    );
    // A name that is not <id>.json.
    put_pending(
        &project,
        "not an id.json",
        request("ok", "x").to_string().as_bytes(),
    );
    // Valid, with ANSI escapes and other control characters in its fields.
    let mut ansi = request("ansi", "\u{1b}[31mred\u{1b}[0m \u{7}bell \u{9b}2J");
    ansi["tool_input"] = serde_json::json!({"command": "echo \u{1b}]0;pwned\u{7}"});
    put_pending(&project, "ansi.json", ansi.to_string().as_bytes());
    // Valid and plain.
    put_pending(
        &project,
        "fine.json",
        request("fine", "fine").to_string().as_bytes(),
    );

    let outside_before = snapshot(&outside);
    let output = project.run(&["queue", "--json"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr_of(&output));
    let mut ids = listed_ids(&output);
    ids.sort();
    assert_eq!(ids, ["ansi", "fine"]);
    for raw in [&output.stdout, &output.stderr] {
        assert!(
            !raw.contains(&0x1b) && !raw.contains(&0x07),
            "raw control bytes printed"
        );
        assert!(
            !String::from_utf8_lossy(raw).contains('\u{9b}'),
            "raw C1 control printed"
        );
    }
    // The JSON still carries the exact text.
    let listed: Vec<serde_json::Value> = serde_json::from_str(&stdout_of(&output)).expect("json");
    let ansi_listed = listed.iter().find(|r| r["id"] == "ansi").expect("ansi");
    assert_eq!(
        ansi_listed["title"],
        "\u{1b}[31mred\u{1b}[0m \u{7}bell \u{9b}2J"
    );

    // The table shows the escapes as text.
    let output = project.run(&["queue"]);
    assert_eq!(output.status.code(), Some(0));
    let table = stdout_of(&output);
    assert!(
        table.contains("\\u{1b}[31mred\\u{1b}[0m \\u{7}bell \\u{9b}2J"),
        "{table}"
    );
    assert!(table.contains("echo \\u{1b}]0;pwned\\u{7}"), "{table}");
    assert!(!output.stdout.contains(&0x1b));

    // Every hostile file was reported, with its name and a reason, and moved aside.
    let rejected = project.events_named("approval_rejected_file");
    let reported: HashSet<String> = rejected
        .iter()
        .map(|e| e["file"].as_str().expect("file").to_string())
        .collect();
    for name in [
        "big.json",
        "utf8.json",
        "badjson.json",
        "unknown.json",
        "secret.json",
        "fifo.json",
        "hard.json",
        "dir.json",
        "evil.json",
        "mismatch.json",
        "not an id.json",
    ] {
        assert!(
            reported.contains(&format!("pending/{name}")),
            "{name} not reported: {rejected:?}"
        );
        assert!(
            std::fs::symlink_metadata(pending.join(name)).is_err(),
            "{name} still in pending/"
        );
    }
    let reason_of = |name: &str| {
        rejected
            .iter()
            .find(|e| e["file"] == format!("pending/{name}"))
            .and_then(|e| e["reason"].as_str())
            .unwrap_or_default()
            .to_string()
    };
    assert!(
        reason_of("big.json").contains("larger than"),
        "{}",
        reason_of("big.json")
    );
    assert!(reason_of("utf8.json").contains("UTF-8"));
    assert!(reason_of("unknown.json").contains("unknown field"));
    assert!(reason_of("secret.json").contains("symbolic link"));
    assert!(reason_of("fifo.json").contains("FIFO"));
    assert!(reason_of("hard.json").contains("hard link"));
    assert!(reason_of("dir.json").contains("directory"));
    assert!(reason_of("mismatch.json").contains("does not match"));

    // Nothing outside the queue changed; only the queue and the event log were written.
    assert_eq!(snapshot(&outside), outside_before);
    let mut top: Vec<String> = std::fs::read_dir(project.root())
        .expect("read_dir")
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    top.sort();
    assert_eq!(
        top,
        [
            ".clowder",
            "PROMPT.md",
            "harness-events.jsonl",
            "harness.toml",
            "outside"
        ]
    );

    // The valid ones can still be decided; a hostile one cannot.
    assert_eq!(project.run(&["approve", "fine"]).status.code(), Some(0));
    assert_eq!(project.run(&["approve", "secret"]).status.code(), Some(1));
}

#[test]
fn a_group_or_world_writable_queue_is_refused() {
    let project = Project::new("");
    let dir = project.path("shared-queue");
    std::fs::create_dir(&dir).expect("mkdir");
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o770)).expect("chmod");
    let output = project.run(&["queue", "--dir", "shared-queue"]);
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr_of(&output).contains("group- or world-writable"),
        "{}",
        stderr_of(&output)
    );
    assert!(
        !dir.join("pending").exists(),
        "nothing created in a refused folder"
    );

    // A subfolder made world-writable later is refused too, by every command.
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).expect("chmod");
    assert_eq!(
        project
            .run(&["queue", "--dir", "shared-queue"])
            .status
            .code(),
        Some(0)
    );
    assert_eq!(
        std::fs::metadata(dir.join("pending"))
            .expect("pending")
            .permissions()
            .mode()
            & 0o777,
        0o700
    );
    std::fs::set_permissions(dir.join("decided"), std::fs::Permissions::from_mode(0o777))
        .expect("chmod");
    for args in [
        &["queue", "--dir", "shared-queue"][..],
        &["approve", "x", "--dir", "shared-queue"],
        &["ask", "--title", "t", "--dir", "shared-queue"],
    ] {
        let output = project.run(args);
        assert_eq!(
            output.status.code(),
            Some(2),
            "{args:?}: {}",
            stderr_of(&output)
        );
    }
    let mut gate = project
        .command(&["gate", "--dir", "shared-queue"])
        .stdin(std::process::Stdio::piped())
        .spawn()
        .expect("spawn");
    {
        use std::io::Write;
        let mut stdin = gate.stdin.take().expect("stdin");
        stdin
            .write_all(br#"{"tool_name":"Bash","tool_input":{"command":"ls"}}"#)
            .expect("write");
    }
    let output = wait_with_deadline(gate, DEADLINE);
    assert_eq!(output.status.code(), Some(2), "{}", stderr_of(&output));
    assert!(stdout_of(&output).is_empty());
}
