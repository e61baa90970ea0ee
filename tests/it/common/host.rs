//! A fleet repository whose host runs headless, for the tests of the host's
//! socket, `clowder attach` and the CLI through the socket: lanes of the
//! fleet's fake agent (`tests/agents/fleet-agent.sh`), the host started with
//! sessions of a chosen length, one lane asking once through the gate (or a
//! test asking with a command of its own), and the host ended as a service
//! manager would end it.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use tempfile::TempDir;

use super::fleet::{lane_status, registered_lanes};
use super::git::{clowder_command, clowder_in, init_with_one_commit};
use super::{DEADLINE, clowder_bin, send_signal, wait_until};

/// A repository with lanes, and a folder outside it for what the agents leave.
pub struct HostFleet {
    repo: TempDir,
    out: TempDir,
}

impl HostFleet {
    /// `lanes`, each running at most `iterations` sessions.
    pub fn new(lanes: &[&str], iterations: u32) -> HostFleet {
        HostFleet::in_folder(tempfile::tempdir().expect("tempdir"), lanes, iterations)
    }

    pub fn in_folder(repo: TempDir, lanes: &[&str], iterations: u32) -> HostFleet {
        let fleet = HostFleet {
            repo,
            out: tempfile::tempdir().expect("tempdir"),
        };
        let root = fleet.root();
        init_with_one_commit(root);
        std::fs::write(root.join("PROMPT.md"), "Do the work.\n").expect("write");
        let agent = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/agents/fleet-agent.sh");
        let config = format!(
            "[agent]\ncommand = \"sh\"\nargs = [{:?}]\n\n[session]\nmax_iterations = {iterations}\n\n[backoff]\ninitial_delay_secs = 0.2\n\n[watchdog]\nmin_output_bytes = 1\n",
            agent.display().to_string()
        );
        std::fs::write(root.join("harness.toml"), config).expect("write");
        for lane in lanes {
            clowder_in(root, &["lane", "add", lane]);
        }
        fleet
    }

    pub fn root(&self) -> &Path {
        self.repo.path()
    }

    /// Makes the lanes' agent a Codex that runs no hooks (a `codex` that says
    /// it is 0.101.0 and runs the fleet's fake agent), so every lane is ungated.
    pub fn with_codex_without_hooks(&self) {
        let codex = self.out_dir().join("codex");
        let agent = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/agents/fleet-agent.sh");
        std::fs::write(
            &codex,
            format!(
                "#!/bin/sh\nif [ \"$1\" = --version ]; then echo 'codex-cli 0.101.0'; exit 0; fi\nexec sh {:?} \"$@\"\n",
                agent.display().to_string()
            ),
        )
        .expect("write codex");
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&codex, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        let config = format!(
            "[agent]\ncommand = {:?}\nargs = [\"exec\"]\n\n[session]\nmax_iterations = 1\n\n[watchdog]\nmin_output_bytes = 1\n",
            codex.display().to_string()
        );
        std::fs::write(self.root().join("harness.toml"), config).expect("write harness.toml");
    }

    /// Where the agents leave their gate answers (outside the repository).
    pub fn out_dir(&self) -> &Path {
        self.out.path()
    }

    pub fn socket(&self) -> PathBuf {
        self.root().join(".clowder/host.sock")
    }

    /// A file the agents left in [`HostFleet::out_dir`], or "".
    pub fn out(&self, name: &str) -> String {
        std::fs::read_to_string(self.out.path().join(name)).unwrap_or_default()
    }

    /// The gate's answer to lane `lane`'s request, once there is one.
    pub fn answer(&self, lane: &str) -> String {
        self.out(&format!("answer-{lane}.json"))
    }

    /// `clowder --headless` here, its output piped, each session `secs` long;
    /// the agent of `gate_lane` asks through `clowder gate` first.
    pub fn host_command(&self, secs: u32, gate_lane: &str) -> Command {
        let mut command = clowder_command(self.root(), &["--headless"]);
        command
            .env("FLEET_AGENT_SECS", secs.to_string())
            .env("FLEET_AGENT_OUT", self.out.path())
            .env("FLEET_AGENT_GATE_LANE", gate_lane)
            .env("FLEET_AGENT_CLOWDER", clowder_bin());
        command
    }

    /// The host, with sessions of two minutes and its output dropped, once
    /// its socket answers.
    pub fn host(&self, gate_lane: &str) -> Child {
        let child = self
            .host_command(120, gate_lane)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start the host");
        let socket = self.socket();
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
}

/// Ends the host of the fleet in `root` as a service manager would: SIGTERM
/// (finish the sessions), then SIGTERM again once it was taken (stop now).
pub fn stop_host(root: &Path, mut host: Child) {
    let pid = host.id();
    send_signal(pid, libc::SIGTERM);
    let lanes = registered_lanes(root);
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

/// `clowder gate` asking about `command` in `root`'s queue, as an agent's
/// hook would; killed on drop.
pub struct Asking(Child);

impl Asking {
    pub fn start(root: &Path, command: &str) -> Asking {
        let mut child = clowder_command(root, &["gate", "--timeout", "120s"])
            .env("CLOWDER_APPROVALS_DIR", root.join(".clowder/approvals"))
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start clowder gate");
        let hook = serde_json::json!({
            "session_id": "s-1", "cwd": root, "hook_event_name": "PreToolUse",
            "tool_name": "Bash", "tool_input": {"command": command}, "tool_use_id": "toolu_1"
        });
        let mut stdin = child.stdin.take().expect("stdin");
        std::io::Write::write_all(&mut stdin, hook.to_string().as_bytes()).expect("write the hook");
        Asking(child)
    }
}

impl Drop for Asking {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
