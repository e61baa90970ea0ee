//! The worker's fixed loop: read the state, build the context, call the LLM, validate
//! its answer, run the tools, append to `actions.jsonl`, write `state.json` and
//! `heartbeat.json`, check whether to stop. The LLM never decides to stop.
//!
//! Terminal states: `completed` when `max_iterations` have run (exit 0); `stopped`
//! when someone wrote `"status": "stopped"` into `state.json` (exit 0) or when
//! `timeout_seconds` have passed since `started_at` (reason `timeout`, exit 4);
//! `failed` on a fatal error (exit 1). A corrupt `state.json` is left as it is.
//! An answer's actions are written down in the journal before they run, so that a
//! worker killed meanwhile is finished by the next one without running any twice.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use chrono::Utc;

use super::answer::{self, Action};
use super::context::{self, Context};
use super::journal::{self, Journal};
use super::llm::retry::{Busy, Retry};
use super::llm::{self, Call, Waiter};
use super::sandbox::Sandbox;
use super::show;
use super::start;
use super::task::{self, ActionRecord, Counters, Heartbeat, State, Status, Task};
use super::tools::{self, ActionResult};
use super::{EXIT_FAILED, EXIT_TIMEOUT, EXIT_USAGE, WorkerConfig};

/// While the LLM thinks, the heartbeat is rewritten this often.
const HEARTBEAT_EVERY: Duration = Duration::from_secs(2);
/// Looks again at an unreadable state.json this many times, 100 ms apart.
const CORRUPT_RETRIES: u32 = 5;

/// Why the loop ended.
pub(super) enum End {
    Completed,
    StopRequested,
    /// SIGINT or SIGTERM (the number): a stop too, but of the worker itself.
    Signal(i32),
    TimedOut,
    Fatal(String),
    /// `state.json` cannot be read: it is kept untouched, not overwritten.
    Corrupt(String),
}

pub(super) struct Worker<'a> {
    pub(super) dir: PathBuf,
    task: Task,
    config: &'a WorkerConfig,
    pub(super) state: State,
    sandbox: Sandbox,
    recent: VecDeque<ActionRecord>,
    /// The number of a SIGINT or SIGTERM received, 0 before.
    signal: Arc<AtomicUsize>,
}

/// Runs the task in `dir` until it stops; returns the exit code. `config_path`: the
/// worker's config file, which its tools never write.
pub(crate) fn run(dir: &Path, config: &WorkerConfig, config_path: &Path) -> i32 {
    let task = match task::read_task(dir) {
        Ok(task) => task,
        Err(err) => {
            eprintln!("clowder: error: not a usable task: {err}");
            return EXIT_USAGE;
        }
    };
    // Held until the process ends: one worker per task.
    let _lock = match start::lock(dir) {
        Ok(lock) => lock,
        Err(message) => {
            eprintln!("clowder: error: {message}");
            return EXIT_FAILED;
        }
    };
    start::clear_interrupted_writes(dir);
    let mut state = match start::state_to_run(dir, &task) {
        Ok(state) => state,
        Err(code) => return code,
    };
    // A task resumed after a stop before its start starts its clock now.
    state.started_at.get_or_insert_with(Utc::now);
    let mut never_written: Vec<PathBuf> = task::OWN_FILES.iter().map(|f| dir.join(f)).collect();
    never_written.push(config_path.to_path_buf());
    let sandbox = match Sandbox::open(dir, &task.constraints.allowed_paths, &never_written) {
        Ok(sandbox) => sandbox,
        Err(message) => return finish_without_sandbox(dir, state, message),
    };
    let keep = config.context_iterations();
    let mut worker = Worker {
        dir: dir.to_path_buf(),
        task,
        config,
        state,
        sandbox,
        recent: task::recent_actions(dir, keep).into(),
        signal: catch_signals(),
    };
    // A crash between the log line and the state write leaves the log ahead.
    if let Some(last) = worker.recent.back() {
        worker.state.iteration = worker.state.iteration.max(last.iteration);
    }
    let end = worker.run_loop();
    let code = worker.finish(end);
    // Those too young to clear at the start may be old enough now.
    start::clear_interrupted_writes(dir);
    code
}

/// The LLM runs in its own process group, out of reach of a Ctrl-C: the worker
/// takes SIGINT and SIGTERM, kills that group and records the stop.
fn catch_signals() -> Arc<AtomicUsize> {
    let received = Arc::new(AtomicUsize::new(0));
    for signal in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        let number = usize::try_from(signal).unwrap_or_default();
        if let Err(err) = signal_hook::flag::register_usize(signal, received.clone(), number) {
            eprintln!("clowder: warning: cannot catch signal {signal}: {err}");
        }
    }
    received
}

fn finish_without_sandbox(dir: &Path, mut state: State, message: String) -> i32 {
    state.status = Status::Failed;
    state.termination_reason = Some(format!("error: {message}"));
    state.updated_at = Some(Utc::now());
    let _ = task::write_state(dir, &state);
    eprintln!("clowder: error: {message}");
    EXIT_FAILED
}

impl Worker<'_> {
    fn run_loop(&mut self) -> End {
        self.state.pid = Some(std::process::id());
        self.state.status = Status::Running;
        println!(
            "clowder: worker on task {} in {}: iteration {} of {}",
            show::piece(&self.task.task_id),
            self.dir.display(),
            self.state.iteration,
            self.task.constraints.max_iterations
        );
        if let Err(end) = self.save_start() {
            return end;
        }
        if let Err(end) = self.finish_interrupted() {
            return end;
        }
        loop {
            if let Some(end) = self.should_stop() {
                return end;
            }
            if let Err(end) = self.iterate() {
                return end;
            }
        }
    }

    fn should_stop(&self) -> Option<End> {
        if let Err(end) = self.check_stop_request() {
            return Some(end);
        }
        if self.state.iteration >= self.task.constraints.max_iterations {
            return Some(End::Completed);
        }
        (self.seconds_left() <= 0).then_some(End::TimedOut)
    }

    fn seconds_left(&self) -> i64 {
        let started = self.state.started_at.unwrap_or_else(Utc::now);
        let timeout = i64::try_from(self.task.constraints.timeout_seconds).unwrap_or(i64::MAX);
        timeout.saturating_sub((Utc::now() - started).num_seconds())
    }

    /// `Err(StopRequested)` once someone wrote "stopped"; `Err(Corrupt)` if unreadable.
    fn check_stop_request(&self) -> Result<(), End> {
        let signal = self.signal.load(Ordering::Relaxed);
        let mut read = task::read_state(&self.dir);
        // Someone editing state.json in place (`> state.json`) leaves it empty or half
        // written for a moment: look again before calling it corrupt.
        for _ in 0..CORRUPT_RETRIES {
            if signal != 0 || matches!(read, Ok(Some(_))) {
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
            read = task::read_state(&self.dir);
        }
        match read {
            // A supervisor asks with state.json first, then signals: its reason is kept.
            Ok(Some(state)) if state.status == Status::Stopped => Err(End::StopRequested),
            _ if signal != 0 => Err(End::Signal(i32::try_from(signal).unwrap_or(libc::SIGTERM))),
            Ok(Some(_)) => Ok(()),
            Ok(None) => Err(End::Corrupt(format!(
                "{} disappeared while the task ran",
                task::STATE_FILE
            ))),
            Err(err) => Err(End::Corrupt(err.to_string())),
        }
    }

    /// One iteration, logged and saved; `Err` ends the loop.
    fn iterate(&mut self) -> Result<(), End> {
        let iteration = self.state.iteration + 1;
        let prompt = self.context(iteration);
        self.heartbeat(iteration, "calling_llm", None)?;
        println!("#{iteration} calling the LLM");
        let record = match self.call_llm(iteration, &prompt)? {
            Call::Stopped => return Err(End::StopRequested),
            Call::TimedOut => {
                self.state.counters.llm_timeouts += 1;
                refused(
                    iteration,
                    String::new(),
                    format!(
                        "no answer within llm_timeout ({} s)",
                        self.config.llm_timeout.0.as_secs_f64()
                    ),
                )
            }
            Call::Invalid(why) => {
                self.state.counters.invalid_answers += 1;
                refused(iteration, String::new(), format!("invalid answer: {why}"))
            }
            Call::Answer(raw) => self.act(iteration, answer::unwrap_envelope(&raw))?,
        };
        self.record(record)
    }

    /// Logs a finished iteration, then moves the state past it.
    pub(super) fn record(&mut self, record: ActionRecord) -> Result<(), End> {
        task::append_action(&self.dir, &record).map_err(fatal)?;
        // Once the iteration is in actions.jsonl, nothing of it is to be resumed.
        journal::remove(&self.dir).map_err(fatal)?;
        for line in show::record_lines(&record) {
            println!("{line}");
        }
        let iteration = record.iteration;
        self.recent.push_back(record);
        while self.recent.len() > self.config.context_iterations() {
            self.recent.pop_front();
        }
        self.state.iteration = iteration;
        self.save_unless_stopped("idle")
    }

    /// Saves the state, looking for a stop request once the new file is on disk and
    /// just before it replaces the old one: a stop written meanwhile is not overwritten
    /// (short of a write landing in the microseconds between that look and the rename).
    fn save_unless_stopped(&mut self, phase: &str) -> Result<(), End> {
        self.state.updated_at = Some(Utc::now());
        let mut stop = None;
        task::write_state_if(&self.dir, &self.state, || match self.check_stop_request() {
            Ok(()) => true,
            Err(end) => {
                stop = Some(end);
                false
            }
        })
        .map_err(fatal)?;
        if let Some(end) = stop {
            return Err(end);
        }
        self.heartbeat(self.state.iteration, phase, None)
    }

    /// Saves the state the worker starts from. A stopped task goes on (its
    /// `stopped` is replaced), but a stop written since it was read is kept.
    fn save_start(&mut self) -> Result<(), End> {
        let read = self.state.updated_at;
        self.state.updated_at = Some(Utc::now());
        let stopped_since = || match task::read_state(&self.dir) {
            Ok(Some(now)) => now.status == Status::Stopped && now.updated_at != read,
            _ => false,
        };
        let written =
            task::write_state_if(&self.dir, &self.state, || !stopped_since()).map_err(fatal)?;
        if !written {
            return Err(End::StopRequested);
        }
        self.heartbeat(self.state.iteration, "starting", None)
    }

    fn context(&self, iteration: u64) -> String {
        let listings = self
            .sandbox
            .prefixes()
            .into_iter()
            .map(|path| {
                let listing = tools::listing(&self.sandbox, &path);
                (path, listing)
            })
            .collect();
        let recent: Vec<ActionRecord> = self.recent.iter().cloned().collect();
        context::build(&Context {
            task: &self.task,
            iteration,
            seconds_left: self.seconds_left(),
            recent: &recent,
            listings,
        })
    }

    /// Waits for the LLM, keeping the heartbeat and watching for a stop or the timeout.
    fn call_llm(&self, iteration: u64, prompt: &str) -> Result<Call, End> {
        let mut waiting = Waiting {
            worker: self,
            iteration,
            stop: None,
            last_beat: Instant::now(),
            note: None,
        };
        let format = answer::json_schema(&tools::TOOL_NAMES);
        let call = llm::call(self.config, prompt, &format, &mut waiting).map_err(End::Fatal)?;
        match (call, waiting.stop) {
            (_, Some(end)) => Err(end),
            (Call::Stopped, None) => Err(End::StopRequested),
            (call, None) => Ok(call),
        }
    }

    fn should_stop_while_waiting(&self) -> Option<End> {
        if let Err(end) = self.check_stop_request() {
            return Some(end);
        }
        (self.seconds_left() <= 0).then_some(End::TimedOut)
    }

    /// Validates the answer and runs its actions, each written down in the
    /// journal before it runs.
    fn act(&mut self, iteration: u64, raw: String) -> Result<ActionRecord, End> {
        let answer = match answer::parse(&raw) {
            Ok(answer) => answer,
            Err(error) => {
                self.state.counters.invalid_answers += 1;
                return Ok(refused(iteration, raw, error));
            }
        };
        self.heartbeat(iteration, "executing_action", None)?;
        let mut journal = Journal::begin(&self.dir, iteration, &raw).map_err(fatal)?;
        let mut results = Vec::with_capacity(answer.actions.len());
        for (number, action) in answer.actions.iter().enumerate() {
            results.push(self.run_action(&mut journal, number, action)?);
        }
        Ok(ActionRecord {
            iteration,
            timestamp: Utc::now(),
            llm_response: raw,
            error: None,
            results,
            resumed: None,
        })
    }

    /// Runs one action, noted in the journal as started before and done after.
    pub(super) fn run_action(
        &mut self,
        journal: &mut Journal,
        number: usize,
        action: &Action,
    ) -> Result<ActionResult, End> {
        journal.start(number).map_err(fatal)?;
        let result = tools::execute(&self.sandbox, action);
        count(&mut self.state.counters, &result);
        journal.done(number, &result).map_err(fatal)?;
        Ok(result)
    }

    pub(super) fn heartbeat(
        &self,
        iteration: u64,
        phase: &str,
        note: Option<String>,
    ) -> Result<(), End> {
        let beat = Heartbeat {
            iteration,
            timestamp: Utc::now(),
            status: phase.to_string(),
            pid: Some(std::process::id()),
            note,
        };
        task::write_heartbeat(&self.dir, &beat).map_err(fatal)
    }

    /// Writes the terminal state (unless state.json is corrupt) and says how it ended.
    fn finish(mut self, end: End) -> i32 {
        let (status, reason, code) = match &end {
            End::Completed => (Status::Completed, "max_iterations".to_string(), 0),
            End::StopRequested => (Status::Stopped, self.stop_reason(), 0),
            End::Signal(signal) => {
                let name = if *signal == libc::SIGINT {
                    "SIGINT"
                } else {
                    "SIGTERM"
                };
                (Status::Stopped, format!("signal: {name}"), 128 + signal)
            }
            End::TimedOut => (Status::Stopped, "timeout".to_string(), EXIT_TIMEOUT),
            End::Fatal(message) => (Status::Failed, format!("error: {message}"), EXIT_FAILED),
            End::Corrupt(message) => {
                eprintln!("clowder: error: {message}; state.json left as it is");
                let _ = self.heartbeat(self.state.iteration, "failed", None);
                return EXIT_FAILED;
            }
        };
        self.state.status = status;
        self.state.termination_reason = Some(reason.clone());
        self.state.pid = None;
        self.state.updated_at = Some(Utc::now());
        let saved = task::write_state(&self.dir, &self.state).map_err(fatal);
        if let Err(End::Fatal(message)) =
            saved.and_then(|()| self.heartbeat(self.state.iteration, status.as_str(), None))
        {
            eprintln!("clowder: error: {message}");
            return EXIT_FAILED;
        }
        let line = format!(
            "clowder: task {} {} after {} iteration(s): {reason}",
            self.task.task_id,
            status.as_str(),
            self.state.iteration
        );
        if code == EXIT_FAILED {
            eprintln!("{line}");
            eprintln!(
                "clowder: `clowder task resume {}` lets it go on",
                self.dir.display()
            );
        } else {
            println!("{line}");
        }
        code
    }

    /// The reason the stopper wrote, if any.
    fn stop_reason(&self) -> String {
        task::read_state(&self.dir)
            .ok()
            .flatten()
            .and_then(|state| state.termination_reason)
            .unwrap_or_else(|| "stopped".to_string())
    }
}

/// A task file that cannot be written ends the task.
pub(super) fn fatal(err: task::FileError) -> End {
    End::Fatal(err.to_string())
}

/// Counts what went wrong with one action.
pub(super) fn count(counters: &mut Counters, result: &ActionResult) {
    if result.skipped {
        counters.unknown_tools += 1;
    } else if result.security_violation {
        counters.security_violations += 1;
    } else if !result.ok {
        counters.tool_errors += 1;
    }
}

/// The worker waiting for an answer: it beats, watches for a stop, and says
/// when the LLM is busy.
struct Waiting<'w, 'a> {
    worker: &'w Worker<'a>,
    iteration: u64,
    stop: Option<End>,
    last_beat: Instant,
    /// While a busy LLM is waited for: what is waited for.
    note: Option<String>,
}

impl Waiting<'_, '_> {
    fn beat(&mut self) -> Result<(), String> {
        self.last_beat = Instant::now();
        let phase = match self.note {
            Some(_) => "llm_busy",
            None => "calling_llm",
        };
        self.worker
            .heartbeat(self.iteration, phase, self.note.clone())
            .map_err(|end| match end {
                End::Fatal(message) => message,
                _ => "cannot write heartbeat.json".to_string(),
            })
    }
}

impl Waiter for Waiting<'_, '_> {
    fn tick(&mut self) -> Result<bool, String> {
        if let Some(end) = self.worker.should_stop_while_waiting() {
            self.stop = Some(end);
            return Ok(true);
        }
        if self.last_beat.elapsed() >= HEARTBEAT_EVERY {
            self.beat()?;
        }
        Ok(false)
    }

    fn busy(&mut self, busy: &Busy, retry: &Retry) {
        let said = match busy.message.is_empty() {
            true => String::new(),
            false => format!(": {}", show::piece(&busy.message)),
        };
        let asked = if retry.asked {
            ", as its Retry-After asks"
        } else {
            ""
        };
        let note = format!(
            "the LLM is busy ({}{said}): retry {} of {} in {} s{asked}",
            busy.status,
            retry.number,
            retry.of,
            retry.wait.as_secs_f64().ceil()
        );
        println!("#{} {note}", self.iteration);
        self.note = Some(note);
        // A heartbeat that cannot be written is met again at the next tick.
        let _ = self.beat();
    }

    fn retrying(&mut self) {
        self.note = None;
        println!("#{} calling the LLM again", self.iteration);
        let _ = self.beat();
    }
}

fn refused(iteration: u64, raw: String, error: String) -> ActionRecord {
    ActionRecord {
        iteration,
        timestamp: Utc::now(),
        llm_response: raw,
        error: Some(error),
        results: Vec::new(),
        resumed: None,
    }
}
