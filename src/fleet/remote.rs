//! A client of a host: reaches its socket (in a folder here, over SSH, or
//! through any command that gives a pipe, such as `kubectl exec -i`), reads
//! what the host says as [`RemoteEvent`]s, and sends what the room asks. A
//! lost host is tried again with backoff, for as long as the client runs.

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::mpsc;

use super::LaneName;
use super::link::{HostMsg, LaneReport};
use super::wire::{
    self, ClientMsg, Hello, HostSnapshot, LaneChange, Output, PendingRequest, ServerMsg,
};
use crate::protocol::Snapshot;

/// The program a pipe runs on the far side; `CLOWDER_REMOTE_COMMAND` names
/// another (a clowder outside the far side's PATH).
const REMOTE_COMMAND_ENV: &str = "CLOWDER_REMOTE_COMMAND";
/// The ssh command, with its options (`ssh -F ~/.ssh/fleet.conf`); `ssh` if unset.
const SSH_ENV: &str = "CLOWDER_SSH";
/// The longest line taken from a host: a snapshot of thousands of lanes fits.
const MAX_HOST_LINE: usize = 256 << 20;
/// How soon a host in a folder here is tried again, at first and at most
/// (its socket is watched besides).
const LOCAL_RETRY: Duration = Duration::from_millis(500);
const MAX_LOCAL_RETRY: Duration = Duration::from_secs(5);
/// The longest wait between two tries to reach a lost host.
const MAX_BACKOFF: Duration = Duration::from_secs(30);

/// Where a host is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// A folder on this machine, whose `.clowder/host.sock` is dialled.
    Folder(PathBuf),
    /// `ssh://[user@]host[:port]/path`: `ssh … clowder attach --stdio /path`.
    Ssh {
        destination: String,
        port: Option<u16>,
        path: String,
    },
    /// `--via COMMAND`: run by `sh -c`; its stdin and stdout reach a host.
    Via(String),
}

impl Target {
    /// A `TARGET` argument: an `ssh://` address or a folder.
    pub fn parse(text: &str) -> Result<Target, String> {
        if !text.contains("://") {
            return Ok(Target::Folder(PathBuf::from(text)));
        }
        let url = url::Url::parse(text).map_err(|err| {
            format!(
                "{text:?} is no target: {err}; expected a folder or ssh://[user@]host[:port]/path"
            )
        })?;
        if url.scheme() != "ssh" {
            return Err(format!(
                "{text:?}: only ssh:// addresses are understood (or a folder, or --via 'COMMAND')"
            ));
        }
        let host = url
            .host_str()
            .filter(|host| !host.is_empty())
            .ok_or_else(|| format!("{text:?}: no host name"))?;
        // ssh reads a destination that starts with `-` as one of its options
        // (`-oProxyCommand=…` runs a command here): never a host or user name.
        if host.starts_with('-') || url.username().starts_with('-') {
            return Err(format!(
                "{text:?}: a host or user name cannot start with `-`; expected ssh://[user@]host[:port]/path"
            ));
        }
        let destination = match url.username() {
            "" => host.to_string(),
            user => format!("{user}@{host}"),
        };
        let path = match url.path() {
            "" | "/" => ".".to_string(),
            path => path.to_string(),
        };
        Ok(Target::Ssh {
            destination,
            port: url.port(),
            path,
        })
    }

    /// The target as a person wrote it, for messages: the folder, the ssh
    /// address with its path, or the `--via` command.
    pub fn label(&self) -> String {
        match self {
            Target::Folder(folder) => folder.display().to_string(),
            Target::Ssh {
                destination, path, ..
            } => format!("{destination}:{path}"),
            Target::Via(command) => command.clone(),
        }
    }

    /// A name for the host from the target alone: the folder's name, the
    /// ssh address's host, or `via`.
    fn short_name(&self) -> String {
        let name = match self {
            Target::Folder(folder) => std::fs::canonicalize(folder)
                .unwrap_or_else(|_| folder.clone())
                .file_name()
                .map(|name| name.to_string_lossy().into_owned())
                .unwrap_or_default(),
            Target::Ssh { destination, .. } => destination
                .rsplit_once('@')
                .map_or(destination.as_str(), |(_, host)| host)
                .to_string(),
            Target::Via(_) => String::new(),
        };
        let safe: String = name
            .chars()
            .map(|c| {
                if c == '/' || c.is_whitespace() {
                    '_'
                } else {
                    c
                }
            })
            .collect();
        if safe.is_empty() {
            "via".to_string()
        } else {
            safe
        }
    }
}

/// The name each host's lanes go by in a room of several (`NAME/lane`):
/// its `NAME=` where given, else one made from its target alone (the
/// folder's name, the ssh host, `via-N` for `--via`), so that it does not
/// depend on which host answers first. A made name that another host would
/// share gets the host's place in the list (`repo-2`).
pub fn host_labels(hosts: &[(Option<String>, Target)]) -> Vec<String> {
    let made: Vec<String> = hosts
        .iter()
        .map(|(_, target)| target.short_name())
        .collect();
    let given: Vec<&str> = hosts
        .iter()
        .filter_map(|(name, _)| name.as_deref())
        .collect();
    let mut labels: Vec<String> = Vec::with_capacity(hosts.len());
    for (index, (name, target)) in hosts.iter().enumerate() {
        if let Some(name) = name {
            labels.push(name.clone());
            continue;
        }
        let base = &made[index];
        let shared = made
            .iter()
            .enumerate()
            .any(|(other, name)| other != index && hosts[other].0.is_none() && name == base);
        let mut label =
            if matches!(target, Target::Via(_)) || shared || given.contains(&base.as_str()) {
                format!("{base}-{}", index + 1)
            } else {
                base.clone()
            };
        while given.contains(&label.as_str()) || labels.contains(&label) {
            label = format!("{label}-{}", index + 1);
        }
        labels.push(label);
    }
    labels
}

/// What the room hears of one host.
#[derive(Debug)]
pub enum RemoteEvent {
    Hello(Hello),
    Snapshot(Box<HostSnapshot>),
    Host(HostMsg),
    Requests(Vec<PendingRequest>),
    Reply {
        re: u64,
        ok: bool,
        text: String,
    },
    /// The host refused a line of ours, or the whole connection.
    Refused(String),
    Overflowed(u64),
    Output(Box<Output>),
    /// The connection ended or could not be made; tried again after `retry`.
    Lost {
        since: DateTime<Utc>,
        why: String,
        retry: Duration,
    },
}

/// Keeps one host reached until `to_host` is dropped by the room: every
/// line the host sends becomes an event, every message of the room a line.
pub fn keep_reached(
    target: Target,
    events: mpsc::UnboundedSender<RemoteEvent>,
) -> mpsc::UnboundedSender<ClientMsg> {
    let (to_host, from_room) = mpsc::unbounded_channel();
    tokio::spawn(reach(target, events, from_room));
    to_host
}

/// [`keep_reached`] for host `index` of several: its events go to `tagged`,
/// marked with `index`, so that one receiver hears every host.
pub fn keep_reached_as(
    index: usize,
    target: Target,
    tagged: mpsc::UnboundedSender<(usize, RemoteEvent)>,
) -> mpsc::UnboundedSender<ClientMsg> {
    let (events_tx, mut events) = mpsc::unbounded_channel();
    let to_host = keep_reached(target, events_tx);
    tokio::spawn(async move {
        while let Some(event) = events.recv().await {
            if tagged.send((index, event)).is_err() {
                return;
            }
        }
    });
    to_host
}

/// How a lost host is said, in the room's events and on the web page alike.
pub fn unreachable_text(name: &str, since: DateTime<Utc>, why: &str, retry: Duration) -> String {
    let since = since.with_timezone(&chrono::Local).format("%H:%M");
    format!(
        "⚠ {name} unreachable since {since}: {why}; trying again in {:.1}s",
        retry.as_secs_f64()
    )
}

async fn reach(
    target: Target,
    events: mpsc::UnboundedSender<RemoteEvent>,
    mut from_room: mpsc::UnboundedReceiver<ClientMsg>,
) {
    // A folder's socket is watched: a restarted host is seen as it binds
    // it, and the tries between are only in case a change was missed.
    let (first, most) = match target {
        Target::Folder(_) => (LOCAL_RETRY, MAX_LOCAL_RETRY),
        _ => (Duration::from_secs(1), MAX_BACKOFF),
    };
    let mut backoff = first;
    let mut lost_since: Option<DateTime<Utc>> = None;
    loop {
        let why = match open(&target).await {
            Ok(pipe) => {
                let folder = match &target {
                    Target::Folder(folder) => Some(folder.as_path()),
                    _ => None,
                };
                let (why, spoke) = converse(pipe, folder, &events, &mut from_room).await;
                if spoke {
                    backoff = first;
                    lost_since = None;
                }
                why
            }
            Err(why) => why,
        };
        if events.is_closed() || from_room.is_closed() {
            return;
        }
        let since = *lost_since.get_or_insert_with(Utc::now);
        let lost = RemoteEvent::Lost {
            since,
            why,
            retry: backoff,
        };
        if events.send(lost).is_err() {
            return;
        }
        // A message meanwhile is for a host that is not there: it is dropped
        // (the room says so), and the host is tried again now.
        let (_watcher, mut changed) = match &target {
            Target::Folder(folder) => watch_socket(folder),
            _ => (None, mpsc::unbounded_channel().1),
        };
        let deadline = tokio::time::sleep(backoff);
        tokio::pin!(deadline);
        tokio::select! {
            () = &mut deadline => {}
            Some(()) = changed.recv() => {}
            message = from_room.recv() => if message.is_none() { return },
        }
        backoff = (backoff * 2).min(most);
    }
}

/// Watches where the socket of the host in `folder` is made: its `.clowder`
/// folder, or the folder itself until that exists. (A socket made in the
/// instant before the watch began is found by the next try.)
fn watch_socket(
    folder: &std::path::Path,
) -> (
    Option<notify::RecommendedWatcher>,
    mpsc::UnboundedReceiver<()>,
) {
    use notify::Watcher;
    let (changed_tx, changed) = mpsc::unbounded_channel();
    let socket = super::serve::socket_path(folder);
    let watched = match socket.parent() {
        Some(state) if state.is_dir() => state.to_path_buf(),
        _ => folder.to_path_buf(),
    };
    let hint = changed_tx;
    let watcher = notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
        if event.is_ok() {
            let _ = hint.send(());
        }
    })
    .ok()
    .and_then(|mut watcher| {
        watcher
            .watch(&watched, notify::RecursiveMode::NonRecursive)
            .ok()
            .map(|()| watcher)
    });
    (watcher, changed)
}

/// The two ends of a connection, and the process behind them if any.
struct Pipe {
    read: Box<dyn AsyncRead + Unpin + Send>,
    write: Box<dyn AsyncWrite + Unpin + Send>,
    child: Option<tokio::process::Child>,
    /// The last line the process wrote on its stderr (ssh's reason for
    /// failing: a refused login, a closed port), once it has closed it.
    said: Option<tokio::task::JoinHandle<String>>,
}

async fn open(target: &Target) -> Result<Pipe, String> {
    match target {
        Target::Folder(folder) => {
            let path = super::serve::socket_path(folder);
            // Through the folder's descriptor when the path is too long for a socket address.
            let stream = super::serve::connect(&path)
                .and_then(|stream| {
                    stream.set_nonblocking(true)?;
                    tokio::net::UnixStream::from_std(stream)
                })
                .map_err(|err| super::serve::unreached(&path, &err))?;
            let (read, write) = stream.into_split();
            Ok(Pipe {
                read: Box::new(read),
                write: Box::new(write),
                child: None,
                said: None,
            })
        }
        Target::Ssh {
            destination,
            port,
            path,
        } => {
            let ssh = std::env::var(SSH_ENV).unwrap_or_default();
            let ssh = shlex::split(&ssh)
                .filter(|words| !words.is_empty())
                .unwrap_or_else(|| vec!["ssh".to_string()]);
            let mut command = tokio::process::Command::new(&ssh[0]);
            command.args(&ssh[1..]);
            command.args(["-T", "-o", "BatchMode=yes", "-o", "ServerAliveInterval=15"]);
            if let Some(port) = port {
                command.args(["-p", &port.to_string()]);
            }
            let remote = remote_command();
            let quoted = shlex::try_quote(path).map_err(|err| format!("{path:?}: {err}"))?;
            // `--`: whatever the destination says, ssh takes no option from it.
            command
                .arg("--")
                .arg(destination)
                .arg(format!("{remote} attach --stdio {quoted}"));
            spawn(command)
        }
        Target::Via(line) => {
            let mut command = tokio::process::Command::new("sh");
            command.arg("-c").arg(line);
            spawn(command)
        }
    }
}

fn remote_command() -> String {
    std::env::var(REMOTE_COMMAND_ENV)
        .ok()
        .filter(|command| !command.trim().is_empty())
        .unwrap_or_else(|| "clowder".to_string())
}

fn spawn(mut command: tokio::process::Command) -> Result<Pipe, String> {
    command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let shown = format!("{:?}", command.as_std());
    let mut child = command
        .spawn()
        .map_err(|err| format!("cannot run {shown}: {err}"))?;
    let (Some(write), Some(read), Some(stderr)) =
        (child.stdin.take(), child.stdout.take(), child.stderr.take())
    else {
        return Err(format!("{shown} gave no pipe"));
    };
    Ok(Pipe {
        read: Box::new(read),
        write: Box::new(write),
        child: Some(child),
        said: Some(tokio::spawn(last_line(stderr))),
    })
}

/// The longest stderr line kept: the start of a reason, not a flood.
const MAX_SAID: usize = 300;

/// Reads `stderr` to its end; its last line that is not blank.
async fn last_line(stderr: tokio::process::ChildStderr) -> String {
    use tokio::io::AsyncReadExt;
    let mut lines = BufReader::new(stderr);
    let mut last = String::new();
    let mut buffer = Vec::new();
    loop {
        buffer.clear();
        // A line without end is cut, not held whole.
        let read = (&mut lines)
            .take(64 * 1024)
            .read_until(b'\n', &mut buffer)
            .await;
        match read {
            Ok(0) | Err(_) => return last,
            Ok(_) => {}
        }
        let text = String::from_utf8_lossy(&buffer);
        let text = crate::escape::one_line(text.trim());
        if !text.is_empty() {
            last = text.chars().take(MAX_SAID).collect();
        }
    }
}

/// How long a process that gave up may take to finish saying why.
const LAST_WORDS: Duration = Duration::from_secs(2);

/// `why`, with what the process last said on its stderr, if anything.
async fn with_last_words(why: String, said: Option<tokio::task::JoinHandle<String>>) -> String {
    let Some(said) = said else {
        return why;
    };
    match tokio::time::timeout(LAST_WORDS, said).await {
        Ok(Ok(line)) if !line.is_empty() => {
            // The far clowder's own error repeats the refusal already said.
            let own = line.strip_prefix("clowder: error: ").unwrap_or(&line);
            if why.contains(own) {
                why
            } else {
                // Its words first: they say what went wrong (a refused
                // login, a closed port), the room's only when it ended.
                format!("{line} ({why})")
            }
        }
        _ => why,
    }
}

/// Reads and writes until the connection ends; why it ended, and whether the
/// host spoke at all (then the next try starts with a short wait again).
async fn converse(
    pipe: Pipe,
    folder: Option<&std::path::Path>,
    events: &mpsc::UnboundedSender<RemoteEvent>,
    from_room: &mut mpsc::UnboundedReceiver<ClientMsg>,
) -> (String, bool) {
    let Pipe {
        read,
        write,
        child,
        said,
    } = pipe;
    // Dropped at the end of the conversation: the ssh or --via command is killed.
    let _child = child;
    let (why, spoke) = talk(read, write, folder, events, from_room).await;
    if events.is_closed() {
        return (why, spoke);
    }
    (with_last_words(why, said).await, spoke)
}

async fn talk(
    read: Box<dyn AsyncRead + Unpin + Send>,
    mut write: Box<dyn AsyncWrite + Unpin + Send>,
    folder: Option<&std::path::Path>,
    events: &mpsc::UnboundedSender<RemoteEvent>,
    from_room: &mut mpsc::UnboundedReceiver<ClientMsg>,
) -> (String, bool) {
    let mut lines = BufReader::new(read);
    let mut spoke = false;
    let mut last = LastSnapshots::default();
    let mut buffer = Vec::new();
    loop {
        buffer.clear();
        // A host's first line holds every lane (megabytes with a thousand):
        // a room over a hundred hosts would keep each one's largest line.
        buffer.shrink_to(KEEP_LINE);
        tokio::select! {
            read = read_line(&mut lines, &mut buffer) => match read {
                Ok(true) => {
                    let event = match parse_host_line(&buffer) {
                        HostLine::Event(event) => event,
                        HostLine::Change(change) => match last.expand(&change) {
                            Some(event) => event,
                            // A lane not seen yet: its next snapshot comes whole.
                            None => continue,
                        },
                    };
                    if last.note(&event)
                        && let Err(why) = send_line(&mut write, &ClientMsg::Changes).await
                    {
                        return (why, spoke);
                    }
                    if let (RemoteEvent::Hello(hello), Some(folder)) = (&event, folder)
                        && !super::serve::serves(&hello.folder, folder)
                    {
                        let why = format!(
                            "the host on {} serves {}, not {}",
                            super::serve::socket_path(folder).display(),
                            hello.folder,
                            folder.display()
                        );
                        return (why, false);
                    }
                    spoke |= matches!(event, RemoteEvent::Hello(_));
                    let refused = matches!(event, RemoteEvent::Refused(_));
                    let why = match &event {
                        RemoteEvent::Refused(why) => why.clone(),
                        _ => String::new(),
                    };
                    if events.send(event).is_err() {
                        return ("the room closed".into(), spoke);
                    }
                    if refused && !spoke {
                        return (why, spoke);
                    }
                }
                Ok(false) => return ("the host hung up".into(), spoke),
                Err(why) => return (why, spoke),
            },
            message = from_room.recv() => match message {
                Some(message) => {
                    if let Err(why) = send_line(&mut write, &message).await {
                        return (why, spoke);
                    }
                }
                None => return ("the room closed".into(), spoke),
            },
        }
    }
}

/// Writes `message` to the host as its line.
async fn send_line(
    write: &mut Box<dyn AsyncWrite + Unpin + Send>,
    message: &ClientMsg,
) -> Result<(), String> {
    let text = format!("{}\n", wire::line(message));
    if let Err(err) = write.write_all(text.as_bytes()).await {
        return Err(format!("cannot write to the host: {err}"));
    }
    let _ = write.flush().await;
    Ok(())
}

/// The room of a line kept between two lines: a change is a few kilobytes.
const KEEP_LINE: usize = 64 * 1024;

/// One line into `buffer`; `false` at the end of the stream.
async fn read_line(
    lines: &mut BufReader<Box<dyn AsyncRead + Unpin + Send>>,
    buffer: &mut Vec<u8>,
) -> Result<bool, String> {
    use tokio::io::AsyncReadExt;
    let limit = MAX_HOST_LINE as u64 + 1;
    let read = (&mut *lines)
        .take(limit)
        .read_until(b'\n', buffer)
        .await
        .map_err(|err| format!("cannot read from the host: {err}"))?;
    if buffer.len() > MAX_HOST_LINE {
        return Err(format!(
            "the host sent a line longer than {MAX_HOST_LINE} bytes"
        ));
    }
    Ok(read > 0)
}

/// A host's line: an event, or a lane's change to make a snapshot of.
enum HostLine {
    Event(RemoteEvent),
    Change(Box<LaneChange>),
}

/// Each lane's last snapshot, kept by a connection to a host that sends
/// changes ([`ServerMsg::LaneChanged`]), so that whoever reads its events
/// gets whole snapshots as from any host.
#[derive(Default)]
struct LastSnapshots {
    /// The host offered changes and was asked for them.
    asked: bool,
    lanes: HashMap<LaneName, (Arc<Snapshot>, bool)>,
}

impl LastSnapshots {
    /// Keeps what `event` says of the lanes' snapshots; true when the host
    /// must now be asked for changes.
    fn note(&mut self, event: &RemoteEvent) -> bool {
        match event {
            RemoteEvent::Snapshot(snapshot) if snapshot.changes => {
                self.lanes = snapshot
                    .facts
                    .iter()
                    .filter_map(|f| {
                        Some((f.lane.clone(), (Arc::clone(f.snapshot.as_ref()?), f.queued)))
                    })
                    .collect();
                return !std::mem::replace(&mut self.asked, true);
            }
            RemoteEvent::Host(HostMsg::Lane {
                lane,
                report: LaneReport::Snapshot { snapshot, queued },
            }) if self.asked => {
                self.lanes
                    .insert(lane.clone(), (Arc::clone(snapshot), *queued));
            }
            RemoteEvent::Host(HostMsg::Lanes(entries)) if self.asked => {
                let names: HashSet<&LaneName> = entries.iter().map(|e| &e.name).collect();
                self.lanes.retain(|lane, _| names.contains(lane));
            }
            _ => {}
        }
        false
    }

    /// The lane's whole snapshot after `change`, as the host would have sent it.
    fn expand(&mut self, change: &LaneChange) -> Option<RemoteEvent> {
        let (last, _) = self.lanes.get(&change.lane)?;
        let mut snapshot = Snapshot::clone(last);
        change.apply(&mut snapshot);
        let snapshot = Arc::new(snapshot);
        self.lanes
            .insert(change.lane.clone(), (Arc::clone(&snapshot), change.queued));
        Some(RemoteEvent::Host(HostMsg::Lane {
            lane: change.lane.clone(),
            report: LaneReport::Snapshot {
                snapshot,
                queued: change.queued,
            },
        }))
    }
}

fn parse_host_line(bytes: &[u8]) -> HostLine {
    HostLine::Event(match serde_json::from_slice::<ServerMsg>(bytes) {
        Ok(ServerMsg::LaneChanged(change)) => return HostLine::Change(change),
        Ok(ServerMsg::Hello(hello)) => RemoteEvent::Hello(hello),
        Ok(ServerMsg::Snapshot(snapshot)) => RemoteEvent::Snapshot(snapshot),
        Ok(ServerMsg::Host { msg }) => RemoteEvent::Host(msg),
        Ok(ServerMsg::Requests { requests }) => RemoteEvent::Requests(requests),
        Ok(ServerMsg::Reply { re, ok, text }) => RemoteEvent::Reply { re, ok, text },
        Ok(ServerMsg::Refused { reason, .. }) => RemoteEvent::Refused(reason),
        Ok(ServerMsg::Overflowed { dropped }) => RemoteEvent::Overflowed(dropped),
        Ok(ServerMsg::Output(output)) => RemoteEvent::Output(output),
        Err(err) => {
            let start = String::from_utf8_lossy(&bytes[..bytes.len().min(80)]).into_owned();
            RemoteEvent::Refused(format!(
                "the host sent a line this clowder cannot read ({err}): {}",
                crate::escape::one_line(&start)
            ))
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_read_as_folders_or_ssh_addresses() {
        assert_eq!(
            Target::parse("../fleet"),
            Ok(Target::Folder(PathBuf::from("../fleet")))
        );
        assert_eq!(
            Target::parse("ssh://ann@build-1:2222/srv/repo"),
            Ok(Target::Ssh {
                destination: "ann@build-1".into(),
                port: Some(2222),
                path: "/srv/repo".into()
            })
        );
        assert_eq!(
            Target::parse("ssh://build-1"),
            Ok(Target::Ssh {
                destination: "build-1".into(),
                port: None,
                path: ".".into()
            })
        );
        let refused = Target::parse("http://build-1/srv").unwrap_err();
        assert!(refused.contains("only ssh://"), "{refused}");
    }

    #[test]
    fn a_host_or_user_that_ssh_would_take_for_an_option_is_refused() {
        for text in ["ssh://-oProxyCommand=sh/srv", "ssh://-x@build-1/srv"] {
            let refused = Target::parse(text).unwrap_err();
            assert!(refused.contains("cannot start with `-`"), "{refused}");
        }
    }

    #[test]
    fn unnamed_hosts_are_named_from_their_targets_alone() {
        let ssh = |text: &str| Target::parse(text).expect("an ssh target");
        let hosts = vec![
            (None, Target::Folder(PathBuf::from("/srv/a/repo"))),
            (None, Target::Folder(PathBuf::from("/srv/b/repo"))),
            (None, ssh("ssh://ann@build-1/srv/repo")),
            (Some("build-2".to_string()), ssh("ssh://build-9/srv")),
            (None, ssh("ssh://build-2/srv")),
            (
                None,
                Target::Via("kubectl exec -i pod-0 -- clowder attach --stdio /w".into()),
            ),
            (None, Target::Folder(PathBuf::from("/srv/docs"))),
        ];
        assert_eq!(
            host_labels(&hosts),
            [
                "repo-1",
                "repo-2",
                "build-1",
                "build-2",
                "build-2-5",
                "via-6",
                "docs"
            ]
        );
    }

    #[test]
    fn a_line_that_is_not_the_protocol_is_said_so() {
        let HostLine::Event(RemoteEvent::Refused(why)) = parse_host_line(b"Welcome to Ubuntu\n")
        else {
            panic!("not a refusal")
        };
        assert!(why.contains("Welcome to Ubuntu"), "{why}");
    }

    fn running(bytes: u64) -> Snapshot {
        let start = DateTime::from_timestamp(1_800_000_000, 0).expect("a time");
        let mut snapshot = Snapshot::starting(1, "agent".into(), start);
        snapshot.state = crate::protocol::LoopState::SessionRunning;
        snapshot.output_bytes = bytes;
        snapshot
    }

    fn host_snapshot(changes: bool) -> RemoteEvent {
        let lane = LaneName::parse("api").expect("a name");
        let facts = wire::LaneFacts {
            lane,
            snapshot: Some(Arc::new(running(10))),
            queued: false,
            ahead: None,
            ended: None,
        };
        RemoteEvent::Snapshot(Box::new(HostSnapshot {
            facts: vec![facts],
            changes,
            ..HostSnapshot::default()
        }))
    }

    /// A host that offers changes is asked once; each change becomes the
    /// lane's whole snapshot, made from the last one; what else moved comes whole.
    #[test]
    fn a_lanes_changes_become_whole_snapshots_again() {
        let lane = LaneName::parse("api").expect("a name");
        let mut last = LastSnapshots::default();
        assert!(
            !last.note(&host_snapshot(false)),
            "an older host is not asked"
        );
        assert!(last.lanes.is_empty());
        assert!(last.note(&host_snapshot(true)));
        assert!(!last.note(&host_snapshot(true)), "asked once a connection");
        let old = running(10);
        let mut new = running(500);
        new.totals.tool_calls = 3;
        new.last_output_growth = Some(chrono::Utc::now());
        let change = LaneChange::between(&lane, (&old, false), (&new, false)).expect("a change");
        let line = wire::line(&ServerMsg::LaneChanged(Box::new(change)));
        assert!(line.len() < wire::line(&new).len() / 2, "{line}");
        let HostLine::Change(change) = parse_host_line(line.as_bytes()) else {
            panic!("not a change: {line}")
        };
        let Some(RemoteEvent::Host(HostMsg::Lane {
            report: LaneReport::Snapshot { snapshot, queued },
            ..
        })) = last.expand(&change)
        else {
            panic!("no snapshot made")
        };
        assert!(!queued);
        assert_eq!(snapshot.output_bytes, 500);
        assert_eq!(snapshot.totals.tool_calls, 3);
        assert_eq!(snapshot.last_output_growth, new.last_output_growth);
        assert_eq!(snapshot.agent_command, "agent");
        // A new state is no change: it goes whole.
        let mut held = new.clone();
        held.state = crate::protocol::LoopState::Held;
        assert_eq!(
            LaneChange::between(&lane, (&new, false), (&held, false)),
            None
        );
        assert_eq!(
            LaneChange::between(&lane, (&new, false), (&new, true)),
            None
        );
    }
}
