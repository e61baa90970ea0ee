//! The fleet host: runs every lane of `.clowder/fleet.json` in one process. It
//! owns what is process-wide — the signal handler, the subreaper (the reaper is
//! [`crate::supervisor::reaper`]), the cgroup tree, the session slots of
//! `[fleet] max_parallel` — and starts lanes added while it runs. Each lane is
//! the single loop's runtime with the lane's folder, files and environment.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use tokio::signal::unix::{SignalKind, signal};
use tokio::sync::{Semaphore, mpsc};

use super::LaneName;
use super::lanes::FINISHED_MARK;
use super::link::{HostMsg, HostRequest};
use super::plans::Driver;
use super::registry::{self, Lane, LaneKind, LaneState};
use super::room::RoomSide;
use super::serve::{WorkDone, settle};
use crate::approvals::commands::{APPROVALS_DIR_ENV, EVENT_LOG_ENV, LANE_ENV};
use crate::approvals::host_rules::{self, HostRules};
use crate::config::{Config, Usd};
use crate::console::{Console, Verbosity, say, summary_line};
use crate::protocol::{Command, Event, ExitReason};
use crate::supervisor::cgroup::{self, KillMethod};
use crate::supervisor::core::{Level, StopSignal};
use crate::supervisor::fleet_budget::{FleetBudget, SharedBudget};
use crate::supervisor::runtime::{LaneSetup, Outcome, Reporter, Runtime, RuntimeOptions};
use crate::supervisor::shared_limit::Shared;
use crate::supervisor::{leftovers, process};

/// How often the registry is read again for lanes added or resumed.
const REGISTRY_POLL: Duration = Duration::from_millis(500);

/// Whether the fleet in `root` has lanes (then `clowder` runs them); an
/// unreadable registry is an error, not a folder without lanes.
pub fn has_lanes(root: &Path) -> Result<bool, String> {
    Ok(!registry::load(root)?.lanes.is_empty())
}

/// Each lane's config (see [`lane_config`]), for the checks made before a start.
pub fn lane_configs(root: &Path, base: &Config) -> Result<Vec<(LaneName, Config)>, String> {
    let registry = registry::load(root)?;
    registry
        .lanes
        .iter()
        .map(|lane| Ok((lane.name.clone(), lane_config(root, base, lane)?)))
        .collect()
}

/// Runs the lanes of the fleet in `root` until every one has ended; returns the
/// exit code (0, or that of the first lane in lane order that did not end well).
/// `plans` shows the plans run here to the socket's clients, and takes their
/// merges and retries.
pub fn run_headless(
    root: PathBuf,
    config: Config,
    verbosity: Verbosity,
    plans: Option<super::plans::RoomDriver>,
) -> i32 {
    run_headless_with(root, config, verbosity, None, plans)
}

/// [`run_headless`] that goes on after its lanes have ended, serving and
/// starting lanes added or resumed, until a signal stops it.
pub fn run_staying(
    root: PathBuf,
    config: Config,
    verbosity: Verbosity,
    plans: Option<super::plans::RoomDriver>,
) -> i32 {
    let (watchers, viewer) = served(plans);
    let stay = Host::staying;
    run_with(root, config, verbosity, watchers, (None, viewer), stay)
}

/// [`run_headless`], kept alive until `driver` is done too.
pub fn run_headless_with(
    root: PathBuf,
    config: Config,
    verbosity: Verbosity,
    driver: Option<Driver>,
    plans: Option<super::plans::RoomDriver>,
) -> i32 {
    let (watchers, viewer) = served(plans);
    run(root, config, verbosity, watchers, driver, viewer)
}

/// The watchers of a host with no room on its terminal, and the plans'
/// side made to hear its clients' plan requests.
fn served(plans: Option<super::plans::RoomDriver>) -> (Watchers, Option<Driver>) {
    let (to_hub, from_host) = mpsc::unbounded_channel();
    let mut room = RoomSide::served(to_hub.clone());
    let viewer = plans.map(|make| room.plans_side(make, to_hub));
    let watchers = Watchers {
        room,
        from_host,
        local: None,
    };
    (watchers, viewer)
}

fn run(
    root: PathBuf,
    config: Config,
    verbosity: Verbosity,
    watchers: Watchers,
    driver: Option<Driver>,
    viewer: Option<Driver>,
) -> i32 {
    run_with(
        root,
        config,
        verbosity,
        watchers,
        (driver, viewer),
        |host| host,
    )
}

/// Runs the lanes of the fleet in `root` for the control room on another
/// thread: snapshots, log lines and events go to `to_ui`, and `requests` come
/// back. Returns once every lane has ended and the control room has closed
/// `requests`, with the exit code as [`run_headless`]'s (its summary printed).
pub fn run_for_room(
    root: PathBuf,
    config: Config,
    to_ui: mpsc::UnboundedSender<HostMsg>,
    requests: mpsc::UnboundedReceiver<HostRequest>,
    plan: Option<super::plans::RoomPlans>,
) -> i32 {
    use super::plans::RoomPlans;
    // What the host says goes through the hub, to the room and to the socket's clients.
    let (to_hub, from_host) = mpsc::unbounded_channel();
    let mut room = RoomSide::new(to_hub.clone(), requests);
    let (driver, viewer) = match plan {
        Some(RoomPlans::Drive(make)) => (Some(make), None),
        Some(RoomPlans::View(make)) => (None, Some(make)),
        None => (None, None),
    };
    let mut start = |make: super::plans::RoomDriver| room.plans_side(make, to_hub.clone());
    let driver = driver.map(&mut start);
    let viewer = viewer.map(&mut start);
    let watchers = Watchers {
        room,
        from_host,
        local: Some(to_ui),
    };
    run(root, config, Verbosity::Normal, watchers, driver, viewer)
}

/// Who hears the host: the control room on this terminal (`local`), if any,
/// and the clients of its socket, both through the hub that reads `from_host`.
struct Watchers {
    room: RoomSide,
    from_host: mpsc::UnboundedReceiver<HostMsg>,
    local: Option<mpsc::UnboundedSender<HostMsg>>,
}

fn run_with(
    root: PathBuf,
    config: Config,
    verbosity: Verbosity,
    watchers: Watchers,
    (driver, viewer): (Option<Driver>, Option<Driver>),
    shape: impl FnOnce(Host) -> Host,
) -> i32 {
    let Some(runtime) = crate::supervisor::current_thread_runtime() else {
        return 1;
    };
    let started = Instant::now();
    let local = tokio::task::LocalSet::new();
    let headless = watchers.local.is_none();
    let approvals_dir = root.join(&config.approvals.dir.0);
    let format = config.agent.format;
    let notified = config.ui.calls_out();
    // Headless (no room): a waiting request is said on the console.
    let _notices = (headless && verbosity != Verbosity::Quiet)
        .then(|| super::waiting_notice::start(&root, approvals_dir.clone()));
    // The host calls its human (`[ui] on_attention`, `notify_url`), whether a
    // room is attached or not; a headless host says on its console how it went.
    let say = match headless {
        true => super::attention::console_say(verbosity),
        false => super::attention::unsaid(),
    };
    let (from_host, attention) = super::attention::watch_host(
        &root,
        approvals_dir.clone(),
        &config.ui,
        watchers.from_host,
        say,
    );
    let mut host = Host::new(root.clone(), config, verbosity);
    host.room = Some(watchers.room);
    host.headless = headless;
    host.driver = driver;
    let mut host = shape(host);
    let budget = host.budget.clone();
    // Ends with the room's plan channel, or with the host.
    if let Some(viewer) = viewer {
        local.spawn_local(viewer);
    }
    let (remote_tx, remote_rx) = mpsc::unbounded_channel();
    host.remote = Some(remote_rx);
    let ended = local.block_on(&runtime, async {
        let options = super::serve::ServeOptions {
            root,
            approvals_dir,
            format,
            outputs: None,
            watched: Arc::clone(&host.watched),
            notified,
        };
        let serving = super::serve::start(options, from_host, watchers.local, remote_tx);
        let _serving = match serving {
            Ok(serving) => Some(serving),
            Err(why) => {
                host.say(
                    Level::Warn,
                    &format!("not served to `clowder attach`: {why}"),
                );
                None
            }
        };
        host.run().await
    });
    // Its tasks hold senders of the host's messages: the watcher ends once they are gone.
    drop(local);
    attention.finish();
    finish(ended, budget.as_ref(), started.elapsed().as_secs() as i64)
}

/// A lane's exit code: its reason's, but 1 for a lane that ran out of
/// iterations with nothing to show (see [`crate::protocol::Counters::none_succeeded`]),
/// which the lane listings call failed.
fn lane_exit_code(
    name: &LaneName,
    reason: &ExitReason,
    snapshot: &crate::protocol::Snapshot,
) -> i32 {
    let ending = crate::protocol::Ending::of(Some(reason), Some(snapshot));
    match reason.exit_code() {
        0 if ending == crate::protocol::Ending::Failed => {
            say(&format!(
                "lane={name} no session came to anything ({} sessions, {} productive, {} exited non-zero, {} error results): counted as failed, exit code 1",
                snapshot.counters.sessions,
                snapshot.counters.productive,
                snapshot.counters.failed_exits,
                snapshot.counters.error_results
            ));
            1
        }
        code => code,
    }
}

/// Prints one summary line per lane and the fleet's; returns the exit code.
fn finish(
    ended: Vec<(LaneName, Result<Outcome, String>)>,
    budget: Option<&SharedBudget>,
    secs: i64,
) -> i32 {
    let mut first_bad: Option<(LaneName, i32)> = None;
    for (name, outcome) in &ended {
        let code = match outcome {
            Ok(outcome) => {
                say(&format!(
                    "lane={name} {}",
                    summary_line(&outcome.reason, &outcome.snapshot, secs)
                ));
                lane_exit_code(name, &outcome.reason, &outcome.snapshot)
            }
            Err(err) => {
                say(&format!("lane={name} clowder: error: {err}; exit code 1"));
                1
            }
        };
        if code != 0 && first_bad.is_none() {
            first_bad = Some((name.clone(), code));
        }
    }
    if let Some(code) = budget.map(budget_code).filter(|code| *code != 0) {
        return code;
    }
    match first_bad {
        None => {
            say(&format!(
                "clowder: fleet stopped: {} lane(s) ended normally; exit code 0",
                ended.len()
            ));
            0
        }
        Some((name, code)) => {
            say(&format!(
                "clowder: fleet stopped: lane {name} did not end normally; exit code {code}"
            ));
            code
        }
    }
}

/// Exit 4 (a run budget reached), said, when the lanes together spent the fleet's budget.
fn budget_code(budget: &SharedBudget) -> i32 {
    let budget = budget
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if !budget.reached() {
        return 0;
    }
    let code = ExitReason::BudgetExceeded {
        budget: crate::protocol::Budget::MaxCostUsd,
        limit: budget.limit_usd(),
        value: budget.spent_usd(),
    }
    .exit_code();
    say(&format!(
        "clowder: the fleet's budget [guard] max_cost_usd = ${:.2} was spent (${:.4} over all lanes); exit code {code}",
        budget.limit_usd(),
        budget.spent_usd()
    ));
    code
}

/// A lane's log lines on the console, marked with its name.
struct LaneConsole {
    name: String,
    console: Console,
}

impl Reporter for LaneConsole {
    fn log(&mut self, wall: DateTime<Utc>, level: Level, message: &str) {
        let line = format!("lane={} {message}", self.name);
        self.console.log(wall, level, &line);
    }

    fn event(&mut self, wall: DateTime<Utc>, event: &Event) {
        self.console.event(wall, event);
    }

    fn agent_output(&mut self, bytes: &[u8]) {
        self.console.agent_output(bytes);
    }
}

/// A lane's reports to the console and to the hub alike.
struct Both {
    console: Option<LaneConsole>,
    hub: Option<Box<dyn Reporter>>,
}

impl Reporter for Both {
    fn log(&mut self, wall: DateTime<Utc>, level: Level, message: &str) {
        if let Some(console) = &mut self.console {
            console.log(wall, level, message);
        }
        if let Some(hub) = &mut self.hub {
            hub.log(wall, level, message);
        }
    }

    fn event(&mut self, wall: DateTime<Utc>, event: &Event) {
        if let Some(console) = &mut self.console {
            console.event(wall, event);
        }
        if let Some(hub) = &mut self.hub {
            hub.event(wall, event);
        }
    }

    fn agent_output(&mut self, bytes: &[u8]) {
        if let Some(console) = &mut self.console {
            console.agent_output(bytes);
        }
    }
}

struct Host {
    root: PathBuf,
    config: Config,
    verbosity: Verbosity,
    kill_method: Arc<KillMethod>,
    slots: Arc<Semaphore>,
    /// The lanes started in this run, with the senders of their signals.
    running: BTreeMap<LaneName, mpsc::UnboundedSender<StopSignal>>,
    /// Each started lane's command channel (pause, kill, stop from the control room).
    commands: BTreeMap<LaneName, mpsc::UnboundedSender<Command>>,
    /// Each started lane's resume count (`Lane::resumes`) when it started.
    resumes_at_start: BTreeMap<LaneName, u64>,
    /// The control room on the screen's thread, when there is one.
    room: Option<RoomSide>,
    ended_tx: mpsc::UnboundedSender<(LaneName, Result<Outcome, String>)>,
    ended_rx: mpsc::UnboundedReceiver<(LaneName, Result<Outcome, String>)>,
    ended: BTreeMap<LaneName, Result<Outcome, String>>,
    stopping: bool,
    /// `[guard] max_cost_usd` of the root config, for all lanes together.
    budget: Option<SharedBudget>,
    /// One shared rate limit per agent command.
    limits: BTreeMap<String, Shared>,
    driver: Option<Driver>,
    /// No control room on this terminal: lanes and the fleet speak on the console too.
    headless: bool,
    /// What the socket's clients ask.
    remote: Option<mpsc::UnboundedReceiver<super::serve::Remote>>,
    /// `--stay`: runs on with no lane running, until a signal.
    stay: bool,
    /// Whether a room or a client watches (set by the hub).
    watched: Arc<std::sync::atomic::AtomicBool>,
}

impl Host {
    fn new(root: PathBuf, config: Config, verbosity: Verbosity) -> Host {
        let slots = config
            .fleet
            .max_parallel
            .0
            .clamp(1, Semaphore::MAX_PERMITS as u64);
        let (ended_tx, ended_rx) = mpsc::unbounded_channel();
        let limit = config.guard.max_cost_usd.0;
        let budget = (limit > 0.0).then(|| Arc::new(Mutex::new(FleetBudget::new(limit))));
        Host {
            budget,
            root,
            config,
            verbosity,
            kill_method: Arc::new(cgroup::setup()),
            slots: Arc::new(Semaphore::new(slots as usize)),
            running: BTreeMap::new(),
            resumes_at_start: BTreeMap::new(),
            commands: BTreeMap::new(),
            room: None,
            ended_tx,
            ended_rx,
            ended: BTreeMap::new(),
            stopping: false,
            limits: BTreeMap::new(),
            driver: None,
            headless: true,
            remote: None,
            stay: false,
            watched: Arc::default(),
        }
    }

    async fn run(mut self) -> Vec<(LaneName, Result<Outcome, String>)> {
        process::become_subreaper();
        tokio::task::spawn_local(crate::supervisor::reaper::reap_as_orphans_die());
        match super::lanes::settle(&self.root, None) {
            Ok(done) => done.iter().for_each(|line| self.say(Level::Info, line)),
            Err(failure) => self.say(Level::Warn, failure.message()),
        }
        let mut sigint = signal(SignalKind::interrupt()).ok();
        let mut sigterm = signal(SignalKind::terminate()).ok();
        let mut sighup = process::hangup_signal();
        let order = self.start_ready();
        let mut order = order.unwrap_or_default();
        self.end_leftovers_of_idle_lanes(&order).await;
        if self.running.is_empty() && self.driver.is_none() {
            let said = if self.stay {
                "no lane to run yet: lanes added or resumed start here (--stay)"
            } else {
                "no lane to run: every lane is stopped, paused or finished"
            };
            self.say(Level::Info, said);
        }
        let mut poll = tokio::time::interval(REGISTRY_POLL);
        if let Some(room) = &self.room {
            room.start_facts(&self.root, Arc::clone(&self.watched));
        }
        while self.ended.len() < self.running.len()
            || self.room_open()
            || self.driver.is_some()
            || (self.stay && !self.stopping)
            || self.plan_runs()
        {
            self.tell_idle();
            tokio::select! {
                () = drive(&mut self.driver) => self.driver = None,
                Some((name, outcome)) = self.ended_rx.recv() => {
                    let again = self.lane_ended(&name, &outcome);
                    self.ended.insert(name, outcome);
                    // Before the loop's test, or a fleet of one would end here.
                    if again && !self.stopping && let Some(fresh) = self.start_ready() {
                        order = fresh;
                    }
                }
                Some(()) = recv(&mut sigint) => self.forward(StopSignal::Int),
                Some(()) = recv(&mut sigterm) => self.forward(StopSignal::Term),
                Some(()) = recv(&mut sighup) => self.forward(StopSignal::Hup),
                request = RoomSide::next_request(&mut self.room) => self.on_request(request, None),
                Some(remote) = recv_remote(&mut self.remote) => self.on_remote(remote),
                _ = poll.tick() => {
                    if !self.stopping && let Some(fresh) = self.start_ready() {
                        order = fresh;
                    }
                }
            }
        }
        self.kill_method.teardown();
        // In lane order (the registry's), then any lane no longer listed.
        let mut ended = std::mem::take(&mut self.ended);
        let mut result: Vec<_> = order
            .iter()
            .filter_map(|name| ended.remove_entry(name))
            .collect();
        result.extend(ended);
        result
    }

    fn staying(mut self) -> Host {
        self.stay = true;
        self
    }

    /// A lane that does not run now (stopped, paused, finished) may still have
    /// sessions a killed clowder left: they are ended like a running lane's.
    async fn end_leftovers_of_idle_lanes(&mut self, lanes: &[LaneName]) {
        let grace = self.config.watchdog.kill_grace_secs.0;
        let idle: Vec<&LaneName> = lanes
            .iter()
            .filter(|name| !self.running.contains_key(*name))
            .collect();
        for name in idle {
            let dir = self
                .config
                .lane_files(&self.root, name.as_str())
                .running_dir();
            let running = crate::store::running::Running::in_dir(dir);
            for warning in running.set_aside_unreadable() {
                self.say(Level::Warn, &format!("lane={name} {warning}"));
            }
            for ended in leftovers::end_abandoned(&running, grace).await {
                let record = &ended.record;
                if ended.group_killed == 0 && ended.escaped.is_empty() {
                    continue;
                }
                let message = format!(
                    "lane={name} {} `{}` of an earlier run (clowder PID {}) was left running: killed {} process(es) of its group {} and {} outside it",
                    record.kind,
                    record.what,
                    record.clowder_pid,
                    ended.group_killed,
                    record.pgid,
                    ended.escaped.len()
                );
                self.say(Level::Warn, &message);
            }
        }
    }

    /// Marks a lane that ended on its own as finished (see [`finished`]); whether
    /// it is to run again instead (resumed while it was ending).
    fn lane_ended(&self, name: &LaneName, outcome: &Result<Outcome, String>) -> bool {
        if let Some(room) = &self.room {
            room.lane_ended(name, outcome);
        }
        let by_signal = outcome
            .as_ref()
            .is_ok_and(|o| matches!(o.reason, ExitReason::Signal { .. }));
        if by_signal {
            return false;
        }
        if self.resumed_while_running(name) {
            // `lane stop` then `lane resume` before the run had ended: it runs again.
            return true;
        }
        let mark = super::lane_files_dir(&self.root, name).join(FINISHED_MARK);
        if let Err(err) = std::fs::write(&mark, b"") {
            let message = format!("lane={name} cannot write {}: {err}", mark.display());
            self.say(Level::Warn, &message);
        }
        false
    }

    /// Whether the lane was resumed after its run started (its resume count grew).
    fn resumed_while_running(&self, name: &LaneName) -> bool {
        let now = registry::load(&self.root)
            .ok()
            .and_then(|registry| registry.lane(name).map(|lane| lane.resumes));
        let at_start = self.resumes_at_start.get(name).copied().unwrap_or(0);
        now.is_some_and(|now| now > at_start)
    }

    fn say(&self, level: Level, message: &str) {
        if let Some(room) = &self.room {
            room.say(level, message);
        }
        if self.headless {
            Console::new(self.verbosity).log(Utc::now(), level, message);
        }
    }

    /// Whether a plan the plans' side started (a retry) still runs.
    fn plan_runs(&self) -> bool {
        !self.stopping
            && self
                .room
                .as_ref()
                .is_some_and(|room| room.plan_busy.load(std::sync::atomic::Ordering::Relaxed))
    }

    /// Whether the control room is still on screen (then the host keeps
    /// running, so that lanes added or resumed start).
    fn room_open(&self) -> bool {
        self.room.as_ref().is_some_and(RoomSide::open)
    }

    /// Tells the control room whether every lane has ended.
    fn tell_idle(&mut self) {
        let idle = self.ended.len() >= self.running.len();
        let signalled = self.stopping;
        if let Some(room) = self.room.as_mut() {
            room.tell_idle(idle, signalled);
        }
    }

    /// A request from the control room; `None`: it has closed. `done`,
    /// when given, hears how the work went.
    fn on_request(&mut self, request: Option<HostRequest>, done: Option<WorkDone>) {
        let Some(request) = request else {
            self.room_closed();
            return;
        };
        if matches!(request, HostRequest::Detached) {
            // Nobody asks anything more; nothing is stopped.
            if let Some(room) = self.room.as_mut() {
                room.close();
                room.plan = None;
            }
            return;
        }
        if let HostRequest::Tell { lane, text } = request {
            self.tell(lane, &text, done);
            return;
        }
        let Some(room) = &self.room else {
            return;
        };
        match request {
            HostRequest::Command { lane, command } => {
                let word = command_word(&command);
                let resume = command == Command::Resume;
                let sent = self
                    .commands
                    .get(&lane)
                    .filter(|_| !self.ended.contains_key(&lane))
                    .is_some_and(|sender| sender.send(command).is_ok());
                // A lane paused between sessions (`lane pause`) has no loop
                // to tell: it is made active, as `lane resume` does.
                if !sent && resume {
                    room.resume_lane(&self.root, lane, done);
                    return;
                }
                let said = match sent {
                    true => Ok(format!("lane {lane}: {word} sent")),
                    false => Err(format!("lane {lane} is not running: nothing to {word}")),
                };
                if let Err(why) = &said {
                    self.say(Level::Warn, why);
                }
                settle(done, said);
            }
            HostRequest::Diff(lane) => room.diff(&self.root, lane, done),
            HostRequest::Work(lane) => room.work(&self.root, lane, done),
            HostRequest::Remove(lane) => room.remove(&self.root, lane, done),
            request @ (HostRequest::MergeStep { .. } | HostRequest::RetryPlan { .. }) => {
                room.to_plan(request, done);
            }
            HostRequest::AddLane(request) => room.add_lane(&self.root, request, done),
            HostRequest::Detached | HostRequest::Tell { .. } => {}
            HostRequest::StopTask(lane) => room.stop_task(&self.root, lane, done),
            request @ (HostRequest::MergeLane(_)
            | HostRequest::PushLane(_)
            | HostRequest::RestartLane(_)) => {
                room.lane_work(&self.root, &self.config, request, done);
            }
        }
    }

    /// Nobody is looking: start nothing new, and stop what runs (a plan's
    /// driver too: `plan run` again goes on with it).
    fn room_closed(&mut self) {
        self.stopping = true;
        self.driver = None;
        if let Some(room) = self.room.as_mut() {
            room.close();
        }
        for (name, sender) in &self.commands {
            if !self.ended.contains_key(name) {
                let _ = sender.send(Command::StopNow);
            }
        }
    }

    /// Leaves a note for `lane`; once its runtime has decided whether the
    /// running session takes it now, `reply` is answered with which. The
    /// room hears it from the lane itself, or here when the lane is not running.
    fn tell(
        &self,
        lane: LaneName,
        text: &str,
        reply: Option<tokio::sync::oneshot::Sender<Result<String, String>>>,
    ) {
        let dir = super::lane_files_dir(&self.root, &lane);
        let note = match crate::store::notes::leave(&dir, text, Utc::now()) {
            Ok(note) => note,
            Err(err) => {
                let said = format!("lane={lane} no note left: {err}");
                self.say(Level::Error, &said);
                if let Some(reply) = reply {
                    let _ = reply.send(Err(format!("no note left for lane {lane}: {err}")));
                }
                return;
            }
        };
        if !self.commands.contains_key(&lane) {
            let verdict = crate::store::notes::not_running(super::note_answer::NO_LANE);
            let said = format!("lane={lane} note {}: {}", note.id, verdict.answer());
            self.say(Level::Info, &said);
            if let Some(reply) = reply {
                let _ = reply.send(Ok(format!("lane {lane}: {}", verdict.answer())));
            }
            return;
        }
        tokio::spawn(async move {
            let verdict = super::note_answer::verdict(&dir, &note.id).await;
            if let Some(reply) = reply {
                let _ = reply.send(Ok(format!("lane {lane}: {}", verdict.answer())));
            }
        });
    }

    /// A request from a client of the socket: as the room's, but a client
    /// leaving stops nothing. Who asked is said in the events.
    fn on_remote(&mut self, remote: super::serve::Remote) {
        let super::serve::Remote {
            request,
            reply,
            outcome,
            by,
        } = remote;
        if let HostRequest::Tell { lane, text } = request {
            // Whoever waits for the end hears the verdict; the other, that it was taken.
            match outcome {
                Some(outcome) => {
                    self.tell(lane, &text, Some(outcome));
                    settle(reply, Ok("sent to the host".to_string()));
                }
                None => self.tell(lane, &text, reply),
            }
            return;
        }
        let answer = match &request {
            HostRequest::Command { lane, command }
                if !self.commands.contains_key(lane) && *command != Command::Resume =>
            {
                Err(format!(
                    "lane {lane} is not running here: nothing to {}",
                    command_word(command)
                ))
            }
            HostRequest::Detached => Err("only the room that started the host detaches".into()),
            HostRequest::Work(_) if outcome.is_none() => {
                Err("`work` is answered only to a request with `re`".into())
            }
            _ => Ok("sent to the host".to_string()),
        };
        if answer.is_ok() {
            // Who asked is kept only for what was taken.
            if !by.is_empty() {
                self.say_asked(&request, &by);
            }
            self.on_request(Some(request), outcome);
        }
        if let Some(reply) = reply {
            let _ = reply.send(answer);
        }
    }

    /// `lane api: merge asked by web 127.0.0.1:50412`, in the lane's events
    /// (the room's too) as it is asked.
    fn say_asked(&self, request: &HostRequest, by: &str) {
        let by = crate::escape::one_line(by);
        let (lane, what) = match request {
            HostRequest::Command { lane, command } => (Some(lane), command_word(command)),
            HostRequest::MergeLane(lane) => (Some(lane), "merge"),
            HostRequest::PushLane(lane) => (Some(lane), "push"),
            HostRequest::RestartLane(lane) => (Some(lane), "run again"),
            HostRequest::Remove(lane) => (Some(lane), "remove"),
            HostRequest::StopTask(lane) => (Some(lane), "stop"),
            HostRequest::RetryPlan { plan } => {
                self.say(Level::Info, &format!("plan {plan}: retry asked by {by}"));
                return;
            }
            // It has no event log yet: the fleet's events say it.
            HostRequest::AddLane(new) => {
                let text = format!("new lane {} asked by {by}", new.name);
                self.say(Level::Info, &text);
                return;
            }
            HostRequest::MergeStep { plan, step } => {
                let text = format!("plan {plan}: merge of step {step} asked by {by}");
                self.say(Level::Info, &text);
                return;
            }
            // Reading asks nothing of the lane; a note says itself.
            _ => return,
        };
        if let Some(lane) = lane {
            self.record_asked(lane, what, &by);
        }
    }

    /// Writes `asked` into the lane's event log, as the lane's own events
    /// are, and tells the rooms.
    fn record_asked(&self, lane: &LaneName, action: &str, by: &str) {
        let event = Event::Asked {
            action: action.to_string(),
            by: by.to_string(),
        };
        let at = Utc::now();
        let log = self.config.lane_files(&self.root, lane.as_str()).event_log;
        if let Some(path) = log {
            let appended = crate::store::events::EventLog::open(&path)
                .and_then(|mut log| log.append(at, &event));
            if let Err(err) = appended {
                let said = format!(
                    "lane={lane} {action} asked by {by}: not recorded in {}: {err}",
                    path.display()
                );
                self.say(Level::Warn, &said);
            }
        }
        if let Some(room) = &self.room {
            room.event(lane, at, event);
        }
    }

    fn forward(&mut self, stop: StopSignal) {
        self.stopping = true;
        self.driver = None;
        for sender in self.running.values() {
            let _ = sender.send(stop);
        }
    }

    /// Reads the registry and starts every lane that should run and does not;
    /// returns the lane order, or `None` if the registry cannot be read.
    fn start_ready(&mut self) -> Option<Vec<LaneName>> {
        let registry = match registry::load(&self.root) {
            Ok(registry) => registry,
            Err(err) => {
                self.say(Level::Error, &err);
                return None;
            }
        };
        if let Some(room) = self.room.as_mut() {
            let running: Vec<&LaneName> = self
                .running
                .keys()
                .filter(|name| !self.ended.contains_key(*name))
                .collect();
            room.lanes(&self.root, &registry, &running);
        }
        for lane in &registry.lanes {
            if lane.state != LaneState::Active {
                continue;
            }
            // Running, or ended and not resumed since: nothing to start.
            let ended = self.ended.contains_key(&lane.name);
            if self.running.contains_key(&lane.name) && !ended {
                continue;
            }
            // Looked at last: a running lane costs no look at its files here.
            if (ended && !self.resumed(&lane.name)) || finished(&self.root, &lane.name) {
                continue;
            }
            self.ended.remove(&lane.name);
            self.start(lane);
        }
        Some(
            registry
                .lanes
                .iter()
                .map(|lane| lane.name.clone())
                .collect(),
        )
    }

    /// A lane that ended in this run starts again only once resumed (which
    /// removes its finished mark); one ended by a signal is not.
    fn resumed(&self, name: &LaneName) -> bool {
        !self.stopping
            && self
                .ended
                .get(name)
                .is_some_and(|outcome| !matches!(outcome, Ok(o) if matches!(o.reason, ExitReason::Signal { .. })))
    }

    fn start(&mut self, lane: &Lane) {
        // Held by `lane rm` (or the lane's own run elsewhere): not now. And
        // once held, the lane must still be registered: an rm may just have ended.
        let lane_lock = match super::lanes::take_lane_lock(&self.root, &lane.name) {
            Ok(lock) => Ok(lock),
            Err(super::lanes::Failure::Failed(err)) => Err(err),
            Err(_) => return,
        };
        let still_active = registry::load(&self.root)
            .ok()
            .and_then(|registry| registry.lane(&lane.name).map(|l| l.state))
            == Some(LaneState::Active);
        if !still_active {
            return;
        }
        self.resumes_at_start
            .insert(lane.name.clone(), lane.resumes);
        let (signals_tx, signals_rx) = mpsc::unbounded_channel();
        self.running.insert(lane.name.clone(), signals_tx);
        // Headless, the lane takes no commands but its request files.
        let (commands_tx, commands_rx) = mpsc::unbounded_channel();
        self.commands.insert(lane.name.clone(), commands_tx);
        let name = lane.name.clone();
        let ended = self.ended_tx.clone();
        if lane.kind == LaneKind::WatchTask {
            let config = lane_config(&self.root, &self.config, lane);
            let reporter = self.reporter(&lane.name);
            let (snapshots, watch) =
                super::task_lane::watch(&self.root, lane, config, signals_rx, reporter);
            if let Some(room) = &self.room {
                let files_dir = super::lane_files_dir(&self.root, &lane.name);
                room.forward_snapshots(lane.name.clone(), files_dir, snapshots);
            }
            let commands =
                super::task_lane::take_commands(self.root.clone(), name.clone(), commands_rx);
            tokio::task::spawn_local(commands);
            tokio::task::spawn_local(async move {
                let outcome = watch.await;
                drop(lane_lock);
                ended.send((name, outcome))
            });
            return;
        }
        let prepared = lane_lock.and_then(|lock| Ok((lock, self.prepare(lane, signals_rx)?)));
        tokio::task::spawn_local(async move {
            let outcome = match prepared {
                Ok((lock, runtime)) => {
                    let outcome = runtime.run(commands_rx).await;
                    drop(lock);
                    Ok(outcome)
                }
                Err(err) => Err(err),
            };
            let _ = ended.send((name, outcome));
        });
    }

    /// Where a lane's log lines and events go: the hub, and the console when headless.
    fn reporter(&self, lane: &LaneName) -> Box<dyn Reporter> {
        let console = self.headless.then(|| LaneConsole {
            name: lane.to_string(),
            console: Console::new(self.verbosity),
        });
        let hub = self.room.as_ref().map(|room| room.reporter(lane));
        Box::new(Both { console, hub })
    }

    /// The limit shared by the lanes that run `config`'s agent command, with
    /// `[fleet] shared_rate_limit`.
    fn shared_limit(&mut self, config: &Config) -> Option<Shared> {
        if !self.config.fleet.shared_rate_limit {
            return None;
        }
        let shared = self
            .limits
            .entry(config.agent.command.0.clone())
            .or_default();
        Some(Arc::clone(shared))
    }

    fn prepare(
        &mut self,
        lane: &Lane,
        signals: mpsc::UnboundedReceiver<StopSignal>,
    ) -> Result<Runtime, String> {
        let name = lane.name.as_str().to_string();
        let config = lane_config(&self.root, &self.config, lane)?;
        let (activity_file, on_stale) = super::task_lane::configure(&self.root, lane, &config)?;
        let files_dir = super::lane_files_dir(&self.root, &lane.name);
        std::fs::create_dir_all(&files_dir)
            .map_err(|err| format!("cannot create {}: {err}", files_dir.display()))?;
        let working_dir = self.root.join(&lane.dir);
        if !working_dir.is_dir() {
            return Err(format!(
                "the lane's folder {} is missing",
                working_dir.display()
            ));
        }
        let approvals = config.approvals.dir.0.display().to_string();
        let mut env = vec![
            (LANE_ENV.into(), name.clone()),
            (APPROVALS_DIR_ENV.into(), approvals),
        ];
        // A gate in the worktree logs to the lane's own event log, not into the worktree.
        if let Some(events) = config.lane_files(&self.root, &name).event_log {
            env.push((EVENT_LOG_ENV.into(), events.display().to_string()));
        }
        // The gate judges by the host's rules, never by the worktree's harness.toml.
        let rules = HostRules {
            lane: name.clone(),
            approvals: config.approvals.clone(),
        };
        env.extend(host_rules::write(&files_dir, &rules)?);
        if let Some(note) = host_rules::differs_in(&working_dir, &self.config.approvals) {
            self.say(Level::Warn, &format!("lane={name} {note}"));
        }
        let setup = LaneSetup {
            name: name.clone(),
            gate_project: self.root.clone(),
            files_dir,
            env,
            signals: Some(signals),
            slots: Some(Arc::clone(&self.slots)),
            kill_method: Arc::new(self.kill_method.for_lane(&name)),
            shared_limit: self.shared_limit(&config),
            budget: self.budget.clone(),
            activity_file,
            on_stale,
        };
        let options = RuntimeOptions {
            working_dir,
            verbose: self.verbosity == Verbosity::Verbose,
        };
        let files_dir = setup.files_dir.clone();
        let reporter = self.reporter(&lane.name);
        let (runtime, snapshots) = Runtime::with_lane(config, options, Some(setup), reporter)?;
        if let Some(room) = &self.room {
            room.forward_snapshots(lane.name.clone(), files_dir, snapshots);
        }
        Ok(runtime)
    }
}

/// The root config with the lane's options on top; the paths that point into
/// the fleet's folder (prompt, approval queue) made absolute, since the agent
/// runs in the lane's folder.
fn lane_config(root: &Path, base: &Config, lane: &Lane) -> Result<Config, String> {
    let mut config = base.clone();
    config
        .apply(&lane.overrides())
        .map_err(|err| format!("lane {}: {err}", lane.name))?;
    // The root's budget is the whole fleet's (see `FleetBudget`); a lane has its own only with --max-cost.
    config.guard.max_cost_usd = Usd(lane.max_cost_usd.unwrap_or(0.0));
    config.session.prompt_file.0 = root.join(&config.session.prompt_file.0);
    config.approvals.dir.0 = root.join(&config.approvals.dir.0);
    super::task_lane::adjust_config(root, lane, &mut config)?;
    Ok(config)
}

/// How a log line names a command that found no running lane.
fn command_word(command: &Command) -> &'static str {
    match command {
        Command::Pause => "pause",
        Command::Resume => "resume",
        Command::KillSession => "kill",
        Command::StopAfterCurrent | Command::TerminalClosed => "stop",
        Command::StopNow => "stop now",
    }
}

/// Whether the lane's last run ended on its own (not by a signal or a kill): a
/// finished lane is not started again until it is resumed.
fn finished(root: &Path, name: &LaneName) -> bool {
    super::lane_files_dir(root, name)
        .join(FINISHED_MARK)
        .exists()
}

async fn drive(driver: &mut Option<Driver>) {
    match driver {
        Some(driver) => driver.await,
        None => std::future::pending().await,
    }
}

async fn recv_remote(
    remote: &mut Option<mpsc::UnboundedReceiver<super::serve::Remote>>,
) -> Option<super::serve::Remote> {
    match remote {
        Some(remote) => remote.recv().await,
        None => std::future::pending().await,
    }
}

async fn recv(stream: &mut Option<tokio::signal::unix::Signal>) -> Option<()> {
    match stream {
        Some(stream) => stream.recv().await,
        None => std::future::pending().await,
    }
}
