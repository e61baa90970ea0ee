//! Building a [`Runtime`]: where its files live, what it opens and recovers
//! before the first iteration, the settings its core runs by, and the
//! machinery that ends its sessions' processes.

use std::path::PathBuf;
use std::sync::Arc;

use chrono::Utc;
use tokio::sync::{mpsc, watch};

use super::{
    LOOPS, LaneSetup, Reporter, Runtime, RuntimeOptions, STOP_NOW_REQUEST, shared_detectors,
    unfinished_run,
};
use crate::agent::Detectors;
use crate::config::{Config, pattern_strings};
use crate::protocol::Snapshot;
use crate::store::control;
use crate::store::counter::{self, Counter};
use crate::store::events::EventLog;
use crate::store::paths::LoopFiles;
use crate::store::running::Running;
use crate::supervisor::cgroup::{self, KillMethod};
use crate::supervisor::core::{Core, GuardSettings, Level, SessionGate, Settings, Watched};
use crate::supervisor::hooks::ShellContext;
use crate::supervisor::process;

impl Runtime {
    /// [`Runtime::new`], for a lane of a fleet when `lane` is given.
    pub fn with_lane(
        config: Config,
        options: RuntimeOptions,
        lane: Option<LaneSetup>,
        mut reporter: Box<dyn Reporter>,
    ) -> Result<(Runtime, watch::Receiver<Arc<Snapshot>>), String> {
        let cwd = options.working_dir.clone();
        let places = match lane.as_ref() {
            Some(lane) => LoopFiles::in_lane_dir(&lane.files_dir, &config.file_names()),
            None => config.loop_files(&cwd),
        };
        let files = Files::open(&config, &places, lane.is_some(), reporter.as_mut())?;
        let settings = settings_for(&config, lane.as_ref());
        let running = Running::in_dir(places.running_dir());
        let machinery = Machinery::new(lane.as_ref(), running, &settings, reporter.as_mut());
        let mut core = Core::new(settings, std::process::id(), config.agent.command.0.clone());
        let project = lane
            .as_ref()
            .map_or(cwd.as_path(), |l| l.gate_project.as_path());
        let gate = crate::approvals::handed::handover(&config.agent, project);
        // A single loop's start says so on stderr (see `cli`); a lane's, here.
        if let (Some(why), Some(_)) = (&gate.ungated, &lane) {
            reporter.log(Utc::now(), Level::Warn, &format!("ungated: {why}"));
        }
        core.set_ungated(gate.ungated.clone());
        let live_input = crate::agent::live_input::LiveInput::of(&config.agent.args);
        core.set_notes_now(live_input.is_some());
        if lane.is_some()
            && let Some(earlier) = unfinished_run(&files.status_path)?
        {
            core.continue_from(&earlier);
        }
        let snapshot = Arc::new(core.snapshot(Utc::now()));
        let (snapshots, snapshot_rx) = watch::channel(snapshot);
        let parts = Parts {
            config,
            options,
            lane,
            reporter,
            core,
            snapshots,
            gate,
            live_input,
        };
        Ok((Runtime::assemble(parts, files, machinery), snapshot_rx))
    }

    /// The runtime before its first input: nothing running, nothing pending.
    fn assemble(parts: Parts, files: Files, machinery: Machinery) -> Runtime {
        let (internal_tx, internal_rx) = mpsc::unbounded_channel();
        Runtime {
            status_path: files.status_path,
            stop_file: files.stop_file,
            output_dir: files.output_dir,
            config: parts.config,
            core: parts.core,
            reporter: parts.reporter,
            detectors: files.detectors,
            event_log: files.event_log,
            counter: files.counter,
            session: None,
            pending_iteration: 0,
            snapshots: parts.snapshots,
            internal_tx,
            internal_rx,
            last_status_write: None,
            status_error_reported: false,
            exit: None,
            pending_prompt: None,
            approval_cancel: Arc::new(std::sync::atomic::AtomicBool::new(false)),
            kill_method: machinery.kill_method,
            running: machinery.running,
            shell: machinery.shell,
            hook_cancel: machinery.hook_cancel,
            options: parts.options,
            lane: parts.lane,
            control_dir: files.control_dir,
            slot: None,
            queued: false,
            lane_paused: false,
            held_iteration: None,
            stopped_before_start: None,
            look_watch: None,
            last_look: None,
            status_growth: (0, None),
            late_calls: Vec::new(),
            output_tap: None,
            hangup_to_the_room: false,
            notes_in_prompt: Vec::new(),
            note_problems: std::collections::HashSet::new(),
            gate: parts.gate,
            live_input: parts.live_input,
        }
    }
}

/// What the caller hands over, with the core made from it.
struct Parts {
    config: Config,
    options: RuntimeOptions,
    lane: Option<LaneSetup>,
    reporter: Box<dyn Reporter>,
    core: Core,
    snapshots: watch::Sender<Arc<Snapshot>>,
    gate: crate::approvals::handed::Handover,
    live_input: Option<crate::agent::live_input::LiveInput>,
}

/// The files a loop opens or recovers before it starts.
struct Files {
    output_dir: PathBuf,
    status_path: PathBuf,
    stop_file: PathBuf,
    control_dir: PathBuf,
    detectors: Arc<Detectors>,
    event_log: Option<EventLog>,
    counter: Counter,
}

impl Files {
    fn open(
        config: &Config,
        places: &LoopFiles,
        is_lane: bool,
        reporter: &mut dyn Reporter,
    ) -> Result<Files, String> {
        let output_dir = places.output_dir.clone();
        std::fs::create_dir_all(&output_dir).map_err(|err| {
            format!(
                "cannot create the output directory {}: {err}",
                output_dir.display()
            )
        })?;
        let detectors = shared_detectors(
            pattern_strings(&config.detect.rate_limit_patterns),
            pattern_strings(&config.detect.commit_patterns),
        )?;
        let event_log =
            match &places.event_log {
                Some(path) => Some(EventLog::open(path).map_err(|err| {
                    format!("cannot open the event log {}: {err}", path.display())
                })?),
                None => None,
            };
        let status_path = places.status.clone();
        let counter_path = places.counter.clone();
        if is_lane {
            // A lane's folder is clowder's: the folders its configured names
            // need (`.clowder/` under init's config) are made, as the output folder is.
            for path in [&status_path, &counter_path] {
                if let Some(parent) = path.parent() {
                    std::fs::create_dir_all(parent)
                        .map_err(|err| format!("cannot create {}: {err}", parent.display()))?;
                }
            }
        }
        clear_leftovers(places, [&status_path, &counter_path], is_lane, reporter);
        let loaded = counter::recover(
            &counter_path,
            &output_dir,
            &places.output_prefix,
            event_log.as_ref().map(EventLog::path),
        );
        for warning in loaded.warnings {
            reporter.log(Utc::now(), Level::Warn, &warning);
        }
        Ok(Files {
            output_dir,
            status_path,
            stop_file: places.stop.clone(),
            control_dir: places.control_dir.clone(),
            detectors,
            event_log,
            counter: loaded.counter,
        })
    }
}

/// What an earlier loop left that is not for this one.
fn clear_leftovers(
    places: &LoopFiles,
    written: [&PathBuf; 2],
    is_lane: bool,
    reporter: &mut dyn Reporter,
) {
    // Under the instance lock nobody else writes these files: a temp file next
    // to one is a write that a killed run never finished.
    for path in written {
        if let Err(err) = crate::store::remove_interrupted_writes(path) {
            reporter.log(
                Utc::now(),
                Level::Warn,
                &format!(
                    "cannot remove the temp files of an interrupted write of {}: {err}",
                    path.display()
                ),
            );
        }
    }
    // A request left for a loop that ended meanwhile is not for this one.
    let control_dir = &places.control_dir;
    control::take_in(control_dir, control::PAUSE_REQUEST);
    control::take_in(control_dir, control::RESUME_REQUEST);
    if is_lane {
        control::take_in(control_dir, STOP_NOW_REQUEST);
    }
}

/// The settings the core runs by, read from the config.
fn settings_for(config: &Config, lane: Option<&LaneSetup>) -> Settings {
    Settings {
        max_iterations: config.session.max_iterations.0,
        stale_timeout: config.stale_timeout(),
        min_output_bytes: config.watchdog.min_output_bytes,
        max_empty_retries: config.retry.max_empty_retries,
        retry_delay: config.retry.retry_delay_secs.0,
        initial_delay: config.backoff.initial_delay_secs.0,
        max_delay: config.backoff.max_delay_secs.0,
        max_consecutive_rate_limits: config.backoff.max_consecutive_rate_limits.0,
        max_consecutive_errors: config.backoff.max_consecutive_errors.0,
        kill_grace: config.watchdog.kill_grace_secs.0,
        sigterm_stops_now: config.signals.sigterm == crate::config::Sigterm::StopNow,
        disk_recheck: config.output.disk_recheck_secs.0,
        session_gate: SessionGate {
            autonomy: config.approvals.autonomy.0,
            critical_every: config.approvals.critical_every,
        },
        guard: GuardSettings {
            max_tool_calls_per_session: config.guard.max_tool_calls_per_session,
            max_cost_per_session_usd: config.guard.max_cost_per_session_usd.0,
            max_cost_usd: config.guard.max_cost_usd.0,
            max_runtime: config.guard.max_runtime.duration,
            doom_loop_threshold: config.guard.doom_loop_threshold.0,
            on_doom_loop: config.guard.on_doom_loop,
        },
        watched: match lane.and_then(|l| l.activity_file.as_ref()) {
            Some(_) => Watched::Heartbeat,
            None => Watched::Output,
        },
    }
}

/// How the loop ends its sessions' processes and hooks, and where it records
/// what runs.
struct Machinery {
    kill_method: Arc<KillMethod>,
    running: Running,
    shell: ShellContext,
    hook_cancel: watch::Sender<bool>,
}

impl Machinery {
    fn new(
        lane: Option<&LaneSetup>,
        running: Running,
        settings: &Settings,
        reporter: &mut dyn Reporter,
    ) -> Machinery {
        let kill_method = match lane {
            Some(lane) => Arc::clone(&lane.kill_method),
            None => Arc::new(cgroup::setup()),
        };
        if let KillMethod::GroupToken { why } = kill_method.as_ref() {
            reporter.log(
                Utc::now(),
                Level::Info,
                &format!(
                    "no per-session cgroups ({why}): sessions are ended by process group and {}",
                    process::TOKEN_ENV
                ),
            );
        }
        let (hook_cancel, cancel) = watch::channel(false);
        let own_start =
            process::read_proc_stat(std::process::id() as i32).map_or(0, |info| info.start_ticks);
        let shell = ShellContext {
            method: Arc::clone(&kill_method),
            running: Some(running.clone()),
            // Unique per loop, even with several loops in one process.
            token_prefix: format!(
                "{}-{own_start}-{}",
                std::process::id(),
                LOOPS.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
            ),
            own_start,
            counter: Arc::new(std::sync::atomic::AtomicU64::new(0)),
            grace: settings.kill_grace,
            cancel,
        };
        Machinery {
            kill_method,
            running,
            shell,
            hook_cancel,
        }
    }
}
