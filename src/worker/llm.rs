//! Calling the LLM: a program (context on stdin, answer on stdout, its process group
//! killed on timeout or stop) or Ollama's HTTP API with the answer schema as `format`.
//! While waiting, `tick` is called several times a second (heartbeat, stop check).

use std::io::{Read, Write};
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;

use super::WorkerConfig;

/// Most bytes of an answer kept; a longer one is cut (and then fails validation).
const ANSWER_CAP: u64 = 4 * 1024 * 1024;
/// The end of the program's stderr kept for an error message.
const STDERR_TAIL: usize = 2000;
const POLL: Duration = Duration::from_millis(100);

pub(crate) enum Call {
    Answer(String),
    TimedOut,
    Stopped,
}

/// Called while waiting: `Ok(true)` asks to stop, `Err` is fatal.
pub(crate) type Tick<'a> = &'a mut dyn FnMut() -> Result<bool, String>;

/// `Err` is fatal: the LLM is missing, down or broken, and is not retried.
pub(crate) fn call(config: &WorkerConfig, context: &str, tick: Tick) -> Result<Call, String> {
    if config.ollama.is_empty() {
        call_program(config, context, tick)
    } else {
        call_ollama(config, context, tick)
    }
}

/// The program runs in the worker's own folder (where `harness.toml` names it), not
/// in the task directory: it reads the context, not the files.
fn call_program(config: &WorkerConfig, context: &str, tick: Tick) -> Result<Call, String> {
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
    let waited = wait(&mut child, deadline, tick, &closed);
    // Whatever the leader left running in its group goes too, so the pipes close.
    end_group(&mut child);
    let status = match waited? {
        Waited::Exited(status) => status,
        Waited::TimedOut => return Ok(Call::TimedOut),
        Waited::Stopped => return Ok(Call::Stopped),
    };
    let out = stdout.and_then(|h| h.join().ok()).unwrap_or_default();
    let err = stderr.and_then(|h| h.join().ok()).unwrap_or_default();
    if !status.success() {
        return Err(format!(
            "the LLM program `{program}` failed ({status}): {}",
            tail(&String::from_utf8_lossy(&err), STDERR_TAIL).trim()
        ));
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
    tick: Tick,
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
        if tick()? {
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

/// Reads up to `cap` bytes, drains the rest, and says so on `done` at the end.
fn read_capped(
    stream: impl Read + Send + 'static,
    cap: u64,
    done: Option<mpsc::Sender<()>>,
) -> thread::JoinHandle<Vec<u8>> {
    thread::spawn(move || {
        let mut kept = Vec::new();
        let mut stream = stream;
        let _ = (&mut stream).take(cap).read_to_end(&mut kept);
        // Drain the rest so that the writer is never blocked on a full pipe.
        let _ = std::io::copy(&mut stream, &mut std::io::sink());
        if let Some(done) = done {
            let _ = done.send(());
        }
        kept
    })
}

/// SIGKILL to the whole group, then reap the leader.
fn end_group(child: &mut Child) {
    if let Ok(pid) = i32::try_from(child.id()) {
        let _ = killpg(Pid::from_raw(pid), Signal::SIGKILL);
    }
    let _ = child.wait();
}

fn call_ollama(config: &WorkerConfig, context: &str, tick: Tick) -> Result<Call, String> {
    let url = format!("{}/api/generate", config.ollama.trim_end_matches('/'));
    let body = serde_json::json!({
        "model": config.model,
        "prompt": context,
        "stream": false,
        "format": super::answer::json_schema(),
    });
    let timeout = config.llm_timeout.0;
    let (tx, rx) = mpsc::channel();
    let request_url = url.clone();
    // The request blocks; this thread keeps the heartbeat and the stop check going.
    thread::spawn(move || {
        let _ = tx.send(post(&request_url, &body, timeout));
    });
    loop {
        match rx.recv_timeout(POLL) {
            Ok(result) => return result,
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                return Err(format!("the request to {url} ended without an answer"));
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {}
        }
        if tick()? {
            return Ok(Call::Stopped);
        }
    }
}

fn post(url: &str, body: &serde_json::Value, timeout: Duration) -> Result<Call, String> {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .timeout_global(Some(timeout))
        .http_status_as_error(false)
        .build()
        .into();
    let mut response = match agent.post(url).send_json(body) {
        Ok(response) => response,
        Err(ureq::Error::Timeout(_)) => return Ok(Call::TimedOut),
        Err(err) => return Err(format!("Ollama at {url} is unreachable: {err}")),
    };
    let status = response.status();
    let reply: serde_json::Value = match response.body_mut().read_json() {
        Ok(reply) => reply,
        Err(ureq::Error::Timeout(_)) => return Ok(Call::TimedOut),
        Err(err) => {
            return Err(format!(
                "Ollama at {url}: unreadable reply ({status}): {err}"
            ));
        }
    };
    if !status.is_success() {
        let message = reply["error"].as_str().unwrap_or("no error message");
        return Err(format!("Ollama at {url} answered {status}: {message}"));
    }
    match reply["response"].as_str() {
        Some(text) => Ok(Call::Answer(text.to_string())),
        None => Err(format!("Ollama at {url}: the reply has no `response` text")),
    }
}
