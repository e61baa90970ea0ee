//! `clowder attach`: the control room as a client of a headless host, in a
//! real terminal (tmux), reached through its socket, through `--via`, and
//! over real SSH (Debian's sshd on a free port of 127.0.0.1, with a host key
//! and a key pair made here). Decisions, pauses, a host killed and started
//! again, a connection cut: read off the screen and the host's files.

use crate::common;

use std::path::Path;
use std::process::{Child, Command, Stdio};

use common::fleet::lane_status;
use common::git::clowder_in;
use common::host::{HostFleet, stop_host};
use common::sshd::Sshd;
use common::tmux::Tmux;
use common::{DEADLINE, clowder_bin, pid_alive, send_signal, wait_until};

type Fleet = HostFleet;

/// `lanes` of three sessions each.
fn fleet(lanes: &[&str]) -> Fleet {
    HostFleet::new(lanes, 3)
}

/// Ends a host: SIGTERM, then again once taken.
fn stop(root: &Path, host: Child) {
    stop_host(root, host);
}

fn attach_command(args: &str) -> String {
    format!(
        "{} attach {args}; echo ATTACH_EXIT=$?; sleep 600",
        clowder_bin().display()
    )
}

/// Moves the selection with `j` (then `k`, past the last row) until the
/// header names `lane`, each key waited for; the last screen.
fn walk_to(tmux: &Tmux, lane: &str) -> String {
    for key in ["j", "k"] {
        for _ in 0..8 {
            let now = selected_lane(&tmux.screen());
            if now.as_deref() == Some(lane) {
                return tmux.screen();
            }
            tmux.keys(&[key]);
            let moved = wait_until(std::time::Duration::from_secs(5), || {
                selected_lane(&tmux.screen()) != now
            });
            if !moved {
                break;
            }
        }
    }
    tmux.screen()
}

/// The lane the room's header names (the selected one).
fn selected_lane(screen: &str) -> Option<String> {
    let header = screen.lines().next()?;
    let after = header.split("lane ").nth(1)?;
    after.split_whitespace().next().map(str::to_string)
}

#[test]
fn an_attached_room_decides_pauses_and_leaves_the_host_running() {
    let fleet = fleet(&["api", "docs"]);
    let host = fleet.host("docs");
    let tmux = Tmux::start(fleet.root(), &attach_command(""), 120, 40);
    let other = Tmux::start(fleet.root(), &attach_command(""), 120, 40);
    tmux.wait_for("attached to the host");
    tmux.wait_for("Approvals (1 waiting)");
    other.wait_for("Approvals (1 waiting)");
    tmux.keys(&["a"]);
    assert!(
        wait_until(DEADLINE, || fleet.answer("docs").contains("allow")),
        "approved in the attached room, the gate never allowed; screen:\n{}",
        tmux.screen()
    );
    tmux.wait_for(" approved");
    // The other room sees the request go, and who decided it.
    other.wait_for(" approved");
    other.wait_for("nothing waiting");
    other.keys(&["q"]);
    other.wait_for("ATTACH_EXIT=0");

    let screen = tmux.wait_for("● running");
    let lane = selected_lane(&screen).expect("a lane is selected");
    tmux.keys(&["p"]);
    assert!(
        wait_until(DEADLINE, || lane_status(fleet.root(), &lane)
            .is_some_and(|status| status["paused"] == true)),
        "p in the attached room never paused lane {lane}; screen:\n{}",
        tmux.screen()
    );
    tmux.wait_for("‖ paused");
    tmux.keys(&["q"]);
    // It leaves without a question, and says that nothing stopped.
    let screen = tmux.wait_for("ATTACH_EXIT=0");
    let root = std::fs::canonicalize(fleet.root()).expect("canonical root");
    let said = format!("left the room; the lanes go on ({})", root.display());
    assert!(screen.replace('\n', "").contains(&said), "{screen}");
    assert!(
        pid_alive(host.id() as i32),
        "quitting the room stopped the host"
    );
    drop(tmux);

    // Later, from another terminal: everything as it was.
    let again = Tmux::start(fleet.root(), &attach_command(""), 120, 40);
    again.wait_for("‖ paused");
    assert!(
        lane_status(fleet.root(), &lane).is_some_and(|status| status["paused"] == true),
        "the lane did not stay paused"
    );
    again.keys(&["q"]);
    again.wait_for("ATTACH_EXIT=0");
    stop(fleet.root(), host);
}

#[test]
fn attach_with_no_host_says_how_to_start_one() {
    let fleet = fleet(&["api"]);
    let output = Command::new(clowder_bin())
        .arg("attach")
        .current_dir(fleet.root())
        .output()
        .expect("run clowder attach");
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("no clowder host serves") && stderr.contains("clowder --headless"),
        "{stderr}"
    );
}

#[test]
fn a_room_through_via_sees_a_host_killed_and_started_again() {
    let fleet = fleet(&["api", "docs"]);
    let host = fleet.host("none");
    let via = format!(
        "--via '{} attach --stdio {}'",
        clowder_bin().display(),
        fleet.root().display()
    );
    let tmux = Tmux::start(fleet.root(), &attach_command(&via), 120, 40);
    tmux.wait_for("attached to the host");
    tmux.wait_for("● running");

    let pid = host.id();
    send_signal(pid, libc::SIGKILL);
    let mut host = host;
    let _ = host.wait();
    tmux.wait_for(" unreachable since");

    let restarted = fleet.host("none");
    assert!(
        wait_until(DEADLINE, || tmux
            .screen()
            .matches("attached to the host")
            .count()
            >= 2),
        "the room never came back to the restarted host; screen:\n{}",
        tmux.screen()
    );
    tmux.wait_for("● running");
    tmux.keys(&["q"]);
    tmux.wait_for("ATTACH_EXIT=0");
    stop(fleet.root(), restarted);
}

/// The PIDs of the ssh clients whose command line names `marker`.
fn ssh_clients(marker: &str) -> Vec<i32> {
    let mut pids = Vec::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
        let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        if cmdline.starts_with("ssh ") && cmdline.contains(marker) {
            pids.push(pid);
        }
    }
    pids
}

#[test]
fn a_room_over_ssh_decides_and_survives_a_cut_connection() {
    let Some(sshd) = Sshd::start() else {
        return;
    };
    let fleet = fleet(&["api", "docs"]);
    let host = fleet.host("docs");
    let target = format!(
        "ssh://root@127.0.0.1:{}{}",
        sshd.port,
        fleet.root().display()
    );
    let command = format!(
        "CLOWDER_SSH='{}' CLOWDER_REMOTE_COMMAND='{}' {}",
        sshd.ssh_command(),
        clowder_bin().display(),
        attach_command(&target)
    );
    let somewhere_else = tempfile::tempdir().expect("tempdir");
    let tmux = Tmux::start(somewhere_else.path(), &command, 120, 40);
    tmux.wait_for("attached to the host");
    tmux.wait_for("Approvals (1 waiting)");
    tmux.keys(&["a"]);
    assert!(
        wait_until(DEADLINE, || fleet.answer("docs").contains("allow")),
        "approved over ssh, the gate never allowed; screen:\n{}",
        tmux.screen()
    );

    // The connection cut: the ssh client killed mid-stream.
    let marker = fleet.root().display().to_string();
    let clients = ssh_clients(&marker);
    assert!(!clients.is_empty(), "no ssh client runs for {marker}");
    for pid in &clients {
        send_signal(*pid as u32, libc::SIGKILL);
    }
    tmux.wait_for(" unreachable since");
    assert!(
        wait_until(DEADLINE, || tmux
            .screen()
            .matches("attached to the host")
            .count()
            >= 2),
        "the room never reconnected over ssh; screen:\n{}",
        tmux.screen()
    );
    tmux.keys(&["q"]);
    tmux.wait_for("ATTACH_EXIT=0");
    assert!(
        wait_until(DEADLINE, || ssh_clients(&marker).is_empty()),
        "an ssh client outlived the room: {:?}",
        ssh_clients(&marker)
    );
    stop(fleet.root(), host);
}

/// The PIDs of `clowder attach` processes working in `folder`.
fn rooms_in(folder: &Path) -> Vec<i32> {
    let folder = folder
        .canonicalize()
        .unwrap_or_else(|_| folder.to_path_buf());
    let mut pids = Vec::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
        let attach = cmdline.split(|b| *b == 0).nth(1) == Some(b"attach".as_slice());
        let cwd = std::fs::read_link(entry.path().join("cwd")).ok();
        if attach && cwd.as_deref() == Some(folder.as_path()) {
            pids.push(pid);
        }
    }
    pids
}

#[test]
fn closing_the_terminal_of_an_attached_room_stops_no_lane() {
    let fleet = fleet(&["api", "docs"]);
    let host = fleet.host("none");
    let running = |lane: &str| {
        lane_status(fleet.root(), lane).is_some_and(|status| status["state"] == "session_running")
    };
    assert!(wait_until(DEADLINE, || running("api") && running("docs")));
    let tmux = Tmux::start(fleet.root(), &attach_command(""), 120, 40);
    tmux.wait_for("attached to the host");
    assert_eq!(rooms_in(fleet.root()).len(), 1, "one room runs");
    drop(tmux);
    assert!(
        wait_until(DEADLINE, || rooms_in(fleet.root()).is_empty()),
        "the room outlived its terminal: {:?}",
        rooms_in(fleet.root())
    );
    for lane in ["api", "docs"] {
        let status = lane_status(fleet.root(), lane).expect("status");
        assert_eq!(
            status["stop_pending"], false,
            "{lane} was told to stop: {status}"
        );
        assert!(status["exit_reason"].is_null(), "{lane} ended: {status}");
    }
    assert!(
        running("api") && running("docs"),
        "a lane stopped with the room"
    );
    stop(fleet.root(), host);
}

#[test]
fn a_staying_host_serves_with_no_lane_and_starts_lanes_added_later() {
    let fleet = fleet(&[]);
    let host = Command::new(clowder_bin())
        .args(["--headless", "--stay"])
        .current_dir(fleet.root())
        .env("FLEET_AGENT_SECS", "120")
        .env("FLEET_AGENT_OUT", fleet.out_dir())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start the host");
    let socket = fleet.root().join(".clowder/host.sock");
    assert!(
        wait_until(DEADLINE, || std::os::unix::net::UnixStream::connect(
            &socket
        )
        .is_ok()),
        "a host with no lane never served"
    );
    clowder_in(fleet.root(), &["lane", "add", "api"]);
    assert!(
        wait_until(DEADLINE, || lane_status(fleet.root(), "api")
            .is_some_and(|status| status["state"] == "session_running")),
        "the lane added to a staying host never started"
    );
    stop(fleet.root(), host);
    assert!(!socket.exists(), "the socket outlived its host");
}

#[test]
fn one_room_over_three_hosts_acts_on_each_lane_s_own_host() {
    let one = fleet(&["api"]);
    let two = fleet(&["api", "docs"]);
    let three = fleet(&["web"]);
    let hosts = [one.host("none"), two.host("docs"), three.host("none")];
    let args = format!(
        "one={} two={} three={}",
        one.root().display(),
        two.root().display(),
        three.root().display()
    );
    let elsewhere = tempfile::tempdir().expect("tempdir");
    let tmux = Tmux::start(elsewhere.path(), &attach_command(&args), 140, 45);
    tmux.wait_for_all(&["one/api", "two/api", "two/docs", "three/web"]);
    tmux.wait_for("Approvals (1 waiting)");
    tmux.wait_for("[two/docs]");
    tmux.keys(&["a"]);
    assert!(
        wait_until(DEADLINE, || two.answer("docs").contains("allow")),
        "approved in a room over three hosts, host two's gate never allowed; screen:\n{}",
        tmux.screen()
    );

    // Walk to two/api and pause it: only host two's api pauses.
    let screen = walk_to(&tmux, "two/api");
    assert_eq!(
        selected_lane(&screen).as_deref(),
        Some("two/api"),
        "{screen}"
    );
    tmux.keys(&["p"]);
    assert!(
        wait_until(DEADLINE, || lane_status(two.root(), "api")
            .is_some_and(|status| status["paused"] == true)),
        "two/api never paused; screen:\n{}",
        tmux.screen()
    );
    let one_api = lane_status(one.root(), "api").expect("one's api status");
    assert_eq!(one_api["paused"], false, "host one's api was paused too");
    tmux.keys(&["q"]);
    tmux.wait_for("ATTACH_EXIT=0");
    let [h1, h2, h3] = hosts;
    stop(one.root(), h1);
    stop(two.root(), h2);
    stop(three.root(), h3);
}

#[test]
fn plain_clowder_where_a_host_runs_attaches_to_it() {
    let fleet = fleet(&["api"]);
    let host = fleet.host("none");
    let command = format!("{}; echo ROOM_EXIT=$?; sleep 600", clowder_bin().display());
    let tmux = Tmux::start(fleet.root(), &command, 120, 40);
    tmux.wait_for("attached to the host");
    tmux.keys(&["q"]);
    tmux.wait_for("ROOM_EXIT=0");
    assert!(pid_alive(host.id() as i32), "quitting stopped the host");
    stop(fleet.root(), host);
}

#[test]
fn hosts_in_harness_toml_are_attached_by_name() {
    let one = fleet(&["api"]);
    let two = fleet(&["api"]);
    let hosts = [one.host("none"), two.host("none")];
    let laptop = tempfile::tempdir().expect("tempdir");
    let config = format!(
        "[[hosts]]\nname = \"east\"\ntarget = {:?}\n\n[[hosts]]\nname = \"west\"\nvia = \"{} attach --stdio {}\"\n",
        one.root().display().to_string(),
        clowder_bin().display(),
        two.root().display()
    );
    std::fs::write(laptop.path().join("harness.toml"), config).expect("write");
    let tmux = Tmux::start(laptop.path(), &attach_command(""), 120, 40);
    tmux.wait_for_all(&["east/api", "west/api"]);
    tmux.keys(&["q"]);
    tmux.wait_for("ATTACH_EXIT=0");
    let [h1, h2] = hosts;
    stop(one.root(), h1);
    stop(two.root(), h2);

    std::fs::write(
        laptop.path().join("harness.toml"),
        "[[hosts]]\nname = \"east\"\ntarget = \"/srv\"\nvia = \"ssh east\"\n",
    )
    .expect("write");
    let output = Command::new(clowder_bin())
        .arg("attach")
        .current_dir(laptop.path())
        .output()
        .expect("run clowder attach");
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("harness.toml: key `hosts[0]`: expected one of `target` or `via`"),
        "{stderr}"
    );
}

#[test]
fn a_headless_single_loop_is_served_as_a_fleet_of_one() {
    let project = common::Project::new(&common::fast_config(
        &["slow", "600"],
        "[watchdog]\nstale_timeout_mins = 10\n",
    ));
    let mut clowder = project.spawn(&["--headless", "1"]);
    let socket = project.path(".clowder/host.sock");
    assert!(
        wait_until(DEADLINE, || std::os::unix::net::UnixStream::connect(
            &socket
        )
        .is_ok()),
        "a headless single loop never served"
    );
    let tmux = Tmux::start(project.root(), &attach_command(""), 120, 40);
    tmux.wait_for("attached to the host");
    tmux.wait_for("● running");
    tmux.keys(&["p"]);
    let paused = || {
        std::fs::read_to_string(project.path("harness.status"))
            .ok()
            .and_then(|text| serde_json::from_str::<serde_json::Value>(&text).ok())
            .is_some_and(|status| status["paused"] == true)
    };
    assert!(
        wait_until(DEADLINE, paused),
        "p in a room attached to a single loop never paused it; screen:\n{}",
        tmux.screen()
    );
    tmux.keys(&["q"]);
    tmux.wait_for("ATTACH_EXIT=0");
    assert!(
        matches!(clowder.try_wait(), Ok(None)),
        "quitting the room ended the loop"
    );
    send_signal(clowder.id(), libc::SIGTERM);
    let _ = common::wait_with_deadline(clowder, DEADLINE);
    assert!(!socket.exists(), "the socket outlived its loop");
}

#[test]
fn a_single_loop_detached_from_its_room_is_attached_again() {
    let project = common::Project::new(&common::fast_config(
        &["slow", "600"],
        "[watchdog]\nstale_timeout_mins = 10\n",
    ));
    let command = format!(
        "{} 1; echo LOOP_EXIT=$?; sleep 600",
        clowder_bin().display()
    );
    let first = Tmux::start(project.root(), &command, 120, 40);
    let status = || {
        std::fs::read_to_string(project.path("harness.status"))
            .ok()
            .and_then(|text| serde_json::from_str::<serde_json::Value>(&text).ok())
            .unwrap_or_default()
    };
    assert!(
        wait_until(DEADLINE, || status()["state"] == "session_running"),
        "no session started; screen:\n{}",
        first.screen()
    );
    first.keys(&["q"]);
    // A key that comes in the same read as the one that asked is dropped
    // (a paste never answers a question): the question is waited for.
    first.wait_for("d  detach");
    first.keys(&["d"]);
    first.wait_for("LOOP_EXIT=0");
    let pid = status()["pid"].as_u64().expect("the loop's pid") as u32;
    assert!(pid_alive(pid as i32), "the detached loop is gone");
    drop(first);

    let again = Tmux::start(project.root(), &attach_command(""), 120, 40);
    again.wait_for("attached to the host");
    again.wait_for("● running");
    again.keys(&["q"]);
    again.wait_for("ATTACH_EXIT=0");
    assert!(
        pid_alive(pid as i32),
        "quitting the attached room ended the loop"
    );
    send_signal(pid, libc::SIGTERM);
    let _ = wait_until(DEADLINE, || {
        status()["stop_pending"] == true || !pid_alive(pid as i32)
    });
    if pid_alive(pid as i32) {
        send_signal(pid, libc::SIGTERM);
    }
    assert!(
        wait_until(DEADLINE, || !pid_alive(pid as i32)),
        "the detached loop did not end"
    );
}
