//! The plan driver: runs next to the fleet host, feeds the pure scheduler what
//! happened (lanes that ended, decisions, merges, requests left by `plan pause`
//! and friends) and carries out its effects. Slow work (git merges, checks,
//! waiting for a human) runs on threads of its own and reports back.

use std::cell::RefCell;
use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use chrono::Utc;
use tokio::sync::mpsc;

use super::checks::{self, Checks};
use super::cleanup;
use super::control;
use super::events::EventLog;
use super::home::Home;
use super::merge::{self, MergeJob, MergeOf};
use super::scheduler::{self, Effect, Input, MergeOutcome, Outcome};
use super::state::{PlanState, PlanStatus, StepState, StepStatus};
use super::steps::{self, NotStarted};
use super::subplan;
use crate::approvals::{Queue, Request, RequestKind};
use crate::console::{Console, Verbosity};
use crate::supervisor::core::Level;
use crate::supervisor::runtime::Reporter;

/// How often lanes and request files are looked at.
const POLL: Duration = Duration::from_millis(300);

/// What a thread of the driver reports.
enum Report {
    Judged {
        id: String,
        outcome: Outcome,
    },
    Decided {
        id: String,
        approved: Result<(), String>,
    },
    Reviewed {
        id: String,
        approved: Result<(), String>,
    },
    Merged {
        id: String,
        outcome: MergeOutcome,
    },
    MergedByHand {
        id: String,
        outcome: MergeOutcome,
    },
    /// The driver of a sub-plan step's plan is done.
    SubplanEnded {
        id: String,
        /// Why it could not start, when it could not.
        failure: Option<String>,
    },
}

pub struct Driver {
    root: PathBuf,
    state: PlanState,
    /// Where it keeps its lock, requests, checks, prompts and events.
    home: Home,
    log: EventLog,
    queue_dir: PathBuf,
    /// Where its log lines go: the console, or the control room's events;
    /// shared with the drivers of its sub-plans.
    out: Rc<RefCell<Box<dyn Reporter>>>,
    tx: mpsc::UnboundedSender<Report>,
    rx: mpsc::UnboundedReceiver<Report>,
    /// Set when the driver goes: waiting threads give up their requests.
    cancel: Arc<AtomicBool>,
    /// Steps whose ended lane is being judged now.
    judging: HashSet<String>,
    /// The threads that wait on the inbox: ended (their requests withdrawn) before
    /// the driver is done.
    waiters: Vec<std::thread::JoinHandle<()>>,
    /// The review requests waited for, by step: set to withdraw one.
    reviews: HashMap<String, Arc<AtomicBool>>,
    /// The last session of each step checked against its command `done_when`.
    checked: HashMap<String, u64>,
    /// The drivers of its sub-plans: a stopped plan waits for theirs to stop.
    subs: Vec<tokio::task::JoinHandle<()>>,
    /// Its `verify` and `done_when` commands, ended with it.
    checks: Checks,
    /// `[watchdog] kill_grace_secs`: how long a stopped check has to end before KILL.
    grace: Duration,
}

impl Drop for Driver {
    fn drop(&mut self) {
        self.cancel.store(true, Ordering::Relaxed);
        self.checks.stop();
    }
}

impl Driver {
    pub fn new(
        root: PathBuf,
        state: PlanState,
        queue_dir: PathBuf,
        verbosity: Verbosity,
    ) -> Driver {
        let (tx, rx) = mpsc::unbounded_channel();
        let grace = checks::DEFAULT_GRACE;
        let home = Home::of(&root, &state);
        Driver {
            log: EventLog::new(&home),
            checks: Checks::new(&home, grace),
            home,
            grace,
            root,
            state,
            queue_dir,
            out: Rc::new(RefCell::new(Box::new(Console::new(verbosity)))),
            tx,
            rx,
            cancel: Arc::new(AtomicBool::new(false)),
            judging: HashSet::new(),
            checked: HashMap::new(),
            reviews: HashMap::new(),
            waiters: Vec::new(),
            subs: Vec::new(),
        }
    }

    /// Gives its stopped checks `grace` before KILL (`[watchdog] kill_grace_secs`).
    pub(super) fn kill_grace(mut self, grace: Duration) -> Driver {
        self.checks = Checks::new(&self.home, grace);
        self.grace = grace;
        self
    }

    /// Sends its log lines to `out` instead of the console.
    pub(super) fn report_to(mut self, out: Box<dyn Reporter>) -> Driver {
        self.out = Rc::new(RefCell::new(out));
        self
    }

    pub async fn run(mut self) {
        // Before anything runs in the merge worktree or a step's: what a killed
        // run of this plan left running there is ended first.
        for line in self.checks.end_left().await {
            self.say(Level::Warn, &format!("plan={} {line}", self.state.name));
        }
        if self.state.status == PlanStatus::Created {
            self.apply(Input::Start);
        } else {
            // A request left unanswered by the run that stopped is asked again.
            for step in &mut self.state.steps {
                if step.status == StepStatus::WaitingForApproval {
                    step.status = StepStatus::Pending;
                }
            }
            self.register_lost_lanes();
            self.take_over_inbox();
            self.apply(Input::Restarted);
        }
        if self.state.status == PlanStatus::Paused {
            let name = &self.state.name;
            self.say(
                Level::Info,
                &format!("plan {name} is paused: `clowder plan resume {name}` goes on"),
            );
        }
        let mut poll = tokio::time::interval(POLL);
        while !self.finished() {
            tokio::select! {
                Some(report) = self.rx.recv() => self.on_report(report),
                _ = poll.tick() => self.poll(),
            }
        }
        for sub in std::mem::take(&mut self.subs) {
            let _ = sub.await;
        }
        if self.state.status == PlanStatus::Completed && self.state.cleanup {
            self.clean_up().await;
        }
        self.cancel.store(true, Ordering::Relaxed);
        let waiters = std::mem::take(&mut self.waiters);
        let _ = tokio::task::spawn_blocking(move || {
            for waiter in waiters {
                let _ = waiter.join();
            }
        })
        .await;
    }

    /// The completed plan's merged steps' worktrees and branches go (git runs
    /// off the fleet's thread); what was removed and what was kept is said.
    async fn clean_up(&mut self) {
        let (root, state) = (self.root.clone(), self.state.clone());
        let cleaned = tokio::task::spawn_blocking(move || cleanup::clean(&root, &state)).await;
        let detail = match cleaned {
            Ok(cleaned) => cleaned.summary(),
            Err(err) => format!("the clean-up failed: {err}"),
        };
        let line = self
            .log
            .append(scheduler::EventKind::PlanCleanup, None, &detail);
        self.say(Level::Info, &line);
    }

    /// A step saved as running whose lane was never registered (clowder was
    /// killed in between) gets it now.
    fn register_lost_lanes(&mut self) {
        let Ok(registry) = crate::fleet::registry::load(&self.root) else {
            return;
        };
        let lost: Vec<StepState> = self
            .state
            .steps
            .iter()
            .filter(|s| s.status == StepStatus::Running)
            .filter(|s| {
                subplan::is_subplan(s)
                    || crate::fleet::LaneName::parse(&s.lane)
                        .is_ok_and(|name| registry.lane(&name).is_none())
            })
            .cloned()
            .collect();
        for step in lost {
            let workspace = scheduler::workspace(&self.state, &step);
            // A sub-plan has no lane: its own driver runs again and resumes it.
            let started = if subplan::is_subplan(&step) {
                self.start_subplan(&step, &workspace);
                Ok(())
            } else {
                steps::start(&self.root, &self.home, &step, &workspace)
            };
            if let Err(refused) = started {
                let input = self.not_started(&step.id, refused);
                self.apply(input);
            }
        }
    }

    /// The requests a killed run left in the inbox, which nobody waits on any
    /// more, leave it: approvals are asked again (the steps are pending again),
    /// reviews are asked again with the same words.
    fn take_over_inbox(&mut self) {
        let (_, requests) = crate::approvals::list_pending_requests(&self.queue_dir);
        let prefix = format!("plan {}: ", self.state.name);
        let left: Vec<Request> = requests
            .into_iter()
            .filter(|r| r.abandoned && r.title.starts_with(&prefix))
            .collect();
        if left.is_empty() {
            return;
        }
        if let Ok(queue) = Queue::open(&self.queue_dir) {
            queue.sweep_listed(&left, true, std::time::SystemTime::now());
        }
        for request in left {
            let step = self
                .state
                .steps
                .iter()
                .find(|s| Some(&s.lane) == request.lane.as_ref());
            if request.kind == RequestKind::Ask
                && let Some(step) = step.filter(|s| s.status == StepStatus::NeedsReview)
            {
                let id = step.id.clone();
                self.ask_review(&id, request.body.unwrap_or_default());
            }
        }
    }

    fn finished(&self) -> bool {
        matches!(
            self.state.status,
            PlanStatus::Completed | PlanStatus::Failed
        ) && self.state.merging.is_none()
            && self.judging.is_empty()
    }

    fn say(&self, level: Level, message: &str) {
        self.out.borrow_mut().log(Utc::now(), level, message);
    }

    /// Steps the scheduler, saves its state, then carries out its effects, and
    /// whatever they in turn report (a step that cannot start has failed).
    fn apply(&mut self, input: Input) {
        let mut inputs = vec![input];
        while let Some(input) = inputs.pop() {
            let effects = match scheduler::step(Utc::now(), &mut self.state, input) {
                Ok(effects) => effects,
                Err(refused) => {
                    self.say(Level::Warn, &format!("plan {}: {refused}", self.state.name));
                    continue;
                }
            };
            if let Err(err) = self.state.save(&self.root) {
                self.say(Level::Error, &err);
            }
            for effect in effects {
                inputs.extend(self.carry_out(effect));
            }
        }
    }

    fn carry_out(&mut self, effect: Effect) -> Option<Input> {
        let home = self.home.clone();
        match effect {
            Effect::Event { kind, step, detail } => {
                let line = self.log.append(kind, step.as_deref(), &detail);
                self.say(Level::Info, &line);
            }
            Effect::StartStep { id, workspace, .. } => {
                let step = self.state.step(&id)?.clone();
                let started = if subplan::is_subplan(&step) {
                    self.start_subplan(&step, &workspace);
                    Ok(())
                } else {
                    steps::start(&self.root, &home, &step, &workspace)
                };
                if let Err(refused) = started {
                    return Some(self.not_started(&id, refused));
                }
            }
            Effect::RetryStep { id, failure, .. } => {
                let step = self.state.step(&id)?;
                // A step whose lane could not be made the first time tries again.
                let workspace = scheduler::workspace(&self.state, step);
                let retried = steps::start(&self.root, &home, step, &workspace).and_then(|()| {
                    steps::retry(&self.root, &home, step, &failure).map_err(NotStarted::Failed)
                });
                if let Err(refused) = retried {
                    return Some(self.not_started(&id, refused));
                }
            }
            Effect::AskApproval { id, body } => self.ask_approval(&id, body),
            Effect::Merge { id, branch, verify } => {
                let rev = self.state.step(&id)?.tip.clone().unwrap_or(branch);
                self.spawn_merge(id, rev, verify, false);
            }
            Effect::AskReview { id, body } => self.ask_review(&id, body),
        }
        None
    }

    /// A step whose lane did not start: one that cannot take a dependency's
    /// branch waits for it (see the scheduler), any other has failed.
    fn not_started(&self, id: &str, refused: NotStarted) -> Input {
        let plan = &self.state.name;
        if let NotStarted::Conflict { branch, detail } = &refused {
            let depends_on = self.state.step(id).map(|s| s.depends_on.clone());
            let dependency = self.state.steps.iter().find(|s| {
                s.branch.as_deref() == Some(branch.as_str())
                    && depends_on.as_ref().is_some_and(|d| d.contains(&s.id))
            });
            if let Some(dependency) = dependency {
                self.say(Level::Warn, &format!("plan={plan} step={id} {detail}"));
                return Input::DependencyConflict {
                    id: id.to_string(),
                    dependency: dependency.id.clone(),
                    detail: detail.clone(),
                };
            }
        }
        let reason = refused.reason();
        self.say(Level::Warn, &format!("plan={plan} step={id} {reason}"));
        ended_badly(id.to_string(), reason)
    }

    fn submit(
        &self,
        id: &str,
        kind: RequestKind,
        title: String,
        body: String,
    ) -> Result<(Queue, crate::approvals::Submitted), String> {
        let queue = Queue::open(&self.queue_dir).map_err(|err| err.to_string())?;
        let request = Request {
            id: String::new(),
            created: Utc::now(),
            kind,
            title,
            tool_name: None,
            tool_input: None,
            session_id: None,
            cwd: Some(self.root.display().to_string()),
            body: Some(body),
            lane: self.state.step(id).map(|s| s.lane.clone()),
            abandoned: false,
        };
        let submitted = queue.submit(request).map_err(|err| err.to_string())?;
        Ok((queue, submitted))
    }

    /// A request in the inbox, waited for on a thread; nothing is approved by
    /// default (a request that vanishes is a rejection).
    fn ask_approval(&mut self, id: &str, body: String) {
        let title = format!("plan {}: start step {id}?", self.state.name);
        self.ask(id, RequestKind::Session, title, body, false);
    }

    /// The step needs a human: approving the request merges it again (once its
    /// branch is fixed), as `plan merge` does. It is withdrawn once merged.
    fn ask_review(&mut self, id: &str, body: String) {
        let title = format!("plan {}: step {id} needs review", self.state.name);
        self.ask(id, RequestKind::Ask, title, body, true);
    }

    fn ask(&mut self, id: &str, kind: RequestKind, title: String, body: String, review: bool) {
        let (queue, submitted) = match self.submit(id, kind, title, body) {
            Ok(pair) => pair,
            Err(err) => {
                self.say(Level::Error, &format!("cannot write to the inbox: {err}"));
                return;
            }
        };
        let line = format!(
            "plan={} step={id} waits in the inbox (request {})",
            self.state.name, submitted.request.id
        );
        self.say(Level::Info, &line);
        let mine = Arc::new(AtomicBool::new(false));
        if review {
            self.reviews.insert(id.to_string(), Arc::clone(&mine));
        }
        let (tx, all, id) = (self.tx.clone(), Arc::clone(&self.cancel), id.to_string());
        self.waiters.retain(|w| !w.is_finished());
        self.waiters.push(std::thread::spawn(move || {
            let cancelled = || {
                (all.load(Ordering::Relaxed) || mine.load(Ordering::Relaxed))
                    .then_some(libc::SIGTERM)
            };
            use crate::approvals::Outcome as Wait;
            let approved = match queue.wait(&submitted, None, &cancelled) {
                Ok(Wait::Approved { .. }) => Ok(()),
                Ok(Wait::Rejected { reason }) => Err(reason),
                Ok(Wait::Cancelled { .. }) => return,
                Ok(Wait::TimedOut | Wait::Removed) => Err("the request was removed".into()),
                Err(err) => Err(err.to_string()),
            };
            let _ = tx.send(if review {
                Report::Reviewed { id, approved }
            } else {
                Report::Decided { id, approved }
            });
        }));
    }

    fn spawn_merge(&self, id: String, rev: String, verify: String, by_hand: bool) {
        let (tx, root) = (self.tx.clone(), self.root.clone());
        let (home, base) = (self.home.clone(), self.state.base.clone());
        let verify_timeout = self.state.step(&id).map_or(
            super::file::DEFAULT_CHECK_TIMEOUT,
            StepState::verify_timeout,
        );
        let checks = self.checks.clone();
        checks::spawn(move || {
            let job = MergeJob {
                root: &root,
                of: MergeOf::Step {
                    home: &home,
                    step: &id,
                },
                base: &base,
                rev: &rev,
                verify: &verify,
                verify_timeout,
                checks: &checks,
            };
            let outcome = merge::merge(&job);
            let _ = tx.send(if by_hand {
                Report::MergedByHand { id, outcome }
            } else {
                Report::Merged { id, outcome }
            });
        });
    }

    fn on_report(&mut self, report: Report) {
        match report {
            Report::Judged { id, outcome } => {
                self.judging.remove(&id);
                if outcome == Outcome::Done {
                    self.record_tip(&id);
                }
                self.apply(Input::StepEnded { id, outcome });
            }
            Report::Decided {
                id,
                approved: Ok(()),
            } => self.apply(Input::Approve { id }),
            Report::Decided {
                id,
                approved: Err(reason),
            } => {
                let name = self.state.name.clone();
                self.say(
                    Level::Warn,
                    &format!("plan={name} step={id} rejected: {reason}; the plan is held until `clowder plan resume {name}`"),
                );
                self.apply(Input::Reject { id, reason });
            }
            Report::SubplanEnded { id, failure } => self.subplan_ended(id, failure),
            Report::Merged { id, outcome } => self.apply(Input::MergeResult {
                id,
                result: outcome,
            }),
            Report::Reviewed { id, approved } => self.reviewed(id, approved),
            Report::MergedByHand { id, outcome } => self.merged_by_hand(id, outcome),
        }
    }

    fn reviewed(&mut self, id: String, approved: Result<(), String>) {
        self.reviews.remove(&id);
        match (approved, self.state.step(&id)) {
            (Ok(()), Some(step)) if step.status == StepStatus::NeedsReview => {
                let rev = step.branch.clone().unwrap_or_default();
                self.spawn_merge(id, rev, self.state.verify.clone(), true);
            }
            (Ok(()), _) => {}
            (Err(reason), _) => {
                let name = &self.state.name;
                let line = format!(
                    "plan={name} step={id} review dismissed ({reason}): it needs review until `clowder plan merge {name} {id}`"
                );
                self.say(Level::Warn, &line);
            }
        }
    }

    /// A merge asked by a human: merged, its review request is withdrawn; not
    /// merged, a new request says why.
    fn merged_by_hand(&mut self, id: String, outcome: MergeOutcome) {
        if outcome == MergeOutcome::Passed {
            if let Some(flag) = self.reviews.remove(&id) {
                flag.store(true, Ordering::Relaxed);
            }
            return self.apply(Input::MergeByHand { id });
        }
        let why = merge::describe(&outcome, &self.state.base);
        let line = format!("plan={} step={id} not merged: {why}", self.state.name);
        self.say(Level::Warn, &line);
        if !self.reviews.contains_key(&id) {
            let body = format!(
                "Step {id} of plan {} was merged by hand, but not merged: {why}\nFix its branch, then approve this request or run `clowder plan merge {} {id}`.",
                self.state.name, self.state.name
            );
            self.ask_review(&id, body);
        }
    }

    /// What a done step's branch holds now is what gets merged, even if a
    /// sequential step goes on on that branch meanwhile.
    fn record_tip(&mut self, id: &str) {
        let root = self.root.clone();
        if let Some(step) = self.state.step_mut(id)
            && let Some(branch) = &step.branch
        {
            let rev = format!("refs/heads/{branch}");
            step.tip = crate::fleet::worktree::commit_of(&root, &rev)
                .ok()
                .flatten();
        }
    }

    fn poll(&mut self) {
        for request in control::take_requests(&self.home) {
            self.on_request(request);
        }
        let ended: Vec<_> = self
            .state
            .steps
            .iter()
            .filter(|s| s.status == StepStatus::Running && !self.judging.contains(&s.id))
            .filter(|s| steps::lane_ended(&self.root, s))
            .cloned()
            .collect();
        self.check_done_after_sessions(&ended);
        for step in ended {
            self.judging.insert(step.id.clone());
            let (tx, root, checks) = (self.tx.clone(), self.root.clone(), self.checks.clone());
            checks::spawn(move || {
                let outcome = steps::judge(&root, &checks, &step);
                let _ = tx.send(Report::Judged {
                    id: step.id,
                    outcome,
                });
            });
        }
    }

    /// A step whose `done_when` is a command is done as soon as it holds after a
    /// session: its lane is stopped then rather than run to max_iterations.
    fn check_done_after_sessions(&mut self, ended: &[StepState]) {
        let candidates: Vec<StepState> = self
            .state
            .steps
            .iter()
            .filter(|s| s.status == StepStatus::Running && s.done_when.trim() != "promise")
            .filter(|s| !self.judging.contains(&s.id) && !ended.iter().any(|e| e.id == s.id))
            .cloned()
            .collect();
        for step in candidates {
            let Some(session) = steps::last_session(&self.root, &step) else {
                continue;
            };
            if self.checked.insert(step.id.clone(), session) == Some(session) {
                continue;
            }
            let (root, checks) = (self.root.clone(), self.checks.clone());
            checks::spawn(move || steps::stop_when_done(&root, &checks, &step));
        }
    }

    fn on_request(&mut self, request: control::Request) {
        control::forward(&self.root, &self.state, &request);
        match request {
            control::Request::Pause => self.apply(Input::Pause),
            control::Request::Resume => self.apply(Input::Resume),
            control::Request::Stop => {
                // The lanes of the steps running before the stop marks them failed.
                if matches!(self.state.status, PlanStatus::Running | PlanStatus::Paused) {
                    steps::stop_lanes(&self.root, &self.state);
                }
                self.apply(Input::Stop);
            }
            control::Request::Merge(id) => match self.state.step(&id) {
                Some(step) if step.status == StepStatus::NeedsReview => {
                    let rev = step.branch.clone().unwrap_or_default();
                    self.spawn_merge(id, rev, self.state.verify.clone(), true);
                }
                _ => self.say(Level::Warn, &format!("plan: no step {id} under review")),
            },
        }
    }
}

fn ended_badly(id: String, reason: String) -> Input {
    Input::StepEnded {
        id,
        outcome: Outcome::Failed {
            reason,
            last_result: String::new(),
        },
    }
}

/// Sub-plan steps: each runs its plan with a driver of its own, in this process.
impl Driver {
    /// Runs the step's sub-plan next to this driver; it reports back when the
    /// sub-plan is completed or failed, or could not start.
    fn start_subplan(&mut self, step: &StepState, workspace: &scheduler::Workspace) {
        let sub = Nested {
            file: self.state.sub_file(&step.id),
            root: self.root.clone(),
            queue_dir: self.queue_dir.clone(),
            out: Rc::clone(&self.out),
            grace: self.grace,
        };
        let (step, workspace, report) = (step.clone(), workspace.clone(), self.tx.clone());
        self.subs.retain(|sub| !sub.is_finished());
        self.subs.push(tokio::task::spawn_local(async move {
            let id = step.id.clone();
            let failure = sub.run(step, workspace).await.err();
            let _ = report.send(Report::SubplanEnded { id, failure });
        }));
    }

    fn subplan_ended(&mut self, id: String, failure: Option<String>) {
        // A step stopped with the plan is failed already.
        let Some(step) = self
            .state
            .step(&id)
            .filter(|s| s.status == StepStatus::Running)
        else {
            return;
        };
        let outcome = match failure {
            Some(reason) => {
                let line = format!("plan={} step={id} {reason}", self.state.name);
                self.say(Level::Warn, &line);
                return self.apply(ended_badly(id, reason));
            }
            None => subplan::outcome(&self.root, &self.state.sub_file(&id), step),
        };
        let Some(outcome) = outcome else {
            return;
        };
        if outcome == Outcome::Done {
            self.record_tip(&id);
        }
        self.apply(Input::StepEnded { id, outcome });
    }
}

/// What a sub-plan's driver shares with its plan's.
struct Nested {
    /// The sub-plan's state file, relative to the plans' folder.
    file: String,
    root: PathBuf,
    queue_dir: PathBuf,
    out: Rc<RefCell<Box<dyn Reporter>>>,
    grace: Duration,
}

impl Nested {
    async fn run(self, step: StepState, workspace: scheduler::Workspace) -> Result<(), String> {
        // Making its branch runs git (and merges): off the fleet's thread.
        let (root, file) = (self.root.clone(), self.file.clone());
        let state =
            tokio::task::spawn_blocking(move || subplan::prepare(&root, &file, &step, &workspace))
                .await
                .map_err(|err| format!("the sub-plan could not be prepared: {err}"))??;
        if subplan::settled(&state) {
            return Ok(());
        }
        // Held as `plan run` holds its plan's: `plan pause` and friends then ask
        // the running driver rather than edit its state.
        let home = Home::of(&self.root, &state);
        let Some(lock) = control::lock(&home)? else {
            return Err(format!(
                "the sub-plan {} is already running here",
                state.name
            ));
        };
        let (tx, rx) = mpsc::unbounded_channel();
        let driver = Driver {
            log: EventLog::new(&home),
            checks: Checks::new(&home, self.grace),
            home,
            grace: self.grace,
            root: self.root,
            state,
            queue_dir: self.queue_dir,
            out: self.out,
            tx,
            rx,
            cancel: Arc::new(AtomicBool::new(false)),
            judging: HashSet::new(),
            checked: HashMap::new(),
            reviews: HashMap::new(),
            waiters: Vec::new(),
            subs: Vec::new(),
        };
        let run: Pin<Box<dyn Future<Output = ()>>> = Box::pin(driver.run());
        run.await;
        drop(lock);
        Ok(())
    }
}
