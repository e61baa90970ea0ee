//! A client of a host: reaches its socket (in a folder here, over SSH, or
//! through any command that gives a pipe, such as `kubectl exec -i`), reads
//! what the host says as [`RemoteEvent`]s, and sends what the room asks. A
//! lost host is tried again with backoff, for as long as the client runs.

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use chrono::{DateTime, Utc};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::mpsc;

use super::link::HostMsg;
use super::wire::{self, ClientMsg, Hello, HostSnapshot, Output, PendingRequest, ServerMsg};

/// The program a pipe runs on the far side; `CLOWDER_REMOTE_COMMAND` names
/// another (a clowder outside the far side's PATH).
const REMOTE_COMMAND_ENV: &str = "CLOWDER_REMOTE_COMMAND";
/// The ssh command, with its options (`ssh -F ~/.ssh/fleet.conf`); `ssh` if unset.
const SSH_ENV: &str = "CLOWDER_SSH";
/// The longest line taken from a host: a snapshot of thousands of lanes fits.
const MAX_HOST_LINE: usize = 256 << 20;
/// How often a host in a folder here is tried again.
const LOCAL_RETRY: Duration = Duration::from_millis(500);
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
            .map(|c| if c == '/' || c.is_whitespace() { '_' } else { c })
            .collect();
        if safe.is_empty() { "via".to_string() } else { safe }
    }
}

/// The name each host's lanes go by in a room of several (`NAME/lane`):
/// its `NAME=` where given, else one made from its target alone (the
/// folder's name, the ssh host, `via-N` for `--via`), so that it does not
/// depend on which host answers first. A made name that another host would
/// share gets the host's place in the list (`repo-2`).
pub fn host_labels(hosts: &[(Option<String>, Target)]) -> Vec<String> {
    let made: Vec<String> = hosts.iter().map(|(_, target)| target.short_name()).collect();
    let given: Vec<&str> = hosts.iter().filter_map(|(name, _)| name.as_deref()).collect();
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
        let mut label = if matches!(target, Target::Via(_)) || shared || given.contains(&base.as_str()) {
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
    // A folder's socket costs nothing to try: a restarted host is seen at once.
    let (first, most) = match target {
        Target::Folder(_) => (LOCAL_RETRY, LOCAL_RETRY),
        _ => (Duration::from_secs(1), MAX_BACKOFF),
    };
    let mut backoff = first;
    let mut lost_since: Option<DateTime<Utc>> = None;
    loop {
        let why = match open(&target).await {
            Ok(pipe) => {
                let (why, spoke) = converse(pipe, &events, &mut from_room).await;
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
        // Messages meanwhile are for a host that is not there: dropped.
        let deadline = tokio::time::sleep(backoff);
        tokio::pin!(deadline);
        loop {
            tokio::select! {
                () = &mut deadline => break,
                message = from_room.recv() => if message.is_none() { return },
            }
        }
        backoff = (backoff * 2).min(most);
    }
}

/// The two ends of a connection, and the process behind them if any.
struct Pipe {
    read: Box<dyn AsyncRead + Unpin + Send>,
    write: Box<dyn AsyncWrite + Unpin + Send>,
    child: Option<tokio::process::Child>,
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
                .map_err(|err| format!("no host serves {} ({err})", path.display()))?;
            let (read, write) = stream.into_split();
            Ok(Pipe {
                read: Box::new(read),
                write: Box::new(write),
                child: None,
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
        .stderr(Stdio::null())
        .kill_on_drop(true);
    let shown = format!("{:?}", command.as_std());
    let mut child = command
        .spawn()
        .map_err(|err| format!("cannot run {shown}: {err}"))?;
    let (Some(write), Some(read)) = (child.stdin.take(), child.stdout.take()) else {
        return Err(format!("{shown} gave no pipe"));
    };
    Ok(Pipe {
        read: Box::new(read),
        write: Box::new(write),
        child: Some(child),
    })
}

/// Reads and writes until the connection ends; why it ended, and whether the
/// host spoke at all (then the next try starts with a short wait again).
async fn converse(
    pipe: Pipe,
    events: &mpsc::UnboundedSender<RemoteEvent>,
    from_room: &mut mpsc::UnboundedReceiver<ClientMsg>,
) -> (String, bool) {
    let Pipe {
        read,
        mut write,
        child,
    } = pipe;
    // Dropped at the end of the conversation: the ssh or --via command is killed.
    let _child = child;
    let mut lines = BufReader::new(read);
    let mut spoke = false;
    let mut buffer = Vec::new();
    loop {
        buffer.clear();
        tokio::select! {
            read = read_line(&mut lines, &mut buffer) => match read {
                Ok(true) => {
                    let event = parse_host_line(&buffer);
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
                    let text = format!("{}\n", wire::line(&message));
                    if let Err(err) = write.write_all(text.as_bytes()).await {
                        return (format!("cannot write to the host: {err}"), spoke);
                    }
                    let _ = write.flush().await;
                }
                None => return ("the room closed".into(), spoke),
            },
        }
    }
}

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

fn parse_host_line(bytes: &[u8]) -> RemoteEvent {
    match serde_json::from_slice::<ServerMsg>(bytes) {
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
    }
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
    fn a_line_that_is_not_the_protocol_is_said_so() {
        let event = parse_host_line(b"Welcome to Ubuntu\n");
        let RemoteEvent::Refused(why) = event else {
            panic!("{event:?}")
        };
        assert!(why.contains("Welcome to Ubuntu"), "{why}");
    }
}
