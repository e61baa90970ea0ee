//! A single loop (a folder with no lanes) served as a fleet of one: its one
//! lane is named after the folder, its snapshots and events go to the hub,
//! and what clients ask of that lane reaches the loop's commands.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use chrono::{DateTime, Utc};
use tokio::sync::{mpsc, watch};

use super::{Remote, ServeOptions, Serving};
use crate::fleet::LaneName;
use crate::fleet::link::{HostMsg, HostRequest, LaneEntry, LaneReport};
use crate::fleet::registry::{LaneKind, LaneState};
use crate::protocol::{Command, Event, Snapshot};
use crate::supervisor::core::Level;
use crate::supervisor::runtime::Reporter;

/// The single loop's side of the hub, before the loop starts.
pub struct SingleLoop {
    lane: LaneName,
    root: PathBuf,
    to_hub: mpsc::UnboundedSender<HostMsg>,
    from_host: mpsc::UnboundedReceiver<HostMsg>,
}

impl SingleLoop {
    pub fn new(root: &Path) -> SingleLoop {
        let (to_hub, from_host) = mpsc::unbounded_channel();
        SingleLoop {
            lane: lane_name(root),
            root: root.to_path_buf(),
            to_hub,
            from_host,
        }
    }

    /// `inner`, whose every line and event goes to the hub too.
    pub fn reporter(&self, inner: Box<dyn Reporter>) -> Box<dyn Reporter> {
        Box::new(Tee {
            inner,
            lane: self.lane.clone(),
            to_hub: self.to_hub.clone(),
        })
    }

    /// Serves the loop whose states come through `snapshots` and whose
    /// commands go to `commands`; must run inside the loop's runtime. `None`
    /// (said through `say`) when the socket cannot be served.
    pub fn serve(
        self,
        options: ServeOptions,
        snapshots: watch::Receiver<Arc<Snapshot>>,
        commands: mpsc::UnboundedSender<Command>,
        max_iterations: u64,
    ) -> Result<Serving, String> {
        let entry = LaneEntry {
            name: self.lane.clone(),
            requested: LaneState::Active,
            max_iterations: Some(max_iterations),
            kind: LaneKind::Dir,
            base: None,
        };
        let _ = self.to_hub.send(HostMsg::Lanes(vec![entry]));
        let to_hub = self.to_hub.clone();
        crate::fleet::room::forward_snapshots(self.lane.clone(), to_hub, None, snapshots);
        let (remote_tx, remote_rx) = mpsc::unbounded_channel();
        tokio::spawn(take_requests(self.lane, self.root, remote_rx, commands));
        super::start(options, self.from_host, None, remote_tx)
    }
}

/// The folder's name as a lane name, or `loop`.
fn lane_name(root: &Path) -> LaneName {
    let folder = std::fs::canonicalize(root).unwrap_or_else(|_| root.to_path_buf());
    let name: String = folder
        .file_name()
        .map(|name| name.to_string_lossy().to_lowercase())
        .unwrap_or_default()
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "._-".contains(c) {
                c
            } else {
                '-'
            }
        })
        .skip_while(|c| !c.is_ascii_alphanumeric())
        .take(40)
        .collect();
    LaneName::parse(name.trim_end_matches(['.', '-']))
        .unwrap_or_else(|_| LaneName::parse("loop").expect("\"loop\" follows the lane-name rule"))
}

async fn take_requests(
    lane: LaneName,
    root: PathBuf,
    mut requests: mpsc::UnboundedReceiver<Remote>,
    commands: mpsc::UnboundedSender<Command>,
) {
    while let Some(remote) = requests.recv().await {
        let answer = match remote.request {
            HostRequest::Command {
                lane: asked,
                command,
            } if asked == lane => commands
                .send(command)
                .map(|()| "sent to the loop".to_string())
                .map_err(|_| "the loop has ended".to_string()),
            HostRequest::Tell { lane: asked, text } if asked == lane => {
                let dir = crate::store::paths::state_dir(&root);
                match crate::store::notes::leave(&dir, &text, Utc::now()) {
                    // The loop serving this socket runs: it decides, and logs which.
                    Ok(note) => {
                        let lane = lane.clone();
                        tokio::spawn(async move {
                            let verdict = crate::fleet::note_answer::verdict(&dir, &note.id).await;
                            if let Some(reply) = remote.reply {
                                let _ = reply.send(Ok(format!("{lane}: {}", verdict.answer())));
                            }
                        });
                        continue;
                    }
                    Err(err) => Err(format!("no note left: {err}")),
                }
            }
            other => Err(format!(
                "this host runs a single loop ({lane}): it has no lanes for {other:?}"
            )),
        };
        if let Some(reply) = remote.reply {
            let _ = reply.send(answer);
        }
    }
}

/// A reporter's lines and events, to the hub as well.
struct Tee {
    inner: Box<dyn Reporter>,
    lane: LaneName,
    to_hub: mpsc::UnboundedSender<HostMsg>,
}

impl Tee {
    fn send(&self, report: LaneReport) {
        let _ = self.to_hub.send(HostMsg::Lane {
            lane: self.lane.clone(),
            report,
        });
    }
}

impl Reporter for Tee {
    fn log(&mut self, wall: DateTime<Utc>, level: Level, message: &str) {
        self.inner.log(wall, level, message);
        self.send(LaneReport::Log {
            at: wall,
            level,
            text: message.to_string(),
        });
    }

    fn event(&mut self, wall: DateTime<Utc>, event: &Event) {
        self.inner.event(wall, event);
        self.send(LaneReport::Event {
            at: wall,
            event: Box::new(event.clone()),
        });
    }

    fn agent_output(&mut self, bytes: &[u8]) {
        self.inner.agent_output(bytes);
    }
}
