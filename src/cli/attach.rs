//! `clowder attach`: the control room as a client of a running host (its
//! socket in a folder, over SSH, or through any command that gives a pipe),
//! the far end of such a pipe (`--stdio`), and the protocol's schema.

use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};

use crate::fleet::serve::socket_path;
use crate::fleet::wire::{self, ServerMsg};

#[derive(Debug, clap::Args)]
pub struct AttachArgs {
    /// Hosts to attach to: a folder (its .clowder/host.sock), or
    /// ssh://[user@]host[:port]/path, each optionally NAME=TARGET (its lanes
    /// show as NAME/lane); the default is the current folder
    #[arg(value_name = "TARGET")]
    pub targets: Vec<String>,
    /// A command whose stdin and stdout reach a host, e.g.
    /// 'kubectl exec -i POD -- clowder attach --stdio /work'; may be repeated
    #[arg(long = "via", value_name = "COMMAND")]
    pub via: Vec<String>,
    /// Be the far end of such a pipe: bridge stdin and stdout to PATH's host socket
    #[arg(long = "stdio", value_name = "PATH", conflicts_with_all = ["targets", "via", "protocol_schema"])]
    pub stdio: Option<PathBuf>,
    /// Print the JSON Schema of the host protocol and exit
    #[arg(long = "protocol-schema", conflicts_with_all = ["targets", "via"])]
    pub protocol_schema: bool,
}

pub fn run(args: AttachArgs) -> i32 {
    if args.protocol_schema {
        return print_schema();
    }
    if let Some(path) = args.stdio {
        return bridge(&path);
    }
    super::attach_room::run(args.targets, args.via)
}

fn print_schema() -> i32 {
    match serde_json::to_string_pretty(&wire::schema()) {
        Ok(text) => {
            println!("{text}");
            0
        }
        Err(err) => {
            eprintln!("clowder: error: cannot print the schema: {err}");
            1
        }
    }
}

/// `--stdio PATH`: stdin to the socket, the socket to stdout, until either
/// side ends. A folder with no host running, a host of another user, or one
/// that serves another folder get a refusal on stdout too, so that the room
/// at the other end can say why; each exits 1, as does a refusal that ends
/// the conversation later.
fn bridge(folder: &Path) -> i32 {
    let path = socket_path(folder);
    let socket = match crate::fleet::serve::connect(&path) {
        Ok(socket) => socket,
        Err(err) => return refuse(&crate::fleet::serve::unreached(&path, &err)),
    };
    let Ok(to_socket) = socket.try_clone() else {
        eprintln!("clowder: error: cannot use {}", path.display());
        return 1;
    };
    let mut from_socket = BufReader::new(socket);
    let mut first = Vec::new();
    let read = from_socket
        .by_ref()
        .take(MAX_KEPT as u64)
        .read_until(b'\n', &mut first);
    match read {
        Err(err) => return refuse(&format!("cannot read from {}: {err}", path.display())),
        Ok(0) => return refuse(&format!("the host on {} hung up", path.display())),
        Ok(_) => {}
    }
    match serde_json::from_slice::<ServerMsg>(&first) {
        Ok(ServerMsg::Hello(hello)) if !crate::fleet::serve::serves(&hello.folder, folder) => {
            return refuse(&format!(
                "the host on {} serves {}, not {}",
                path.display(),
                hello.folder,
                folder.display()
            ));
        }
        _ => {}
    }
    // Stdin ends (the far side hung up): the host hears this client leave.
    std::thread::spawn(move || {
        let mut to_socket = to_socket;
        let _ = copy_flushed(
            &mut std::io::stdin().lock(),
            &mut to_socket,
            &mut Refusals::default(),
        );
        let _ = to_socket.shutdown(std::net::Shutdown::Write);
    });
    let mut last = Refusals::default();
    let mut stdout = std::io::stdout().lock();
    last.see(&first);
    if stdout
        .write_all(&first)
        .and_then(|()| stdout.flush())
        .is_err()
    {
        return 1;
    }
    let copied = copy_flushed(&mut from_socket, &mut stdout, &mut last);
    match (copied, last.refusal()) {
        (Ok(()), None) => 0,
        (Ok(()), Some(reason)) => {
            eprintln!("clowder: error: the host refused: {reason}");
            1
        }
        (Err(_), _) => 1,
    }
}

/// Says `reason` as the host would (a `refused` line on stdout) and on stderr; 1.
fn refuse(reason: &str) -> i32 {
    let refusal = wire::line(&ServerMsg::Refused {
        reason: reason.to_string(),
        closing: true,
    });
    println!("{refusal}");
    eprintln!("clowder: error: {reason}");
    1
}

/// The longest line looked at for a refusal; a longer one is a snapshot.
const MAX_KEPT: usize = 64 * 1024;

/// Whether a refusal that ends the conversation went by (lines that
/// follow it may still be on their way).
#[derive(Default)]
struct Refusals {
    current: Vec<u8>,
    long: bool,
    refused: Option<String>,
}

impl Refusals {
    fn see(&mut self, bytes: &[u8]) {
        for piece in bytes.split_inclusive(|b| *b == b'\n') {
            if !self.long {
                self.current.extend_from_slice(piece);
                self.long = self.current.len() > MAX_KEPT;
            }
            if piece.ends_with(b"\n") {
                let line = std::mem::take(&mut self.current);
                if !self.long && self.refused.is_none() {
                    self.refused = closing_refusal(&line);
                }
                self.long = false;
            }
        }
    }

    /// Why the host hung up, if it refused.
    fn refusal(&self) -> Option<String> {
        self.refused.clone()
    }
}

/// The reason of a `refused` line that ends the conversation.
fn closing_refusal(line: &[u8]) -> Option<String> {
    // Most lines are changes: only one that says "refused" is read as JSON.
    if !line.windows(9).any(|w| w == b"\"refused\"") {
        return None;
    }
    match serde_json::from_slice::<ServerMsg>(line) {
        Ok(ServerMsg::Refused {
            reason,
            closing: true,
        }) => Some(reason),
        _ => None,
    }
}

/// `io::copy` that flushes after every read: a line must not wait in a buffer.
fn copy_flushed(
    from: &mut impl Read,
    to: &mut impl Write,
    seen: &mut Refusals,
) -> std::io::Result<()> {
    let mut buffer = vec![0u8; 64 * 1024];
    loop {
        let read = match from.read(&mut buffer) {
            Ok(0) => return Ok(()),
            Ok(read) => read,
            Err(err) if err.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(err) => return Err(err),
        };
        seen.see(&buffer[..read]);
        to.write_all(&buffer[..read])?;
        to.flush()?;
    }
}
