//! One page's live feed: what changed in the fleet's view since the version
//! the page holds (coalesced, so a burst of changes costs one message; the
//! whole view first for a page that holds none), and the followed lane's new
//! output.

use std::sync::Arc;
use std::time::Duration;

use axum::response::sse::Event;
use tokio::sync::{broadcast, watch};
use tokio::time::Instant;

use super::follow::Follower;
use super::hosts::Shared;

/// The shortest time between two states sent to one page.
const STATE_EVERY: Duration = Duration::from_millis(100);

pub struct Feed {
    shared: Arc<Shared>,
    changes: watch::Receiver<u64>,
    follower: Option<Arc<Follower>>,
    output: Option<broadcast::Receiver<Arc<str>>>,
    /// The followed lane's kept lines, sent right after the first state.
    kept: Option<String>,
    started: bool,
    last_state: Option<Instant>,
    /// The run of the server and the version of the view the page holds.
    epoch: Option<String>,
    since: Option<u64>,
}

impl Feed {
    pub fn new(
        shared: Arc<Shared>,
        follower: Option<Arc<Follower>>,
        epoch: Option<String>,
        since: Option<u64>,
    ) -> Feed {
        let changes = shared.changes();
        let (kept, output) = match &follower {
            Some(follower) => {
                let (kept, output) = follower.subscribe_with_kept();
                (Some(kept), Some(output))
            }
            None => (None, None),
        };
        Feed {
            shared,
            changes,
            follower,
            output,
            kept,
            started: false,
            last_state: None,
            epoch,
            since,
        }
    }

    /// The next message for the page; `None` ends the stream.
    pub async fn next(&mut self) -> Option<Event> {
        if !self.started {
            self.started = true;
            self.changes.mark_unchanged();
            return Some(self.state());
        }
        if let Some(kept) = self.kept.take() {
            return Some(output_event(&kept));
        }
        tokio::select! {
            changed = self.changes.changed() => {
                changed.ok()?;
                if let Some(last) = self.last_state {
                    tokio::time::sleep_until(last + STATE_EVERY).await;
                }
                self.changes.mark_unchanged();
                Some(self.state())
            }
            chunk = recv_output(&mut self.output) => match chunk {
                Ok(json) => Some(output_event(&json)),
                // Too far behind: start again from the kept lines.
                Err(_) => {
                    let follower = self.follower.as_ref()?;
                    let (kept, output) = follower.subscribe_with_kept();
                    self.output = Some(output);
                    Some(output_event(&kept))
                }
            },
        }
    }

    fn state(&mut self) -> Event {
        self.last_state = Some(Instant::now());
        let (version, view) = self.shared.view_since(self.epoch.as_deref(), self.since);
        // From now on the page holds this version of this run.
        self.since = Some(version);
        if self.epoch.is_none() {
            self.epoch = Some(self.shared.epoch().to_string());
        }
        let data = format!(
            r#"{{"now":"{}","view":{view}}}"#,
            chrono::Utc::now().to_rfc3339(),
        );
        Event::default().event("state").data(data)
    }
}

fn output_event(json: &str) -> Event {
    Event::default().event("output").data(json)
}

/// The next output message; never, for a page that follows no lane.
async fn recv_output(
    output: &mut Option<broadcast::Receiver<Arc<str>>>,
) -> Result<Arc<str>, broadcast::error::RecvError> {
    match output {
        Some(output) => output.recv().await,
        None => std::future::pending().await,
    }
}
