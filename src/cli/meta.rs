//! What describes clowder itself rather than a loop: shell completions, the man
//! page (both from the clap definition) and the JSON Schema of `harness.toml`.

use std::io::Write;

use clap::{CommandFactory, Subcommand};

use super::Args;

/// `clowder config …`.
#[derive(Debug, Subcommand)]
pub enum ConfigCommand {
    /// Print the JSON Schema of harness.toml (editors with Taplo / Even Better TOML read it)
    Schema,
}

/// Prints the completion script for `shell` on stdout.
pub fn completions(shell: clap_complete::Shell) -> i32 {
    let mut command = Args::command();
    // Into a buffer first: clap_complete panics when its writer fails, and a
    // reader that closes the pipe early (`| head`) is no reason to.
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut command, "clowder", &mut script);
    print_bytes(&script)
}

/// Prints the man page (roff) on stdout.
pub fn man() -> i32 {
    let mut page = Vec::new();
    if let Err(err) = clap_mangen::Man::new(Args::command()).render(&mut page) {
        eprintln!("clowder: error: cannot render the man page: {err}");
        return 1;
    }
    print_bytes(&page)
}

pub fn config(command: ConfigCommand) -> i32 {
    match command {
        ConfigCommand::Schema => print_bytes(crate::config::schema::to_json().as_bytes()),
    }
}

/// A closed pipe (`clowder man | head`) is not an error worth a panic.
fn print_bytes(bytes: &[u8]) -> i32 {
    let mut out = std::io::stdout().lock();
    match out.write_all(bytes).and_then(|()| out.flush()) {
        Ok(()) => 0,
        Err(err) if err.kind() == std::io::ErrorKind::BrokenPipe => 0,
        Err(err) => {
            eprintln!("clowder: error: cannot write to stdout: {err}");
            1
        }
    }
}
