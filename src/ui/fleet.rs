//! The control room over a fleet. The host (every lane's runtime, output
//! analysis, git) runs on a thread of its own with its own async runtime; this
//! thread only draws and handles keys, and talks to the host through two
//! channels whose every message names its lane.

use std::path::PathBuf;
use std::time::Duration;

use chrono::{DateTime, Utc};
use tokio::sync::mpsc;

use super::app::{AppState, LaneProgram, Msg, UiCommand, lanes, update};
use super::caller::Caller;
use super::suspend::Suspend;
use super::{
    Files, HISTORY_LIMIT, Input, Inputs, TerminalGuard, on_inbox_command, output_msg,
    sleep_until_opt, spawn_queue_scanner, view,
};
use crate::agent::follow::{FollowUpdate, follow};
use crate::config::Config;
use crate::fleet::LaneName;
use crate::fleet::link::{HostMsg, HostRequest, LaneReport};
use crate::fleet::plans::{RoomDriver, RoomPlans};
use crate::protocol::Command;
use crate::supervisor::core::Level;

/// At most this many host messages are taken between two looks at the keyboard.
const HOST_BATCH: usize = 4_096;

/// Runs every lane of the fleet in `root` with the control room on the
/// terminal; returns the exit code once the user has left and every lane has ended.
pub fn run_fleet(root: PathBuf, config: Config, config_path: PathBuf) -> i32 {
    run_fleet_with(root, config, config_path, None)
}

/// [`run_fleet`], with a plan's driver running next to the lanes.
pub fn run_fleet_with(
    root: PathBuf,
    config: Config,
    config_path: PathBuf,
    plan: Option<RoomDriver>,
) -> i32 {
    run_fleet_plans(root, config, config_path, plan.map(RoomPlans::Drive))
}

/// [`run_fleet`], with `viewer` sending the plans that ran here to the Plan view.
pub fn run_fleet_viewing(
    root: PathBuf,
    config: Config,
    config_path: PathBuf,
    viewer: RoomDriver,
) -> i32 {
    run_fleet_plans(root, config, config_path, Some(RoomPlans::View(viewer)))
}

fn run_fleet_plans(
    root: PathBuf,
    config: Config,
    config_path: PathBuf,
    plan: Option<RoomPlans>,
) -> i32 {
    let files = Files {
        root: root.clone(),
        approvals_dir: root.join(&config.approvals.dir.0),
        config_path: root.join(config_path),
        stop_file: config.loop_files(&root).stop,
    };
    let format = config.agent.format;
    let caller = Caller::new(&config.ui, &root);
    // Before the host's thread: the shell then waits for a parent that
    // restores the terminal if this process is killed (see `detach`).
    let parent = crate::detach::fork_waiter();
    if parent.is_some() {
        // The process that goes on holds the folder's lock (the open file is shared).
        crate::store::lock::record_holder(&root);
    }
    let room_root = root.clone();
    let (to_ui, from_host) = mpsc::unbounded_channel();
    let (requests, requests_rx) = mpsc::unbounded_channel();
    let host = std::thread::Builder::new()
        .name("fleet-host".into())
        .spawn(move || crate::fleet::host::run_for_room(root, config, to_ui, requests_rx, plan));
    let host = match host {
        Ok(host) => host,
        Err(err) => {
            eprintln!("clowder: error: cannot start the fleet's thread: {err}");
            return 1;
        }
    };
    let screen = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|err| format!("cannot start the async runtime: {err}"))
        .and_then(|runtime| {
            runtime.block_on(async {
                let guard = TerminalGuard::enter()
                    .map_err(|err| format!("cannot set up the terminal: {err}"))?;
                let room = Room {
                    root: room_root,
                    format,
                    files: &files,
                    caller,
                    parent,
                    link: Link::Local,
                };
                room_loop(guard, from_host, requests, room)
                    .await
                    .map_err(|err| format!("terminal error: {err}"))
            })
        });
    // The host ends once its lanes have (a closed room stops them).
    let code = host.join().unwrap_or(1);
    match screen {
        Ok(()) => code,
        Err(err) => {
            eprintln!("clowder: error: {err}");
            if code == 0 { 1 } else { code }
        }
    }
}

/// What the control room's loop is given besides its channels.
pub(super) struct Room<'a> {
    pub(super) root: PathBuf,
    pub(super) format: crate::agent::stream::AgentFormat,
    pub(super) files: &'a Files,
    pub(super) caller: Caller,
    /// The waiting parent, told when the room suspends.
    pub(super) parent: Option<crate::detach::Detacher>,
    pub(super) link: Link,
}

/// How the room reaches its host.
pub(super) enum Link {
    /// The host runs on a thread of this process, and the folder is here.
    Local,
    /// The host runs elsewhere, reached through its protocol: given the
    /// channel of what the room asks, this starts the room's feeds.
    Attached(StartFeeds),
}

/// Starts an attached room's feeds (see [`Link::Attached`]).
pub(super) type StartFeeds =
    Box<dyn FnOnce(mpsc::UnboundedReceiver<crate::fleet::wire::ClientMsg>) -> Feeds>;

/// Where the room's news besides the host's messages comes from: the output
/// followed, and the approval requests listed.
pub(super) struct Feeds {
    pub(super) feed_tx: mpsc::UnboundedSender<FollowUpdate>,
    pub(super) feed_rx: mpsc::UnboundedReceiver<FollowUpdate>,
    /// Asks for the requests to be listed again now (after a decision).
    pub(super) hint_tx: mpsc::UnboundedSender<()>,
    pub(super) listing_rx: mpsc::UnboundedReceiver<(bool, Vec<crate::approvals::Request>)>,
    /// Stopped when the room closes.
    pub(super) task: tokio::task::JoinHandle<()>,
}

impl Feeds {
    /// A follower of files here, and the queue scanned here.
    fn local(files: &Files) -> Feeds {
        let (feed_tx, feed_rx) = mpsc::unbounded_channel::<FollowUpdate>();
        let (hint_tx, hint_rx) = mpsc::unbounded_channel::<()>();
        let (listing_tx, listing_rx) = mpsc::unbounded_channel();
        let task = spawn_queue_scanner(
            files.root.clone(),
            files.approvals_dir.clone(),
            hint_tx.clone(),
            hint_rx,
            listing_tx,
        );
        Feeds {
            feed_tx,
            feed_rx,
            hint_tx,
            listing_rx,
            task,
        }
    }
}

pub(super) async fn room_loop(
    mut guard: TerminalGuard,
    mut from_host: mpsc::UnboundedReceiver<HostMsg>,
    requests: mpsc::UnboundedSender<HostRequest>,
    room: Room<'_>,
) -> std::io::Result<()> {
    let Room {
        root,
        format,
        files,
        mut caller,
        parent,
        link,
    } = room;
    let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
    let mut state = AppState::for_fleet(no_color);
    if let Some(fleet) = state.fleet.as_mut() {
        fleet.root = root;
    }
    state.can_detach = parent.is_some();
    let mut inputs = Inputs::new();
    let mut suspend: Option<Suspend<LaneName>> = None;
    let mut ticker = tokio::time::interval(Duration::from_secs(1));
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    let mut history_ticker = tokio::time::interval(Duration::from_secs(1));
    history_ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    let (asks, feeds) = match link {
        Link::Local => (None, Feeds::local(files)),
        Link::Attached(start) => {
            state.attached = true;
            let (asks, asked) = mpsc::unbounded_channel();
            (Some(asks), start(asked))
        }
    };
    let Feeds {
        feed_tx,
        mut feed_rx,
        hint_tx,
        mut listing_rx,
        task: scanner,
    } = feeds;
    let mut outside = Outside {
        foreground: None,
        asks,
        requests: &requests,
        follower: None,
        feed_tx,
        format,
        files,
        hint_tx,
        detaching: false,
    };
    let mut redraw = super::Redraw::new();
    let mut host_gone = false;
    let mut terminal_gone = false;
    loop {
        // A terminal that cannot be written to is gone, as when its events end.
        if !terminal_gone && super::draw_if_due(&mut guard, &mut state, &mut redraw).is_err() {
            terminal_gone = true;
            inputs.pause_events();
            stop_every_lane(&mut state, &requests);
        }
        if !redraw.pending() && !terminal_gone {
            caller.signal(guard.terminal.backend_mut());
        }
        if state.should_quit || host_gone || outside.detaching {
            break;
        }
        if let Some(asked) =
            suspend.take_if(|asked| asked.due(all_paused(&state, asked.waits_for())))
        {
            match asked.stop(&mut guard, &mut inputs, parent.as_ref()) {
                Ok(paused_here) => send_to_lanes(&requests, paused_here, &Command::Resume),
                // The screen cannot be taken again: as if the terminal had gone.
                Err(_) => {
                    terminal_gone = true;
                    inputs.pause_events();
                    stop_every_lane(&mut state, &requests);
                }
            }
            redraw.changed(true);
            continue;
        }
        // Nothing is drawn on a terminal that is gone: a frame due is not waited for.
        let redraw_at = redraw.due_at().filter(|_| !terminal_gone);
        let mut messages = Vec::new();
        // A key is taken before any news waiting: a person never waits behind a batch.
        tokio::select! {
            biased;
            input = inputs.next() => match super::to_messages(input, &mut messages) {
                // The terminal is gone: nobody can answer, so every lane stops.
                Some(Input::Closed) => {
                    terminal_gone = true;
                    stop_every_lane(&mut state, &requests);
                }
                // Nothing of an attached room's runs here: a stop only closes it.
                Some(Input::Stop) if state.attached => state.should_quit = true,
                Some(Input::Suspend) if !terminal_gone && suspend.is_none() => {
                    // An attached room's lanes are not paused while it is away.
                    let running = if state.attached { Vec::new() } else { lanes_to_pause(&state) };
                    send_to_lanes(&requests, running.clone(), &Command::Pause);
                    suspend = Some(Suspend::new(running));
                }
                // A stop: the host has the signal too, and stops the lanes, then the room.
                Some(_) | None => {}
            },
            Some(update) = feed_rx.recv() => messages.push(output_msg(update)),
            _ = ticker.tick() => messages.push(Msg::Tick),
            _ = history_ticker.tick(), if state.approval_history.is_some() => {
                messages.push(Msg::History(crate::approvals::list_done(
                    &files.approvals_dir,
                    HISTORY_LIMIT,
                )));
            }
            Some((dir_exists, pending)) = listing_rx.recv() => {
                if pending != state.approvals || dir_exists != state.approvals_dir_exists {
                    messages.push(Msg::Approvals { dir_exists, pending });
                }
            }
            // Last: at start, or over many busy lanes, it is always ready.
            message = from_host.recv() => match message {
                Some(message) => messages.push(Msg::Host(message)),
                None => host_gone = true,
            },
            _ = sleep_until_opt(redraw_at) => {}
        }
        // Drain what is already queued before drawing once.
        while messages.len() < HOST_BATCH
            && let Ok(message) = from_host.try_recv()
        {
            messages.push(Msg::Host(message));
        }
        while let Ok(update) = feed_rx.try_recv() {
            messages.push(output_msg(update));
        }
        let news = !messages.is_empty();
        let by_user = messages.iter().any(Msg::is_from_user);
        let now = Utc::now();
        let hidden: Option<Vec<LaneName>> = messages
            .iter()
            .map(|message| hidden_snapshot(&state, message).cloned())
            .collect();
        let before = hidden.as_ref().map(|lanes| rows_text(&state, lanes, now));
        outside.apply(&mut state, messages);
        if let Some((lane, program)) = outside.foreground.take() {
            if !terminal_gone {
                let note = run_in_lane(&mut guard, &mut inputs, &files.root, &lane, program);
                update(&mut state, note, Utc::now());
            }
            redraw.changed(true);
            continue;
        }
        // Busy lanes not shown redraw the screen only when their row reads otherwise.
        let changed = match (&hidden, before) {
            (Some(lanes), Some(before)) => rows_text(&state, lanes, now) != before,
            _ => news,
        };
        if changed {
            redraw.changed(by_user);
        }
        if news {
            caller.look(&mut state);
        }
        let idle = state.fleet.as_ref().is_some_and(|f| f.idle);
        if state.should_quit && !idle && !state.attached {
            // Leave only once every lane has ended: nothing keeps running unseen.
            state.should_quit = false;
            state.quit_when_finished = true;
        }
    }
    drop(outside.follower.take());
    scanner.abort();
    drop(guard);
    if outside.detaching
        && !host_gone
        && let Some(parent) = parent
    {
        drop(inputs);
        detach(parent, &requests);
        // The host goes on until its lanes end; nobody reads what it says.
        while from_host.recv().await.is_some() {}
    }
    Ok(())
}

/// `d`: tells the host to go on without the room, then lets the shell go.
fn detach(parent: crate::detach::Detacher, requests: &mpsc::UnboundedSender<HostRequest>) {
    let _ = requests.send(HostRequest::Detached);
    let pid = std::process::id();
    println!(
        "clowder: detached: the lanes go on in the background as PID {pid}.\n  clowder lanes   what they are doing\n  clowder lane stop NAME   stop a lane after its session\n  kill -INT {pid}   stop every lane (twice within 3 s: kill the sessions now)"
    );
    use std::io::Write;
    let _ = std::io::stdout().flush();
    if let Err(err) = parent.detach() {
        eprintln!("clowder: cannot detach ({err}); the lanes go on here, in the foreground");
    }
}

/// A line for the events pane: of the lane it is about, else of the lane shown.
type Note = (Option<LaneName>, (DateTime<Utc>, Level, String));

/// Carries out what `update` asks of the world outside the state.
struct Outside<'a> {
    /// `o` or `e`, run by the loop once the messages are handled.
    foreground: Option<(LaneName, LaneProgram)>,
    /// In an attached room: what would touch the host's files is asked of it.
    asks: Option<mpsc::UnboundedSender<crate::fleet::wire::ClientMsg>>,
    requests: &'a mpsc::UnboundedSender<HostRequest>,
    /// Follows the shown lane's session output on a thread of its own.
    follower: Option<crate::agent::follow::Follower>,
    feed_tx: mpsc::UnboundedSender<FollowUpdate>,
    format: crate::agent::stream::AgentFormat,
    files: &'a Files,
    hint_tx: mpsc::UnboundedSender<()>,
    /// `d` was chosen in the quit dialog.
    detaching: bool,
}

impl Outside<'_> {
    fn apply(&mut self, state: &mut AppState, messages: Vec<Msg>) {
        let mut notes: Vec<Note> = Vec::new();
        for message in messages {
            for command in update(state, message, Utc::now()) {
                self.carry_out(state, command, &mut notes);
            }
        }
        for (lane, (at, level, text)) in notes {
            // A decision's note goes to the lane that asked, not the one shown.
            let message = match lane {
                Some(lane) => Msg::Host(HostMsg::Lane {
                    lane,
                    report: LaneReport::Log { at, level, text },
                }),
                None => Msg::Log { at, level, text },
            };
            update(state, message, Utc::now());
        }
    }

    fn carry_out(&mut self, state: &mut AppState, command: UiCommand, notes: &mut Vec<Note>) {
        let command = match &self.asks {
            Some(asks) => match ask_host(state, command, asks, self.requests, notes) {
                Some(command) => command,
                None => return,
            },
            None => command,
        };
        match command {
            UiCommand::Host(request) => {
                let _ = self.requests.send(request);
            }
            UiCommand::Follow(file) => {
                // The old follower stops when dropped.
                self.follower = Some(follow(file, self.format, self.feed_tx.clone()));
            }
            UiCommand::Quit => state.should_quit = true,
            UiCommand::Tell { lane, text } => {
                let said = super::leave_note(self.files, lane.as_ref(), &text);
                notes.push((lane, said));
            }
            UiCommand::Detach => self.detaching = true,
            UiCommand::RunInLane { lane, program } => self.foreground = Some((lane, program)),
            // Routed to their lanes by `update`.
            UiCommand::Supervisor(_) => {}
            inbox => {
                let lane = lanes::request_lane(state, &inbox);
                let mut said = Vec::new();
                on_inbox_command(inbox, self.files, state, &self.hint_tx, &mut said);
                notes.extend(said.into_iter().map(|note| (lane.clone(), note)));
            }
        }
    }
}

/// In an attached room, the commands the host carries out for it; the
/// others are handed back.
fn ask_host(
    state: &AppState,
    command: UiCommand,
    asks: &mpsc::UnboundedSender<crate::fleet::wire::ClientMsg>,
    requests: &mpsc::UnboundedSender<HostRequest>,
    notes: &mut Vec<Note>,
) -> Option<UiCommand> {
    let selected = || {
        state
            .fleet
            .as_ref()
            .and_then(|fleet| fleet.selected.clone())
    };
    let ask = match command {
        UiCommand::Approve { id } | UiCommand::ApproveAlways { id, .. } => decision(id, true, None),
        UiCommand::Reject { id, reason } => decision(id, false, Some(reason)),
        UiCommand::Follow(file) => {
            let lane = selected()?;
            crate::fleet::wire::ClientMsg::Follow { lane, file }
        }
        UiCommand::Tell {
            lane: Some(lane),
            text,
        } => {
            let _ = requests.send(HostRequest::Tell { lane, text });
            return None;
        }
        UiCommand::RunInLane { lane, .. } => {
            let text = "its folder is on the host: open a shell there (ssh, kubectl exec)";
            notes.push((Some(lane), (Utc::now(), Level::Warn, text.to_string())));
            return None;
        }
        UiCommand::LoadHistory => return None,
        other => return Some(other),
    };
    let _ = asks.send(ask);
    None
}

/// Who decides, as the request's record says: the user and this machine.
fn decider() -> String {
    format!("{} (attached room)", crate::fleet::serve::user_at_host())
}

/// A decision of an attached room, as the host takes it.
fn decision(id: String, approve: bool, reason: Option<String>) -> crate::fleet::wire::ClientMsg {
    use crate::fleet::wire::WireDecision;
    let decision = match (approve, reason) {
        (true, reason) => WireDecision::Approve { reason },
        (false, reason) => WireDecision::Reject {
            reason: reason.unwrap_or_default(),
        },
    };
    crate::fleet::wire::ClientMsg::Decide {
        re: Some(Utc::now().timestamp_millis().unsigned_abs()),
        id,
        decision,
        by: decider(),
    }
}

/// `o` or `e`: the program in the lane's folder, the screen suspended
/// meanwhile; what happened, as a line for the events pane.
fn run_in_lane(
    guard: &mut TerminalGuard,
    inputs: &mut Inputs,
    root: &std::path::Path,
    lane: &LaneName,
    program: LaneProgram,
) -> Msg {
    let folder = crate::fleet::registry::load(root)
        .map_err(|err| err.to_string())
        .and_then(|registry| {
            let found = registry.lane(lane).map(|l| root.join(&l.dir));
            found.ok_or_else(|| format!("no lane named {lane}"))
        })
        .and_then(|dir| {
            if dir.is_dir() {
                Ok(dir)
            } else {
                Err(format!("its folder {} is missing", dir.display()))
            }
        });
    let what = match program {
        LaneProgram::Shell => "shell",
        LaneProgram::Editor => "editor",
    };
    let (level, text) = match folder {
        Ok(dir) => {
            let command = super::foreground::command_for(program, &dir);
            let shown = format!("{:?}", command.get_program());
            match super::foreground::run(guard, inputs, command) {
                Ok(ended) => (
                    Level::Info,
                    format!(
                        "lane={lane} {what} ended: {ended} ({shown} in {})",
                        dir.display()
                    ),
                ),
                Err(err) => (
                    Level::Warn,
                    format!("lane={lane} {what} {shown} failed: {err}"),
                ),
            }
        }
        Err(why) => (Level::Warn, format!("lane={lane} no {what}: {why}")),
    };
    Msg::Log {
        at: Utc::now(),
        level,
        text,
    }
}

/// The lane of a snapshot of a lane the panes do not show: of the screen, it
/// can change only that lane's row in the Lanes pane.
fn hidden_snapshot<'a>(state: &AppState, message: &'a Msg) -> Option<&'a LaneName> {
    let Msg::Host(HostMsg::Lane {
        lane,
        report: LaneReport::Snapshot { .. },
    }) = message
    else {
        return None;
    };
    let fleet = state.fleet.as_ref()?;
    (fleet.selected.as_ref() != Some(lane)).then_some(lane)
}

/// The Lanes-pane text of each of `lanes`' rows.
fn rows_text(state: &AppState, lanes: &[LaneName], now: DateTime<Utc>) -> Vec<Option<String>> {
    let Some(fleet) = &state.fleet else {
        return Vec::new();
    };
    lanes
        .iter()
        .map(|lane| {
            let row = fleet.row(lane)?;
            Some(view::lane_row_text(row, now))
        })
        .collect()
}

/// The terminal is gone: nobody can answer, so every lane stops, and the room
/// leaves once they all have.
fn stop_every_lane(state: &mut AppState, requests: &mpsc::UnboundedSender<HostRequest>) {
    // An attached room's lanes are the host's: it goes on without the room.
    if state.attached {
        state.should_quit = true;
        return;
    }
    if let Some(fleet) = &state.fleet {
        let mut stops = Vec::new();
        lanes::to_every_lane(fleet, &Command::TerminalClosed, &mut stops);
        send_all(requests, stops);
    }
    state.quit_when_finished = true;
    state.should_quit = state.fleet.as_ref().is_some_and(|f| f.idle);
}

/// The lanes whose session runs unpaused: a suspend pauses them.
fn lanes_to_pause(state: &AppState) -> Vec<LaneName> {
    let Some(fleet) = &state.fleet else {
        return Vec::new();
    };
    fleet
        .rows
        .iter()
        .filter(|row| row.live())
        .filter(|row| {
            row.snapshot.as_ref().is_some_and(|s| {
                s.pgid.is_some()
                    && !s.paused
                    && matches!(s.state, crate::protocol::LoopState::SessionRunning)
            })
        })
        .map(|row| row.name.clone())
        .collect()
}

fn all_paused(state: &AppState, lanes: &[LaneName]) -> bool {
    let Some(fleet) = &state.fleet else {
        return true;
    };
    lanes.iter().all(|lane| {
        fleet
            .row(lane)
            .and_then(|row| row.snapshot.as_ref())
            .is_none_or(|s| s.paused || s.pgid.is_none())
    })
}

fn send_to_lanes(
    requests: &mpsc::UnboundedSender<HostRequest>,
    lanes: Vec<LaneName>,
    command: &Command,
) {
    for lane in lanes {
        let _ = requests.send(HostRequest::Command {
            lane,
            command: command.clone(),
        });
    }
}

fn send_all(requests: &mpsc::UnboundedSender<HostRequest>, commands: Vec<UiCommand>) {
    for command in commands {
        if let UiCommand::Host(request) = command {
            let _ = requests.send(request);
        }
    }
}
