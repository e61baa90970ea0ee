//! A simulated host for the tests that need thousands of lanes: it serves
//! `DIR/.clowder/host.sock` with the real protocol (the crate's own wire
//! types), says hello and sends a snapshot of its lanes to each client, then
//! whatever the test sends. It runs no agent. Lane `lN` waits for you when N
//! ends in 7 and has failed when N ends in 3; the others run.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::Path;
use std::sync::{Arc, Mutex};

use chrono::Utc;
use clowder::fleet::LaneName;
use clowder::fleet::link::{HostMsg, LaneEntry, LaneReport};
use clowder::fleet::registry::{LaneKind, LaneState};
use clowder::fleet::wire::{self, Hello, HostSnapshot, LaneFacts, PROTOCOL_VERSION, ServerMsg};
use clowder::protocol::{LoopState, Snapshot};

/// Serves until dropped (its thread then ends at the next client).
pub struct SimHost {
    clients: Arc<Mutex<Vec<UnixStream>>>,
}

pub fn lane(index: usize) -> LaneName {
    LaneName::parse(&format!("l{index}")).expect("a lane name")
}

/// Lane `lN`'s running session at iteration `iteration`; waiting for a
/// session's approval when `waiting`.
pub fn session(iteration: u64, waiting: bool) -> Arc<Snapshot> {
    let now = Utc::now();
    let mut lane = Snapshot::starting(4242, "sim-agent".into(), now);
    lane.state = match waiting {
        true => LoopState::AwaitingApproval,
        false => LoopState::SessionRunning,
    };
    lane.iteration = iteration;
    lane.max_iterations = 100;
    lane.stale_timeout_secs = 1800.0;
    lane.session_start = Some(now);
    Arc::new(lane)
}

impl SimHost {
    /// Lanes `l1`…`lN` in `dir`.
    pub fn start(dir: &Path, lanes: usize) -> SimHost {
        let folder = dir.join(".clowder");
        std::fs::create_dir_all(&folder).expect("create .clowder");
        let listener = UnixListener::bind(folder.join(wire::SOCKET_FILE)).expect("bind the socket");
        let hello = wire::line(&ServerMsg::Hello(Hello {
            protocol: PROTOCOL_VERSION,
            clowder: env!("CARGO_PKG_VERSION").to_string(),
            host: "sim".to_string(),
            folder: dir.display().to_string(),
            pid: std::process::id(),
        }));
        let snapshot = wire::line(&ServerMsg::Snapshot(Box::new(snapshot(lanes))));
        let clients: Arc<Mutex<Vec<UnixStream>>> = Arc::default();
        let shared = Arc::clone(&clients);
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { return };
                let start = format!("{hello}\n{snapshot}\n");
                if stream.write_all(start.as_bytes()).is_err() {
                    continue;
                }
                let Ok(writer) = stream.try_clone() else {
                    continue;
                };
                shared.lock().expect("clients").push(writer);
                let answers = Arc::clone(&shared);
                std::thread::spawn(move || answer_pings(stream, &answers));
            }
        });
        SimHost { clients }
    }

    /// Sends `report` of lane `lN` to every client.
    pub fn report(&self, index: usize, report: LaneReport) {
        let message = ServerMsg::Host {
            msg: HostMsg::Lane {
                lane: lane(index),
                report,
            },
        };
        self.send(&wire::line(&message));
    }

    fn send(&self, line: &str) {
        let mut clients = self.clients.lock().expect("clients");
        clients.retain_mut(|client| client.write_all(format!("{line}\n").as_bytes()).is_ok());
    }
}

impl Drop for SimHost {
    fn drop(&mut self) {
        for client in self.clients.lock().expect("clients").iter() {
            let _ = client.shutdown(std::net::Shutdown::Both);
        }
    }
}

fn snapshot(lanes: usize) -> HostSnapshot {
    let mut snapshot = HostSnapshot {
        idle: Some((false, false)),
        ..HostSnapshot::default()
    };
    for index in 1..=lanes {
        let name = lane(index);
        snapshot.lanes.push(LaneEntry {
            name: name.clone(),
            requested: LaneState::Active,
            max_iterations: Some(100),
            kind: LaneKind::Worktree,
            base: Some("main".into()),
        });
        snapshot.facts.push(LaneFacts {
            lane: name,
            snapshot: Some(session(1, index % 10 == 7)),
            queued: false,
            ahead: Some(Some(0)),
            ended: (index % 10 == 3).then(|| Err("exit 1".to_string())),
        });
    }
    snapshot
}

/// Answers the client's pings, as a host does, until it hangs up.
fn answer_pings(stream: UnixStream, clients: &Mutex<Vec<UnixStream>>) {
    let Ok(mut writer) = stream.try_clone() else {
        return;
    };
    for line in BufReader::new(stream).lines() {
        let Ok(line) = line else { return };
        if let Ok(wire::ClientMsg::Ping { re }) = wire::parse_client_line(line.as_bytes()) {
            let pong = ServerMsg::Reply {
                re,
                ok: true,
                text: "pong".to_string(),
            };
            // Held, so that a pong never lands inside another line.
            let _held = clients.lock();
            if writer
                .write_all(format!("{}\n", wire::line(&pong)).as_bytes())
                .is_err()
            {
                return;
            }
        }
    }
}
