//! The plan's own commands, `verify` and a command `done_when`, run as a session's
//! hooks are: each in its own process group with a token, recorded under
//! `.clowder/plans/NAME/running/` before it starts, in a cgroup when this run's
//! sessions have them, killed at its timeout, and ended with TERM, the kill grace
//! and KILL when the plan stops. A restarted plan ends what a killed one left
//! before it runs anything. Each check's output is kept in `.clowder/plans/NAME/checks/`.

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use tokio::sync::watch;

use super::home::Home;
use crate::store::running::{RUNNING_DIR, Running};
use crate::supervisor::cgroup::{self, KillMethod};
use crate::supervisor::hooks::{self, ShellContext};
use crate::supervisor::{leftovers, process};

/// How many lines of a check's output a failure quotes.
const TAIL_LINES: usize = 20;
/// How much of the end of a check's output is read for them.
const TAIL_BYTES: u64 = 64 * 1024;
/// The kill grace of checks run without `[watchdog] kill_grace_secs` at hand.
pub const DEFAULT_GRACE: Duration = Duration::from_secs(5);
/// Where the check's output goes: passed to its shell, never written into its text.
const OUTPUT_ENV: &str = "CLOWDER_CHECK_OUTPUT";

/// One command to run.
pub struct Check<'a> {
    /// `verify` or `done_when`: what it is called (its timeout key adds `_timeout`).
    pub key: &'a str,
    pub command: &'a str,
    pub dir: &'a Path,
    pub timeout: Duration,
    /// Its output file's name in the checks folder, e.g. `verify-api`.
    pub label: &'a str,
}

/// How a check ended, with the last lines it printed.
#[derive(Debug, Clone, PartialEq)]
pub struct Ran {
    pub end: End,
    pub tail: String,
}

#[derive(Debug, Clone, PartialEq)]
pub enum End {
    Passed,
    Exited(i32),
    Signalled,
    TimedOut(Duration),
    /// The plan stopped (or clowder was asked to) while it ran.
    Interrupted,
}

impl Ran {
    /// Why it did not pass, for a person: `None` when it passed.
    pub fn why_not(&self, check: &Check) -> Option<String> {
        let Check { key, command, .. } = check;
        let how = match &self.end {
            End::Passed => return None,
            End::Exited(code) => format!("exited {code}"),
            End::Signalled => "was killed by a signal".to_string(),
            End::TimedOut(limit) => format!(
                "timed out after {} ({key}_timeout) and was killed",
                limit_text(*limit)
            ),
            End::Interrupted => "was stopped with the plan".to_string(),
        };
        let mut text = format!("{key} `{command}` {how}");
        if !self.tail.is_empty() {
            text.push_str(":\n");
            text.push_str(&self.tail);
        }
        Some(text)
    }
}

/// A time limit as a plan file writes it: `30m`, `2h`, `90s`, `1.5s`.
pub fn limit_text(limit: Duration) -> String {
    let secs = limit.as_secs_f64();
    match limit.as_secs() {
        whole if f64::from(u32::try_from(whole).unwrap_or(u32::MAX)) != secs => format!("{secs}s"),
        whole if whole > 0 && whole % 3600 == 0 => format!("{}h", whole / 3600),
        whole if whole > 0 && whole % 60 == 0 => format!("{}m", whole / 60),
        whole => format!("{whole}s"),
    }
}

/// The checks of one plan: shared by its driver's threads, stopped together.
#[derive(Clone)]
pub struct Checks {
    dir: PathBuf,
    grace: Duration,
    token_prefix: String,
    own_start: u64,
    counter: Arc<AtomicU64>,
    stop: Arc<watch::Sender<bool>>,
}

impl Checks {
    pub fn new(home: &Home, grace: Duration) -> Checks {
        Checks::in_dir(
            home.dir().to_path_buf(),
            &format!("plan-{}", home.name()),
            grace,
        )
    }

    /// Checks that keep their logs in `dir`; `label` marks their processes.
    pub fn in_dir(dir: PathBuf, label: &str, grace: Duration) -> Checks {
        let own_start =
            process::read_proc_stat(std::process::id() as i32).map_or(0, |info| info.start_ticks);
        Checks {
            dir,
            grace,
            token_prefix: format!("{}-{own_start}-{label}-", std::process::id()),
            own_start,
            counter: Arc::new(AtomicU64::new(0)),
            stop: Arc::new(watch::channel(false).0),
        }
    }

    fn running(&self) -> Running {
        Running::in_dir(self.dir.join(RUNNING_DIR))
    }

    /// Ends every check running now: TERM to its group, the grace, then KILL.
    /// Checks started later are ended as soon as they start.
    pub fn stop(&self) {
        self.stop.send_replace(true);
    }

    /// The cgroup tree of this plan's checks when this run's sessions have
    /// cgroups; looked up at each check, since the fleet sets them up after the
    /// plan's driver is made.
    fn method(&self) -> KillMethod {
        let plan = self.dir.file_name().unwrap_or_default().to_string_lossy();
        let tree = cgroup::this_run_tree().map(|tree| tree.join(format!("plan-{plan}")));
        match tree {
            Some(root) if std::fs::create_dir_all(&root).is_ok() => KillMethod::Cgroup { root },
            _ => KillMethod::GroupToken {
                why: "no cgroups in this run".into(),
            },
        }
    }

    fn context(&self) -> ShellContext {
        ShellContext {
            method: Arc::new(self.method()),
            running: Some(self.running()),
            token_prefix: self.token_prefix.clone(),
            own_start: self.own_start,
            counter: Arc::clone(&self.counter),
            grace: self.grace,
            cancel: self.stop.subscribe(),
        }
    }

    /// Runs `check` to its end, its timeout or the plan's stop. Blocks: call it
    /// off the driver's thread (the forking thread lives as long as the check,
    /// as the parent-death signal needs).
    pub fn run(&self, check: &Check) -> Result<Ran, String> {
        let logs = self.dir.join("checks");
        std::fs::create_dir_all(&logs)
            .map_err(|err| format!("cannot create {}: {err}", logs.display()))?;
        let output = logs.join(format!("{}.log", check.label));
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|err| format!("cannot start the async runtime: {err}"))?;
        let script = format!("exec >\"${OUTPUT_ENV}\" 2>&1\n{}", check.command);
        let env = [(OUTPUT_ENV.to_string(), output.display().to_string())];
        let ctx = self.context();
        let run = runtime
            .block_on(hooks::run_shell(
                &script,
                &env,
                check.dir,
                check.timeout,
                &ctx,
            ))
            .map_err(|err| format!("cannot run {} `{}`: {err}", check.key, check.command))?;
        let end = if run.timed_out {
            End::TimedOut(check.timeout)
        } else if run.interrupted {
            End::Interrupted
        } else {
            match run.exit_code {
                Some(0) => End::Passed,
                Some(code) => End::Exited(code),
                None => End::Signalled,
            }
        };
        Ok(Ran {
            end,
            tail: tail_of(&output),
        })
    }

    /// Ends what a killed run of this plan left running (its records), before
    /// this run starts anything; returns a line for each that was found alive.
    pub async fn end_left(&self) -> Vec<String> {
        let mut said = Vec::new();
        for ended in leftovers::end_abandoned(&self.running(), self.grace).await {
            if ended.group_killed == 0 && ended.escaped.is_empty() {
                continue;
            }
            let record = &ended.record;
            let command = record.what.lines().skip(1).collect::<Vec<_>>().join("; ");
            said.push(format!(
                "`{command}` of an earlier run (clowder PID {}) was left running: killed {} process(es) of its group {} and {} outside it",
                record.clowder_pid,
                ended.group_killed,
                record.pgid,
                ended.escaped.len()
            ));
        }
        said
    }

    /// [`Checks::end_left`] for a caller without a runtime (`plan merge` by hand).
    pub fn end_left_now(&self) -> Vec<String> {
        match tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
        {
            Ok(runtime) => runtime.block_on(self.end_left()),
            Err(err) => vec![format!("cannot start the async runtime: {err}")],
        }
    }
}

/// The last lines of a check's output file.
fn tail_of(path: &Path) -> String {
    let text = crate::store::small_file::tail(path, TAIL_BYTES).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(TAIL_LINES)..].join("\n")
}

/// The threads that run checks, waited for before `plan run` exits so that no
/// check outlives it.
static THREADS: Mutex<Vec<JoinHandle<()>>> = Mutex::new(Vec::new());

/// Runs `work` (which runs checks) on a thread of its own, known to [`wait_for_all`].
pub fn spawn(work: impl FnOnce() + Send + 'static) {
    let handle = std::thread::spawn(work);
    let mut threads = THREADS
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    threads.retain(|thread| !thread.is_finished());
    threads.push(handle);
}

/// Waits until every thread started by [`spawn`] is done (their checks were
/// stopped with their plans).
pub fn wait_for_all() {
    loop {
        let threads = std::mem::take(
            &mut *THREADS
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        );
        if threads.is_empty() {
            return;
        }
        for thread in threads {
            let _ = thread.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_read_as_the_plan_file_writes_them() {
        assert_eq!(limit_text(Duration::from_secs(1800)), "30m");
        assert_eq!(limit_text(Duration::from_secs(7200)), "2h");
        assert_eq!(limit_text(Duration::from_secs(90)), "90s");
        assert_eq!(limit_text(Duration::from_millis(1500)), "1.5s");
    }

    #[test]
    fn a_check_that_did_not_pass_says_how_and_quotes_its_last_lines() {
        let check = Check {
            key: "verify",
            command: "cargo test",
            dir: Path::new("."),
            timeout: Duration::from_secs(60),
            label: "verify-a",
        };
        let ran = |end| Ran {
            end,
            tail: "test x ... FAILED".into(),
        };
        assert_eq!(ran(End::Passed).why_not(&check), None);
        assert_eq!(
            ran(End::TimedOut(Duration::from_secs(60))).why_not(&check),
            Some(
                "verify `cargo test` timed out after 1m (verify_timeout) and was killed:\ntest x ... FAILED"
                    .into()
            )
        );
        assert_eq!(
            ran(End::Exited(101)).why_not(&check),
            Some("verify `cargo test` exited 101:\ntest x ... FAILED".into())
        );
    }
}
