//! `clowder serve --http [ADDR] [TARGET…]`: the web inbox over the hosts
//! named (as `clowder attach` names them), the current folder's by default.

use std::net::{SocketAddr, ToSocketAddrs};
use std::path::PathBuf;

/// The address the page is served on unless `--http` names another.
pub const DEFAULT_HTTP: &str = "127.0.0.1:7700";

#[derive(Debug, clap::Args)]
pub struct ServeArgs {
    /// Serve the web inbox on ADDR (default 127.0.0.1:7700; port 0 picks a
    /// free one). Another address than loopback needs --token-file
    #[arg(long = "http", value_name = "ADDR", num_args = 0..=1, default_missing_value = DEFAULT_HTTP, required = true)]
    pub http: Option<String>,
    /// Read the token from FILE (its first line) instead of making one
    #[arg(long = "token-file", value_name = "FILE")]
    pub token_file: Option<PathBuf>,
    /// Hosts to serve, as `clowder attach` takes them: a folder,
    /// ssh://[user@]host[:port]/path, each optionally NAME=TARGET; the
    /// default is the current folder
    #[arg(value_name = "TARGET")]
    pub targets: Vec<String>,
    /// A command whose stdin and stdout reach a host; may be repeated
    #[arg(long = "via", value_name = "COMMAND")]
    pub via: Vec<String>,
}

pub fn run(args: ServeArgs) -> i32 {
    let text = args.http.as_deref().unwrap_or(DEFAULT_HTTP);
    let addr = match parse_addr(text) {
        Ok(addr) => addr,
        Err(err) => {
            eprintln!("clowder: error: {err}");
            return super::EXIT_USAGE;
        }
    };
    let token = match crate::web::token_for(addr, args.token_file.as_deref()) {
        Ok(token) => token,
        Err(err) => {
            eprintln!("clowder: error: {err}");
            return super::EXIT_USAGE;
        }
    };
    let hosts = match super::attach_room::resolve(args.targets, args.via) {
        Ok(hosts) => hosts,
        Err(code) => return code,
    };
    let hosts = hosts
        .into_iter()
        .map(|(name, target)| crate::web::WebHost { name, target })
        .collect();
    crate::web::run(crate::web::WebOptions { addr, token, hosts })
}

fn parse_addr(text: &str) -> Result<SocketAddr, String> {
    let expected = "expected HOST:PORT, such as 127.0.0.1:7700 or 0.0.0.0:7700";
    let mut addrs = text
        .to_socket_addrs()
        .map_err(|err| format!("--http {text:?}: {err}; {expected}"))?;
    addrs
        .next()
        .ok_or_else(|| format!("--http {text:?}: no such address; {expected}"))
}
