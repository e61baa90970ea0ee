//! The control room attached to a host that runs elsewhere (another process,
//! another machine): the same screen and keys, fed by the host's protocol
//! instead of the host's thread. Quitting leaves the host running. What the
//! room would do to files itself (decide a request, follow an output file,
//! leave a note) it asks of the host.

use chrono::{Local, Utc};
use tokio::sync::mpsc;

use super::fleet::{Feeds, Link, Room, room_loop};
use super::{Files, TerminalGuard};
use crate::agent::follow::FollowUpdate;
use crate::approvals::Request;
use crate::fleet::link::{HostMsg, HostRequest};
use crate::fleet::remote::{RemoteEvent, Target, keep_reached};
use crate::fleet::wire::{ClientMsg, WireDecision};
use crate::supervisor::core::Level;

/// Opens the room on the host at `target` until the user quits; 0, or 1 if
/// the terminal could not be used.
pub fn run_attached(target: Target) -> i32 {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build();
    let runtime = match runtime {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!("clowder: error: cannot start the async runtime: {err}");
            return 1;
        }
    };
    let files = Files {
        root: std::path::PathBuf::from("."),
        approvals_dir: std::path::PathBuf::new(),
        config_path: std::path::PathBuf::new(),
        stop_file: std::path::PathBuf::new(),
    };
    let done = runtime.block_on(async {
        let (events_tx, events) = mpsc::unbounded_channel();
        let to_host = keep_reached(target, events_tx);
        let (host_tx, from_host) = mpsc::unbounded_channel();
        let (requests, requests_rx) = mpsc::unbounded_channel();
        let guard =
            TerminalGuard::enter().map_err(|err| format!("cannot set up the terminal: {err}"))?;
        let link = Link::Attached(Attached {
            events,
            to_host,
            host_tx,
            requests: requests_rx,
        });
        let room = Room {
            root: files.root.clone(),
            format: crate::agent::stream::AgentFormat::Auto,
            files: &files,
            caller: super::caller::Caller::new(&crate::config::UiConfig::default(), &files.root),
            parent: None,
            link,
        };
        room_loop(guard, from_host, requests, room)
            .await
            .map_err(|err| format!("terminal error: {err}"))
    });
    match done {
        Ok(()) => 0,
        Err(err) => {
            eprintln!("clowder: error: {err}");
            1
        }
    }
}

/// The ends of an attached room's connection, before the room starts.
pub(super) struct Attached {
    events: mpsc::UnboundedReceiver<RemoteEvent>,
    to_host: mpsc::UnboundedSender<ClientMsg>,
    host_tx: mpsc::UnboundedSender<HostMsg>,
    requests: mpsc::UnboundedReceiver<HostRequest>,
}

impl Attached {
    /// Starts carrying the host's events into the room's channels; what the
    /// room asks goes through `asks`.
    pub(super) fn start(self, asks: mpsc::UnboundedReceiver<ClientMsg>) -> Feeds {
        let (feed_tx, feed_rx) = mpsc::unbounded_channel();
        let (listing_tx, listing_rx) = mpsc::unbounded_channel();
        let (hint_tx, _hints) = mpsc::unbounded_channel();
        let carrier = Carrier {
            host_tx: self.host_tx,
            listing_tx,
            feed_tx: feed_tx.clone(),
            to_host: self.to_host,
            following: None,
            asked: 0,
            attached_once: false,
            hello: None,
        };
        let task = tokio::spawn(carrier.run(self.events, self.requests, asks));
        Feeds {
            feed_tx,
            feed_rx,
            hint_tx,
            listing_rx,
            task,
        }
    }
}

/// Carries one host's events to the room and the room's asks to the host.
struct Carrier {
    host_tx: mpsc::UnboundedSender<HostMsg>,
    listing_tx: mpsc::UnboundedSender<(bool, Vec<Request>)>,
    feed_tx: mpsc::UnboundedSender<FollowUpdate>,
    to_host: mpsc::UnboundedSender<ClientMsg>,
    /// The output file the room shows: followed again after a reconnection.
    following: Option<ClientMsg>,
    asked: u64,
    attached_once: bool,
    /// The host's hello, said after its snapshot.
    hello: Option<String>,
}

impl Carrier {
    async fn run(
        mut self,
        mut events: mpsc::UnboundedReceiver<RemoteEvent>,
        mut requests: mpsc::UnboundedReceiver<HostRequest>,
        mut asks: mpsc::UnboundedReceiver<ClientMsg>,
    ) {
        loop {
            tokio::select! {
                event = events.recv() => match event {
                    Some(event) => self.on_event(event),
                    None => return,
                },
                Some(request) = requests.recv() => {
                    self.asked += 1;
                    let _ = self.to_host.send(ClientMsg::Request { re: Some(self.asked), request });
                }
                ask = asks.recv() => match ask {
                    Some(ask) => self.ask(ask),
                    None => return,
                },
            }
        }
    }

    fn ask(&mut self, ask: ClientMsg) {
        if matches!(ask, ClientMsg::Follow { .. }) {
            self.following = Some(ask.clone());
        }
        let _ = self.to_host.send(ask);
    }

    fn say(&self, level: Level, text: String) {
        let _ = self.host_tx.send(HostMsg::Log { level, text });
    }

    fn on_event(&mut self, event: RemoteEvent) {
        match event {
            RemoteEvent::Hello(hello) => {
                // Said once the snapshot has made the lanes, so that every lane shows it.
                self.hello = Some(format!(
                    "attached to the host on {} in {} (clowder {}, PID {})",
                    hello.host, hello.folder, hello.clowder, hello.pid
                ));
                if let Some(follow) = self.following.clone() {
                    let _ = self.to_host.send(follow);
                }
            }
            RemoteEvent::Snapshot(snapshot) => {
                let mut messages = snapshot.replay();
                if self.attached_once {
                    // The events already shown are not shown twice.
                    messages.retain(|message| !is_recent(message));
                }
                self.attached_once = true;
                for message in messages {
                    let _ = self.host_tx.send(message);
                }
                self.list(snapshot.requests);
                if let Some(hello) = self.hello.take() {
                    self.say(Level::Info, hello);
                }
            }
            RemoteEvent::Host(message) => {
                let _ = self.host_tx.send(message);
            }
            RemoteEvent::Requests(requests) => self.list(requests),
            RemoteEvent::Reply { ok, text, .. } => {
                if !ok {
                    self.say(Level::Warn, text);
                } else if text.starts_with("request ") {
                    self.say(Level::Info, text);
                }
            }
            RemoteEvent::Refused(why) => self.say(Level::Warn, format!("the host refused: {why}")),
            RemoteEvent::Overflowed(dropped) => self.say(
                Level::Warn,
                format!(
                    "this room fell behind: {dropped} changes skipped, the host's state read again"
                ),
            ),
            RemoteEvent::Output(output) => {
                let update = FollowUpdate {
                    file: output.file,
                    lines: output.lines.into_iter().map(Into::into).collect(),
                    stats: output.stats,
                    reset: output.reset,
                };
                let _ = self.feed_tx.send(update);
            }
            RemoteEvent::Lost { since, why, retry } => {
                let since = since.with_timezone(&Local).format("%H:%M");
                self.say(
                    Level::Warn,
                    format!(
                        "⚠ host unreachable since {since}: {why}; trying again in {}s",
                        retry.as_secs()
                    ),
                );
            }
        }
    }

    fn list(&self, requests: Vec<crate::fleet::wire::PendingRequest>) {
        let requests = requests
            .into_iter()
            .map(crate::fleet::wire::PendingRequest::into_request)
            .collect();
        let _ = self.listing_tx.send((true, requests));
    }
}

fn is_recent(message: &HostMsg) -> bool {
    use crate::fleet::link::LaneReport;
    matches!(
        message,
        HostMsg::Log { .. }
            | HostMsg::Lane {
                report: LaneReport::Log { .. } | LaneReport::Event { .. },
                ..
            }
    )
}

/// Who decides, as the request's record says: the user and this machine.
pub(super) fn decider() -> String {
    let user = std::env::var("USER").unwrap_or_else(|_| "someone".to_string());
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|name| name.trim().to_string())
        .unwrap_or_default();
    format!("{user}@{host} (attached room)")
}

/// A decision of the room, as the host takes it.
pub(super) fn decision(id: String, approve: bool, reason: Option<String>) -> ClientMsg {
    let decision = match (approve, reason) {
        (true, reason) => WireDecision::Approve { reason },
        (false, reason) => WireDecision::Reject {
            reason: reason.unwrap_or_default(),
        },
    };
    ClientMsg::Decide {
        re: Some(Utc::now().timestamp_millis().unsigned_abs()),
        id,
        decision,
        by: decider(),
    }
}
