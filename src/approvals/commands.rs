//! The approval subcommands: `gate`, `queue`, `approve`, `reject`, `ask`.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI32, Ordering};
use std::time::{Duration, Instant};

use clap::Args;
use serde::{Deserialize, Serialize};

use crate::config::Wait;

use super::{
    ApprovalEvent, DEFAULT_DIR, DecideError, Decision, Outcome, Queue, QueueError, Request,
    RequestKind, escape,
};

/// Exit code for a problem with the queue or the input: nothing was decided.
pub const EXIT_ERROR: i32 = 2;

/// The largest hook input read from stdin.
const MAX_STDIN: u64 = 1024 * 1024;

/// How often the gate looks for a signal while it reads its input.
const STDIN_NAP: Duration = Duration::from_millis(100);

/// The largest `--body-file` for `clowder ask`.
const MAX_BODY: u64 = 48 * 1024;

/// The fleet's approval queue, as the agent of a lane is given it.
pub const APPROVALS_DIR_ENV: &str = "CLOWDER_APPROVALS_DIR";
/// The lane an agent runs in, for the agent's own use: a request takes its lane
/// from the rules the host gave the lane, not from this variable.
pub const LANE_ENV: &str = "CLOWDER_LANE";
/// The event log a lane's gate writes to (the lane's own, under `.clowder/lanes/NAME/`):
/// without it the gate would write into its working folder, the lane's worktree.
pub const EVENT_LOG_ENV: &str = "CLOWDER_EVENT_LOG";

#[derive(Debug, Args)]
pub struct DirArg {
    /// The approval queue folder [default: [approvals] dir, or .clowder/approvals]
    #[arg(long = "dir", value_name = "PATH")]
    pub given: Option<PathBuf>,
    /// Resolved from `--dir`, the config, or the default.
    #[arg(skip)]
    pub dir: PathBuf,
}

/// The `[approvals]` settings: in a fleet lane, the rules its host gave it (see
/// [`super::host_rules`]); elsewhere those of `harness.toml` in the current folder
/// (optional file). A broken config is an error: a gate must not guess its rules.
pub fn approvals_config() -> Result<crate::config::ApprovalsConfig, String> {
    if let Some(rules) = super::host_rules::from_env()? {
        return Ok(rules.approvals);
    }
    crate::config::Config::load(Path::new(crate::config::DEFAULT_CONFIG_FILE), false)
        .map(|config| config.approvals)
        .map_err(|err| format!("bad configuration: {err}"))
}

/// [`approvals_config`] for the gate: an agent that says it runs in a lane
/// (`CLOWDER_LANE`) is judged only by the rules its host gave it, never by the
/// `harness.toml` of its worktree.
fn gate_config() -> Result<crate::config::ApprovalsConfig, String> {
    let in_lane = std::env::var_os(LANE_ENV).is_some_and(|lane| !lane.is_empty());
    if in_lane && std::env::var_os(super::host_rules::RULES_ENV).is_none() {
        return Err(format!(
            "{LANE_ENV} is set but {} is not: a lane's gate judges only by the rules its host gives it",
            super::host_rules::RULES_ENV
        ));
    }
    approvals_config()
}

impl DirArg {
    /// Fills in `dir`: `--dir` wins over `CLOWDER_APPROVALS_DIR` (set for the agent
    /// of a fleet lane, so that a gate in a worktree uses the fleet's queue),
    /// which wins over `[approvals] dir`, which wins over the default.
    pub fn resolve(&mut self, config: Option<&crate::config::ApprovalsConfig>) {
        let from_env = std::env::var_os(APPROVALS_DIR_ENV).filter(|dir| !dir.is_empty());
        self.dir = match (&self.given, from_env, config) {
            (Some(dir), _, _) => dir.clone(),
            (None, Some(dir), _) => PathBuf::from(dir),
            (None, None, Some(config)) => config.dir.0.clone(),
            (None, None, None) => PathBuf::from(DEFAULT_DIR),
        };
    }
}

#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct GateArgs {
    #[command(subcommand)]
    pub action: Option<GateAction>,
    #[command(flatten)]
    pub dir: DirArg,
    /// How long to wait for a decision before denying (90s, 10m, 1h, never). The
    /// default stays under the 600 s hook timeout of `clowder init --claude-hook`:
    /// Claude Code lets the call run when the hook itself times out.
    #[arg(long = "timeout", value_name = "DURATION")]
    pub timeout: Option<Wait>,
    /// The registration a loop hands its agent on the command line; any other
    /// `clowder gate` of that agent steps aside (see `approvals::handed`).
    #[arg(long = "handed", hide = true)]
    pub handed: bool,
}

#[derive(Debug, clap::Subcommand)]
pub enum GateAction {
    /// Run a labelled corpus (JSON lines of `tool`, `input`, `expect`) through this
    /// folder's rules and count what they allow, deny and ask; exit 1 when a
    /// destructive call is allowed
    Eval(EvalArgs),
}

#[derive(Debug, Args)]
pub struct EvalArgs {
    /// Corpus files: one call a line, `{"tool": "Bash", "input": {"command": "…"},
    /// "expect": "safe" | "destructive", "note": "…"}`
    #[arg(value_name = "FILE", required = true)]
    pub files: Vec<PathBuf>,
    /// Print the counts and every destructive call allowed as JSON
    #[arg(long = "json")]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct QueueArgs {
    #[command(flatten)]
    pub dir: DirArg,
    /// Print the pending requests as JSON
    #[arg(long = "json")]
    pub json: bool,
    /// Move the abandoned requests (their waiter is gone) to done/ now
    #[arg(long = "prune")]
    pub prune: bool,
    /// List the newest finished requests instead: who decided each (a person,
    /// or the reviewer), the outcome and the reason
    #[arg(long = "history", conflicts_with = "prune")]
    pub history: bool,
}

#[derive(Debug, Args)]
pub struct ApproveArgs {
    /// The request id (see `clowder queue`)
    #[arg(value_name = "ID")]
    pub id: String,
    /// A note kept with the decision
    #[arg(long = "reason", value_name = "TEXT")]
    pub reason: Option<String>,
    #[command(flatten)]
    pub dir: DirArg,
}

#[derive(Debug, Args)]
pub struct RejectArgs {
    /// The request id (see `clowder queue`)
    #[arg(value_name = "ID")]
    pub id: String,
    /// Why: the agent is told this
    #[arg(long = "reason", value_name = "TEXT")]
    pub reason: String,
    #[command(flatten)]
    pub dir: DirArg,
}

#[derive(Debug, Args)]
pub struct AskArgs {
    /// The question, in one line
    #[arg(long = "title", value_name = "TEXT")]
    pub title: String,
    /// A file whose text is shown with the question
    #[arg(long = "body-file", value_name = "PATH")]
    pub body_file: Option<PathBuf>,
    /// How long to wait for an answer (90s, 10m, 1h, never)
    #[arg(long = "timeout", value_name = "DURATION", default_value = "10m")]
    pub timeout: Wait,
    #[command(flatten)]
    pub dir: DirArg,
}

// ---------------------------------------------------------------------------
// Signals: a flag the waiting loops poll.

static SIGNAL: AtomicI32 = AtomicI32::new(0);

extern "C" fn on_signal(signal: libc::c_int) {
    SIGNAL.store(signal, Ordering::SeqCst);
}

fn install_signal_flag() {
    use nix::sys::signal::{SaFlags, SigAction, SigHandler, SigSet, Signal, sigaction};
    let action = SigAction::new(
        SigHandler::Handler(on_signal),
        SaFlags::SA_RESTART,
        SigSet::empty(),
    );
    for signal in [Signal::SIGINT, Signal::SIGTERM, Signal::SIGHUP] {
        // SAFETY: the handler only stores into an atomic, which is async-signal-safe.
        let _ = unsafe { sigaction(signal, &action) };
    }
}

/// A crash the panic hook never sees (a stack overflow, an abort) still blocks
/// the call: the gate exits 2 rather than die by a signal, which Claude Code
/// would read as a hook error, and then run the call.
fn exit_2_on_crash() {
    use nix::sys::signal::{SaFlags, SigAction, SigHandler, SigSet, Signal, sigaction};
    extern "C" fn on_crash(_: libc::c_int) {
        const MESSAGE: &[u8] = b"clowder gate: crashed, the tool call is denied\n";
        // SAFETY: write(2) and _exit(2) are async-signal-safe.
        unsafe {
            libc::write(2, MESSAGE.as_ptr().cast(), MESSAGE.len());
            libc::_exit(EXIT_ERROR);
        }
    }
    // On the alternate stack std gives every thread: an overflowed stack has no room.
    let action = SigAction::new(
        SigHandler::Handler(on_crash),
        SaFlags::SA_ONSTACK,
        SigSet::empty(),
    );
    for signal in [
        Signal::SIGSEGV,
        Signal::SIGBUS,
        Signal::SIGABRT,
        Signal::SIGILL,
        Signal::SIGFPE,
    ] {
        // SAFETY: the handler calls only async-signal-safe functions.
        let _ = unsafe { sigaction(signal, &action) };
    }
}

fn caught_signal() -> Option<i32> {
    match SIGNAL.load(Ordering::SeqCst) {
        0 => None,
        signal => Some(signal),
    }
}

fn signal_name(signal: i32) -> String {
    nix::sys::signal::Signal::try_from(signal)
        .map(|s| s.as_str().to_string())
        .unwrap_or_else(|_| format!("signal {signal}"))
}

// ---------------------------------------------------------------------------

/// Opens the queue with the event log the agent was given (see [`EVENT_LOG_ENV`]).
fn open_for_agent(dir: &Path) -> Result<Queue, QueueError> {
    let queue = Queue::open(dir)?;
    let in_lane = std::env::var_os(LANE_ENV).is_some_and(|lane| !lane.is_empty());
    Ok(
        match std::env::var_os(EVENT_LOG_ENV).filter(|path| !path.is_empty()) {
            Some(path) => queue.with_event_log(Some(PathBuf::from(path))),
            // A lane whose event log is off: nothing goes into its worktree.
            None if in_lane => queue.with_event_log(None),
            None => queue,
        },
    )
}

fn open_queue(dir: &Path, who: &str) -> Result<Queue, i32> {
    open_for_agent(dir).map_err(|err| {
        match err {
            QueueError::Unsafe(msg) => {
                eprintln!("{who}: error: unsafe approval queue: {}", escape(&msg))
            }
            other => eprintln!("{who}: error: {}", escape(&other.to_string())),
        }
        EXIT_ERROR
    })
}

/// Whether a clowder holds this folder: in a lane, the fleet that runs it
/// (the lane's files folder is where the host put the lane's rules); else the
/// loop of the current folder. Its lock says so, wherever `[output]` put its
/// status file.
fn loop_running() -> bool {
    use crate::store::{lock, paths};
    let lane = std::env::var_os(super::host_rules::RULES_ENV)
        .and_then(|rules| Path::new(&rules).parent().and_then(paths::lane_of_dir));
    match lane {
        Some((root, name)) => {
            lock::is_held(&paths::lane_lock(&root, &name))
                || lock::is_held(&paths::state_dir(&root).join(lock::LOCK_FILE))
        }
        None => lock::is_held(&paths::state_dir(Path::new("")).join(lock::LOCK_FILE)),
    }
}

/// The PreToolUse hook input (unknown fields are allowed: Claude Code adds some).
#[derive(Debug, Deserialize)]
struct HookInput {
    #[serde(default)]
    session_id: Option<String>,
    #[serde(default)]
    cwd: Option<String>,
    #[serde(default)]
    hook_event_name: Option<String>,
    tool_name: String,
    /// Kept as text until [`tool_input_value`] reads it, so that input nested
    /// deeper than the JSON reader follows still reaches a person.
    #[serde(default)]
    tool_input: Option<Box<serde_json::value::RawValue>>,
}

/// The tool's input as JSON. A field nested deeper than the JSON reader follows
/// (128 levels) is kept as its exact text, a string, so that the request can be
/// stored, shown whole and decided by a person (rules read only the fields they
/// know, such as a command, which stay as they are).
fn tool_input_value(raw: &serde_json::value::RawValue) -> serde_json::Value {
    use serde_json::Value;
    use serde_json::value::RawValue;
    if let Ok(value) = serde_json::from_str::<Value>(raw.get()) {
        return value;
    }
    let as_text = |raw: &RawValue| Value::String(raw.get().to_string());
    match serde_json::from_str::<std::collections::BTreeMap<String, Box<RawValue>>>(raw.get()) {
        Ok(fields) => Value::Object(
            fields
                .into_iter()
                .map(|(key, field)| {
                    let value = serde_json::from_str::<Value>(field.get())
                        .unwrap_or_else(|_| as_text(&field));
                    (key, value)
                })
                .collect(),
        ),
        Err(_) => as_text(raw),
    }
}

#[derive(Serialize)]
struct HookAnswer<'a> {
    #[serde(rename = "hookSpecificOutput")]
    output: HookOutput<'a>,
}

#[derive(Serialize)]
struct HookOutput<'a> {
    #[serde(rename = "hookEventName")]
    event: &'static str,
    #[serde(rename = "permissionDecision")]
    decision: &'static str,
    #[serde(rename = "permissionDecisionReason")]
    reason: &'a str,
}

/// The PreToolUse answer printed by `clowder gate`.
pub fn hook_answer(allow: bool, reason: &str) -> String {
    let answer = HookAnswer {
        output: HookOutput {
            event: "PreToolUse",
            decision: if allow { "allow" } else { "deny" },
            reason,
        },
    };
    serde_json::to_string(&answer).unwrap_or_else(|_| {
        "{\"hookSpecificOutput\":{\"hookEventName\":\"PreToolUse\",\"permissionDecision\":\"deny\",\"permissionDecisionReason\":\"clowder gate: internal error\"}}".into()
    })
}

/// `clowder gate`: a Claude Code PreToolUse hook that holds the tool call until a
/// human decides. Fails closed: every error, a panic included, exits 2 (blocks).
pub fn gate(mut args: GateArgs) -> i32 {
    if let Some(GateAction::Eval(eval)) = &args.action {
        return gate_eval(eval);
    }
    std::panic::set_hook(Box::new(|info| {
        let _ = writeln!(
            std::io::stderr(),
            "clowder gate: internal error, the tool call is denied: {}",
            escape(&info.to_string())
        );
        std::process::exit(EXIT_ERROR);
    }));
    exit_2_on_crash();
    install_signal_flag();
    if super::handed::steps_aside(args.handed) {
        // No answer is no decision: the handed gate, run beside this one, decides.
        let _ = read_hook_input(Instant::now(), Some(Duration::from_secs(5)));
        return 0;
    }
    let config = match gate_config() {
        Ok(config) => config,
        Err(reason) => {
            eprintln!(
                "clowder gate: {} — the tool call is denied",
                escape(&reason)
            );
            return EXIT_ERROR;
        }
    };
    args.dir.resolve(Some(&config));
    match run_gate(&args, &config) {
        Ok(code) => code,
        Err(reason) => {
            eprintln!(
                "clowder gate: {} — the tool call is denied",
                escape(&reason)
            );
            EXIT_ERROR
        }
    }
}

/// `clowder gate eval`: 0 when no destructive call is allowed, 1 when one is,
/// 2 when the rules or the corpus cannot be read.
fn gate_eval(args: &EvalArgs) -> i32 {
    let report = approvals_config().and_then(|config| super::eval::evaluate(&args.files, &config));
    let report = match report {
        Ok(report) => report,
        Err(err) => {
            eprintln!("clowder gate eval: {}", escape(&err));
            return EXIT_ERROR;
        }
    };
    if args.json {
        match serde_json::to_string_pretty(&report) {
            Ok(json) => println!("{json}"),
            Err(err) => {
                eprintln!("clowder gate eval: {err}");
                return EXIT_ERROR;
            }
        }
    } else {
        print!("{}", report.table());
    }
    i32::from(!report.destructive_allowed.is_empty())
}

fn run_gate(args: &GateArgs, config: &crate::config::ApprovalsConfig) -> Result<i32, String> {
    let started = Instant::now();
    let timeout = args
        .timeout
        .clone()
        .unwrap_or_else(|| config.timeout.parse());
    let Some(input) = read_hook_input(started, timeout.limit)? else {
        return answer(
            false,
            &format!(
                "timed out after {} reading the hook input (stdin was not closed)",
                timeout.label
            ),
        );
    };
    let hook: HookInput = serde_json::from_slice(&input)
        .map_err(|err| format!("the hook input is not PreToolUse JSON: {err}"))?;
    if let Some(event) = hook.hook_event_name.as_deref()
        && event != "PreToolUse"
    {
        return Err(format!(
            "clowder gate answers PreToolUse hooks, not `{event}`"
        ));
    }
    let queue = open_for_agent(&args.dir.dir).map_err(|err| match err {
        QueueError::Unsafe(msg) => format!("unsafe approval queue: {msg}"),
        other => other.to_string(),
    })?;
    let mut request = Request {
        id: String::new(),
        created: chrono::Utc::now(),
        kind: RequestKind::Tool,
        title: String::new(),
        tool_name: Some(hook.tool_name.clone()),
        tool_input: hook.tool_input.as_deref().map(tool_input_value),
        session_id: hook.session_id,
        cwd: hook.cwd,
        body: None,
        lane: super::host_rules::lane().ok().flatten(),
        abandoned: false,
    };
    // Policy first, deny before allow: a rule decides without a human, and an
    // allow only when it covers every simple command of a shell call.
    let full_subject = request.subject();
    let allow: Vec<_> = config.allow.iter().map(|r| r.policy()).collect();
    let deny: Vec<_> = config.deny.iter().map(|r| r.policy()).collect();
    let call = super::policy::Call::new(&hook.tool_name, request.tool_input.as_ref())
        .in_dir(request.cwd.as_deref());
    let decided_by_rule = match super::policy::decide(&call, &allow, &deny) {
        super::policy::Verdict::Allow(reason) => Some((true, reason)),
        super::policy::Verdict::Deny(reason) => Some((false, reason)),
        super::policy::Verdict::Ask(why) => {
            let next = match config.reviewer {
                Some(_) => "asking the reviewer",
                None => "asking a human",
            };
            eprintln!("clowder gate: {next}: {}", escape(&why));
            None
        }
    };
    if let Some((allow, reason)) = decided_by_rule {
        let mut event = ApprovalEvent::new("approval_decided");
        event.kind = Some("policy".into());
        event.tool = Some(hook.tool_name.clone());
        event.lane = request.lane.clone();
        event.decider = reason
            .split_once(" by the ")
            .map(|(_, rule)| rule.to_string());
        event.verdict = Some(if allow { "allow" } else { "deny" }.into());
        event.reason = Some(reason.clone());
        queue.log(&event);
        return answer(allow, &reason);
    }
    // Short enough for `clowder queue` to show whole, start and end.
    let subject = crate::fmt::head_and_tail(&full_subject, 90);
    request.title = if subject.is_empty() {
        hook.tool_name.clone()
    } else {
        format!("{}: {subject}", hook.tool_name)
    };
    if let Some(reviewer) = &config.reviewer {
        let log = queue.event_log_path();
        match super::reviewed::consult(config, reviewer, &queue, &request, log.as_deref()) {
            super::reviewed::Next::Answer { allow, reason } => return answer(allow, &reason),
            super::reviewed::Next::Person(review) => {
                eprintln!("clowder gate: {}", escape(&review.describe()));
                // The title goes wherever the request is listed or rung (the
                // room's inbox, the page, the notifier): it says the verdict.
                request.title.push_str(&format!(" · {}", review.headline()));
                request.body = Some(review.describe());
            }
        }
    }
    let submitted = match queue.submit(request) {
        Ok(submitted) => submitted,
        // Shown in part, a call could be approved for what nobody saw.
        Err(err @ QueueError::TooLarge { .. }) => return answer(false, &err.to_string()),
        Err(err) => return Err(err.to_string()),
    };
    let id = submitted.request.id.clone();
    let mut event = ApprovalEvent::new("approval_requested");
    event.id = Some(id.clone());
    event.kind = Some("tool".into());
    event.tool = Some(hook.tool_name.clone());
    queue.log(&event);
    eprintln!(
        "clowder gate: waiting for approval of {} (id {id}) — approve in the control room or with `clowder approve {id}`",
        escape(&hook.tool_name)
    );
    if !loop_running() {
        eprintln!(
            "clowder gate: no clowder loop holds this folder (no clowder holds its lock): the request is queued anyway"
        );
    }
    // The timeout counts from the start: reading the input took part of it.
    let left = timeout
        .limit
        .map(|limit| limit.saturating_sub(started.elapsed()));
    let outcome = queue
        .wait(&submitted, left, &caught_signal)
        .map_err(|err| err.to_string())?;
    let (allow, reason) = match outcome {
        Outcome::Approved { reason } => (
            true,
            match reason {
                Some(r) if !r.trim().is_empty() => format!("approved in clowder: {r}"),
                _ => "approved in clowder".to_string(),
            },
        ),
        Outcome::Rejected { reason } => (false, reason),
        Outcome::TimedOut => (
            false,
            format!(
                "timed out after {} waiting for a human to approve (clowder approval queue)",
                timeout.label
            ),
        ),
        Outcome::Removed => (
            false,
            "the request was removed from the clowder approval queue".to_string(),
        ),
        Outcome::Cancelled { signal } => {
            return Err(format!(
                "stopped by {} while waiting for approval",
                signal_name(signal)
            ));
        }
    };
    answer(allow, &reason)
}

/// Prints the hook's answer.
fn answer(allow: bool, reason: &str) -> Result<i32, String> {
    println!("{}", hook_answer(allow, reason));
    std::io::stdout()
        .flush()
        .map_err(|err| format!("cannot write the answer: {err}"))?;
    Ok(0)
}

/// The hook input from stdin, read on a thread so that a caller that never closes
/// stdin cannot hold the gate past its timeout. `Ok(None)`: the time ran out.
fn read_hook_input(started: Instant, limit: Option<Duration>) -> Result<Option<Vec<u8>>, String> {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut input = Vec::new();
        let read = std::io::stdin()
            .take(MAX_STDIN + 1)
            .read_to_end(&mut input)
            .map(|_| input);
        let _ = tx.send(read);
    });
    loop {
        if let Some(signal) = caught_signal() {
            return Err(format!(
                "stopped by {} while reading the hook input",
                signal_name(signal)
            ));
        }
        let mut nap = STDIN_NAP;
        if let Some(limit) = limit {
            let elapsed = started.elapsed();
            if elapsed >= limit {
                return Ok(None);
            }
            nap = nap.min(limit - elapsed);
        }
        match rx.recv_timeout(nap) {
            Ok(Ok(input)) if input.len() as u64 > MAX_STDIN => {
                return Err(format!("the hook input is larger than {MAX_STDIN} bytes"));
            }
            Ok(Ok(input)) => return Ok(Some(input)),
            Ok(Err(err)) => return Err(format!("cannot read the hook input: {err}")),
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                return Err("cannot read the hook input".into());
            }
        }
    }
}

/// `clowder ask`: exit 0 approved, 1 rejected, 3 timed out, 2 error.
pub fn ask(args: AskArgs) -> i32 {
    install_signal_flag();
    let body = match &args.body_file {
        None => None,
        Some(path) => match read_body(path) {
            Ok(body) => Some(body),
            Err(err) => {
                eprintln!("clowder ask: error: {}", escape(&err));
                return EXIT_ERROR;
            }
        },
    };
    let queue = match open_queue(&args.dir.dir, "clowder ask") {
        Ok(queue) => queue,
        Err(code) => return code,
    };
    let request = Request {
        id: String::new(),
        created: chrono::Utc::now(),
        kind: RequestKind::Ask,
        title: args.title.clone(),
        tool_name: None,
        tool_input: None,
        session_id: None,
        cwd: std::env::current_dir()
            .ok()
            .map(|p| p.display().to_string()),
        body,
        lane: super::host_rules::lane().ok().flatten(),
        abandoned: false,
    };
    let submitted = match queue.submit(request) {
        Ok(submitted) => submitted,
        Err(err) => {
            eprintln!("clowder ask: error: {}", escape(&err.to_string()));
            return EXIT_ERROR;
        }
    };
    let id = submitted.request.id.clone();
    let mut event = ApprovalEvent::new("approval_requested");
    event.id = Some(id.clone());
    event.kind = Some("ask".into());
    queue.log(&event);
    eprintln!(
        "clowder ask: waiting for an answer (id {id}) — `clowder approve {id}` or `clowder reject {id} --reason …`"
    );
    match queue.wait(&submitted, args.timeout.limit, &caught_signal) {
        Ok(Outcome::Approved { reason }) => {
            match reason {
                Some(r) => eprintln!("clowder ask: approved: {}", escape(&r)),
                None => eprintln!("clowder ask: approved"),
            }
            0
        }
        Ok(Outcome::Rejected { reason }) => {
            eprintln!("clowder ask: rejected: {}", escape(&reason));
            1
        }
        Ok(Outcome::TimedOut) => {
            eprintln!(
                "clowder ask: timed out after {} without an answer",
                args.timeout.label
            );
            3
        }
        Ok(Outcome::Removed) => {
            eprintln!("clowder ask: the request was removed from the queue");
            1
        }
        Ok(Outcome::Cancelled { signal }) => {
            eprintln!("clowder ask: stopped by {}", signal_name(signal));
            128 + signal
        }
        Err(err) => {
            eprintln!("clowder ask: error: {}", escape(&err.to_string()));
            EXIT_ERROR
        }
    }
}

fn read_body(path: &Path) -> Result<String, String> {
    let file = std::fs::File::open(path)
        .map_err(|err| format!("cannot read {}: {err}", path.display()))?;
    let meta = file
        .metadata()
        .map_err(|err| format!("cannot read {}: {err}", path.display()))?;
    if !meta.is_file() {
        return Err(format!("{} is not a regular file", path.display()));
    }
    let mut bytes = Vec::new();
    file.take(MAX_BODY + 1)
        .read_to_end(&mut bytes)
        .map_err(|err| format!("cannot read {}: {err}", path.display()))?;
    if bytes.len() as u64 > MAX_BODY {
        return Err(format!(
            "{} is larger than {MAX_BODY} bytes",
            path.display()
        ));
    }
    String::from_utf8(bytes).map_err(|_| format!("{} is not UTF-8 text", path.display()))
}

/// One pending request as `clowder queue --json` prints it.
#[derive(Serialize)]
struct Listed<'a> {
    id: &'a str,
    created: chrono::DateTime<chrono::Utc>,
    age_secs: i64,
    kind: RequestKind,
    tool_name: Option<&'a str>,
    subject: String,
    title: &'a str,
    session_id: Option<&'a str>,
    cwd: Option<&'a str>,
    tool_input: Option<&'a serde_json::Value>,
    body: Option<&'a str>,
    /// The fleet lane that asked, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    lane: Option<&'a str>,
    /// The process that asked is gone: nobody would receive a decision.
    abandoned: bool,
}

/// `clowder queue`: the pending requests, their lanes set by `attribute` from
/// the fleet's records (a request's own word is not taken).
/// `listed`: the requests as a host serving the folder lists them (attributed),
/// instead of the queue's files.
pub fn queue(
    args: QueueArgs,
    listed: Option<Vec<Request>>,
    attribute: &dyn Fn(&mut [Request]),
) -> i32 {
    let queue = match open_queue(&args.dir.dir, "clowder queue") {
        Ok(queue) => queue,
        Err(code) => return code,
    };
    if args.history {
        return history(&args);
    }
    let mut requests = match listed {
        Some(requests) => requests,
        None => {
            let (mut requests, refused) = queue.scan_pending();
            attribute(&mut requests);
            for (name, reason) in &refused {
                eprintln!(
                    "clowder queue: refused pending/{}: {}",
                    escape(name),
                    escape(reason)
                );
            }
            requests
        }
    };
    let swept = queue.sweep_listed(&requests, args.prune, std::time::SystemTime::now());
    if !swept.abandoned.is_empty() {
        eprintln!(
            "clowder queue: moved {} abandoned request(s) to done/: {}",
            swept.abandoned.len(),
            swept.abandoned.join(", ")
        );
        requests.retain(|r| !swept.abandoned.contains(&r.id));
    }
    let now = chrono::Utc::now();
    if args.json {
        let listed: Vec<Listed> = requests
            .iter()
            .map(|r| Listed {
                id: &r.id,
                created: r.created,
                age_secs: r.age_secs(now),
                kind: r.kind,
                tool_name: r.tool_name.as_deref(),
                subject: r.subject(),
                title: &r.title,
                session_id: r.session_id.as_deref(),
                cwd: r.cwd.as_deref(),
                tool_input: r.tool_input.as_ref(),
                body: r.body.as_deref(),
                lane: r.lane.as_deref(),
                abandoned: r.abandoned,
            })
            .collect();
        return print_json(&listed);
    }
    if requests.is_empty() {
        println!(
            "no pending requests in {}",
            escape(&args.dir.dir.display().to_string())
        );
        return 0;
    }
    println!(
        "{:<12} {:>7}  {:<9}  {:<11} {:<50}  TITLE",
        "ID", "AGE", "STATE", "TOOL", "WHAT"
    );
    for r in &requests {
        let tool = match r.kind {
            RequestKind::Ask => "(ask)".to_string(),
            RequestKind::Session => "(session)".to_string(),
            RequestKind::Tool => r.tool_name.clone().unwrap_or_default(),
        };
        println!(
            "{:<12} {:>7}  {:<9}  {:<11} {:<50}  {}",
            r.id,
            crate::fmt::duration(r.age_secs(now)),
            if r.abandoned { "abandoned" } else { "waiting" },
            clip(&escape(&tool), 11),
            crate::fmt::head_and_tail(&escape(&r.subject()), 50),
            crate::fmt::head_and_tail(&escape(&titled(r)), 100),
        );
    }
    if requests.iter().any(|r| r.abandoned) {
        println!(
            "abandoned: the process that asked is gone; `clowder queue --prune` moves these to done/"
        );
    }
    0
}

/// `clowder queue --json`'s output: 0, or 1 when it cannot be encoded.
fn print_json(value: &impl Serialize) -> i32 {
    match serde_json::to_string_pretty(value) {
        // serde_json leaves DEL, C1 controls and format characters raw.
        Ok(json) => {
            println!("{}", crate::escape::json_visible(&json));
            0
        }
        Err(err) => {
            eprintln!("clowder queue: error: {err}");
            1
        }
    }
}

/// How many finished requests `clowder queue --history` lists.
const HISTORY: usize = 50;

/// `clowder queue --history`: the newest finished requests, newest first.
fn history(args: &QueueArgs) -> i32 {
    let records = super::list_done(&args.dir.dir, HISTORY);
    if args.json {
        return print_json(&records);
    }
    if records.is_empty() {
        println!(
            "no finished requests in {}",
            escape(&args.dir.dir.display().to_string())
        );
        return 0;
    }
    println!(
        "{:<12} {:<19}  {:<9}  {:<28} {:<40}  REASON",
        "ID", "DECIDED", "OUTCOME", "BY", "WHAT"
    );
    for record in &records {
        let decision = record.decision.as_ref();
        let by = decision
            .and_then(|d| d.decided_by.as_deref())
            .unwrap_or("-");
        let at = decision.map_or(record.request.created, |d| d.decided_at);
        let reason = decision.and_then(|d| d.reason.as_deref()).unwrap_or("");
        println!(
            "{:<12} {:<19}  {:<9}  {:<28} {:<40}  {}",
            record.request.id,
            at.format("%Y-%m-%d %H:%M:%S"),
            record.outcome,
            clip(&escape(by), 28),
            crate::fmt::head_and_tail(&escape(&titled(&record.request)), 40),
            crate::fmt::head_and_tail(&escape(reason), 100),
        );
    }
    0
}

/// The title, after the lane that asked (`[auth] …`) when a lane did.
fn titled(request: &crate::approvals::Request) -> String {
    match &request.lane {
        Some(lane) => format!("[{lane}] {}", request.title),
        None => request.title.clone(),
    }
}

/// `text` (escaped, so on one line) in at most `max` characters.
fn clip(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        text.to_string()
    } else {
        let mut out: String = text.chars().take(max.saturating_sub(1)).collect();
        out.push('…');
        out
    }
}

/// `clowder approve ID` / `clowder reject ID --reason …`.
pub fn decide(dir: &Path, id: &str, decision: Decision, note: Option<String>) -> i32 {
    let (who, verb) = decider(&decision);
    let queue = match open_queue(dir, who) {
        Ok(queue) => queue.deciding_as(who),
        Err(code) => return code,
    };
    let result = match decision {
        Decision::Approve => queue.approve_with_reason(id, note),
        reject => queue.decide(id, reject),
    };
    match result {
        Ok(()) => {
            println!("{verb} {id}");
            0
        }
        Err(
            err @ (DecideError::UnknownId(_)
            | DecideError::BadId(_)
            | DecideError::BadRequest { .. }
            | DecideError::Abandoned(_)
            | DecideError::AlreadyDecided { .. }),
        ) => {
            eprintln!("{who}: error: {}", escape(&err.to_string()));
            1
        }
        Err(err) => {
            eprintln!("{who}: error: {}", escape(&err.to_string()));
            EXIT_ERROR
        }
    }
}

/// Who decides from the command line, as the request's record names it, and
/// what `clowder approve` / `reject` print once done (`approved ID`).
pub fn decider(decision: &Decision) -> (&'static str, &'static str) {
    match decision {
        Decision::Approve => ("clowder approve", "approved"),
        Decision::Reject(_) => ("clowder reject", "rejected"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timeouts_parse() {
        let secs = |t: &str| t.parse::<Wait>().map(|w| w.limit.map(|d| d.as_secs_f64()));
        assert_eq!(secs("90s"), Ok(Some(90.0)));
        assert_eq!(secs("10m"), Ok(Some(600.0)));
        assert_eq!(secs("1h"), Ok(Some(3600.0)));
        assert_eq!(secs("1.5m"), Ok(Some(90.0)));
        assert_eq!(secs("never"), Ok(None));
        assert!(secs("0s").is_err());
        assert!(secs("10").is_err());
        assert!(secs("m").is_err());
        assert!(secs("10 minutes").is_err());
    }

    #[test]
    fn answers_are_the_hook_protocol() {
        assert_eq!(
            hook_answer(false, "no"),
            r#"{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"deny","permissionDecisionReason":"no"}}"#
        );
    }
}
