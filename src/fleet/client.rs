//! A short blocking client of the host's socket for the CLI: `clowder lanes`,
//! `queue`, `approve` and `reject` ask the host that serves the folder, and
//! read the files as before when none does. Every read and write has a
//! deadline: a host that stops answering makes the command fall back to the
//! files, never hang.

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::{Duration, Instant};

use super::wire::{
    self, ClientMsg, Hello, HostSnapshot, PROTOCOL_VERSION, ServerMsg, WireDecision,
};

/// Set (to anything but `0` or nothing), the CLI reads the files even when a
/// host serves the folder.
pub const NO_SOCKET_ENV: &str = "CLOWDER_NO_SOCKET";

/// The longest the CLI waits for the host, for the hello and snapshot, and
/// again for an answer.
const DEADLINE: Duration = Duration::from_secs(5);

/// The longest line the CLI reads from the host (a snapshot of a big fleet
/// with its recent log is a few MB).
const MAX_LINE: u64 = 256 << 20;

/// A connection to the host that serves a folder, with what it said first.
pub struct Client {
    reader: BufReader<UnixStream>,
    writer: UnixStream,
    pub hello: Hello,
    pub snapshot: HostSnapshot,
    next_re: u64,
}

/// How a message sent to the host went.
#[derive(Debug)]
pub enum Answer {
    /// The host did it; its words.
    Done(String),
    /// The host refused it; why, in its words.
    Refused(String),
    /// The host did not answer as it should: the caller falls back to the files.
    Trouble(String),
}

/// The host serving `root`, with its hello and snapshot read; `None` when no
/// host serves it (no socket, a socket left by a dead host, or
/// [`NO_SOCKET_ENV`] set). A host that answers wrongly is noted on stderr.
pub fn connect(root: &Path) -> Option<Client> {
    if std::env::var_os(NO_SOCKET_ENV).is_some_and(|value| !value.is_empty() && value != "0") {
        return None;
    }
    let path = super::serve::socket_path(root);
    std::fs::symlink_metadata(&path).ok()?;
    let stream = match UnixStream::connect(&path) {
        Ok(stream) => stream,
        Err(err) if is_no_host(&err) => return None,
        Err(err) => {
            note(&format!("cannot reach {}: {err}", path.display()));
            return None;
        }
    };
    match Client::start(stream, root) {
        Ok(client) => Some(client),
        Err(err) => {
            note(&format!("the host on {}: {err}", path.display()));
            None
        }
    }
}

/// A socket nobody listens on: the host is gone, or was never there.
fn is_no_host(err: &std::io::Error) -> bool {
    use std::io::ErrorKind;
    matches!(
        err.kind(),
        ErrorKind::ConnectionRefused | ErrorKind::NotFound
    )
}

/// One line on stderr: something unexpected, and the files answer instead.
pub fn note(what: &str) {
    eprintln!(
        "clowder: note: {}; reading the files instead",
        crate::escape::one_line(what)
    );
}

impl Client {
    fn start(stream: UnixStream, root: &Path) -> Result<Client, String> {
        let set = |err: std::io::Error| format!("cannot set a timeout: {err}");
        stream.set_read_timeout(Some(DEADLINE)).map_err(set)?;
        stream.set_write_timeout(Some(DEADLINE)).map_err(set)?;
        let writer = stream
            .try_clone()
            .map_err(|err| format!("cannot use the socket: {err}"))?;
        let mut reader = BufReader::new(stream);
        let deadline = Instant::now() + DEADLINE;
        let hello = match read_message(&mut reader, deadline)? {
            ServerMsg::Hello(hello) if !super::serve::serves(&hello.folder, root) => {
                return Err(format!(
                    "it serves {}, not {}",
                    hello.folder,
                    root.display()
                ));
            }
            ServerMsg::Hello(hello) if hello.protocol == PROTOCOL_VERSION => hello,
            ServerMsg::Hello(hello) => {
                return Err(format!(
                    "it speaks protocol {}, this clowder {PROTOCOL_VERSION}",
                    hello.protocol
                ));
            }
            ServerMsg::Refused { reason, .. } => return Err(format!("refused: {reason}")),
            _ => return Err("it did not start with a hello".to_string()),
        };
        let snapshot = loop {
            match read_message(&mut reader, deadline)? {
                ServerMsg::Snapshot(snapshot) => break *snapshot,
                ServerMsg::Refused { reason, .. } => return Err(format!("refused: {reason}")),
                _ => continue,
            }
        };
        Ok(Client {
            reader,
            writer,
            hello,
            snapshot,
            next_re: 1,
        })
    }

    /// Decides an approval request as `by`, and waits for the host's answer.
    pub fn decide(&mut self, id: &str, decision: WireDecision, by: &str) -> Answer {
        let re = self.next_re;
        self.next_re += 1;
        let message = ClientMsg::Decide {
            re: Some(re),
            id: id.to_string(),
            decision,
            by: by.to_string(),
        };
        match self.ask(re, &message) {
            Ok((true, text)) => Answer::Done(text),
            Ok((false, text)) => Answer::Refused(text),
            Err(err) => Answer::Trouble(err),
        }
    }

    /// Sends `message`, then reads until the reply to `re`, skipping the
    /// changes the host streams meanwhile.
    fn ask(&mut self, re: u64, message: &ClientMsg) -> Result<(bool, String), String> {
        let mut bytes = wire::line(message).into_bytes();
        bytes.push(b'\n');
        self.writer
            .write_all(&bytes)
            .map_err(|err| format!("cannot write to the host: {err}"))?;
        let deadline = Instant::now() + DEADLINE;
        loop {
            match read_message(&mut self.reader, deadline)? {
                ServerMsg::Reply { re: got, ok, text } if got == re => return Ok((ok, text)),
                ServerMsg::Refused { reason, .. } => return Err(format!("refused: {reason}")),
                _ => continue,
            }
        }
    }
}

/// The host's next message, by `deadline` (each read also times out).
fn read_message(
    reader: &mut BufReader<UnixStream>,
    deadline: Instant,
) -> Result<ServerMsg, String> {
    if Instant::now() > deadline {
        return Err(format!("no answer within {} seconds", DEADLINE.as_secs()));
    }
    let mut line = Vec::new();
    let read = reader.by_ref().take(MAX_LINE).read_until(b'\n', &mut line);
    match read {
        Ok(0) => return Err("it hung up".to_string()),
        Ok(_) if line.last() != Some(&b'\n') => {
            return Err("it sent a line that does not end".to_string());
        }
        Ok(_) => {}
        Err(err) => return Err(format!("cannot read from it: {err}")),
    }
    serde_json::from_slice(&line).map_err(|err| format!("cannot read its message: {err}"))
}
