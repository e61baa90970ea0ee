//! `clowder serve --http`: the inbox in a browser. A small page, embedded in
//! the binary, shows the fleet of one or more hosts (reached over the host
//! protocol, as `clowder attach` reaches them) and decides their requests,
//! behind a token, its cookie, an `Origin` check and a CSRF token.

mod auth;
mod feed;
mod follow;
mod hosts;
mod model;
mod routes;
mod view;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
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
    let base = format!("http://{local}/");
    let written: Vec<PathBuf> = options
        .hosts
        .iter()
        .filter_map(|host| match &host.target {
            Target::Folder(folder) => Some(folder.join(STATE_DIR).join(WEB_URL_FILE)),
            _ => None,
        })
        .filter(|path| write_web_url(path, &base))
        .collect();
    let shared = hosts::Shared::start(options.hosts);
    let app = Arc::new(routes::App {
        shared,
        token,
        csrf: auth::random_token()?,
        brake: auth::Brake::default(),
        feeds: Arc::default(),
    });
    announce(&base, &app.token, local);
    let service = routes::router(app).into_make_service_with_connect_info::<SocketAddr>();
    let served = tokio::select! {
        served = axum::serve(listener, service) => served.map_err(|err| format!("the server failed: {err}")),
        () = stop => Ok(()),
    };
    for path in written {
        remove_web_url(&path, &base);
    }
    served
}

/// The page's address on stdout (the one line a script reads), and how to
/// reach it safely on stderr.
fn announce(base: &str, token: &str, local: SocketAddr) {
    use std::io::Write;
    println!("{base}?token={token}");
    let _ = std::io::stdout().flush();
    eprintln!(
        "clowder serve: the web inbox is at the address above; it sets a cookie, so the token need not be typed again"
    );
    if local.ip().is_loopback() {
        eprintln!(
            "clowder serve: from another machine, tunnel to it: ssh -L {port}:127.0.0.1:{port} THIS-HOST, then open http://127.0.0.1:{port}/?token=…",
            port = local.port()
        );
    } else {
        eprintln!(
            "clowder serve: {local} is open to the network: reach it only through a private network (Tailscale, WireGuard) or an SSH tunnel, never from the internet"
        );
    }
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

/// Names the page for the folder's host; false when the folder has no
/// `.clowder` (no host was ever there) or the file cannot be written.
fn write_web_url(path: &Path, base: &str) -> bool {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    if !path.parent().is_some_and(Path::is_dir) {
        return false;
    }
    let written = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
        .and_then(|mut file| file.write_all(format!("{base}\n").as_bytes()));
    written.is_ok()
}

/// Removes the page's name, unless another server wrote its own since.
fn remove_web_url(path: &Path, base: &str) {
    let ours = std::fs::read_to_string(path).is_ok_and(|text| text.trim() == base);
    if ours {
        let _ = std::fs::remove_file(path);
    }
}
