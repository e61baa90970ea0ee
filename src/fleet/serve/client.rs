//! One connection to the host's socket: the peer's uid checked, the hello
//! and the snapshot sent, then the hub's lines written while the client's
//! lines are read, each answered. Whatever a client sends, the worst it gets
//! is a refusal and a hang-up; the host goes on.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::UnixStream;
use tokio::net::unix::OwnedWriteHalf;
use tokio::sync::{mpsc, oneshot};

use super::hub::{CLIENT_QUEUE, HubHandle, Joined};
use super::output;
use super::{Remote, ServeOptions};
use crate::agent::follow::Follower;
use crate::approvals::{DecideError, Decision, Queue};
use crate::fleet::link::{HostMsg, HostRequest};
use crate::fleet::wire::{
    ClientMsg, Hello, MAX_CLIENT_LINE, PROTOCOL_VERSION, ServerMsg, WireDecision, line,
    parse_client_line,
};

/// What every connection shares.
#[derive(Clone)]
pub(super) struct Context {
    hello: Arc<str>,
    hub: HubHandle,
    remote: mpsc::UnboundedSender<Remote>,
    options: Arc<ServeOptions>,
    /// The connections being served now.
    connected: Arc<AtomicUsize>,
}

impl Context {
    pub(super) fn new(
        hello: Hello,
        hub: HubHandle,
        remote: mpsc::UnboundedSender<Remote>,
        options: ServeOptions,
    ) -> Context {
        Context {
            hello: Arc::from(line(&ServerMsg::Hello(hello))),
            hub,
            remote,
            options: Arc::new(options),
            connected: Arc::new(AtomicUsize::new(0)),
        }
    }

    /// One of the `max` places for a client, if one is free; given back
    /// when the [`Slot`] is dropped.
    pub(super) fn take_slot(&self, max: usize) -> Option<Slot> {
        let taken = self.connected.fetch_add(1, Ordering::AcqRel);
        let slot = Slot(Arc::clone(&self.connected));
        (taken < max).then_some(slot)
    }
}

/// A client's place among the host's connections.
pub(super) struct Slot(Arc<AtomicUsize>);

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Tells the peer why it is not served, then hangs up.
pub(super) async fn refuse(mut stream: UnixStream, reason: String) {
    let refusal = line(&ServerMsg::Refused {
        reason,
        closing: true,
    });
    let bytes = format!("{refusal}\n");
    let write = stream.write_all(bytes.as_bytes());
    let _ = tokio::time::timeout(LAST_WORDS, write).await;
}

/// Serves one client while it holds `_slot`.
pub(super) async fn serve(stream: UnixStream, context: Context, _slot: Slot) {
    let ours = nix::unistd::geteuid().as_raw();
    match stream.peer_cred() {
        Ok(peer) if peer.uid() == ours => {}
        Ok(peer) => {
            let reason = format!(
                "this host serves only its own user (uid {ours}); the peer is uid {}",
                peer.uid()
            );
            return refuse(stream, reason).await;
        }
        Err(err) => return refuse(stream, format!("cannot tell who the peer is: {err}")).await,
    }
    let (reader, writer) = stream.into_split();
    let (lines, queue) = mpsc::channel::<Arc<str>>(CLIENT_QUEUE);
    let (stop, stopped) = oneshot::channel::<Option<Arc<str>>>();
    let hello = Arc::clone(&context.hello);
    let writing = tokio::spawn(write_lines(writer, hello, queue, stopped));
    let (queued, snapshot_queued) = oneshot::channel();
    let changes = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let joined = Joined {
        lines: lines.clone(),
        queued,
        changes: Arc::clone(&changes),
    };
    let mut last_words = None;
    if context.hub.join.send(joined).is_ok() && snapshot_queued.await.is_ok() {
        last_words = read_lines(BufReader::new(reader), &context, (&lines, &changes)).await;
    }
    // A refusal that closes the connection is its last line: what the hub
    // queued meanwhile is not written after it. Otherwise what is queued is
    // still written, then the queue closes, and the hub forgets the client.
    let _ = stop.send(last_words);
    let _ = writing.await;
}

/// How long a leaving client's last queued lines may take to write.
const LAST_WORDS: std::time::Duration = std::time::Duration::from_secs(1);

async fn write_lines(
    mut writer: OwnedWriteHalf,
    hello: Arc<str>,
    mut queue: mpsc::Receiver<Arc<str>>,
    mut stop: oneshot::Receiver<Option<Arc<str>>>,
) {
    if write_line(&mut writer, &hello).await.is_err() {
        return;
    }
    loop {
        tokio::select! {
            biased;
            last = &mut stop => {
                if let Ok(Some(last)) = last {
                    let write = write_line(&mut writer, &last);
                    let _ = tokio::time::timeout(LAST_WORDS, write).await;
                    return;
                }
                break;
            }
            text = queue.recv() => match text {
                Some(text) => if write_line(&mut writer, &text).await.is_err() {
                    return;
                },
                None => return,
            },
        }
    }
    queue.close();
    let drain = async {
        while let Some(text) = queue.recv().await {
            if write_line(&mut writer, &text).await.is_err() {
                return;
            }
        }
    };
    let _ = tokio::time::timeout(LAST_WORDS, drain).await;
}

async fn write_line(writer: &mut OwnedWriteHalf, text: &str) -> std::io::Result<()> {
    let mut bytes = Vec::with_capacity(text.len() + 1);
    bytes.extend_from_slice(text.as_bytes());
    bytes.push(b'\n');
    writer.write_all(&bytes).await
}

/// Reads the client's lines until it hangs up, or is refused for good: then
/// the refusal, for the writer to end with.
async fn read_lines(
    mut reader: BufReader<tokio::net::unix::OwnedReadHalf>,
    context: &Context,
    (lines, changes): (&mpsc::Sender<Arc<str>>, &std::sync::atomic::AtomicBool),
) -> Option<Arc<str>> {
    let mut buffer = Vec::new();
    // Held for as long as the client follows a file: dropping it stops the reading.
    let mut _following: Option<Follower> = None;
    let mut pace = Pace::new(tokio::time::Instant::now());
    loop {
        match read_line(&mut reader, &mut buffer).await {
            Ok(true) => {}
            Ok(false) => return None,
            Err(refusal) => return Some(refusal),
        }
        let parsed = parse_client_line(&buffer);
        // A client that asks faster than its share is read more slowly: what
        // it sent waits in its own socket, not in the host.
        let cost = parsed.as_ref().map_or(1, cost_of);
        if cost > 0 {
            tokio::time::sleep_until(pace.take(cost, tokio::time::Instant::now())).await;
        }
        let answer = match parsed {
            Ok(ClientMsg::Follow { lane, file }) => {
                _following = None;
                match follow(context, lines, &lane, &file) {
                    Ok(follower) => {
                        _following = Some(follower);
                        None
                    }
                    Err(refused) => Some(refused),
                }
            }
            // From now on a lane's snapshot may come as a change.
            Ok(ClientMsg::Changes) => {
                changes.store(true, Ordering::Relaxed);
                None
            }
            Ok(ClientMsg::Request {
                re: Some(re),
                request,
                wait,
                by,
            }) if wait || matches!(request, HostRequest::Work(_)) => {
                let asked = Asked { re, request, by };
                until_done(asked, context, lines).await
            }
            Ok(message) => answer(message, context).await,
            Err(reason) => Some(ServerMsg::Refused {
                reason,
                closing: false,
            }),
        };
        if let Some(answer) = answer {
            if matches!(answer, ServerMsg::Refused { closing: true, .. }) {
                return Some(Arc::from(line(&answer)));
            }
            send(lines, &answer).await;
        }
    }
}

/// The client's next line into `buffer`: false once it hung up, or the
/// refusal that ends a line past [`MAX_CLIENT_LINE`].
async fn read_line(
    reader: &mut BufReader<tokio::net::unix::OwnedReadHalf>,
    buffer: &mut Vec<u8>,
) -> Result<bool, Arc<str>> {
    buffer.clear();
    let limit = MAX_CLIENT_LINE as u64 + 1;
    match reader.take(limit).read_until(b'\n', buffer).await {
        Ok(0) | Err(_) => return Ok(false),
        Ok(_) => {}
    }
    if buffer.len() > MAX_CLIENT_LINE {
        let reason = format!("a line longer than {MAX_CLIENT_LINE} bytes: hung up");
        let refusal = ServerMsg::Refused {
            reason,
            closing: true,
        };
        return Err(Arc::from(line(&refusal)));
    }
    Ok(true)
}

/// Starts following one of `lane`'s output files for this client.
fn follow(
    context: &Context,
    lines: &mpsc::Sender<Arc<str>>,
    lane: &crate::fleet::LaneName,
    file: &std::path::Path,
) -> Result<Follower, ServerMsg> {
    let folder = match &context.options.outputs {
        Some(outputs) => outputs.clone(),
        None => crate::fleet::lane_files_dir(&context.options.root, lane),
    };
    output::follow_for(&folder, context.options.format, lines, lane, file).map_err(|reason| {
        ServerMsg::Refused {
            reason,
            closing: false,
        }
    })
}

/// What a message costs of a client's share of the host: git work (a diff,
/// a merge, a push) most. A ping costs nothing: it asks nothing of the host,
/// and its answer waits in the client's own bounded queue.
fn cost_of(message: &ClientMsg) -> u32 {
    match message {
        ClientMsg::Hello { .. } | ClientMsg::Ping { .. } | ClientMsg::Changes => 0,
        ClientMsg::Decide { .. } | ClientMsg::Follow { .. } => 4,
        ClientMsg::Request { request, .. } => match request {
            HostRequest::Command { .. }
            | HostRequest::Tell { .. }
            | HostRequest::StopTask(_)
            | HostRequest::Detached => 1,
            HostRequest::Diff(_)
            | HostRequest::Work(_)
            | HostRequest::Remove(_)
            | HostRequest::MergeStep { .. }
            | HostRequest::RetryPlan { .. }
            | HostRequest::AddLane(_)
            | HostRequest::MergeLane(_)
            | HostRequest::PushLane(_)
            | HostRequest::RestartLane(_) => 8,
        },
    }
}

/// Each client's share of the host: a bucket of [`PACE_BURST`] units that
/// fills again at [`PACE_BURST`] a second. A person's keys never empty it;
/// a script that floods the host waits for it, and every other client is
/// served meanwhile.
struct Pace {
    units: f64,
    at: tokio::time::Instant,
}

/// The units a client may spend at once, and again each second.
const PACE_BURST: f64 = 64.0;

impl Pace {
    fn new(now: tokio::time::Instant) -> Pace {
        Pace {
            units: PACE_BURST,
            at: now,
        }
    }

    /// Takes `cost` units; when the message may be served.
    fn take(&mut self, cost: u32, now: tokio::time::Instant) -> tokio::time::Instant {
        // Never before the message ahead of it.
        let from = now.max(self.at);
        let refilled = from.duration_since(self.at).as_secs_f64() * PACE_BURST;
        self.units = (self.units + refilled).min(PACE_BURST) - f64::from(cost);
        self.at = from;
        if self.units < 0.0 {
            self.at += std::time::Duration::from_secs_f64(-self.units / PACE_BURST);
            self.units = 0.0;
        }
        self.at
    }
}

async fn send(lines: &mpsc::Sender<Arc<str>>, message: &ServerMsg) {
    let _ = lines.send(Arc::from(line(message))).await;
}

/// What the host says back to one client message, if anything.
async fn answer(message: ClientMsg, context: &Context) -> Option<ServerMsg> {
    match message {
        ClientMsg::Hello { protocol, .. } if protocol != PROTOCOL_VERSION => {
            Some(ServerMsg::Refused {
                reason: format!(
                    "this host speaks protocol {PROTOCOL_VERSION}, the client {protocol}: use the same clowder version on both ends"
                ),
                closing: true,
            })
        }
        ClientMsg::Hello { .. } | ClientMsg::Follow { .. } | ClientMsg::Changes => None,
        ClientMsg::Ping { re } => Some(reply(re, Ok("pong".to_string()))),
        ClientMsg::Request {
            re, request, by, ..
        } => {
            let done = forward(request, by, None, context).await;
            match re {
                Some(re) => Some(reply(re, done)),
                None => done.err().map(|reason| ServerMsg::Refused {
                    reason,
                    closing: false,
                }),
            }
        }
        ClientMsg::Decide {
            re,
            id,
            decision,
            by,
        } => {
            let done = decide(context, id, decision, by).await;
            let _ = context.hub.rescan.send(());
            // Every room sees who decided, the host's own included.
            if let Ok(text) = &done {
                let said = HostMsg::Log {
                    level: crate::supervisor::core::Level::Info,
                    text: text.clone(),
                };
                let _ = context.hub.news.send(said);
            }
            match re {
                Some(re) => Some(reply(re, done)),
                None => done.err().map(|reason| ServerMsg::Refused {
                    reason,
                    closing: false,
                }),
            }
        }
    }
}

fn reply(re: u64, done: Result<String, String>) -> ServerMsg {
    match done {
        Ok(text) => ServerMsg::Reply { re, ok: true, text },
        Err(text) => ServerMsg::Reply {
            re,
            ok: false,
            text,
        },
    }
}

/// The characters of `by` kept.
const MAX_BY_CHARS: usize = 200;

/// A request whose reply waits for the end of its work.
struct Asked {
    re: u64,
    request: HostRequest,
    by: String,
}

/// Hands a request to the host's loop; once taken, its reply is sent when
/// the work is done, while this client's other lines are read meanwhile.
async fn until_done(
    asked: Asked,
    context: &Context,
    lines: &mpsc::Sender<Arc<str>>,
) -> Option<ServerMsg> {
    let (outcome, done) = oneshot::channel();
    let Asked { re, request, by } = asked;
    if let Err(why) = forward(request, by, Some(outcome), context).await {
        return Some(reply(re, Err(why)));
    }
    let lines = lines.clone();
    tokio::spawn(async move {
        let done = done
            .await
            .unwrap_or_else(|_| Err("the host ended before the work was done".to_string()));
        send(&lines, &reply(re, done)).await;
    });
    None
}

/// Hands a request to the host's loop, and waits until it was taken: a
/// client has one request at a time in the host's hands.
async fn forward(
    request: HostRequest,
    by: String,
    outcome: Option<super::WorkDone>,
    context: &Context,
) -> Result<String, String> {
    if matches!(request, HostRequest::Detached) {
        return Err("`detached` is for the room that started the host".to_string());
    }
    let (reply, answer) = oneshot::channel();
    // Who asks is said in the lane's events: a line, not a page of text.
    let by: String = by.chars().take(MAX_BY_CHARS).collect();
    let remote = Remote {
        request,
        reply: Some(reply),
        outcome,
        by,
    };
    if context.remote.send(remote).is_err() {
        return Err("the host is stopping: it takes no more requests".to_string());
    }
    answer
        .await
        .unwrap_or_else(|_| Err("the host ended before it answered".to_string()))
}

/// Writes the decision into the queue, as `clowder approve` would.
async fn decide(
    context: &Context,
    id: String,
    decision: WireDecision,
    by: String,
) -> Result<String, String> {
    let dir = context.options.approvals_dir.clone();
    let decider = if by.trim().is_empty() {
        "clowder attach".to_string()
    } else {
        crate::escape::one_line(&by)
    };
    tokio::task::spawn_blocking(move || {
        let queue = Queue::open(&dir)
            .map_err(|err| err.to_string())?
            .deciding_as(&decider);
        let (done, what) = match decision {
            WireDecision::Approve { reason } => {
                (queue.approve_with_reason(&id, reason), "approved")
            }
            WireDecision::Reject { reason } => {
                (queue.decide(&id, Decision::Reject(reason)), "rejected")
            }
        };
        done.map(|()| format!("request {id} {what} by {decider}"))
            .map_err(|err: DecideError| err.to_string())
    })
    .await
    .unwrap_or_else(|err| Err(format!("the decision failed: {err}")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_client_within_its_share_waits_for_nothing_and_one_beyond_it_waits_its_turn() {
        let start = tokio::time::Instant::now();
        let mut pace = Pace::new(start);
        for _ in 0..64 {
            assert_eq!(pace.take(1, start), start);
        }
        let next = pace.take(8, start);
        assert_eq!(next - start, Duration::from_millis(125));
        // Its next message waits behind the one before.
        let after = pace.take(8, start);
        assert_eq!(after - start, Duration::from_millis(250));
        // A second later the bucket is full again.
        let later = start + Duration::from_secs(2);
        assert_eq!(pace.take(64, later), later);
    }
}
