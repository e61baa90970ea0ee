//! One lane's output for the pages that show it: a connection of its own to
//! the lane's host follows the session's output file (the protocol follows
//! one file per connection), keeps the last lines, and hands new ones to
//! every page that looks. It ends when the last page stops looking.

use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, Weak};

use serde::Serialize;
use tokio::sync::{broadcast, mpsc};

use crate::fleet::LaneName;
use crate::fleet::link::{HostMsg, LaneReport};
use crate::fleet::remote::{RemoteEvent, Target, keep_reached};
use crate::fleet::wire::{ClientMsg, Output, OutputLine};

/// Lines kept for a page that starts looking: as many as the page shows.
pub const LINES_KEPT: usize = 200;
/// New-lines messages a slow page may lag behind before it is sent the
/// kept lines afresh.
const CHUNKS_QUEUED: usize = 64;

/// One lane's followed output.
pub struct Follower {
    pub lane: String,
    lines: Mutex<VecDeque<OutputLine>>,
    chunks: broadcast::Sender<Arc<str>>,
    /// Dropped with the follower: its connection to the host ends.
    _to_host: mpsc::UnboundedSender<ClientMsg>,
}

#[derive(Serialize)]
struct Chunk<'a> {
    lane: &'a str,
    reset: bool,
    lines: Vec<&'a OutputLine>,
}

impl Follower {
    /// Follows `lane` on the host at `target`; `shown` is how pages name it.
    pub fn start(target: Target, lane: LaneName, shown: String) -> Arc<Follower> {
        let (events_tx, events) = mpsc::unbounded_channel();
        let to_host = keep_reached(target, events_tx);
        let follower = Arc::new(Follower {
            lane: shown,
            lines: Mutex::new(VecDeque::new()),
            chunks: broadcast::Sender::new(CHUNKS_QUEUED),
            _to_host: to_host.clone(),
        });
        tokio::spawn(track(
            Arc::downgrade(&follower),
            lane,
            events,
            to_host.downgrade(),
        ));
        follower
    }

    /// Every kept line, as one `output` message that starts the view
    /// afresh, and the new lines from then on: taken together, so that no
    /// line is missed or shown twice.
    pub fn subscribe_with_kept(&self) -> (String, broadcast::Receiver<Arc<str>>) {
        let Ok(lines) = self.lines.lock() else {
            return (
                chunk_json(&self.lane, true, [].iter()),
                self.chunks.subscribe(),
            );
        };
        let receiver = self.chunks.subscribe();
        (chunk_json(&self.lane, true, lines.iter()), receiver)
    }

    fn take(&self, output: &Output) {
        let Ok(mut lines) = self.lines.lock() else {
            return;
        };
        if output.reset {
            lines.clear();
        }
        for line in &output.lines {
            if lines.len() == LINES_KEPT {
                lines.pop_front();
            }
            lines.push_back(OutputLine {
                detail: None,
                ..line.clone()
            });
        }
        let tail = lines.len().saturating_sub(output.lines.len());
        let json = chunk_json(&self.lane, output.reset, lines.iter().skip(tail));
        let _ = self.chunks.send(Arc::from(json));
    }
}

fn chunk_json<'a>(lane: &str, reset: bool, lines: impl Iterator<Item = &'a OutputLine>) -> String {
    let chunk = Chunk {
        lane,
        reset,
        lines: lines.collect(),
    };
    serde_json::to_string(&chunk).unwrap_or_else(|_| "{}".to_string())
}

/// Follows whichever output file the lane's latest snapshot names, again
/// after every reconnection, while the follower lives.
async fn track(
    follower: Weak<Follower>,
    lane: LaneName,
    mut events: mpsc::UnboundedReceiver<RemoteEvent>,
    to_host: mpsc::WeakUnboundedSender<ClientMsg>,
) {
    let mut following: Option<PathBuf> = None;
    while let Some(event) = events.recv().await {
        let Some(follower) = follower.upgrade() else {
            return;
        };
        let file = match &event {
            RemoteEvent::Hello(_) => {
                following = None;
                None
            }
            RemoteEvent::Snapshot(snapshot) => snapshot
                .facts
                .iter()
                .find(|facts| facts.lane == lane)
                .and_then(|facts| facts.snapshot.as_ref())
                .and_then(|snapshot| snapshot.output_file.clone()),
            RemoteEvent::Host(HostMsg::Lane {
                lane: of,
                report: LaneReport::Snapshot { snapshot, .. },
            }) if *of == lane => snapshot.output_file.clone(),
            RemoteEvent::Output(output) if output.lane == lane => {
                follower.take(output);
                None
            }
            _ => None,
        };
        if let Some(file) = file
            && following.as_ref() != Some(&file)
        {
            following = Some(file.clone());
            if let Some(to_host) = to_host.upgrade() {
                let _ = to_host.send(ClientMsg::Follow {
                    lane: lane.clone(),
                    file,
                });
            }
        }
    }
}
