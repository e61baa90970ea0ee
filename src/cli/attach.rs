//! `clowder attach`: the control room as a client of a running host (its
//! socket in a folder, over SSH, or through any command that gives a pipe),
//! the far end of such a pipe (`--stdio`), and the protocol's schema.

use std::io::{Read, Write};
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
/// side ends. A folder with no host running gets a refusal on stdout too,
/// so that the room at the other end can say why.
fn bridge(folder: &Path) -> i32 {
    let path = socket_path(folder);
    let socket = match crate::fleet::serve::connect(&path) {
        Ok(socket) => socket,
        Err(err) => {
            let reason = format!(
                "no clowder host serves {} ({err}): start one there with `clowder --headless`",
                path.display()
            );
            let refusal = wire::line(&ServerMsg::Refused {
                reason: reason.clone(),
                closing: true,
            });
            println!("{refusal}");
            eprintln!("clowder: error: {reason}");
            return 1;
        }
    };
    let Ok(to_socket) = socket.try_clone() else {
        eprintln!("clowder: error: cannot use {}", path.display());
        return 1;
    };
    // Stdin ends (the far side hung up): the host hears this client leave.
    std::thread::spawn(move || {
        let mut to_socket = to_socket;
        let _ = copy_flushed(&mut std::io::stdin().lock(), &mut to_socket);
        let _ = to_socket.shutdown(std::net::Shutdown::Write);
    });
    let mut from_socket = socket;
    match copy_flushed(&mut from_socket, &mut std::io::stdout().lock()) {
        Ok(()) => 0,
        Err(_) => 1,
    }
}

/// `io::copy` that flushes after every read: a line must not wait in a buffer.
fn copy_flushed(from: &mut impl Read, to: &mut impl Write) -> std::io::Result<()> {
    let mut buffer = vec![0u8; 64 * 1024];
    loop {
        let read = match from.read(&mut buffer) {
            Ok(0) => return Ok(()),
            Ok(read) => read,
            Err(err) if err.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(err) => return Err(err),
        };
        to.write_all(&buffer[..read])?;
        to.flush()?;
    }
}
