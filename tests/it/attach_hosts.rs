//! `clowder attach` over several hosts, and hosts that cannot be reached:
//! targets refused before anything runs (a host name ssh would read as an
//! option, two hosts of one name), names that do not depend on which host
//! answers first, ssh's own reason for failing, and the lanes and requests of
//! a host that went away. Rooms in tmux, hosts through the real binary.

use crate::common;

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

use common::host::{HostFleet, stop_host};
use common::tmux::Tmux;
use common::{DEADLINE, clowder_bin, send_signal, stdout_of, wait_until, wait_with_deadline};
use serde_json::Value;

fn fake_ssh() -> String {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/agents/fake-ssh.sh");
    format!("sh {}", script.display())
}

/// Waits until the events pane, zoomed to the whole screen, shows every
/// one of `what`; then back to the room.
fn events_show(tmux: &Tmux, what: &[&str]) {
    let focused = wait_until(DEADLINE, || {
        if tmux.screen().contains("┏ Events") {
            return true;
        }
        tmux.keys(&["Tab"]);
        std::thread::sleep(std::time::Duration::from_millis(200));
        false
    });
    assert!(
        focused,
        "the events pane never took the focus:\n{}",
        tmux.screen()
    );
    tmux.keys(&["z"]);
    tmux.wait_for_all(what);
    tmux.keys(&["Escape"]);
}

fn attach_command(env: &str, args: &str) -> String {
    format!(
        "{env} {} attach {args}; echo ATTACH_EXIT=$?; sleep 600",
        clowder_bin().display()
    )
}

/// `clowder attach ARGS` in `dir`, with no terminal: (exit code, stderr).
fn attach_refused(dir: &Path, args: &[&str], ssh_args: &Path) -> (Option<i32>, String) {
    let output = Command::new(clowder_bin())
        .arg("attach")
        .args(args)
        .current_dir(dir)
        .env("CLOWDER_SSH", fake_ssh())
        .env("FAKE_SSH_ARGS", ssh_args)
        .stdin(Stdio::null())
        .output()
        .expect("run clowder attach");
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    (output.status.code(), stderr)
}

#[test]
fn a_host_or_user_that_ssh_would_read_as_an_option_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let ssh_args = dir.path().join("ssh-args");
    for target in [
        "ssh://-oProxyCommand=sh/srv/repo",
        "ssh://-oProxyCommand=sh@build-1/srv/repo",
        "ci=ssh://-F/tmp/x/srv",
    ] {
        let (code, stderr) = attach_refused(dir.path(), &[target], &ssh_args);
        assert_eq!(code, Some(2), "{target}: {stderr}");
        assert!(
            stderr.contains("cannot start with `-`"),
            "{target}: {stderr}"
        );
        assert!(!ssh_args.exists(), "{target} reached ssh");
    }
}

#[test]
fn ssh_gets_the_destination_after_a_double_dash_and_its_reason_for_failing_is_shown() {
    let dir = tempfile::tempdir().expect("tempdir");
    let ssh_args = dir.path().join("ssh-args");
    let env = format!(
        "CLOWDER_SSH='{}' FAKE_SSH_ARGS={}",
        fake_ssh(),
        ssh_args.display()
    );
    let command = attach_command(&env, "ssh://ann@build-1:2222/srv/repo");
    let tmux = Tmux::start(dir.path(), &command, 200, 40);
    // Named, though it never answered; and why, in ssh's words.
    events_show(
        &tmux,
        &[
            "host build-1 unreachable since",
            "ann@build-1: Permission denied (publickey).",
        ],
    );
    let args = std::fs::read_to_string(&ssh_args).expect("ssh ran");
    let args: Vec<&str> = args.lines().collect();
    let dashes = args.iter().position(|arg| *arg == "--").expect("a --");
    assert_eq!(
        args[dashes + 1..],
        ["ann@build-1", "clowder attach --stdio /srv/repo"],
        "{args:?}"
    );
    let port = args.iter().position(|arg| *arg == "-p").expect("-p");
    assert!(port < dashes && args[port + 1] == "2222", "{args:?}");
    tmux.keys(&["q"]);
    tmux.wait_for("ATTACH_EXIT=0");
}

#[test]
fn two_hosts_of_one_name_are_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let ssh_args = dir.path().join("ssh-args");
    let (code, stderr) = attach_refused(
        dir.path(),
        &["r1=ssh://build-1/srv", "r1=ssh://build-3/srv"],
        &ssh_args,
    );
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("two hosts are named \"r1\""), "{stderr}");

    std::fs::write(
        dir.path().join("harness.toml"),
        "[[hosts]]\nname = \"east\"\ntarget = \"ssh://build-1/srv\"\n\n[[hosts]]\nname = \"east\"\nvia = \"ssh build-2 clowder attach --stdio /srv\"\n",
    )
    .expect("write");
    let (code, stderr) = attach_refused(dir.path(), &[], &ssh_args);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains(
            "harness.toml: key `hosts[1]`.name: \"east\" is already the name of hosts[0]"
        ),
        "{stderr}"
    );
    assert!(!ssh_args.exists(), "a refused room ran ssh");
}

fn fleet_in(prefix: &str, lanes: &[&str]) -> HostFleet {
    let dir = tempfile::Builder::new()
        .prefix(prefix)
        .tempdir()
        .expect("tempdir");
    HostFleet::in_folder(dir, lanes, 3)
}

fn folder_name(fleet: &HostFleet) -> String {
    let canonical = fleet.root().canonicalize().expect("canonical");
    canonical
        .file_name()
        .expect("a name")
        .to_string_lossy()
        .into_owned()
}

#[test]
fn unnamed_hosts_are_named_after_their_folders_whichever_answers_first() {
    let alpha = fleet_in("alpha", &["api"]);
    let beta = fleet_in("beta", &["api"]);
    let (a, b) = (folder_name(&alpha), folder_name(&beta));
    // Only the second host runs: it answers first.
    let beta_host = beta.host("none");
    let args = format!("{} {}", alpha.root().display(), beta.root().display());
    let elsewhere = tempfile::tempdir().expect("tempdir");
    let tmux = Tmux::start(elsewhere.path(), &attach_command("", &args), 160, 40);
    tmux.wait_for(&format!("{b}/api"));
    events_show(&tmux, &[&format!("host {a} unreachable since")]);
    let alpha_host = alpha.host("none");
    tmux.wait_for_all(&[&format!("{a}/api"), &format!("{b}/api")]);
    tmux.keys(&["q"]);
    tmux.wait_for("ATTACH_EXIT=0");
    stop_host(alpha.root(), alpha_host);
    stop_host(beta.root(), beta_host);
}

/// The lanes pane's row of `lane`, if shown.
fn row_of<'a>(screen: &'a str, lane: &str) -> Option<&'a str> {
    screen
        .lines()
        .filter(|line| line.contains('│') || line.contains('┃'))
        .find(|line| line.split_whitespace().any(|word| word == lane))
}

#[test]
fn the_lanes_of_a_lost_host_say_so_and_a_decision_for_it_is_said_not_sent() {
    let one = fleet_in("one", &["api"]);
    let two = fleet_in("two", &["api", "docs"]);
    let one_host = one.host("none");
    let two_host = two.host("docs");
    let args = format!("one={} two={}", one.root().display(), two.root().display());
    let elsewhere = tempfile::tempdir().expect("tempdir");
    let tmux = Tmux::start(elsewhere.path(), &attach_command("", &args), 160, 45);
    tmux.wait_for("[two/docs]");
    let rows_say = |lane: &str, what: &str| {
        let mut last = String::new();
        let shown = wait_until(DEADLINE, || {
            last = tmux.screen();
            row_of(&last, lane).is_some_and(|row| row.contains(what))
        });
        assert!(shown, "the row of {lane} never said {what:?}:\n{last}");
    };
    rows_say("two/api", "● running");

    send_signal(two_host.id(), libc::SIGKILL);
    let mut two_host = two_host;
    let _ = two_host.wait();
    rows_say("two/api", "⚠ unreachable");
    rows_say("two/docs", "⚠ unreachable");
    rows_say("one/api", "● running");
    // Its request is still listed: `a` says it cannot reach the host.
    tmux.keys(&["a"]);
    tmux.wait_for("not sent");
    assert!(
        !two.answer("docs").contains("allow"),
        "a decision reached a host that was gone"
    );

    let again = two.host("none");
    rows_say("two/api", "● running");
    tmux.keys(&["q"]);
    tmux.wait_for("ATTACH_EXIT=0");
    stop_host(one.root(), one_host);
    stop_host(two.root(), again);
}

/// `clowder attach --stdio FOLDER` given `input`: (exit code, its lines).
fn bridge(folder: &Path, input: &[u8]) -> (Option<i32>, Vec<Value>) {
    let mut child = Command::new(clowder_bin())
        .args(["attach", "--stdio"])
        .arg(folder)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn the bridge");
    let mut stdin = child.stdin.take().expect("stdin");
    stdin.write_all(input).expect("write");
    drop(stdin);
    let output = wait_with_deadline(child, DEADLINE);
    let lines = stdout_of(&output)
        .lines()
        .map(|line| serde_json::from_str(line).expect("a JSON line"))
        .collect();
    (output.status.code(), lines)
}

#[test]
fn attach_stdio_fails_when_the_host_refuses_it_or_serves_another_folder() {
    let fleet = fleet_in("served", &["api"]);
    let host = fleet.host("none");
    let (code, lines) = bridge(fleet.root(), b"{\"type\":\"hello\",\"protocol\":999}\n");
    let last = lines.last().expect("a line");
    assert_eq!(last["type"], "refused", "{lines:?}");
    assert_eq!(code, Some(1), "refused, the bridge exited {code:?}");

    // Another folder whose .clowder leads to this host's.
    let other = tempfile::tempdir().expect("tempdir");
    std::os::unix::fs::symlink(fleet.root().join(".clowder"), other.path().join(".clowder"))
        .expect("symlink");
    let (code, lines) = bridge(other.path(), b"");
    assert_eq!(code, Some(1), "{lines:?}");
    assert_eq!(lines.len(), 1, "{lines:?}");
    let reason = lines[0]["reason"].as_str().unwrap_or_default();
    assert!(
        lines[0]["type"] == "refused" && reason.contains("not ") && reason.contains("serves"),
        "{lines:?}"
    );
    stop_host(fleet.root(), host);
}

#[test]
fn a_key_for_a_lost_host_behind_a_pipe_tries_it_again_at_once() {
    let fleet = fleet_in("piped", &["api"]);
    let host = fleet.host("none");
    let via = format!(
        "--via '{} attach --stdio {}'",
        clowder_bin().display(),
        fleet.root().display()
    );
    let elsewhere = tempfile::tempdir().expect("tempdir");
    let tmux = Tmux::start(elsewhere.path(), &attach_command("", &via), 160, 40);
    tmux.wait_for_all(&["attached to the host", "● running"]);
    send_signal(host.id(), libc::SIGKILL);
    let mut host = host;
    let _ = host.wait();
    tmux.wait_for("⚠ unreachable");
    // Tries at 1, 2, 4, 8 s: the next one is 16 s after the last.
    std::thread::sleep(std::time::Duration::from_secs(16));
    let again = fleet.host("none");
    let asked = std::time::Instant::now();
    tmux.keys(&["p"]);
    tmux.wait_for("not sent to host");
    let back = wait_until(DEADLINE, || {
        tmux.screen().matches("attached to the host").count() >= 2
    });
    let took = asked.elapsed();
    assert!(back, "the room never came back:\n{}", tmux.screen());
    assert!(
        took < std::time::Duration::from_secs(6),
        "the host was tried again only after {took:?}"
    );
    tmux.keys(&["q"]);
    tmux.wait_for("ATTACH_EXIT=0");
    stop_host(fleet.root(), again);
}
