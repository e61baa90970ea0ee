//! Shared helpers for the integration tests: a throwaway project folder with a
//! `harness.toml` and `PROMPT.md`, the real `clowder` binary run inside it, and
//! polling helpers (tests wait for conditions to deadlines, never fixed sleeps).
#![allow(dead_code)]

pub mod fleet;
pub mod gate;
pub mod git;
pub mod host;
pub mod page;
pub mod plan;
pub mod sim_host;
pub mod sshd;
pub mod tmux;

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use tempfile::TempDir;

/// Generous: these deadlines only matter when something is broken.
pub const DEADLINE: Duration = Duration::from_secs(60);

pub fn clowder_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_clowder"))
}

/// The fake agent, through its link `tests/agents/claude`: it plays Claude
/// Code, so its output files have claude's name (`claude-iteration-N.jsonl`).
pub fn fake_agent() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/agents/claude")
}

/// The fake agent under its own name (`fake-agent.sh`): output files are
/// named after it, `fake-agent-iteration-N.jsonl`.
pub fn fake_agent_script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/agents/fake-agent.sh")
}

/// A transcript of `tests/fixtures/agent/`, as the fake agent's argument.
pub fn transcript(name: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/agent")
        .join(name)
        .display()
        .to_string()
}

pub fn public_fixture(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/public")
        .join(rel)
}

/// A `harness.toml` for plans: `tests/agents/plan-agent.sh` given each step's
/// prompt, one session a step, done when it prints the promise.
pub fn plan_agent_config() -> String {
    let agent = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/agents/plan-agent.sh");
    format!(
        "[agent]\ncommand = {:?}\nargs = [\"{{prompt}}\"]\n\n[session]\nmax_iterations = 1\n\n[completion]\npromise = \"TASK_COMPLETE\"\n\n[watchdog]\nmin_output_bytes = 1\n\n[retry]\nretry_delay_secs = 0.05\n",
        agent.display().to_string()
    )
}

/// A `harness.toml` running the fake agent in `mode` with fast timings, plus `extra`
/// TOML appended (later tables may not repeat earlier ones: pass whole extra tables).
pub fn fast_config(mode_args: &[&str], extra: &str) -> String {
    let args: Vec<String> = mode_args.iter().map(|a| format!("{a:?}")).collect();
    format!(
        "[agent]\ncommand = {:?}\nargs = [{}]\n\n[backoff]\ninitial_delay_secs = 0.05\nmax_delay_secs = 0.5\n\n[retry]\nretry_delay_secs = 0.05\n\n{extra}\n",
        fake_agent().display().to_string(),
        args.join(", ")
    )
}

pub struct Project {
    pub dir: TempDir,
}

impl Project {
    pub fn new(harness_toml: &str) -> Project {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join("harness.toml"), harness_toml).expect("write harness.toml");
        std::fs::write(dir.path().join("PROMPT.md"), "Fix the failing test.\n")
            .expect("write PROMPT.md");
        Project { dir }
    }

    pub fn root(&self) -> &Path {
        self.dir.path()
    }

    pub fn path(&self, rel: &str) -> PathBuf {
        self.dir.path().join(rel)
    }

    pub fn write(&self, rel: &str, content: &str) {
        std::fs::write(self.path(rel), content).expect("write file");
    }

    pub fn read(&self, rel: &str) -> String {
        std::fs::read_to_string(self.path(rel)).unwrap_or_else(|e| panic!("read {rel}: {e}"))
    }

    pub fn command(&self, args: &[&str]) -> Command {
        let mut command = Command::new(clowder_bin());
        command
            .args(args)
            .current_dir(self.root())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        command
    }

    /// Runs clowder to completion (killing it at the deadline) and returns its output.
    pub fn run(&self, args: &[&str]) -> Output {
        let child = self.command(args).spawn().expect("spawn clowder");
        wait_with_deadline(child, DEADLINE)
    }

    pub fn spawn(&self, args: &[&str]) -> Child {
        self.command(args).spawn().expect("spawn clowder")
    }

    /// The event log, one JSON value per line.
    pub fn events(&self) -> Vec<serde_json::Value> {
        let text = std::fs::read_to_string(self.path("harness-events.jsonl")).unwrap_or_default();
        text.lines()
            .filter(|l| !l.trim().is_empty())
            .map(|l| {
                serde_json::from_str(l).unwrap_or_else(|e| panic!("bad event line {l:?}: {e}"))
            })
            .collect()
    }

    pub fn events_named(&self, name: &str) -> Vec<serde_json::Value> {
        self.events()
            .into_iter()
            .filter(|e| e["event"] == name)
            .collect()
    }

    pub fn status(&self) -> serde_json::Value {
        serde_json::from_str(&self.read("harness.status")).expect("status is JSON")
    }

    pub fn output_files(&self) -> Vec<PathBuf> {
        let mut files: Vec<PathBuf> = std::fs::read_dir(self.root())
            .expect("read dir")
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| {
                p.file_name()
                    .and_then(|n| n.to_str())
                    // Named after the agent: `claude-iteration-N.jsonl`,
                    // `agent-iteration-N.jsonl` for a test's `agent.sh`…
                    .is_some_and(|n| n.contains("-iteration-") && n.ends_with(".jsonl"))
            })
            .collect();
        files.sort();
        files
    }
}

pub fn wait_with_deadline(mut child: Child, deadline: Duration) -> Output {
    // Read while it runs: a child whose output fills a pipe (64 KiB) would
    // otherwise wait for the reader forever.
    let drain = |pipe: Option<Box<dyn Read + Send>>| {
        std::thread::spawn(move || {
            let mut bytes = Vec::new();
            if let Some(mut pipe) = pipe {
                let _ = pipe.read_to_end(&mut bytes);
            }
            bytes
        })
    };
    let stdout = drain(
        child
            .stdout
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let stderr = drain(
        child
            .stderr
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let start = Instant::now();
    let mut timed_out = false;
    loop {
        match child.try_wait().expect("try_wait") {
            Some(_) => break,
            None if start.elapsed() > deadline => {
                let _ = child.kill();
                timed_out = true;
                break;
            }
            None => std::thread::sleep(Duration::from_millis(20)),
        }
    }
    let status = child.wait().expect("wait");
    let stdout = stdout.join().expect("read stdout");
    let stderr = stderr.join().expect("read stderr");
    assert!(
        !timed_out,
        "clowder did not finish within {deadline:?}\nstdout:\n{}\nstderr:\n{}",
        String::from_utf8_lossy(&stdout),
        String::from_utf8_lossy(&stderr)
    );
    Output {
        status,
        stdout,
        stderr,
    }
}

/// Polls `condition` every 20 ms until it holds or `deadline` passes.
pub fn wait_until(deadline: Duration, mut condition: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    loop {
        if condition() {
            return true;
        }
        if start.elapsed() > deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Whether `pid` is a live process (zombies count as gone).
pub fn pid_alive(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().next().map(|s| s != "Z" && s != "X"))
            .unwrap_or(false),
        Err(_) => false,
    }
}

/// Live processes (not zombies) whose process group is `pgid`, from `/proc`.
/// How many of `pid`'s threads are called `name` (`/proc/PID/task/*/comm`).
pub fn threads_named(pid: u32, name: &str) -> usize {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return 0;
    };
    tasks
        .filter_map(Result::ok)
        .filter(|task| {
            std::fs::read_to_string(task.path().join("comm"))
                .is_ok_and(|comm| comm.trim_end() == name)
        })
        .count()
}

pub fn live_group_members(pgid: i32) -> Vec<i32> {
    std::fs::read_dir("/proc")
        .expect("read /proc")
        .filter_map(Result::ok)
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .ok()
                .and_then(|stat| {
                    let (_, rest) = stat.rsplit_once(')')?;
                    let fields: Vec<&str> = rest.split_whitespace().collect();
                    let state = *fields.first()?;
                    let group: i32 = fields.get(2)?.parse().ok()?;
                    Some(group == pgid && state != "Z" && state != "X")
                })
                .unwrap_or(false)
        })
        .collect()
}

/// The states (`R`, `S`, `T`…) of the live processes of group `pgid`, from `/proc`.
pub fn group_states(pgid: i32) -> Vec<char> {
    live_group_members(pgid)
        .into_iter()
        .filter_map(|pid| {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
            stat.rsplit_once(')')?.1.trim_start().chars().next()
        })
        .collect()
}

/// Live processes whose environment holds `entry` (`NAME=value`), from `/proc`.
pub fn processes_with_env(entry: &str) -> Vec<i32> {
    std::fs::read_dir("/proc")
        .expect("read /proc")
        .filter_map(Result::ok)
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| pid_alive(*pid))
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/environ"))
                .is_ok_and(|env| env.split(|b| *b == 0).any(|var| var == entry.as_bytes()))
        })
        .collect()
}

pub fn stdout_of(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

pub fn stderr_of(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// `clowder gate`'s answer: its decision and its reason (empty where a field
/// is missing). Panics when stdout is not the hook's JSON.
pub fn gate_answer(output: &Output) -> (String, String) {
    let answer: serde_json::Value = serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|e| panic!("gate stdout is not JSON ({e}): {}", stdout_of(output)));
    let out = &answer["hookSpecificOutput"];
    let text = |key: &str| out[key].as_str().unwrap_or_default().to_string();
    (text("permissionDecision"), text("permissionDecisionReason"))
}

/// Sends `signal` (e.g. libc::SIGINT) to `pid`.
pub fn send_signal(pid: u32, signal: i32) {
    // SAFETY: kill(2) with a pid and a signal number touches no memory.
    let rc = unsafe { libc::kill(pid as i32, signal) };
    assert_eq!(rc, 0, "kill({pid}, {signal}) failed");
}

/// A test that cannot run here says so loudly instead of passing in silence; under
/// CI (`CI` set: root, mount available) it must run, so there it fails.
pub fn cannot_run(why: &str) {
    assert!(
        std::env::var_os("CI").is_none(),
        "this test must run under CI but cannot: {why}"
    );
    // Straight to the file descriptor: the test harness swallows `eprintln!` of a
    // passing test, and a skip must be seen.
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "SKIPPED: {why}");
}

/// Spawns `command`, whose program this test wrote a moment ago: while the
/// file was open for writing, another test's thread may have forked, and
/// until that child execs it holds the file open too (`ETXTBSY`), so a busy
/// program is tried again for a while.
pub fn spawn_written(command: &mut Command) -> Child {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match command.spawn() {
            Err(err)
                if err.kind() == std::io::ErrorKind::ExecutableFileBusy
                    && Instant::now() < deadline =>
            {
                std::thread::sleep(Duration::from_millis(20));
            }
            spawned => return spawned.expect("spawn"),
        }
    }
}
