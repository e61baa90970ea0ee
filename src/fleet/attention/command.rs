//! `[ui] on_attention`: the command the host runs for each call for attention,
//! off the watcher's thread, in a process group of its own that is killed when
//! it outlives [`COMMAND_TIMEOUT`].

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;

use super::AttentionEvent;
use crate::supervisor::{process, reaper};

/// An `on_attention` command still running after this long has its group killed.
pub const COMMAND_TIMEOUT: Duration = Duration::from_secs(10);
/// At most this many `on_attention` commands run at once; more are skipped (logged).
const MAX_RUNNING: usize = 4;
/// The owner the reaper knows the attention commands by.
const OWNER: &str = "attention";
/// Longest `CLOWDER_TEXT`, in characters.
const MAX_TEXT: usize = 200;

/// Runs `on_attention` in `dir` (the fleet's or the loop's folder).
#[derive(Debug, Clone)]
pub(super) struct Calls {
    command: String,
    dir: PathBuf,
    timeout: Duration,
    running: Arc<AtomicUsize>,
}

impl Calls {
    pub(super) fn new(command: &str, dir: PathBuf) -> Calls {
        Calls {
            command: command.to_string(),
            dir,
            timeout: COMMAND_TIMEOUT,
            running: Arc::new(AtomicUsize::new(0)),
        }
    }

    #[cfg(test)]
    fn with_timeout(mut self, timeout: Duration) -> Calls {
        self.timeout = timeout;
        self
    }

    /// Starts the command for `event`; never blocks on it.
    pub(super) fn run(&self, event: &AttentionEvent) {
        if self.running.fetch_add(1, Ordering::SeqCst) >= MAX_RUNNING {
            self.running.fetch_sub(1, Ordering::SeqCst);
            tracing::warn!(
                "[ui] on_attention not run for {} (lane {:?}): {MAX_RUNNING} still running",
                event.event.as_str(),
                event.lane
            );
            return;
        }
        let job = Job {
            command: self.command.clone(),
            dir: self.dir.clone(),
            lane: event.lane.clone(),
            event: event.event.as_str(),
            text: one_line(&event.text),
            timeout: self.timeout,
        };
        let running = Arc::clone(&self.running);
        let spawned = std::thread::Builder::new()
            .name("on_attention".into())
            .spawn(move || {
                job.run();
                running.fetch_sub(1, Ordering::SeqCst);
            });
        if let Err(err) = spawned {
            self.running.fetch_sub(1, Ordering::SeqCst);
            tracing::warn!("[ui] on_attention: cannot start a thread: {err}");
        }
    }

    /// Waits until no command runs, or `limit` has passed (a command is killed
    /// at its timeout anyway): a host that ends lets its last calls finish.
    pub(super) fn wait(&self, limit: Duration) {
        let deadline = Instant::now() + limit;
        while self.running.load(Ordering::SeqCst) > 0 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// The event's text for the environment: one line, no control characters
/// (nor NUL, which an environment cannot hold), cut.
pub(super) fn one_line(text: &str) -> String {
    let visible = crate::escape::one_line(text);
    if visible.chars().count() <= MAX_TEXT {
        return visible;
    }
    let mut cut: String = visible.chars().take(MAX_TEXT - 1).collect();
    cut.push('…');
    cut
}

/// One run of `on_attention`.
struct Job {
    command: String,
    dir: PathBuf,
    lane: String,
    event: &'static str,
    text: String,
    timeout: Duration,
}

impl Job {
    /// Runs the command to its end (or its timeout); a failure is logged, never raised.
    fn run(self) {
        let mut command = Command::new("sh");
        command
            .arg("-c")
            .arg(&self.command)
            .current_dir(&self.dir)
            .env("CLOWDER_LANE", &self.lane)
            .env("CLOWDER_EVENT", self.event)
            .env("CLOWDER_TEXT", &self.text)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        std::os::unix::process::CommandExt::process_group(&mut command, 0);
        let spawned = reaper::spawn_owned(OWNER, || command.spawn(), |child| Some(child.id()));
        let (mut child, _owned) = match spawned {
            Ok(spawned) => spawned,
            Err(err) => {
                tracing::warn!("[ui] on_attention `{}` did not start: {err}", self.command);
                return;
            }
        };
        let started = Instant::now();
        loop {
            match child.try_wait() {
                Ok(Some(status)) if status.success() => return,
                Ok(Some(status)) => {
                    tracing::warn!(
                        "[ui] on_attention `{}` failed ({status}) for {} (lane {:?})",
                        self.command,
                        self.event,
                        self.lane
                    );
                    return;
                }
                Ok(None) if started.elapsed() >= self.timeout => break,
                Ok(None) => std::thread::sleep(Duration::from_millis(50)),
                Err(err) => {
                    tracing::warn!("[ui] on_attention `{}`: {err}", self.command);
                    return;
                }
            }
        }
        let pgid = i32::try_from(child.id()).unwrap_or(0);
        process::signal_group(pgid, Signal::SIGKILL);
        let _ = child.wait();
        tracing::warn!(
            "[ui] on_attention `{}` killed after {:?} for {} (lane {:?})",
            self.command,
            self.timeout,
            self.event,
            self.lane
        );
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::super::EventKind;
    use super::*;

    fn event(lane: &str, text: &str) -> AttentionEvent {
        AttentionEvent {
            lane: lane.into(),
            event: EventKind::LaneHeld,
            text: text.into(),
        }
    }

    fn calls(dir: &Path, command: &str) -> Calls {
        Calls::new(command, dir.to_path_buf())
    }

    fn wait_for(mut condition: impl FnMut() -> bool) -> bool {
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            if condition() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        false
    }

    #[test]
    fn on_attention_runs_in_the_fleet_folder_with_lane_event_and_text() {
        let dir = tempfile::tempdir().expect("tempdir");
        let calls = calls(
            dir.path(),
            "printf '%s %s %s\\n' \"$CLOWDER_LANE\" \"$CLOWDER_EVENT\" \"$CLOWDER_TEXT\" >> seen.txt",
        );
        calls.run(&event("a", "lane a is held"));
        calls.run(&AttentionEvent {
            lane: String::new(),
            event: EventKind::ApprovalRequested,
            text: "approval requested: x\0\ny".into(),
        });
        let seen = dir.path().join("seen.txt");
        assert!(wait_for(|| {
            std::fs::read_to_string(&seen).is_ok_and(|t| t.lines().count() == 2)
        }));
        let mut lines: Vec<String> = std::fs::read_to_string(&seen)
            .expect("read")
            .lines()
            .map(str::to_string)
            .collect();
        lines.sort();
        assert_eq!(lines[1], "a lane_held lane a is held");
        assert!(
            lines[0].starts_with(" approval_requested approval requested: x"),
            "{lines:?}"
        );
    }

    #[test]
    fn a_slow_command_does_not_block_and_is_killed_after_its_timeout() {
        let dir = tempfile::tempdir().expect("tempdir");
        let calls = calls(dir.path(), "echo $$ > pid; exec sleep 60")
            .with_timeout(Duration::from_millis(300));
        let started = Instant::now();
        calls.run(&event("a", "x"));
        assert!(started.elapsed() < Duration::from_secs(5), "run blocked");
        let pid_file = dir.path().join("pid");
        assert!(wait_for(
            || std::fs::read_to_string(&pid_file).is_ok_and(|t| t.ends_with('\n'))
        ));
        let pid: i32 = std::fs::read_to_string(&pid_file)
            .expect("read")
            .trim()
            .parse()
            .expect("pid");
        assert!(
            wait_for(|| !Path::new(&format!("/proc/{pid}")).exists()),
            "the command outlived its timeout"
        );
        assert!(wait_for(|| calls.running.load(Ordering::SeqCst) == 0));
    }

    #[test]
    fn a_failing_command_is_not_fatal_and_frees_its_slot() {
        let dir = tempfile::tempdir().expect("tempdir");
        let calls = calls(dir.path(), "exit 3");
        for _ in 0..10 {
            calls.run(&event("a", "x"));
        }
        assert!(wait_for(|| calls.running.load(Ordering::SeqCst) == 0));
    }

    #[test]
    fn at_most_a_few_commands_run_at_once() {
        let dir = tempfile::tempdir().expect("tempdir");
        let calls =
            calls(dir.path(), "echo x >> started; sleep 1").with_timeout(Duration::from_secs(5));
        for i in 0..10 {
            calls.run(&event(&format!("l{i}"), "x"));
        }
        assert!(calls.running.load(Ordering::SeqCst) <= MAX_RUNNING);
        calls.wait(Duration::from_secs(20));
        assert_eq!(calls.running.load(Ordering::SeqCst), 0);
        let started = std::fs::read_to_string(dir.path().join("started")).expect("read");
        assert_eq!(started.lines().count(), MAX_RUNNING);
    }
}
