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

use nix::sys::signal::Signal;
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::process::Command;

use super::core::HookFailure;
use super::process::{exit_code, live_members, signal_group};

/// The most output kept from one hook run.
pub const OUTPUT_CAP: usize = 16 * 1024;

/// What one shell command did.
#[derive(Debug, Clone, PartialEq)]
pub struct CommandRun {
    pub exit_code: Option<i32>,
    pub timed_out: bool,
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
}

impl CommandRun {
    pub fn succeeded(&self) -> bool {
        !self.timed_out && self.exit_code == Some(0)
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

/// Runs one shell command to completion or timeout.
pub async fn run_shell(
    command: &str,
    env: &[(String, String)],
    cwd: &Path,
    timeout: Duration,
) -> std::io::Result<CommandRun> {
    let mut child = Command::new("sh")
        .arg("-c")
        .arg(command)
        .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .current_dir(cwd)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true)
        .spawn()?;
    let pgid = child.id().map_or(0, |id| id as i32);
    let stdout = child.stdout.take();
    let stderr = child.stderr.take();
    let readers = tokio::spawn(async move {
        let (out, err) = tokio::join!(read_capped(stdout), read_capped(stderr));
        (out, err)
    });

    let (status, timed_out) = match tokio::time::timeout(timeout, child.wait()).await {
        Ok(status) => (status.ok(), false),
        Err(_) => {
            signal_group(pgid, Signal::SIGKILL);
            (child.wait().await.ok(), true)
        }
    };
    // Whatever the hook left running in its group would hold the pipes open.
    if !live_members(pgid, &[]).is_empty() {
        signal_group(pgid, Signal::SIGKILL);
    }
    let (stdout, stderr) = match tokio::time::timeout(Duration::from_secs(2), readers).await {
        Ok(Ok(output)) => output,
        _ => (Vec::new(), Vec::new()),
    };
    Ok(CommandRun {
        exit_code: status.map(exit_code),
        timed_out,
        stdout,
        stderr,
    })
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
) -> Vec<HookFailure> {
    let mut failures = Vec::new();
    for command in commands {
        let failure = match run_shell(command, env, cwd, timeout).await {
            Ok(run) if run.succeeded() => None,
            Ok(run) => Some(HookFailure {
                command: command.clone(),
                exit_code: run.exit_code,
                timed_out: run.timed_out,
                output: run.combined_output(),
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
            ))
            .expect("run");
        assert!(run.timed_out);
        assert!(!run.succeeded());
        assert_eq!(run.combined_output(), "started");
    }

    #[test]
    fn output_is_capped() {
        let run = runtime()
            .block_on(run_shell(
                "head -c 1000000 /dev/zero",
                &[],
                Path::new("."),
                Duration::from_secs(10),
            ))
            .expect("run");
        assert!(run.succeeded());
        assert_eq!(run.stdout.len(), OUTPUT_CAP);
    }
}
