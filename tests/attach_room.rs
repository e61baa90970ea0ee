//! `clowder attach`: the control room as a client of a headless host, in a
//! real terminal (tmux), reached through its socket, through `--via`, and
//! over real SSH (Debian's sshd on a free port of 127.0.0.1, with a host key
//! and a key pair made here). Decisions, pauses, a host killed and started
//! again, a connection cut: read off the screen and the host's files.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use common::fleet::lane_status;
use common::git::{clowder_in, init_with_one_commit};
use common::tmux::Tmux;
use common::{DEADLINE, cannot_run, clowder_bin, pid_alive, send_signal, wait_until};
use tempfile::TempDir;

struct Fleet {
    repo: TempDir,
    out: TempDir,
}

impl Fleet {
    fn new(lanes: &[&str]) -> Fleet {
        let fleet = Fleet {
            repo: tempfile::tempdir().expect("tempdir"),
            out: tempfile::tempdir().expect("tempdir"),
        };
        let root = fleet.root();
        init_with_one_commit(root);
        std::fs::write(root.join("PROMPT.md"), "Do the work.\n").expect("write");
        let agent = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/agents/fleet-agent.sh");
        let config = format!(
            "[agent]\ncommand = {:?}\n\n[session]\nmax_iterations = 3\n\n[watchdog]\nmin_output_bytes = 1\n",
            agent.display().to_string()
        );
        std::fs::write(root.join("harness.toml"), config).expect("write");
        for lane in lanes {
            clowder_in(root, &["lane", "add", lane]);
        }
        fleet
    }

    fn root(&self) -> &Path {
        self.repo.path()
    }

    /// `clowder --headless` here; the lane `gate_lane` asks once through the gate.
    fn host(&self, gate_lane: &str) -> Child {
        let child = Command::new(clowder_bin())
            .arg("--headless")
            .current_dir(self.root())
            .env("FLEET_AGENT_SECS", "120")
            .env("FLEET_AGENT_OUT", self.out.path())
            .env("FLEET_AGENT_GATE_LANE", gate_lane)
            .env("FLEET_AGENT_CLOWDER", clowder_bin())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start the host");
        let socket = self.root().join(".clowder/host.sock");
        assert!(
            wait_until(DEADLINE, || std::os::unix::net::UnixStream::connect(
                &socket
            )
            .is_ok()),
            "the host never served {}",
            socket.display()
        );
        child
    }

    fn answer(&self, lane: &str) -> String {
        std::fs::read_to_string(self.out.path().join(format!("answer-{lane}.json")))
            .unwrap_or_default()
    }
}

/// Ends a host as a service manager would: SIGTERM (finish the sessions),
/// then SIGTERM again once it was taken (kill them now).
fn stop(root: &Path, mut host: Child) {
    let pid = host.id();
    send_signal(pid, libc::SIGTERM);
    let lanes = common::fleet::registered_lanes(root);
    let taken = || {
        lanes.iter().any(|lane| {
            lane_status(root, lane).is_some_and(|status| status["stop_pending"] == true)
        })
    };
    let _ = wait_until(DEADLINE, || {
        taken() || matches!(host.try_wait(), Ok(Some(_)))
    });
    if matches!(host.try_wait(), Ok(None)) {
        send_signal(pid, libc::SIGTERM);
    }
    let ended = wait_until(DEADLINE, || matches!(host.try_wait(), Ok(Some(_))));
    if !ended {
        let _ = host.kill();
    }
    let _ = host.wait();
    assert!(ended, "the host {pid} did not end on SIGTERM twice");
}

fn attach_command(args: &str) -> String {
    format!(
        "{} attach {args}; echo ATTACH_EXIT=$?; sleep 600",
        clowder_bin().display()
    )
}

/// The lane the room's header names (the selected one).
fn selected_lane(screen: &str) -> Option<String> {
    let header = screen.lines().next()?;
    let after = header.split("lane ").nth(1)?;
    after.split_whitespace().next().map(str::to_string)
}

#[test]
fn an_attached_room_decides_pauses_and_leaves_the_host_running() {
    let fleet = Fleet::new(&["api", "docs"]);
    let host = fleet.host("docs");
    let tmux = Tmux::start(fleet.root(), &attach_command(""), 120, 40);
    tmux.wait_for("attached to the host");
    tmux.wait_for("Approvals (1 waiting)");
    tmux.keys(&["a"]);
    assert!(
        wait_until(DEADLINE, || fleet.answer("docs").contains("allow")),
        "approved in the attached room, the gate never allowed; screen:\n{}",
        tmux.screen()
    );
    tmux.wait_for(" approved");

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
    tmux.wait_for("ATTACH_EXIT=0");
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
    let fleet = Fleet::new(&["api"]);
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
    let fleet = Fleet::new(&["api", "docs"]);
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
    tmux.wait_for("host unreachable since");

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

/// Debian's sshd, on a free port of 127.0.0.1, for this test's own key.
struct Sshd {
    child: Child,
    port: u16,
    dir: TempDir,
}

impl Drop for Sshd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Sshd {
    fn start() -> Option<Sshd> {
        let sshd = PathBuf::from("/usr/sbin/sshd");
        if !sshd.exists() {
            cannot_run("no /usr/sbin/sshd (Debian's openssh-server; .ci/run installs it)");
            return None;
        }
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            cannot_run("sshd for this test runs as root (as in CI)");
            return None;
        }
        let dir = tempfile::tempdir().expect("tempdir");
        let keygen = |file: &str| {
            let status = Command::new("ssh-keygen")
                .args(["-q", "-t", "ed25519", "-N", "", "-f"])
                .arg(dir.path().join(file))
                .status()
                .expect("ssh-keygen");
            assert!(status.success(), "ssh-keygen failed");
        };
        keygen("host_key");
        keygen("client_key");
        std::fs::copy(
            dir.path().join("client_key.pub"),
            dir.path().join("authorized_keys"),
        )
        .expect("authorized_keys");
        let _ = std::fs::create_dir_all("/run/sshd");
        let port = free_port();
        let config = format!(
            "Port {port}\nListenAddress 127.0.0.1\nHostKey {dir}/host_key\nAuthorizedKeysFile {dir}/authorized_keys\nPermitRootLogin prohibit-password\nPasswordAuthentication no\nKbdInteractiveAuthentication no\nUsePAM no\nStrictModes no\nPidFile {dir}/sshd.pid\n",
            dir = dir.path().display()
        );
        std::fs::write(dir.path().join("sshd_config"), config).expect("sshd_config");
        let child = Command::new(&sshd)
            .args(["-D", "-e", "-f"])
            .arg(dir.path().join("sshd_config"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start sshd");
        let listening = wait_until(DEADLINE, || {
            std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
        });
        assert!(listening, "sshd never listened on 127.0.0.1:{port}");
        Some(Sshd { child, port, dir })
    }

    /// `CLOWDER_SSH`: ssh with this test's key, knowing no host key file.
    fn ssh_command(&self) -> String {
        format!(
            "ssh -F /dev/null -i {}/client_key -o UserKnownHostsFile=/dev/null -o StrictHostKeyChecking=no -o LogLevel=ERROR",
            self.dir.path().display()
        )
    }
}

fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    listener.local_addr().expect("addr").port()
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
    let fleet = Fleet::new(&["api", "docs"]);
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
    tmux.wait_for("host unreachable since");
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
    let fleet = Fleet::new(&["api", "docs"]);
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
    let fleet = Fleet::new(&[]);
    let host = Command::new(clowder_bin())
        .args(["--headless", "--stay"])
        .current_dir(fleet.root())
        .env("FLEET_AGENT_SECS", "120")
        .env("FLEET_AGENT_OUT", fleet.out.path())
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
    let one = Fleet::new(&["api"]);
    let two = Fleet::new(&["api", "docs"]);
    let three = Fleet::new(&["web"]);
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

    // Walk down to two/api and pause it: only host two's api pauses.
    let mut screen = tmux.screen();
    for _ in 0..8 {
        if selected_lane(&screen).as_deref() == Some("two/api") {
            break;
        }
        tmux.keys(&["j"]);
        std::thread::sleep(std::time::Duration::from_millis(300));
        screen = tmux.screen();
    }
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
    let fleet = Fleet::new(&["api"]);
    let host = fleet.host("none");
    let command = format!("{}; echo ROOM_EXIT=$?; sleep 600", clowder_bin().display());
    let tmux = Tmux::start(fleet.root(), &command, 120, 40);
    tmux.wait_for("attached to the host");
    tmux.keys(&["q"]);
    tmux.wait_for("ROOM_EXIT=0");
    assert!(pid_alive(host.id() as i32), "quitting stopped the host");
    stop(fleet.root(), host);
}
