//! `clowder serve --http`: the inbox in a browser. A small page, embedded in
//! the binary, shows the fleet of one or more hosts (reached over the host
//! protocol, as `clowder attach` reaches them) and decides their requests,
//! behind a token the page sends in a header, an `Origin` check and a CSRF
//! token.

mod actions;
mod announce;
mod app;
mod auth;
mod costs;
mod feed;
mod follow;
mod hosts;
mod listen;
mod model;
mod parts;
mod routes;
mod url_file;
mod view;

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;

pub use hosts::WebHost;

use crate::fleet::remote::Target;
use crate::fleet::wire::WEB_URL_FILE;
use crate::store::lock::STATE_DIR;

/// What `clowder serve --http` was given.
pub struct WebOptions {
    pub addr: SocketAddr,
    /// From [`token_for`].
    pub token: String,
    pub hosts: Vec<WebHost>,
}

/// Serves the page until SIGINT or SIGTERM: 0, or 1 when it cannot start.
pub fn run(options: WebOptions) -> i32 {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build();
    let runtime = match runtime {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!("clowder serve: error: cannot start the async runtime: {err}");
            return 1;
        }
    };
    match runtime.block_on(serve(options)) {
        Ok(()) => 0,
        Err(err) => {
            eprintln!("clowder serve: error: {err}");
            1
        }
    }
}

/// The page's token: `token_file`'s, or a new one; refused for an address
/// other machines can reach without a token file.
pub fn token_for(addr: SocketAddr, token_file: Option<&Path>) -> Result<String, String> {
    if !addr.ip().is_loopback() && token_file.is_none() {
        return Err(format!(
            "--http {addr} is reachable from other machines: this page decides what agents may run, so it needs --token-file FILE with a long secret (e.g. `openssl rand -hex 32 > FILE`)"
        ));
    }
    match token_file {
        Some(path) => auth::token_from_file(path),
        None => auth::random_token(),
    }
}

async fn serve(options: WebOptions) -> Result<(), String> {
    // Taken before the address is printed: a Ctrl-C right after it must
    // still end the page cleanly.
    let stop = stop_signal()?;
    let token = options.token;
    let listener = tokio::net::TcpListener::bind(options.addr)
        .await
        .map_err(|err| format!("cannot listen on {}: {err}", options.addr))?;
    let local = listener
        .local_addr()
        .map_err(|err| format!("cannot read the address listened on: {err}"))?;
    let bases = announce::bases(local);
    let base = bases.first().cloned().unwrap_or_default();
    let named = name_the_page(&options.hosts, &base);
    let shared = hosts::Shared::start(options.hosts);
    let app = Arc::new(app::App {
        shared,
        token,
        csrf: auth::random_token()?,
        brake: auth::Brake::default(),
        feeds: Arc::default(),
    });
    announce::announce(&bases, &app.token, local);
    tokio::select! {
        () = listen::serve(listener, routes::router(app)) => {}
        () = stop => {}
    }
    drop(named);
    Ok(())
}

/// Names the page in `.clowder/web-url` of each folder it serves, unless
/// another page that still runs is named there.
fn name_the_page(hosts: &[WebHost], base: &str) -> Vec<url_file::WebUrl> {
    let mut named = Vec::new();
    for host in hosts {
        let Target::Folder(folder) = &host.target else {
            continue;
        };
        let path = folder.join(STATE_DIR).join(WEB_URL_FILE);
        match url_file::claim(&path, base) {
            url_file::Claim::Named(file) => named.push(file),
            url_file::Claim::Taken(other) => eprintln!(
                "clowder serve: {} names another page that still runs ({other}); the host's notices keep pointing there",
                path.display()
            ),
            url_file::Claim::Skipped => {}
        }
    }
    named
}

/// Ends at the first SIGTERM or SIGINT.
fn stop_signal() -> Result<impl std::future::Future<Output = ()>, String> {
    use tokio::signal::unix::{SignalKind, signal};
    let listen = |kind| signal(kind).map_err(|err| format!("cannot take signals: {err}"));
    let mut term = listen(SignalKind::terminate())?;
    let mut int = listen(SignalKind::interrupt())?;
    Ok(async move {
        tokio::select! {
            _ = term.recv() => {}
            _ = int.recv() => {}
        }
    })
}
