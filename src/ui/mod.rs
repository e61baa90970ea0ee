//! The control room: a ratatui screen over the live supervision loop.
//!
//! The supervisor runs in the same current-thread runtime; this module's event
//! loop turns terminal events, snapshots, log lines and output updates into
//! [`app::Msg`]s, drains everything queued, and draws at most ~30 times a second,
//! and only when something changed. The terminal is restored on every exit path,
//! panics included.

pub mod app;
mod attached;
pub mod attention;
mod caller;
mod fleet;
mod foreground;
pub mod keymap;
mod live_output;
pub mod new_lane;
mod suspend;
pub(crate) mod terminal;
pub mod view;

use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use crossterm::event::Event;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use crate::agent::follow::{FollowUpdate, follow};
use crate::agent::stream::AgentFormat;
use crate::config::Config;
use crate::detach::Detacher;
use crate::protocol::ExitReason;
use crate::supervisor::core::Level;
use crate::supervisor::runtime::{Outcome, Reporter, Runtime, RuntimeOptions};
use app::{AppState, Msg, UiCommand, update};
pub use attached::{HostTarget, run_attached};
pub use fleet::{run_fleet, run_fleet_viewing, run_fleet_with};
use terminal::{Input, Inputs, TerminalGuard};

/// Shortest time between two frames after a key or a mouse event.
const FRAME: Duration = Duration::from_millis(33);
/// Shortest time between two frames when only the agents' output, the counters
/// or the lanes changed: a busy agent would otherwise cost ~30 frames a second.
/// The output follower reads no more often than this (the session reader,
/// which shows the live session, less often still), so new output is still
/// shown as soon as it is read.
const OUTPUT_FRAME: Duration = crate::agent::follow::MIN_GAP;
/// Finished approvals shown in the history view.
const HISTORY_LIMIT: usize = 200;

/// Log lines and events from the supervisor, sent to the event pane instead of
/// the console.
struct ChannelReporter {
    lines: mpsc::UnboundedSender<Msg>,
}

impl Reporter for ChannelReporter {
    fn log(&mut self, wall: DateTime<Utc>, level: Level, message: &str) {
        let _ = self.lines.send(Msg::Log {
            at: wall,
            level,
            text: message.to_string(),
        });
    }

    fn event(&mut self, wall: DateTime<Utc>, event: &crate::protocol::Event) {
        let _ = self.lines.send(Msg::Event {
            at: wall,
            event: Box::new(event.clone()),
        });
    }
}

/// Runs the loop with the control room on the terminal; returns the exit code.
/// With a `detacher` (see [`crate::detach`]) the quit dialog also offers to
/// leave the loop running in the background.
pub fn run(
    config: Config,
    config_path: PathBuf,
    working_dir: PathBuf,
    format: AgentFormat,
    detacher: Option<Detacher>,
) -> i32 {
    let Some(runtime) = crate::supervisor::current_thread_runtime() else {
        return 1;
    };
    let started = Instant::now();
    let files = Files {
        root: working_dir.clone(),
        approvals_dir: working_dir.join(&config.approvals.dir.0),
        config_path: working_dir.join(config_path),
        stop_file: config.loop_files(&working_dir).stop,
    };
    let caller = caller::Caller::new(&config.ui, &working_dir);
    let result = runtime.block_on(async move {
        let (log_tx, log_rx) = mpsc::unbounded_channel();
        let options = RuntimeOptions {
            working_dir,
            verbose: false,
        };
        let (ui, approvals_dir) = (config.ui.clone(), files.approvals_dir.clone());
        // Served as a fleet of one, so that `clowder attach` reaches it, detached too.
        let single = crate::fleet::serve::single::SingleLoop::new(&files.root);
        let serve_options = crate::fleet::serve::ServeOptions {
            root: files.root.clone(),
            approvals_dir: approvals_dir.clone(),
            format: config.agent.format,
            watched: std::sync::Arc::default(),
            outputs: Some(config.loop_files(&files.root).output_dir),
            notified: config.ui.calls_out(),
        };
        let max_iterations = config.session.max_iterations.0;
        let reporter = single.reporter(Box::new(ChannelReporter {
            lines: log_tx.clone(),
        }));
        let (supervisor, snapshots) = Runtime::new(config, options, reporter)?;
        let commands = mpsc::unbounded_channel();
        let served = single.serve(
            serve_options,
            snapshots.clone(),
            commands.0.clone(),
            max_iterations,
        );
        let _serving = match served {
            Ok(serving) => Some(serving),
            Err(why) => {
                let _ = log_tx.send(Msg::Log {
                    at: chrono::Utc::now(),
                    level: Level::Warn,
                    text: format!("not served to `clowder attach`: {why}"),
                });
                None
            }
        };
        // `on_attention` is not the screen's: the loop's watcher runs it.
        let log = log_tx.clone();
        let say: crate::fleet::attention::Say = Arc::new(move |level, text: &str| {
            let text = text.to_string();
            let _ = log.send(Msg::Log {
                at: chrono::Utc::now(),
                level,
                text,
            });
        });
        let attention = crate::fleet::attention::watch_loop(
            &files.root,
            approvals_dir,
            &ui,
            snapshots.clone(),
            say,
        );
        let guard =
            TerminalGuard::enter().map_err(|err| format!("cannot set up the terminal: {err}"))?;
        let screen = Screen {
            format,
            detach: detacher,
            caller,
            attention,
            commands,
        };
        let outcome = event_loop(guard, supervisor, snapshots, log_rx, &files, screen).await;
        outcome.map_err(|err| format!("terminal error: {err}"))
    });
    match result {
        Ok(outcome) => {
            let secs = started.elapsed().as_secs() as i64;
            crate::console::say(&crate::console::summary_line(
                &outcome.reason,
                &outcome.snapshot,
                secs,
            ));
            outcome.reason.exit_code()
        }
        Err(err) => {
            eprintln!("clowder: error: {err}");
            1
        }
    }
}

/// The project's files the control room touches besides the supervisor's.
struct Files {
    /// The folder of the loop or fleet, whose registry says which lane asked.
    root: PathBuf,
    approvals_dir: PathBuf,
    /// Where `A` adds allow rules.
    config_path: PathBuf,
    /// Named in the message shown on detach.
    stop_file: PathBuf,
}

/// The approvals inbox's commands (`a`, `A`, `r`, the history), the same with
/// lanes or without.
fn on_inbox_command(
    command: UiCommand,
    files: &Files,
    state: &mut AppState,
    hint_tx: &mpsc::UnboundedSender<()>,
    notes: &mut Vec<(DateTime<Utc>, Level, String)>,
) {
    let approvals_dir = files.approvals_dir.as_path();
    let config_path = files.config_path.as_path();
    match command {
        UiCommand::LoadHistory => {
            let records = crate::approvals::list_done(approvals_dir, HISTORY_LIMIT);
            update(state, Msg::History(records), Utc::now());
        }
        UiCommand::Approve { id } => {
            decide(
                approvals_dir,
                &id,
                crate::approvals::Decision::Approve,
                notes,
            );
            let _ = hint_tx.send(());
        }
        UiCommand::ApproveAlways {
            id,
            tool,
            prefixes,
            covers,
        } => {
            let decided = decide(
                approvals_dir,
                &id,
                crate::approvals::Decision::Approve,
                notes,
            );
            // A refused approval (an abandoned request) adds no rule.
            let note = decided.then(|| {
                let covers = crate::escape::one_line(&covers);
                match crate::config::add_allow_rule(config_path, &tool, &prefixes) {
                    Ok(()) if prefixes.is_empty() => (Level::Info, covers),
                    Ok(()) => (
                        Level::Info,
                        format!("{covers} (added to {})", config_path.display()),
                    ),
                    Err(err) => (Level::Error, format!("cannot add the allow rule: {err}")),
                }
            });
            if let Some((level, text)) = note {
                notes.push((Utc::now(), level, text));
            }
            let _ = hint_tx.send(());
        }
        UiCommand::Reject { id, reason } => {
            decide(
                approvals_dir,
                &id,
                crate::approvals::Decision::Reject(reason),
                notes,
            );
            let _ = hint_tx.send(());
        }
        _ => {}
    }
}

/// `t`: writes the note where the lane's (or the loop's) runtime takes it
/// from; what happened, for the events pane.
fn leave_note(
    files: &Files,
    lane: Option<&crate::fleet::LaneName>,
    text: &str,
) -> (DateTime<Utc>, Level, String) {
    let (dir, whom) = match lane {
        Some(lane) => (
            crate::fleet::lane_files_dir(&files.root, lane),
            format!("lane {lane}"),
        ),
        None => (
            crate::store::paths::state_dir(&files.root),
            "the loop".to_string(),
        ),
    };
    let now = Utc::now();
    match crate::store::notes::leave(&dir, text, now) {
        Ok(_) => (now, Level::Info, format!("note left for {whom}")),
        Err(err) => (now, Level::Error, format!("no note left for {whom}: {err}")),
    }
}

/// How the single loop's screen behaves besides its channels.
struct Screen {
    format: AgentFormat,
    detach: Option<Detacher>,
    caller: caller::Caller,
    /// Told when the loop ends, and finished with it.
    attention: crate::fleet::attention::Attention,
    /// The loop's commands: from this screen and from attached rooms.
    commands: (
        mpsc::UnboundedSender<crate::protocol::Command>,
        mpsc::UnboundedReceiver<crate::protocol::Command>,
    ),
}

async fn event_loop(
    mut guard: TerminalGuard,
    mut supervisor: Runtime,
    mut snapshots: tokio::sync::watch::Receiver<Arc<crate::protocol::Snapshot>>,
    mut log_rx: mpsc::UnboundedReceiver<Msg>,
    files: &Files,
    screen: Screen,
) -> io::Result<Outcome> {
    let Screen {
        format,
        detach,
        mut caller,
        attention,
        commands: (command_tx, command_rx),
    } = screen;
    let approvals_dir = files.approvals_dir.as_path();
    let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
    // The live session's lines come from its reader; a follower reads the rest.
    let (tap_tx, mut tap_rx) = mpsc::unbounded_channel::<FollowUpdate>();
    supervisor.show_output_to(tap_tx);
    supervisor.leave_hangup_to_the_room();
    let mut live = live_output::LiveOutput::default();
    let supervisor = supervisor.run(command_rx);
    tokio::pin!(supervisor);
    let mut state = AppState::new(snapshots.borrow_and_update().clone(), no_color);
    state.can_detach = detach.is_some();
    let mut detaching = false;
    let mut inputs = Inputs::new();
    let mut suspend: Option<suspend::Suspend<()>> = None;
    let (feed_tx, mut feed_rx) = mpsc::unbounded_channel::<FollowUpdate>();
    let mut follower: Option<crate::agent::follow::Follower> = None;
    let mut ticker = tokio::time::interval(Duration::from_secs(1));
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    // The queue is rescanned on every file-system hint and at least every second.
    let mut approvals_ticker = tokio::time::interval(Duration::from_secs(1));
    let (hint_tx, hint_rx) = mpsc::unbounded_channel::<()>();
    // Reading a large queue takes a while: it is scanned off this thread, which
    // the supervisor shares.
    let (listing_tx, mut listing_rx) = mpsc::unbounded_channel();
    let scanner = spawn_queue_scanner(
        files.root.clone(),
        approvals_dir.to_path_buf(),
        hint_tx.clone(),
        hint_rx,
        listing_tx,
    );
    approvals_ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    let mut outcome: Option<Outcome> = None;
    let mut redraw = Redraw::new();
    let mut terminal_gone = false;

    loop {
        // A terminal that cannot be written to is gone, as when its events end.
        if !terminal_gone && draw_if_due(&mut guard, &mut state, &mut redraw).is_err() {
            terminal_gone = true;
            inputs.pause_events();
            terminal_closed(&command_tx, &mut state, outcome.is_some());
        }
        if !redraw.pending() && !terminal_gone {
            caller.signal(guard.terminal.backend_mut());
        }
        if state.should_quit {
            break;
        }
        let paused =
            |asked: &suspend::Suspend<()>| asked.waits_for().is_empty() || state.snapshot.paused;
        if let Some(asked) = suspend.take_if(|asked| asked.due(paused(asked))) {
            match asked.stop(&mut guard, &mut inputs, detach.as_ref()) {
                Ok(paused_here) => {
                    if !paused_here.is_empty() {
                        let _ = command_tx.send(crate::protocol::Command::Resume);
                    }
                }
                // The screen cannot be taken again: as if the terminal had gone.
                Err(_) => {
                    terminal_gone = true;
                    inputs.pause_events();
                    terminal_closed(&command_tx, &mut state, outcome.is_some());
                }
            }
            redraw.changed(true);
            continue;
        }
        // Nothing is drawn on a terminal that is gone: a frame due is not waited for.
        let redraw_at = redraw.due_at().filter(|_| !terminal_gone);

        let mut messages = Vec::new();
        tokio::select! {
            input = inputs.next() => match to_messages(input, &mut messages) {
                // Nobody can answer a dialog: stop the loop, or leave if it has ended.
                Some(Input::Closed) => {
                    terminal_gone = true;
                    terminal_closed(&command_tx, &mut state, outcome.is_some());
                }
                // While the loop runs, the supervisor answers (it gets the
                // signal too) and the room leaves when it has stopped.
                Some(Input::Stop) => state.should_quit |= outcome.is_some(),
                Some(Input::Suspend) if terminal_gone || suspend.is_some() => {}
                Some(Input::Suspend) => {
                    let pause = state.running_session() && !state.snapshot.paused;
                    if pause {
                        let _ = command_tx.send(crate::protocol::Command::Pause);
                    }
                    suspend = Some(suspend::Suspend::new(if pause { vec![()] } else { Vec::new() }));
                }
                Some(_) | None => {}
            },
            changed = snapshots.changed(), if outcome.is_none() => {
                if changed.is_ok() {
                    messages.push(Msg::Snapshot(snapshots.borrow_and_update().clone()));
                }
            }
            Some(report) = log_rx.recv() => messages.push(report),
            Some(update) = feed_rx.recv() => {
                if live.wants_followed(&update) {
                    messages.push(output_msg(update));
                }
            }
            Some(update) = tap_rx.recv() => {
                on_tapped(live.take(update), &mut follower, &mut messages);
            }
            finished = &mut supervisor, if outcome.is_none() => {
                messages.push(Msg::Snapshot(Arc::new(finished.snapshot.clone())));
                let reason = finished.reason.clone();
                attention.loop_ended(&reason);
                let signalled = matches!(reason, ExitReason::Signal { .. });
                outcome = Some(finished);
                messages.push(Msg::Finished(reason));
                if signalled {
                    // Stopped from outside (SIGINT/SIGTERM): nobody may be looking.
                    state.should_quit = true;
                }
            }
            _ = ticker.tick() => messages.push(Msg::Tick),
            _ = approvals_ticker.tick(), if state.approval_history.is_some() => {
                messages.push(Msg::History(crate::approvals::list_done(
                    approvals_dir,
                    HISTORY_LIMIT,
                )));
            }
            Some((dir_exists, pending)) = listing_rx.recv() => {
                if pending != state.approvals || dir_exists != state.approvals_dir_exists {
                    messages.push(Msg::Approvals { dir_exists, pending });
                }
            }
            _ = sleep_until_opt(redraw_at) => {}
        }
        // Drain whatever else is already queued before drawing once.
        while let Ok(report) = log_rx.try_recv() {
            messages.push(report);
        }
        while let Ok(update) = tap_rx.try_recv() {
            on_tapped(live.take(update), &mut follower, &mut messages);
        }
        while let Ok(update) = feed_rx.try_recv() {
            if live.wants_followed(&update) {
                messages.push(output_msg(update));
            }
        }
        let mut log_tx_local: Vec<(DateTime<Utc>, Level, String)> = Vec::new();
        let mut replays = Vec::new();
        for message in messages {
            redraw.changed(message.is_from_user());
            for command in update(&mut state, message, Utc::now()) {
                match command {
                    UiCommand::Supervisor(command) => {
                        let _ = command_tx.send(command);
                    }
                    UiCommand::Follow(file) => {
                        // The old follower stops when dropped.
                        follower = None;
                        match live.follow(file.clone()) {
                            Some(replay) => replays.push(replay),
                            None => follower = Some(follow(file, format, feed_tx.clone())),
                        }
                    }
                    UiCommand::Quit => state.should_quit = true,
                    UiCommand::Detach => detaching = outcome.is_none() && detach.is_some(),
                    UiCommand::Host(_) => {}
                    UiCommand::Tell { lane, text } => {
                        log_tx_local.push(leave_note(files, lane.as_ref(), &text));
                    }
                    inbox => {
                        on_inbox_command(inbox, files, &mut state, &hint_tx, &mut log_tx_local)
                    }
                }
            }
        }
        for (at, level, text) in log_tx_local {
            update(&mut state, Msg::Log { at, level, text }, Utc::now());
        }
        for replay in replays {
            update(&mut state, output_msg(replay), Utc::now());
        }
        caller.look(&mut state);
        if state.should_quit && outcome.is_none() {
            // Leave only once the loop has ended: nothing keeps running unseen.
            state.should_quit = false;
            state.quit_when_finished = true;
        }
        if state.should_quit || detaching {
            break;
        }
    }
    drop(follower.take());
    scanner.abort();
    drop(guard);
    if detaching && let Some(detacher) = detach {
        // Nobody reads the pane any more; the supervisor's lines are dropped.
        drop(log_rx);
        let pid = std::process::id();
        println!(
            "clowder: detached: the loop goes on in the background as PID {pid}.\n  clowder --status   what it is doing\n  touch {}   stop after the current session\n  kill -INT {pid}   stop (twice within 3 s: kill the session now)",
            files.stop_file.display()
        );
        use std::io::Write;
        let _ = io::stdout().flush();
        if let Err(err) = detacher.detach() {
            // Still attached to the terminal: say so, and run on as before.
            eprintln!("clowder: cannot detach ({err}); the loop goes on here, in the foreground");
        }
        let outcome = supervisor.await;
        attention.loop_ended(&outcome.reason);
        attention.finish();
        return Ok(outcome);
    }
    attention.finish();
    match outcome {
        Some(outcome) => Ok(outcome),
        None => Err(io::Error::other("the control room ended before the loop")),
    }
}

/// Adds what a terminal input carries for the app to `messages`; what the
/// room must act on itself (the terminal closed, a stop, a suspend) is given back.
/// One mapping for the single-loop and the fleet rooms.
fn to_messages(input: Input, messages: &mut Vec<Msg>) -> Option<Input> {
    match input {
        Input::Keys(keys) => messages.extend(keys.into_iter().map(Msg::Key)),
        Input::Burst(keys) => messages.push(Msg::Burst(keys)),
        Input::Paste(text) => messages.push(Msg::Paste(text)),
        Input::Event(Event::Mouse(mouse)) => messages.push(Msg::Mouse(mouse)),
        Input::Event(_) => messages.push(Msg::Tick),
        other => return Some(other),
    }
    None
}

/// The terminal is gone: the loop stops now, and the room leaves once it has
/// (at once when it already has: nobody is looking at its final state).
fn terminal_closed(
    command_tx: &mpsc::UnboundedSender<crate::protocol::Command>,
    state: &mut AppState,
    loop_ended: bool,
) {
    if loop_ended {
        state.should_quit = true;
        return;
    }
    let _ = command_tx.send(crate::protocol::Command::TerminalClosed);
    state.quit_when_finished = true;
}

/// When the screen is drawn next: something changed, and a frame is due
/// ([`FRAME`] after the last one when the user acted, [`OUTPUT_FRAME`] when
/// only what the screen shows moved on).
#[derive(Debug)]
struct Redraw {
    dirty: bool,
    /// A key or mouse event is among the changes.
    user: bool,
    last: Option<Instant>,
}

impl Redraw {
    fn new() -> Redraw {
        Redraw {
            dirty: true,
            user: false,
            last: None,
        }
    }

    /// Something on screen changed; `by_user` when a key or the mouse did it.
    fn changed(&mut self, by_user: bool) {
        self.dirty = true;
        self.user |= by_user;
    }

    fn pending(&self) -> bool {
        self.dirty
    }

    /// When the pending frame is due (`None`: nothing pending, or due now).
    fn due_at(&self) -> Option<tokio::time::Instant> {
        let interval = if self.user { FRAME } else { OUTPUT_FRAME };
        self.dirty
            .then(|| self.last.map(|at| at + interval))
            .flatten()
            .map(tokio::time::Instant::from_std)
    }

    fn due(&self) -> bool {
        self.dirty
            && self
                .due_at()
                .is_none_or(|at| at <= tokio::time::Instant::now())
    }
}

/// Draws the screen when a frame is due, and sizes the output pane's page to it.
fn draw_if_due(
    guard: &mut TerminalGuard,
    state: &mut AppState,
    redraw: &mut Redraw,
) -> io::Result<()> {
    if redraw.due() {
        guard
            .terminal
            .draw(|frame| view::draw(state, frame, Utc::now()))?;
        state.output.page = guard
            .terminal
            .size()
            .map_or(20, |s| s.height.saturating_sub(8) as usize);
        *redraw = Redraw {
            dirty: false,
            user: false,
            last: Some(Instant::now()),
        };
    }
    Ok(())
}

/// Lists the queue's pending requests on a blocking thread after every burst of
/// hints (a decision, a watcher event) and at least every second, and sends
/// each listing, each request's lane taken from the records of the fleet in
/// `root` (none outside a fleet); one scan at a time.
fn spawn_queue_scanner(
    root: PathBuf,
    dir: PathBuf,
    hint_tx: mpsc::UnboundedSender<()>,
    mut hints: mpsc::UnboundedReceiver<()>,
    listings: mpsc::UnboundedSender<(bool, Vec<crate::approvals::Request>)>,
) -> JoinHandle<()> {
    tokio::spawn(async move {
        let mut watcher: Option<notify::RecommendedWatcher> = None;
        let mut ticker = tokio::time::interval(Duration::from_secs(1));
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
        loop {
            tokio::select! {
                _ = ticker.tick() => {
                    if watcher.is_none() {
                        watcher = watch_queue(&dir, hint_tx.clone());
                    }
                }
                Some(()) = hints.recv() => {}
            }
            while hints.try_recv().is_ok() {}
            let (scan_dir, root) = (dir.clone(), root.clone());
            let listing = tokio::task::spawn_blocking(move || {
                crate::approvals::sweep_if_due(&scan_dir);
                let (exists, mut pending) = crate::approvals::list_pending_requests(&scan_dir);
                crate::fleet::request_lane::attribute(&root, &mut pending);
                (exists, pending)
            })
            .await;
            let Ok(listing) = listing else { break };
            if listings.send(listing).is_err() {
                break;
            }
        }
    })
}

/// Watches the queue's `pending/` folder; events are only hints to rescan.
fn watch_queue(dir: &Path, hints: mpsc::UnboundedSender<()>) -> Option<notify::RecommendedWatcher> {
    use notify::Watcher;
    let pending = dir.join("pending");
    if !pending.is_dir() {
        return None;
    }
    let mut watcher = notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
        if crate::approvals::is_change_hint(&event) {
            let _ = hints.send(());
        }
    })
    .ok()?;
    watcher
        .watch(&pending, notify::RecursiveMode::NonRecursive)
        .ok()?;
    Some(watcher)
}

/// Writes a decision into the queue; a failure (an abandoned request is refused)
/// shows in the event pane. Whether the decision was written.
fn decide(
    dir: &Path,
    id: &str,
    decision: crate::approvals::Decision,
    errors: &mut Vec<(DateTime<Utc>, Level, String)>,
) -> bool {
    let what = match &decision {
        crate::approvals::Decision::Approve => "approved".to_string(),
        crate::approvals::Decision::Reject(reason) => format!("rejected: {reason}"),
    };
    let result = crate::approvals::Queue::open(dir)
        .map_err(|err| crate::approvals::DecideError::Io(err.to_string()))
        .and_then(|queue| queue.deciding_as("the control room").decide(id, decision));
    let decided = result.is_ok();
    let text = match result {
        Ok(()) => format!("request {id} {what}"),
        // First words first: the events pane may be narrow.
        Err(crate::approvals::DecideError::Abandoned(_)) => format!(
            "refused: request {id} is abandoned, the process that asked is gone (`clowder queue --prune` clears it)"
        ),
        Err(crate::approvals::DecideError::AlreadyDecided { earlier, .. }) => {
            format!("refused: request {id} was already {earlier}")
        }
        Err(err) => format!("cannot decide request {id}: {err}"),
    };
    let level = if decided { Level::Info } else { Level::Error };
    errors.push((Utc::now(), level, text));
    decided
}

/// Applies what [`live_output::LiveOutput::take`] decided.
fn on_tapped(
    tapped: live_output::Tapped,
    follower: &mut Option<crate::agent::follow::Follower>,
    messages: &mut Vec<Msg>,
) {
    match tapped {
        live_output::Tapped::Kept => {}
        live_output::Tapped::Forward(update) => messages.push(output_msg(update)),
        live_output::Tapped::Switch(replay) => {
            *follower = None;
            messages.push(output_msg(replay));
        }
    }
}

fn output_msg(update: FollowUpdate) -> Msg {
    Msg::Output {
        file: update.file,
        lines: update.lines,
        stats: Box::new(update.stats),
        reset: update.reset,
    }
}

async fn sleep_until_opt(deadline: Option<tokio::time::Instant>) {
    match deadline {
        Some(deadline) => tokio::time::sleep_until(deadline).await,
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn drawn_just_now() -> (Redraw, tokio::time::Instant) {
        let last = Instant::now();
        let redraw = Redraw {
            dirty: false,
            user: false,
            last: Some(last),
        };
        (redraw, tokio::time::Instant::from_std(last))
    }

    #[test]
    fn nothing_changed_draws_nothing() {
        let (redraw, _) = drawn_just_now();
        assert!(!redraw.pending());
        assert_eq!(redraw.due_at(), None);
        assert!(!redraw.due());
    }

    #[test]
    fn output_alone_waits_longer_than_a_key() {
        let (mut redraw, last) = drawn_just_now();
        redraw.changed(false);
        assert_eq!(redraw.due_at(), Some(last + OUTPUT_FRAME));
        redraw.changed(true);
        assert_eq!(redraw.due_at(), Some(last + FRAME));
        // Output after the key does not slow the key's frame down.
        redraw.changed(false);
        assert_eq!(redraw.due_at(), Some(last + FRAME));
    }

    /// The screen's events and requests show foreign text as the console
    /// (`clowder queue`, the headless log) prints it: one function escapes both.
    #[test]
    fn the_screen_and_the_console_escape_alike() {
        use ratatui::Terminal;
        use ratatui::backend::TestBackend;
        let texts = [
            (
                "controls",
                "bell\u{7} nul\u{0} tab\t del\u{7f} c1\u{85} end",
            ),
            (
                "ansi",
                "\u{1b}[31mred\u{1b}[0m \u{1b}]52;c;eA==\u{7} \u{9b}6n",
            ),
            ("wide", "wide 日本語 ｆｕｌｌ 🦀 end"),
            ("combining", "e\u{301}te a\u{308} n\u{303}"),
            ("invisible", "ok\u{202e}txt.exe zw\u{200b}j"),
        ];
        for (what, text) in texts {
            let console = crate::approvals::escape(text);
            assert_eq!(console, crate::escape::visible(text), "{what}");
            assert!(!console.chars().any(crate::escape::is_invisible), "{what}");
            let snapshot = Arc::new(app::lanes::placeholder("loop", Some(5)));
            let mut state = AppState::new(snapshot, true);
            let log = Msg::Log {
                at: Utc::now(),
                level: Level::Info,
                text: text.to_string(),
            };
            app::update(&mut state, log, Utc::now());
            let mut terminal = Terminal::new(TestBackend::new(200, 60)).expect("terminal");
            terminal
                .draw(|frame| view::draw(&state, frame, Utc::now()))
                .expect("draw");
            let screen = terminal.backend().to_string();
            assert!(
                screen.contains(&console),
                "{what}: {console:?} not in\n{screen}"
            );
        }
    }

    #[test]
    fn the_first_frame_is_due_at_once() {
        let redraw = Redraw::new();
        assert!(redraw.due());
    }

    #[test]
    fn a_decision_that_came_second_is_reported_as_refused() {
        use crate::approvals::{Decision, Queue, Request, RequestKind};
        let dir = tempfile::tempdir().expect("tempdir");
        let queue = Queue::open(dir.path())
            .expect("queue")
            .with_event_log(None)
            .deciding_as("clowder reject");
        let submitted = queue
            .submit(Request {
                id: String::new(),
                created: Utc::now(),
                kind: RequestKind::Ask,
                title: "Deploy?".into(),
                tool_name: None,
                tool_input: None,
                session_id: None,
                cwd: None,
                body: None,
                lane: None,
                abandoned: false,
            })
            .expect("submit");
        let id = submitted.request.id.clone();
        queue
            .decide(&id, Decision::Reject("not now".into()))
            .expect("the first decision");
        let mut notes = Vec::new();
        assert!(!decide(dir.path(), &id, Decision::Approve, &mut notes));
        let (_, level, text) = notes.last().expect("a note");
        assert_eq!(*level, Level::Error);
        assert!(
            text.starts_with(&format!(
                "refused: request {id} was already rejected by clowder reject (user "
            )) && text.ends_with(": not now"),
            "{text}"
        );
    }
}
