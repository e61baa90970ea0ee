//! Task lanes: a lane over a task directory (task.json, state.json,
//! heartbeat.json, actions.jsonl). `--task DIR` runs `clowder worker DIR` as the
//! lane's agent, its heartbeat being the watchdog; `--watch-task DIR` follows a
//! worker someone else runs, with no process of ours: it renders the task's
//! actions into the lane's output file, writes the lane's status file, raises a
//! dead heartbeat, and never kills anything. Both stop a task the one way the
//! worker knows: `"status": "stopped"` in state.json.

use std::fs::File;
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use tokio::sync::{mpsc, watch};

use super::lanes::{Failure, LaneRow, STOP_NOW_REQUEST};
use super::registry::{self, Lane, LaneKind, LaneState};
use super::{LaneName, lane_files_dir};
use crate::config::{Config, NonEmptyPath, NonEmptyString, PositiveCount};
use crate::protocol::{Event, ExitReason, LoopState, Snapshot};
use crate::store::events::EventLog;
use crate::supervisor::core::{Level, StopSignal};
use crate::supervisor::runtime::{Outcome, Reporter};
use crate::worker::show;
use crate::worker::task::{self, ActionRecord, Status, StopAsked};

/// The watcher's rendering of the task's actions, in the lane's files folder.
pub const WATCH_OUTPUT_FILE: &str = "task-actions.log";
/// The `[worker]` table a `--task` lane's worker reads, in the lane's files folder.
const WORKER_CONFIG_FILE: &str = "worker.toml";
/// Iterations of actions.jsonl shown when a watch begins.
const WATCH_BACKLOG: usize = 20;
/// Most bytes of actions.jsonl read per look, so that one look stays short.
const WATCH_READ_CAP: u64 = 1024 * 1024;

/// The task directory of a task lane (its `dir`).
pub fn task_dir(root: &Path, lane: &Lane) -> PathBuf {
    root.join(&lane.dir)
}

/// Registers a `--task` or `--watch-task` lane over the task directory `dir`,
/// which must hold a readable task.json and be no other lane's.
pub fn add(root: &Path, name: &LaneName, kind: LaneKind, dir: &Path) -> Result<Lane, Failure> {
    let flag = if kind == LaneKind::Task {
        "--task"
    } else {
        "--watch-task"
    };
    let bad = |what: String| Failure::Usage(format!("{flag} {}: {what}", dir.display()));
    let full = root
        .join(dir)
        .canonicalize()
        .map_err(|err| bad(format!("cannot use this folder: {err}")))?;
    task::read_task(&full).map_err(|err| bad(format!("not a task directory: {err}")))?;
    registry::update(root, |registry| {
        if registry.lane(name).is_some() {
            return Err(Failure::Usage(format!(
                "lane {name} already exists (see `clowder lanes`)"
            )));
        }
        if let Some(other) = registry
            .lanes
            .iter()
            .find(|lane| root.join(&lane.dir).canonicalize().ok().as_ref() == Some(&full))
        {
            return Err(bad(format!(
                "lane {} already works in that folder",
                other.name
            )));
        }
        super::lanes::ignore_state_dir(root)?;
        let files = lane_files_dir(root, name);
        std::fs::create_dir_all(&files)
            .map_err(|err| format!("cannot create {}: {err}", files.display()))?;
        let lane = Lane {
            name: name.clone(),
            kind,
            dir: full.clone(),
            branch: None,
            base: None,
            base_commit: None,
            prompt_file: None,
            max_iterations: None,
            max_cost_usd: None,
            state: LaneState::Active,
            created: Utc::now(),
            resumes: 0,
        };
        registry.lanes.push(lane.clone());
        Ok(lane)
    })
}

/// Asks the task's worker to stop: `"status": "stopped"` in state.json, written
/// atomically and keeping its other fields (as `clowder task stop`). The worker
/// ends at its next check, and so does the lane. Returns what was done.
pub fn request_stop(root: &Path, lane: &Lane) -> Result<String, String> {
    let dir = task_dir(root, lane);
    let reason = format!("stopped by clowder lane stop {}", lane.name);
    match task::request_stop(&dir, &reason).map_err(|err| err.to_string())? {
        StopAsked::Asked => Ok(format!(
            "wrote \"status\": \"stopped\" into {}",
            dir.join(task::STATE_FILE).display()
        )),
        StopAsked::AlreadyEnded(status) => Ok(format!("its task is already {}", status.as_str())),
        StopAsked::BeforeStart => Ok(format!(
            "its task had not started: {} now says stopped, so it does not start (`clowder task resume {}` undoes it)",
            task::STATE_FILE,
            dir.display()
        )),
    }
}

/// What runs a hook when the watchdog finds a session stale.
pub type StaleHook = Box<dyn FnMut(f64) + Send>;

/// A task lane's config: a `--task` lane runs `clowder worker DIR` (this
/// binary) in the task directory, one worker run per lane run (the worker
/// continues from state.json); a `--watch-task` lane runs nothing. The prompt
/// file is task.json: the worker builds its own context. Other lanes: unchanged.
pub(crate) fn adjust_config(root: &Path, lane: &Lane, config: &mut Config) -> Result<(), String> {
    if !lane.kind.is_task() {
        return Ok(());
    }
    let dir = task_dir(root, lane);
    task::read_task(&dir).map_err(|err| format!("not a task directory: {err}"))?;
    let exe = std::env::current_exe()
        .map_err(|err| format!("cannot find the clowder program to run the worker: {err}"))?;
    config.agent.command = NonEmptyString(exe.display().to_string());
    config.agent.args = vec![
        "worker".to_string(),
        dir.display().to_string(),
        "--config".to_string(),
        worker_config_path(root, lane).display().to_string(),
    ];
    config.agent.format = crate::agent::stream::AgentFormat::Text;
    config.session.max_iterations = PositiveCount(1);
    config.session.prompt_file = NonEmptyPath(dir.join(task::TASK_FILE));
    config.prompt = crate::config::PromptConfig {
        continuation: String::new(),
        handoff_file: PathBuf::new(),
        ..Default::default()
    };
    Ok(())
}

fn worker_config_path(root: &Path, lane: &Lane) -> PathBuf {
    lane_files_dir(root, &lane.name).join(WORKER_CONFIG_FILE)
}

/// For a `--task` lane about to run (its config from [`adjust_config`]): writes
/// the `[worker]` table its worker reads, and returns the heartbeat for the
/// watchdog and what to do when it is stale: ask the worker to stop, and leave
/// STOP so that the lane does not start it again. Other lanes: nothing.
pub(crate) fn configure(
    root: &Path,
    lane: &Lane,
    config: &Config,
) -> Result<(Option<PathBuf>, Option<StaleHook>), String> {
    if lane.kind != LaneKind::Task {
        return Ok((None, None));
    }
    let dir = task_dir(root, lane);
    write_worker_config(&worker_config_path(root, lane), config)?;
    let stop_file = config.lane_files(root, lane.name.as_str()).stop;
    let heartbeat = dir.join(task::HEARTBEAT_FILE);
    let on_stale: StaleHook = Box::new(move |idle_secs: f64| {
        let reason = format!("heartbeat stale {idle_secs:.0}s: stopped by the lane's watchdog");
        if let Err(err) = task::request_stop(&dir, &reason) {
            tracing::warn!("cannot ask the worker to stop: {err}");
        }
        if let Err(err) = std::fs::write(&stop_file, b"") {
            tracing::warn!("cannot write {}: {err}", stop_file.display());
        }
    });
    Ok((Some(heartbeat), Some(on_stale)))
}

/// The fleet's `[worker]` table, for the worker to read whatever config file
/// the fleet was started with.
fn write_worker_config(path: &Path, config: &Config) -> Result<(), String> {
    #[derive(serde::Serialize)]
    struct Only<'a> {
        worker: &'a crate::config::WorkerConfig,
    }
    let text = toml::to_string(&Only {
        worker: &config.worker,
    })
    .map_err(|err| format!("cannot encode [worker] for {}: {err}", path.display()))?;
    crate::store::write_atomically(path, text.as_bytes())
        .map_err(|err| format!("cannot write {}: {err}", path.display()))
}

/// The task's state, iteration and heartbeat age laid over a `clowder lanes` row.
pub fn fill_row(root: &Path, lane: &Lane, row: &mut LaneRow, now: DateTime<Utc>) {
    if !lane.kind.is_task() {
        return;
    }
    let dir = task_dir(root, lane);
    if let Ok(task) = task::read_task(&dir) {
        row.max_iterations = Some(task.constraints.max_iterations);
    }
    match task::read_state(&dir) {
        Ok(Some(state)) => {
            row.iteration = Some(state.iteration);
            row.task_status = Some(state.status.as_str().to_string());
        }
        Ok(None) => row.iteration = Some(0),
        Err(err) => row.problems.push(err.to_string()),
    }
    row.idle_secs = task::read_heartbeat(&dir)
        .filter(|_| row.running)
        .map(|beat| (now - beat.timestamp).num_seconds().max(0));
}

/// ` task=running iteration=3/10 heartbeat=2s` for `clowder --status`.
pub fn status_note(root: &Path, lane: &Lane, now: DateTime<Utc>) -> String {
    if !lane.kind.is_task() {
        return String::new();
    }
    let dir = task_dir(root, lane);
    let max = task::read_task(&dir).map_or_else(
        |_| "?".to_string(),
        |t| t.constraints.max_iterations.to_string(),
    );
    let (status, iteration) = match task::read_state(&dir) {
        Ok(Some(state)) => (state.status.as_str().to_string(), state.iteration),
        Ok(None) => ("not_started".to_string(), 0),
        Err(_) => ("unreadable".to_string(), 0),
    };
    let beat = task::read_heartbeat(&dir).map_or_else(
        || "-".to_string(),
        |beat| crate::fmt::duration((now - beat.timestamp).num_seconds().max(0)),
    );
    format!(" task={status} task_iteration={iteration}/{max} heartbeat={beat}")
}

/// A watch-task lane's commands from the control room: a stop (after the
/// session, or now: there is no session of ours) leaves the lane's stop-now
/// request, which ends the watch, asking a running task to stop first. Pause
/// and kill do not apply (the control room says so).
pub(crate) async fn take_commands(
    root: PathBuf,
    name: LaneName,
    mut commands: mpsc::UnboundedReceiver<crate::protocol::Command>,
) {
    use crate::protocol::Command;
    let request = lane_files_dir(&root, &name).join(STOP_NOW_REQUEST);
    while let Some(command) = commands.recv().await {
        if matches!(
            command,
            Command::StopNow | Command::TerminalClosed | Command::StopAfterCurrent
        ) && let Err(err) = std::fs::write(&request, b"")
        {
            tracing::warn!("lane={name} cannot write {}: {err}", request.display());
        }
    }
}

/// Follows the task of a `--watch-task` lane until the task ends (or the fleet
/// stops); `config` is the lane's (its watchdog limit and file names). Returns
/// the lane's snapshots, as a runtime's, and the watch to run.
pub(crate) fn watch(
    root: &Path,
    lane: &Lane,
    config: Result<Config, String>,
    signals: mpsc::UnboundedReceiver<StopSignal>,
    reporter: Box<dyn Reporter>,
) -> (
    watch::Receiver<Arc<Snapshot>>,
    impl std::future::Future<Output = Result<Outcome, String>> + 'static,
) {
    let watcher = config.and_then(|config| Watcher::new(root, lane, &config, reporter));
    let snapshots = match &watcher {
        Ok(watcher) => watcher.snapshots.subscribe(),
        Err(_) => watch::channel(Arc::new(placeholder())).1,
    };
    (snapshots, async move { Ok(watcher?.run(signals).await) })
}

struct Watcher {
    dir: PathBuf,
    files: PathBuf,
    output_path: PathBuf,
    output: File,
    status_path: PathBuf,
    events: Option<EventLog>,
    stop_file: PathBuf,
    stale: Duration,
    poll: Duration,
    /// How far actions.jsonl was read.
    offset: u64,
    /// The heartbeat was found stale and said so; cleared when it beats again.
    stale_said: bool,
    /// The iteration whose LLM call was last shown.
    call_shown: Option<u64>,
    /// The last note of a worker waiting for a busy LLM shown, so each is shown once.
    busy_shown: Option<String>,
    /// state.json was asked to say stopped (a STOP or stop-now request).
    stop_asked: bool,
    snapshot: Snapshot,
    snapshots: watch::Sender<Arc<Snapshot>>,
    reporter: Box<dyn Reporter>,
}

impl Watcher {
    fn new(
        root: &Path,
        lane: &Lane,
        config: &Config,
        reporter: Box<dyn Reporter>,
    ) -> Result<Watcher, String> {
        let dir = task_dir(root, lane);
        let task = task::read_task(&dir).map_err(|err| format!("not a task directory: {err}"))?;
        let files = lane_files_dir(root, &lane.name);
        std::fs::create_dir_all(&files)
            .map_err(|err| format!("cannot create {}: {err}", files.display()))?;
        let output_path = files.join(WATCH_OUTPUT_FILE);
        let output = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&output_path)
            .map_err(|err| format!("cannot open {}: {err}", output_path.display()))?;
        let places = config.lane_files(root, lane.name.as_str());
        let events =
            match &places.event_log {
                Some(path) => Some(EventLog::open(path).map_err(|err| {
                    format!("cannot open the event log {}: {err}", path.display())
                })?),
                None => None,
            };
        let mut snapshot = placeholder();
        snapshot.agent_command = format!("watch-task {}", dir.display());
        snapshot.stale_timeout_secs = config.stale_timeout().as_secs_f64();
        snapshot.max_iterations = task.constraints.max_iterations;
        snapshot.output_file = Some(output_path.clone());
        let (snapshots, _) = watch::channel(Arc::new(snapshot.clone()));
        Ok(Watcher {
            stop_file: places.stop,
            status_path: places.status,
            stale: config.stale_timeout(),
            poll: config
                .watchdog
                .check_interval_secs
                .0
                .clamp(Duration::from_millis(100), Duration::from_secs(2)),
            dir,
            files,
            output_path,
            output,
            events,
            offset: 0,
            stale_said: false,
            call_shown: None,
            busy_shown: None,
            stop_asked: false,
            snapshot,
            snapshots,
            reporter,
        })
    }

    async fn run(mut self, mut signals: mpsc::UnboundedReceiver<StopSignal>) -> Outcome {
        // A request left for a watch that ended meanwhile is not for this one.
        let _ = std::fs::remove_file(self.files.join(STOP_NOW_REQUEST));
        self.say(
            Level::Info,
            &format!("watching the task in {}", self.dir.display()),
        );
        self.show_backlog();
        let mut ticker = tokio::time::interval(self.poll);
        let reason = loop {
            tokio::select! {
                Some(stop) = signals.recv() => break ExitReason::Signal {
                    signal: stop.name().to_string(),
                    forced: false,
                },
                _ = ticker.tick() => {
                    if let Some(reason) = self.look() {
                        break reason;
                    }
                }
            }
        };
        self.end(reason)
    }

    /// One look at the task's files; the reason to end, once the task ended.
    fn look(&mut self) -> Option<ExitReason> {
        self.follow_actions();
        let now = Utc::now();
        let state = match task::read_state(&self.dir) {
            Ok(state) => state,
            Err(err) => {
                // The worker says so too (it leaves a corrupt state.json as it is).
                self.snapshot.state = LoopState::Held;
                self.snapshot.held_reason = Some(err.to_string());
                self.write_status(now);
                return None;
            }
        };
        let status = state.as_ref().map(|s| s.status);
        if let Some(state) = &state {
            self.snapshot.iteration = state.iteration;
            self.snapshot.session_start = state.started_at;
        }
        if let Some(reason) = self.stop_requests(status) {
            return Some(reason);
        }
        if let Some(state) = &state {
            match state.status {
                Status::Running => {}
                Status::Completed => return Some(ExitReason::MaxIterations),
                Status::Stopped => return Some(ExitReason::UserStop),
                Status::Failed => {
                    let why = state.termination_reason.as_deref().unwrap_or("failed");
                    return Some(ExitReason::Fatal {
                        message: format!("the task failed: {why}"),
                    });
                }
            }
        }
        self.check_heartbeat(now, status.is_some());
        self.write_status(now);
        None
    }

    /// STOP (or stop-now) in the lane's folder: the task is asked to stop once;
    /// a task that does not run ends the watch at once.
    fn stop_requests(&mut self, status: Option<Status>) -> Option<ExitReason> {
        let now_asked = self.files.join(STOP_NOW_REQUEST).exists();
        if !now_asked && !self.stop_file.exists() {
            return None;
        }
        if status != Some(Status::Running) {
            let _ = std::fs::remove_file(self.files.join(STOP_NOW_REQUEST));
            return Some(ExitReason::StopFile);
        }
        if !self.stop_asked {
            self.stop_asked = true;
            self.snapshot.stop_pending = true;
            let reason = "stopped by the lane's STOP request";
            match task::request_stop(&self.dir, reason) {
                Ok(_) => self.say(Level::Info, "asked the task's worker to stop (state.json)"),
                Err(err) => self.say(
                    Level::Error,
                    &format!("cannot ask the worker to stop: {err}"),
                ),
            }
        }
        None
    }

    /// Liveness from heartbeat.json: its age against the watchdog's limit. A
    /// stale heartbeat holds the lane for attention; nothing is killed.
    fn check_heartbeat(&mut self, now: DateTime<Utc>, started: bool) {
        let beat = task::read_heartbeat(&self.dir);
        let age = beat
            .as_ref()
            .map(|beat| (now - beat.timestamp).to_std().unwrap_or(Duration::ZERO));
        self.snapshot.last_output_growth = beat.as_ref().map(|beat| beat.timestamp);
        if let Some(beat) = beat.as_ref().filter(|b| b.status == "calling_llm")
            && self.call_shown.replace(beat.iteration) != Some(beat.iteration)
        {
            self.write_lines(&[format!("#{} calling the LLM", beat.iteration)]);
        }
        if let Some(beat) = beat.as_ref().filter(|b| b.status == "llm_busy")
            && let Some(note) = &beat.note
            && self.busy_shown.as_ref() != Some(note)
        {
            self.busy_shown = Some(note.clone());
            let line = format!("#{} {}", beat.iteration, crate::escape::visible(note));
            self.write_lines(&[line]);
        }
        match age {
            Some(age) if age >= self.stale => {
                let secs = age.as_secs();
                let reason = format!("heartbeat stale {secs}s: its worker looks dead (not killed)");
                self.snapshot.state = LoopState::Held;
                self.snapshot.held_reason = Some(reason.clone());
                if !self.stale_said {
                    self.stale_said = true;
                    self.say(Level::Warn, &reason);
                    self.emit(&Event::WatchdogStale {
                        iteration: self.snapshot.iteration,
                        global: 0,
                        idle_secs: age.as_secs_f64().round(),
                        output_bytes: self.snapshot.output_bytes,
                        agent_retrying: None,
                        heartbeat: true,
                    });
                }
            }
            Some(_) => {
                if self.stale_said {
                    self.stale_said = false;
                    self.say(Level::Info, "the heartbeat beats again");
                }
                self.snapshot.state = LoopState::SessionRunning;
                self.snapshot.held_reason = None;
            }
            None if started => {
                self.snapshot.state = LoopState::Held;
                self.snapshot.held_reason = Some("no heartbeat.json".to_string());
            }
            None => self.snapshot.state = LoopState::Idle,
        }
    }

    /// The last iterations the task ran before the watch began.
    fn show_backlog(&mut self) {
        let (records, end) = read_records(&self.dir, 0, u64::MAX);
        self.offset = end;
        let skip = records.len().saturating_sub(WATCH_BACKLOG);
        if skip > 0 {
            self.write_lines(&[format!("… {skip} earlier iteration(s) in actions.jsonl")]);
        }
        for record in &records[skip..] {
            self.write_lines(&show::record_lines(record));
        }
    }

    fn follow_actions(&mut self) {
        let len = std::fs::metadata(self.dir.join(task::ACTIONS_FILE)).map_or(0, |m| m.len());
        if len < self.offset {
            // Replaced or cut: read it from the start again.
            self.write_lines(&["… actions.jsonl was replaced; reading it again".to_string()]);
            self.offset = 0;
        }
        let (records, end) = read_records(&self.dir, self.offset, WATCH_READ_CAP);
        self.offset = end;
        for record in &records {
            self.write_lines(&show::record_lines(record));
        }
    }

    fn write_lines(&mut self, lines: &[String]) {
        let mut text = String::new();
        for line in lines {
            text.push_str(line);
            text.push('\n');
        }
        if let Err(err) = self.output.write_all(text.as_bytes()) {
            let message = format!("cannot write {}: {err}", self.output_path.display());
            self.say(Level::Error, &message);
        }
        self.snapshot.output_bytes = std::fs::metadata(&self.output_path).map_or(0, |m| m.len());
    }

    fn write_status(&mut self, now: DateTime<Utc>) {
        self.snapshot.last_update = now;
        self.snapshots.send_replace(Arc::new(self.snapshot.clone()));
        if let Err(err) = crate::store::status::write(&self.status_path, &self.snapshot) {
            let message = format!("cannot write {}: {err}", self.status_path.display());
            self.say(Level::Error, &message);
        }
    }

    fn end(mut self, reason: ExitReason) -> Outcome {
        self.follow_actions();
        let message = format!("the watch ended: {}", reason.label());
        self.say(Level::Info, &message);
        self.snapshot.state = LoopState::Stopped;
        self.snapshot.held_reason = None;
        self.snapshot.exit_reason = Some(reason.clone());
        self.emit(&Event::LoopEnd {
            reason: reason.clone(),
            iterations: self.snapshot.iteration,
            counters: self.snapshot.counters.clone(),
            duration_secs: (Utc::now() - self.snapshot.loop_start).num_milliseconds() as f64
                / 1000.0,
        });
        self.write_status(Utc::now());
        Outcome {
            reason,
            snapshot: self.snapshot,
        }
    }

    fn say(&mut self, level: Level, message: &str) {
        self.reporter.log(Utc::now(), level, message);
    }

    fn emit(&mut self, event: &Event) {
        let wall = Utc::now();
        if let Some(log) = &mut self.events
            && let Err(err) = log.append(wall, event)
        {
            let message = format!("cannot append to the event log: {err}");
            self.reporter.log(wall, Level::Error, &message);
        }
        self.reporter.event(wall, event);
    }
}

/// A watch's snapshot before its first look: this process, nothing seen yet.
fn placeholder() -> Snapshot {
    Snapshot::starting(std::process::id(), String::new(), Utc::now())
}

/// The records of actions.jsonl from byte `offset`, whole lines only, reading
/// at most `cap` bytes; returns them and where the next read starts.
fn read_records(dir: &Path, offset: u64, cap: u64) -> (Vec<ActionRecord>, u64) {
    let Ok(mut file) = crate::store::small_file::open(&dir.join(task::ACTIONS_FILE)) else {
        return (Vec::new(), offset);
    };
    if file.seek(SeekFrom::Start(offset)).is_err() {
        return (Vec::new(), offset);
    }
    let mut reader = BufReader::new(file.take(cap));
    let mut records = Vec::new();
    let mut at = offset;
    let mut line = Vec::new();
    loop {
        line.clear();
        match reader.read_until(b'\n', &mut line) {
            Ok(0) | Err(_) => break,
            // A line still being written is read next time, whole.
            Ok(_) if !line.ends_with(b"\n") => break,
            Ok(n) => {
                at += n as u64;
                if let Some(record) = std::str::from_utf8(&line)
                    .ok()
                    .and_then(task::parse_action_line)
                {
                    records.push(record);
                }
            }
        }
    }
    (records, at)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_whole_lines_of_actions_jsonl_are_read_and_bad_ones_skipped() {
        let dir = tempfile::tempdir().expect("tempdir");
        let line = |n: u64| {
            format!(
                "{{\"iteration\":{n},\"timestamp\":\"2026-01-01T00:00:00Z\",\"llm_response\":\"\",\"results\":[]}}\n"
            )
        };
        let whole = format!("{}not json\n{}", line(1), line(2));
        let text = format!("{whole}{{\"iteration\":3,\"timest");
        std::fs::write(dir.path().join(task::ACTIONS_FILE), &text).expect("write");
        let (records, end) = read_records(dir.path(), 0, u64::MAX);
        let seen: Vec<u64> = records.iter().map(|r| r.iteration).collect();
        assert_eq!(seen, [1, 2]);
        assert_eq!(end, whole.len() as u64, "the cut line is read next time");
        let (records, again) = read_records(dir.path(), end, u64::MAX);
        assert!(records.is_empty());
        assert_eq!(again, end);
    }
}
