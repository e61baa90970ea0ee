//! A simulated clowder host for the attach benchmarks (`benches/hosts.py`): it
//! serves `DIR/.clowder/host.sock` with the real protocol (the crate's own wire
//! types), says hello, sends a snapshot of LANES running lanes, then a new
//! snapshot of each of its BUSY lanes RATE times a second, as a session that
//! writes output would (as its moved fields, `lane_changed`, to a client that
//! asked for changes, as a real host does). Idle lanes send nothing. It runs
//! no agent and no loop.
//!
//! ```sh
//! cargo bench --bench host_sim -- DIR [--lanes 100] [--busy 0] [--rate 5] [--marker TEXT]
//! ```
//!
//! `--marker` becomes each lane's agent command (shown by the room), so that a
//! script can tell one run of a host from the next. The tool runs until killed.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use chrono::Utc;
use clowder::fleet::LaneName;
use clowder::fleet::link::{HostMsg, LaneEntry, LaneReport};
use clowder::fleet::registry::{LaneKind, LaneState};
use clowder::fleet::wire::{
    self, Hello, HostSnapshot, LaneChange, LaneFacts, PROTOCOL_VERSION, ServerMsg,
};
use clowder::protocol::{LoopState, Snapshot};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::{RwLock, broadcast};

struct Options {
    dir: PathBuf,
    lanes: usize,
    busy: usize,
    rate: f64,
    marker: String,
}

fn options() -> Result<Options> {
    let mut options = Options {
        dir: PathBuf::new(),
        lanes: 100,
        busy: 0,
        rate: 5.0,
        marker: "sim-agent".to_string(),
    };
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = || args.next().with_context(|| format!("{arg} needs a value"));
        match arg.as_str() {
            // `cargo bench` adds it.
            "--bench" => {}
            "--lanes" => options.lanes = value()?.parse().context("--lanes")?,
            "--busy" => options.busy = value()?.parse().context("--busy")?,
            "--rate" => options.rate = value()?.parse().context("--rate")?,
            "--marker" => options.marker = value()?,
            flag if flag.starts_with("--") => bail!("unknown option {flag}"),
            dir => options.dir = PathBuf::from(dir),
        }
    }
    if options.dir.as_os_str().is_empty() {
        bail!("usage: host_sim DIR [--lanes N] [--busy N] [--rate PER_SEC] [--marker TEXT]");
    }
    if options.busy > options.lanes || options.rate <= 0.0 {
        bail!("--busy must be at most --lanes, --rate above 0");
    }
    Ok(options)
}

/// What every connection shares: the hello line and the lanes' latest state.
struct Host {
    hello: String,
    state: RwLock<HostSnapshot>,
    /// Each change as its whole snapshot, and as the moved fields alone for
    /// a client that asked for changes.
    changes: broadcast::Sender<(Arc<str>, Arc<str>)>,
}

fn main() -> Result<()> {
    let options = options()?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(serve(options))
}

async fn serve(options: Options) -> Result<()> {
    let listener = bind(&options.dir)?;
    let (changes, _) = broadcast::channel(4096);
    let host = Arc::new(Host {
        hello: wire::line(&ServerMsg::Hello(Hello {
            protocol: PROTOCOL_VERSION,
            clowder: env!("CARGO_PKG_VERSION").to_string(),
            host: "host-sim".to_string(),
            folder: options.dir.display().to_string(),
            pid: std::process::id(),
        })),
        state: RwLock::new(first_snapshot(&options)?),
        changes,
    });
    for index in 0..options.busy {
        tokio::spawn(busy_lane(Arc::clone(&host), index, options.rate));
    }
    loop {
        let (stream, _) = listener.accept().await?;
        tokio::spawn(client(stream, Arc::clone(&host)));
    }
}

/// Binds `.clowder/host.sock` in `dir`, replacing a socket a killed run left.
fn bind(dir: &Path) -> Result<UnixListener> {
    let folder = dir.join(".clowder");
    std::fs::create_dir_all(&folder).with_context(|| format!("{}", folder.display()))?;
    let path = folder.join(wire::SOCKET_FILE);
    let _ = std::fs::remove_file(&path);
    UnixListener::bind(&path).with_context(|| format!("cannot serve {}", path.display()))
}

fn lane_name(index: usize) -> Result<LaneName> {
    LaneName::parse(&format!("l{}", index + 1)).map_err(anyhow::Error::msg)
}

/// LANES lanes, each in its first session, as a real host's snapshot has them.
fn first_snapshot(options: &Options) -> Result<HostSnapshot> {
    let now = Utc::now();
    let mut snapshot = HostSnapshot {
        idle: Some((false, false)),
        changes: true,
        ..HostSnapshot::default()
    };
    for index in 0..options.lanes {
        let name = lane_name(index)?;
        let mut lane = Snapshot::starting(4242, options.marker.clone(), now);
        lane.state = LoopState::SessionRunning;
        lane.iteration = 1;
        lane.max_iterations = 100;
        lane.stale_timeout_secs = 1800.0;
        lane.session_start = Some(now);
        lane.last_output_growth = Some(now);
        lane.output_bytes = 4096;
        let file = format!(".clowder/lanes/{name}/claude-iteration-1.jsonl");
        lane.output_file = Some(options.dir.join(file));
        snapshot.lanes.push(LaneEntry {
            name: name.clone(),
            requested: LaneState::Active,
            max_iterations: Some(100),
            kind: LaneKind::Worktree,
            base: Some("main".into()),
        });
        snapshot.facts.push(LaneFacts {
            lane: name,
            snapshot: Some(Arc::new(lane)),
            queued: false,
            ahead: Some(Some(0)),
            ended: None,
        });
    }
    Ok(snapshot)
}

/// Lane `index` writing output: a fresh snapshot of it RATE times a second.
async fn busy_lane(host: Arc<Host>, index: usize, rate: f64) {
    let mut tick = tokio::time::interval(Duration::from_secs_f64(1.0 / rate));
    loop {
        tick.tick().await;
        let now = Utc::now();
        let mut state = host.state.write().await;
        let Some(facts) = state.facts.get_mut(index) else {
            return;
        };
        let Some(old) = facts.snapshot.as_deref() else {
            return;
        };
        let mut lane = old.clone();
        lane.output_bytes += 6_500;
        lane.last_output_growth = Some(now);
        lane.last_update = now;
        lane.totals.tool_calls += 1;
        let change = LaneChange::between(&facts.lane, (old, false), (&lane, false));
        let lane = Arc::new(lane);
        facts.snapshot = Some(Arc::clone(&lane));
        let change = change.map(|change| wire::line(&ServerMsg::LaneChanged(Box::new(change))));
        let message = ServerMsg::Host {
            msg: HostMsg::Lane {
                lane: facts.lane.clone(),
                report: LaneReport::Snapshot {
                    snapshot: lane,
                    queued: false,
                },
            },
        };
        drop(state);
        let full: Arc<str> = Arc::from(wire::line(&message));
        let change = change.map_or_else(|| Arc::clone(&full), Arc::from);
        // No client connected: nobody to tell.
        let _ = host.changes.send((full, change));
    }
}

/// One connection: hello, snapshot, then every change; pings answered, other
/// lines read and dropped (the simulator follows no output file).
async fn client(stream: UnixStream, host: Arc<Host>) {
    let (reader, mut writer) = stream.into_split();
    let mut changes = host.changes.subscribe();
    let snapshot = {
        let state = host.state.read().await;
        wire::line(&ServerMsg::Snapshot(Box::new(state.clone())))
    };
    let start = format!("{}\n{snapshot}\n", host.hello);
    if writer.write_all(start.as_bytes()).await.is_err() {
        return;
    }
    let mut lines = BufReader::new(reader).lines();
    // The client asked for changes (`{"type":"changes"}`).
    let mut moved_only = false;
    loop {
        tokio::select! {
            change = changes.recv() => {
                let text = match change {
                    Ok((_, change)) if moved_only => format!("{change}\n"),
                    Ok((full, _)) => format!("{full}\n"),
                    Err(broadcast::error::RecvError::Lagged(dropped)) => {
                        let state = host.state.read().await.clone();
                        let note = wire::line(&ServerMsg::Overflowed { dropped });
                        let again = wire::line(&ServerMsg::Snapshot(Box::new(state)));
                        format!("{note}\n{again}\n")
                    }
                    Err(broadcast::error::RecvError::Closed) => return,
                };
                if writer.write_all(text.as_bytes()).await.is_err() {
                    return;
                }
            }
            line = lines.next_line() => match line {
                Ok(Some(line)) => {
                    moved_only |= matches!(
                        wire::parse_client_line(line.as_bytes()),
                        Ok(wire::ClientMsg::Changes)
                    );
                    if let Some(answer) = answer(&line) {
                        let text = format!("{}\n", wire::line(&answer));
                        if writer.write_all(text.as_bytes()).await.is_err() {
                            return;
                        }
                    }
                }
                Ok(None) | Err(_) => return,
            },
        }
    }
}

fn answer(line: &str) -> Option<ServerMsg> {
    match wire::parse_client_line(line.as_bytes()) {
        Ok(wire::ClientMsg::Ping { re }) => Some(ServerMsg::Reply {
            re,
            ok: true,
            text: "pong".to_string(),
        }),
        Ok(wire::ClientMsg::Request { re: Some(re), .. }) => Some(ServerMsg::Reply {
            re,
            ok: false,
            text: "the host simulator runs no lane".to_string(),
        }),
        _ => None,
    }
}
