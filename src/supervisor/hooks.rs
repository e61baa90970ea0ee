//! Shell commands run around sessions: pre/post-session hooks and the prompt's
//! prepend commands.
//!
//! Each runs as `sh -c COMMAND` in its own process group with stdin `/dev/null`.
//! Data reaches it through environment variables only, never interpolated into
//! the command text. A command still running at the timeout has its whole group
//! killed; its output is captured up to a cap, so a chatty hook cannot flood clowder.

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use nix::sys::signal::Signal;
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::process::Command;
use tokio::sync::watch;

use super::cgroup::KillMethod;
use super::core::HookFailure;
use super::process::{
    Containment, TOKEN_ENV, die_with_clowder, exit_code, live_members, read_proc_stat, signal_group,
};
use crate::store::running::{Record, Running};

/// The most output kept from one hook run.
pub const OUTPUT_CAP: usize = 16 * 1024;

/// What one shell command did.
#[derive(Debug, Clone, PartialEq)]
pub struct CommandRun {
    pub exit_code: Option<i32>,
    pub timed_out: bool,
    /// Ended by clowder's stop (SIGTERM, a second Ctrl-C).
    pub interrupted: bool,
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
}

impl CommandRun {
    pub fn succeeded(&self) -> bool {
        !self.timed_out && !self.interrupted && self.exit_code == Some(0)
    }

    /// stdout then stderr, lossily decoded, capped.
    pub fn combined_output(&self) -> String {
        let mut text = String::from_utf8_lossy(&self.stdout).into_owned();
        if !self.stderr.is_empty() {
            if !text.is_empty() && !text.ends_with('\n') {
                text.push('\n');
            }
            text.push_str(&String::from_utf8_lossy(&self.stderr));
        }
        text.trim_end().to_string()
    }
}

/// What every shell command of a loop shares: how its processes are contained
/// and recorded, and the signal to interrupt it (SIGTERM, a second Ctrl-C).
#[derive(Clone)]
pub struct ShellContext {
    pub method: Arc<KillMethod>,
    /// Where running commands are recorded for a later start to end.
    pub running: Option<Running>,
    /// Token prefix: this clowder's pid and start time.
    pub token_prefix: String,
    /// This clowder's start time (clock ticks since boot): nothing carrying one
    /// of its tokens started earlier.
    pub own_start: u64,
    pub counter: Arc<AtomicU64>,
    pub grace: Duration,
    /// Becomes true when running commands must be interrupted.
    pub cancel: watch::Receiver<bool>,
}

static PLAIN_CONTEXTS: AtomicU64 = AtomicU64::new(0);

impl ShellContext {
    /// No cgroups, no records, never interrupted.
    pub fn plain() -> ShellContext {
        let (tx, cancel) = watch::channel(false);
        // The receiver must stay usable: a dropped sender reads as a change.
        std::mem::forget(tx);
        ShellContext {
            method: Arc::new(KillMethod::GroupToken {
                why: "plain".into(),
            }),
            running: None,
            // Unique per context: two contexts sharing a token would take each
            // other's processes for their own.
            token_prefix: format!(
                "{}-plain{}-",
                std::process::id(),
                PLAIN_CONTEXTS.fetch_add(1, Ordering::Relaxed)
            ),
            own_start: 0,
            counter: Arc::new(AtomicU64::new(0)),
            grace: Duration::from_secs(5),
            cancel,
        }
    }

    fn interrupted(&self) -> bool {
        *self.cancel.borrow()
    }
}

/// One started shell command: its leader, group and what contains it.
struct Started {
    child: tokio::process::Child,
    pgid: i32,
    start_ticks: Option<u64>,
    containment: Containment,
    /// Registered with the reaper until it has been waited for.
    owned: Option<super::reaper::Owned>,
}

/// Starts `sh -c command` in its own group (and cgroup, where there are some),
/// with its own token and the parent-death signal, recorded for a later start.
fn start_shell(
    command: &str,
    env: &[(String, String)],
    cwd: &Path,
    ctx: &ShellContext,
) -> std::io::Result<Started> {
    let n = ctx.counter.fetch_add(1, Ordering::Relaxed);
    let token = format!("{}h{n}", ctx.token_prefix);
    let cgroup = ctx
        .method
        .create(&format!("hook-{n}"))
        .unwrap_or_else(|err| {
            tracing::warn!("no cgroup for hook `{command}`: {err}");
            None
        });
    let mut shell = Command::new("sh");
    shell
        .arg("-c")
        .arg(command)
        .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .env(TOKEN_ENV, &token)
        .current_dir(cwd)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    die_with_clowder(&mut shell, cgroup.as_deref())?;
    let containment = Containment { token, cgroup };
    // Recorded before it starts, so a clowder killed meanwhile leaves a trace;
    // recorded again with its pid once that is known.
    record(ctx, command, 0, Some(ctx.own_start), &containment);
    let spawned = super::reaper::spawn_owned(
        &ctx.token_prefix,
        || shell.spawn(),
        tokio::process::Child::id,
    );
    let (child, owned) = match spawned {
        Ok(spawned) => spawned,
        Err(err) => {
            if let Some(running) = &ctx.running {
                running.remove(&containment.token);
            }
            if let Some(cgroup) = &containment.cgroup {
                super::cgroup::remove_tree(cgroup);
            }
            return Err(err);
        }
    };
    let pgid = child.id().map_or(0, |id| id as i32);
    let start_ticks = read_proc_stat(pgid).map(|info| info.start_ticks);
    record(ctx, command, pgid, start_ticks, &containment);
    Ok(Started {
        child,
        pgid,
        start_ticks,
        containment,
        owned,
    })
}

/// Runs one shell command to completion, timeout or interruption.
pub async fn run_shell(
    command: &str,
    env: &[(String, String)],
    cwd: &Path,
    timeout: Duration,
    ctx: &ShellContext,
) -> std::io::Result<CommandRun> {
    let Started {
        mut child,
        pgid,
        start_ticks,
        containment,
        owned: _owned,
    } = start_shell(command, env, cwd, ctx)?;
    let stdout = child.stdout.take();
    let stderr = child.stderr.take();
    let readers = tokio::spawn(async move {
        let (out, err) = tokio::join!(read_capped(stdout), read_capped(stderr));
        (out, err)
    });

    let mut cancel = ctx.cancel.clone();
    let (status, timed_out, interrupted) = tokio::select! {
        status = child.wait() => (status.ok(), false, false),
        () = tokio::time::sleep(timeout) => {
            signal_group(pgid, Signal::SIGKILL);
            (child.wait().await.ok(), true, false)
        }
        () = wait_for_cancel(&mut cancel) => (interrupt(&mut child, pgid, ctx.grace).await, false, true),
    };
    // Whatever the hook left running in its group would hold the pipes open.
    if !live_members(pgid, &[]).is_empty() {
        signal_group(pgid, Signal::SIGKILL);
    }
    containment
        .end_escaped(pgid, start_ticks, Duration::ZERO)
        .await;
    if let Some(running) = &ctx.running {
        running.remove(&containment.token);
    }
    let (stdout, stderr) = match tokio::time::timeout(Duration::from_secs(2), readers).await {
        Ok(Ok(output)) => output,
        _ => (Vec::new(), Vec::new()),
    };
    Ok(CommandRun {
        exit_code: status.map(exit_code),
        timed_out,
        interrupted,
        stdout,
        stderr,
    })
}

/// Records a started command so that a later start can end it if clowder dies.
fn record(
    ctx: &ShellContext,
    command: &str,
    pgid: i32,
    start_ticks: Option<u64>,
    containment: &Containment,
) {
    let (Some(running), Some(start_ticks)) = (&ctx.running, start_ticks) else {
        return;
    };
    let entry = Record {
        token: containment.token.clone(),
        kind: "hook".into(),
        what: command.to_string(),
        clowder_pid: std::process::id(),
        pid: pgid,
        pgid,
        start_ticks,
        cgroup: containment.cgroup.clone(),
    };
    if let Err(err) = running.add(&entry) {
        tracing::warn!("cannot record hook `{command}`: {err}");
    }
}

async fn wait_for_cancel(cancel: &mut watch::Receiver<bool>) {
    if cancel.wait_for(|interrupted| *interrupted).await.is_err() {
        std::future::pending::<()>().await;
    }
}

/// TERM (+CONT) to the group, `grace`, then KILL.
async fn interrupt(
    child: &mut tokio::process::Child,
    pgid: i32,
    grace: Duration,
) -> Option<std::process::ExitStatus> {
    signal_group(pgid, Signal::SIGTERM);
    signal_group(pgid, Signal::SIGCONT);
    match tokio::time::timeout(grace, child.wait()).await {
        Ok(status) => status.ok(),
        Err(_) => {
            signal_group(pgid, Signal::SIGKILL);
            child.wait().await.ok()
        }
    }
}

/// Reads to EOF, keeping the first [`OUTPUT_CAP`] bytes and discarding the rest,
/// so the writer never blocks on a full pipe.
async fn read_capped<R: AsyncRead + Unpin>(reader: Option<R>) -> Vec<u8> {
    let Some(mut reader) = reader else {
        return Vec::new();
    };
    let mut kept = Vec::new();
    let mut buf = vec![0u8; 8192];
    loop {
        match reader.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                let room = OUTPUT_CAP.saturating_sub(kept.len());
                kept.extend_from_slice(&buf[..n.min(room)]);
            }
        }
    }
    kept
}

/// Runs hooks in order. With `stop_at_first_failure`, the first failure ends the
/// run (pre-session hooks); otherwise every hook runs (post-session hooks).
pub async fn run_hooks(
    commands: &[String],
    env: &[(String, String)],
    cwd: &Path,
    timeout: Duration,
    stop_at_first_failure: bool,
    ctx: &ShellContext,
) -> Vec<HookFailure> {
    let mut failures = Vec::new();
    for command in commands {
        // Once the loop is stopping, no further hook starts.
        if ctx.interrupted() {
            break;
        }
        let failure = match run_shell(command, env, cwd, timeout, ctx).await {
            Ok(run) if run.succeeded() => None,
            Ok(run) => Some(HookFailure {
                command: command.clone(),
                exit_code: run.exit_code,
                timed_out: run.timed_out,
                output: if run.interrupted {
                    format!(
                        "{}\n(interrupted: clowder is stopping)",
                        run.combined_output()
                    )
                    .trim_start()
                    .to_string()
                } else {
                    run.combined_output()
                },
            }),
            Err(err) => Some(HookFailure {
                command: command.clone(),
                exit_code: None,
                timed_out: false,
                output: format!("cannot run `sh`: {err}"),
            }),
        };
        if let Some(failure) = failure {
            failures.push(failure);
            if stop_at_first_failure {
                break;
            }
        }
    }
    failures
}

#[cfg(test)]
mod tests {
    use super::*;

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime")
    }

    #[test]
    fn environment_reaches_the_hook_without_interpolation() {
        let run = runtime()
            .block_on(run_shell(
                "printf '%s' \"$HARNESS_TEST\"",
                &[("HARNESS_TEST".into(), "a; rm -rf / $(x)".into())],
                Path::new("."),
                Duration::from_secs(10),
                &ShellContext::plain(),
            ))
            .expect("run");
        assert!(run.succeeded());
        assert_eq!(run.stdout, b"a; rm -rf / $(x)");
    }

    #[test]
    fn a_hung_hook_is_killed_at_the_timeout() {
        let run = runtime()
            .block_on(run_shell(
                "echo started; sleep 30",
                &[],
                Path::new("."),
                Duration::from_millis(300),
                &ShellContext::plain(),
            ))
            .expect("run");
        assert!(run.timed_out);
        assert!(!run.succeeded());
        assert_eq!(run.combined_output(), "started");
    }

    #[test]
    fn an_interrupted_hook_that_ignores_term_is_killed_after_the_grace() {
        let (tx, cancel) = watch::channel(false);
        let ctx = ShellContext {
            grace: Duration::from_millis(200),
            cancel,
            ..ShellContext::plain()
        };
        let run = runtime()
            .block_on(async {
                let run = run_shell(
                    "trap '' TERM; echo started; sleep 30",
                    &[],
                    Path::new("."),
                    Duration::from_secs(60),
                    &ctx,
                );
                let interrupt = async {
                    tokio::time::sleep(Duration::from_millis(300)).await;
                    let _ = tx.send(true);
                };
                tokio::join!(run, interrupt).0
            })
            .expect("run");
        assert!(run.interrupted && !run.timed_out, "{run:?}");
        assert_eq!(run.exit_code, Some(128 + libc::SIGKILL));
        assert!(run.combined_output().starts_with("started"), "{run:?}");
    }

    #[test]
    fn output_is_capped() {
        let run = runtime()
            .block_on(run_shell(
                "head -c 1000000 /dev/zero",
                &[],
                Path::new("."),
                Duration::from_secs(10),
                &ShellContext::plain(),
            ))
            .expect("run");
        assert!(run.succeeded());
        assert_eq!(run.stdout.len(), OUTPUT_CAP);
    }
}
