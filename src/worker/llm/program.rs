//! The LLM as a program: the context on its stdin, the answer on its stdout, run in
//! its own process group, which is killed on a timeout, a stop, or once it exits.

use std::io::{Read, Write};
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;

use super::{ANSWER_CAP, Call, POLL, Waiter};
use crate::config::WorkerConfig;

/// The end of the program's stderr kept for an error message.
const STDERR_TAIL: usize = 2000;

/// The program runs in the worker's own folder (where `harness.toml` names it), not
/// in the task directory: it reads the context, not the files.
pub(super) fn call(
    config: &WorkerConfig,
    context: &str,
    waiter: &mut dyn Waiter,
) -> Result<Call, String> {
    let (program, args) = config
        .llm
        .split_first()
        .ok_or("[worker] llm is empty: no program to call")?;
    let program = &program.0;
    let mut child = Command::new(program)
        .args(args.iter().map(|a| &a.0))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
        .map_err(|err| format!("cannot run the LLM program `{program}`: {err}"))?;
    let stdin = child.stdin.take();
    let input = context.as_bytes().to_vec();
    // A program that does not read its input gets EPIPE here: not our concern.
    thread::spawn(move || stdin.map(|mut s| s.write_all(&input)));
    let (closed_tx, closed) = mpsc::channel();
    let stdout = child
        .stdout
        .take()
        .map(|out| read_capped(out, ANSWER_CAP, Some(closed_tx)));
    let stderr = child
        .stderr
        .take()
        .map(|err| read_capped(err, 64 * 1024, None));
    let deadline = Instant::now() + config.llm_timeout.0;
    let waited = wait(&mut child, deadline, waiter, &closed);
    // Whatever the leader left running in its group goes too, so the pipes close.
    end_group(&mut child);
    let status = match waited? {
        Waited::Exited(status) => status,
        Waited::TimedOut => return Ok(Call::TimedOut),
        Waited::Stopped => return Ok(Call::Stopped),
    };
    let (out, total) = stdout.and_then(|h| h.join().ok()).unwrap_or_default();
    let (err, _) = stderr.and_then(|h| h.join().ok()).unwrap_or_default();
    if !status.success() {
        return Err(format!(
            "the LLM program `{program}` failed ({status}): {}",
            tail(&String::from_utf8_lossy(&err), STDERR_TAIL).trim()
        ));
    }
    if total > ANSWER_CAP {
        return Ok(Call::Invalid(super::too_big(total)));
    }
    Ok(Call::Answer(String::from_utf8_lossy(&out).into_owned()))
}

enum Waited {
    Exited(std::process::ExitStatus),
    TimedOut,
    Stopped,
}

/// Polls the program until it exits, the deadline passes or `tick` asks to stop.
/// The end of its output wakes the loop at once: a quick program costs no sleep.
fn wait(
    child: &mut Child,
    deadline: Instant,
    waiter: &mut dyn Waiter,
    closed: &mpsc::Receiver<()>,
) -> Result<Waited, String> {
    let mut output_closed = false;
    let mut pause = Duration::from_millis(1);
    loop {
        match child.try_wait() {
            Ok(Some(status)) => return Ok(Waited::Exited(status)),
            Ok(None) => {}
            Err(err) => return Err(format!("cannot wait for the LLM program: {err}")),
        }
        if Instant::now() >= deadline {
            return Ok(Waited::TimedOut);
        }
        if waiter.tick()? {
            return Ok(Waited::Stopped);
        }
        if output_closed {
            // Its output is complete: it is about to exit.
            thread::sleep(pause);
            pause = (pause * 2).min(POLL);
        } else if !matches!(
            closed.recv_timeout(POLL),
            Err(mpsc::RecvTimeoutError::Timeout)
        ) {
            output_closed = true;
        }
    }
}

/// The last `max` bytes of `text` or a little less, cut on a character boundary.
fn tail(text: &str, max: usize) -> &str {
    let mut start = text.len().saturating_sub(max);
    while !text.is_char_boundary(start) {
        start += 1;
    }
    &text[start..]
}

/// Reads up to `cap` bytes, drains the rest, and says so on `done` at the end;
/// yields what was kept and how many bytes there were in all.
fn read_capped(
    stream: impl Read + Send + 'static,
    cap: u64,
    done: Option<mpsc::Sender<()>>,
) -> thread::JoinHandle<(Vec<u8>, u64)> {
    thread::spawn(move || {
        let mut kept = Vec::new();
        let mut stream = stream;
        let _ = (&mut stream).take(cap).read_to_end(&mut kept);
        // Drain the rest so that the writer is never blocked on a full pipe.
        let rest = std::io::copy(&mut stream, &mut std::io::sink()).unwrap_or(0);
        if let Some(done) = done {
            let _ = done.send(());
        }
        let total = kept.len() as u64 + rest;
        (kept, total)
    })
}

/// SIGKILL to the whole group, then reap the leader.
fn end_group(child: &mut Child) {
    if let Ok(pid) = i32::try_from(child.id()) {
        let _ = killpg(Pid::from_raw(pid), Signal::SIGKILL);
    }
    let _ = child.wait();
}
