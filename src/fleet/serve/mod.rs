//! The host serves its fleet on `.clowder/host.sock` (a Unix socket, 0600, in
//! the 0700 `.clowder` folder, for its own user only). Everything the host
//! tells its control room goes through a hub that keeps the fleet's latest
//! state for new clients and fans each change out to them; a slow client
//! never slows the host (see [`hub`]).

mod client;
mod hub;
mod output;
pub mod single;

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use tokio::net::UnixListener;
use tokio::sync::{mpsc, oneshot};

use super::link::{HostMsg, HostRequest};
use super::wire::{Hello, PROTOCOL_VERSION, SOCKET_FILE};
use crate::store::lock::STATE_DIR;

/// At most this many clients at once; one more is told so and hung up on.
const MAX_CLIENTS: usize = 64;

/// `.clowder/host.sock` of the fleet in `root`.
pub fn socket_path(root: &Path) -> PathBuf {
    root.join(STATE_DIR).join(SOCKET_FILE)
}

/// Whether a host serves the fleet in `folder` now; if not, what to do.
pub fn check_served(folder: &Path) -> Result<(), String> {
    let path = socket_path(folder);
    match connect(&path) {
        Ok(_) => Ok(()),
        Err(err) if is_no_host(&err) => Err(format!(
            "{}; or attach to another with ssh://host/path or --via 'COMMAND'",
            unreached(&path, &err)
        )),
        Err(err) => Err(unreached(&path, &err)),
    }
}

/// Nobody listens there: no host runs, or one was killed.
fn is_no_host(err: &std::io::Error) -> bool {
    use std::io::ErrorKind;
    matches!(
        err.kind(),
        ErrorKind::NotFound | ErrorKind::ConnectionRefused
    )
}

/// Why the host socket at `path` could not be reached, and what to do:
/// no host there is not the same as a host of another user.
pub fn unreached(path: &Path, err: &std::io::Error) -> String {
    let shown = path.display();
    if is_no_host(err) {
        return format!(
            "no clowder host serves {shown} ({err}): start one there with `clowder --headless`"
        );
    }
    if err.kind() == std::io::ErrorKind::PermissionDenied {
        return format!(
            "cannot open {shown} ({err}): its host serves only the user it runs as; attach as that user"
        );
    }
    format!("cannot reach the host at {shown}: {err}")
}

/// Whether a hello's `folder` is `asked`: a socket reached through a link,
/// or a folder moved while its host ran, may lead to another folder's host.
pub fn serves(said: &str, asked: &Path) -> bool {
    let canonical = |path: &Path| std::fs::canonicalize(path).ok();
    match (canonical(Path::new(said)), canonical(asked)) {
        (Some(said), Some(asked)) => said == asked,
        _ => Path::new(said) == asked,
    }
}

/// Who decides, as a decision's record says: the login name (from the
/// password database when `USER` is unset), and this machine.
pub fn user_at_host() -> String {
    let user = ["USER", "LOGNAME"]
        .iter()
        .filter_map(|key| std::env::var(key).ok())
        .find(|name| !name.trim().is_empty())
        .or_else(|| {
            let uid = nix::unistd::geteuid();
            nix::unistd::User::from_uid(uid)
                .ok()
                .flatten()
                .map(|user| user.name)
        })
        .unwrap_or_else(|| format!("uid{}", nix::unistd::geteuid()));
    format!("{user}@{}", host_name())
}

/// The longest path a socket address holds (`sun_path`, with its final NUL).
const SUN_PATH: usize = 108;

/// Connects to the host socket at `path`, however deep its folder: a path
/// too long for a socket address is reached through the folder's descriptor.
pub fn connect(path: &Path) -> std::io::Result<std::os::unix::net::UnixStream> {
    through_folder(path, |short| std::os::unix::net::UnixStream::connect(short))
}

/// Calls `use_path` with `path`, or, when that is too long for a socket
/// address, with `/proc/self/fd/N/NAME`, N an open descriptor of its folder.
fn through_folder<T>(
    path: &Path,
    use_path: impl FnOnce(&Path) -> std::io::Result<T>,
) -> std::io::Result<T> {
    use std::os::fd::AsRawFd;
    use std::os::unix::fs::OpenOptionsExt;
    if path.as_os_str().len() < SUN_PATH {
        return use_path(path);
    }
    let (Some(folder), Some(name)) = (path.parent(), path.file_name()) else {
        return use_path(path);
    };
    let folder = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC)
        .open(folder)?;
    let short = Path::new("/proc/self/fd")
        .join(folder.as_raw_fd().to_string())
        .join(name);
    use_path(&short)
}

/// A request a client sent, for the host's loop; `reply` hears that the
/// host took it (or why not), and `outcome`, when given, how the work it
/// asked for went once done.
pub struct Remote {
    pub request: HostRequest,
    pub reply: Option<oneshot::Sender<Result<String, String>>>,
    pub outcome: Option<WorkDone>,
    /// Who asked, for the host's events; empty when unsaid.
    pub by: String,
}

/// Where the end of a piece of work is told: what it did, or why not.
pub type WorkDone = oneshot::Sender<Result<String, String>>;

/// Tells `done`, if anyone waits on it, how the work went.
pub fn settle(done: Option<WorkDone>, said: Result<String, String>) {
    if let Some(done) = done {
        let _ = done.send(said);
    }
}

/// The socket while the host serves: removed when dropped, if it is still ours.
pub struct Serving {
    path: PathBuf,
    inode: Option<u64>,
}

impl Drop for Serving {
    fn drop(&mut self) {
        let ours = std::fs::symlink_metadata(&self.path)
            .ok()
            .is_some_and(|meta| Some(meta.ino()) == self.inode);
        if ours {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

/// What [`start`] needs besides the host's channels.
pub struct ServeOptions {
    pub root: PathBuf,
    pub approvals_dir: PathBuf,
    /// How the lanes' output files are read, for clients that follow one.
    pub format: crate::agent::stream::AgentFormat,
    /// A single loop's output folder: a followed file must be in it (else in
    /// the lane's own folder).
    pub outputs: Option<PathBuf>,
    /// Set while someone watches (a room here, or a client): what only a
    /// watcher reads (commits ahead) is not counted for nobody.
    pub watched: std::sync::Arc<std::sync::atomic::AtomicBool>,
    /// The host calls its human (`on_attention`, `notify_url`) besides: a
    /// person is there to ask even with nobody attached.
    pub notified: bool,
}

/// Starts the hub that fans `from_host` out to `local` (the control room on
/// this terminal, if any) and to the socket's clients, whose requests go to
/// `remote`. Must run inside the host's runtime. The socket is optional: when
/// it cannot be served, the reason comes back and the fleet runs unserved.
pub fn start(
    options: ServeOptions,
    from_host: mpsc::UnboundedReceiver<HostMsg>,
    local: Option<mpsc::UnboundedSender<HostMsg>>,
    remote: mpsc::UnboundedSender<Remote>,
) -> Result<Serving, String> {
    let hub = hub::Hub::spawn(from_host, local, &options);
    let path = socket_path(&options.root);
    let listener = bind(&path)?;
    let inode = std::fs::symlink_metadata(&path).ok().map(|meta| meta.ino());
    let hello = Hello {
        protocol: PROTOCOL_VERSION,
        clowder: env!("CARGO_PKG_VERSION").to_string(),
        host: host_name(),
        // Absolute, so that a client anywhere can tell it is the folder it asked for.
        folder: std::fs::canonicalize(&options.root)
            .unwrap_or_else(|_| options.root.clone())
            .display()
            .to_string(),
        pid: std::process::id(),
    };
    let context = client::Context::new(hello, hub, remote, options);
    tokio::spawn(accept(listener, context));
    Ok(Serving { path, inode })
}

/// Binds `path`: a socket left by a dead host is replaced, a live host's is
/// never taken.
fn bind(path: &Path) -> Result<UnixListener, String> {
    let folder = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(folder)
        .and_then(|()| std::fs::set_permissions(folder, std::fs::Permissions::from_mode(0o700)))
        .map_err(|err| format!("cannot make {} private: {err}", folder.display()))?;
    if std::fs::symlink_metadata(path).is_ok() {
        if connect(path).is_ok() {
            return Err(format!(
                "{} is served by another running host: not taken",
                path.display()
            ));
        }
        std::fs::remove_file(path)
            .map_err(|err| format!("cannot replace the stale {}: {err}", path.display()))?;
    }
    let listener = through_folder(path, |path| UnixListener::bind(path))
        .map_err(|err| format!("cannot serve {}: {err}", path.display()))?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))
        .map_err(|err| format!("cannot make {} private: {err}", path.display()))?;
    Ok(listener)
}

async fn accept(listener: UnixListener, context: client::Context) {
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            // Out of file descriptors, most likely: try again shortly.
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            continue;
        };
        // Counted here, before the connection's task starts: a burst of
        // connections must not all pass before the first of them is counted.
        let Some(slot) = context.take_slot(MAX_CLIENTS) else {
            tokio::spawn(client::refuse(
                stream,
                format!("the host serves at most {MAX_CLIENTS} clients at once"),
            ));
            continue;
        };
        tokio::spawn(client::serve(stream, context.clone(), slot));
    }
}

/// The machine's name, as `hostname` prints it.
pub fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|name| name.trim().to_string())
        .ok()
        .filter(|name| !name.is_empty())
        .unwrap_or_else(|| "localhost".to_string())
}
