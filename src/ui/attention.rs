//! Calling a human: which changes need one ([`detect`], pure) and how they are
//! signalled ([`Notifier`]: the bell, a desktop-notification escape, and the
//! `[ui] on_attention` command).
//!
//! Wiring, in the control room: keep the last [`Observation`] (None before the
//! first), build the new one from the snapshots ([`AttentionState::of`]) and the
//! pending requests, pass both to [`detect`], and hand the events to
//! [`Notifier::notify`] with the terminal.

use std::collections::BTreeMap;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;

use crate::config::{Notify, UiConfig};
use crate::protocol::{ExitReason, LoopState};
use crate::supervisor::{process, reaper};

/// An `on_attention` command still running after this long has its group killed.
pub const COMMAND_TIMEOUT: Duration = Duration::from_secs(10);
/// At most this many `on_attention` commands run at once; more are skipped (logged).
const MAX_RUNNING: usize = 4;
/// At most this many desktop notifications at once; past it the last one counts the rest.
const MAX_NOTIFICATIONS: usize = 3;
/// Longest text put in a notification, in characters.
const MAX_TEXT: usize = 200;
/// The owner the reaper knows the attention commands by.
const OWNER: &str = "attention";

/// What matters of a lane's state for attention.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AttentionState {
    Held,
    Failed,
    Done,
    Other,
}

impl AttentionState {
    /// A lane's state as its snapshot tells it (`state`, `exit_reason`): held;
    /// or, once stopped, done when it ended well (exit code 0) and failed otherwise.
    pub fn of(state: LoopState, exit_reason: Option<&ExitReason>) -> AttentionState {
        match (state, exit_reason) {
            (LoopState::Held, _) => AttentionState::Held,
            (LoopState::Stopped, Some(reason)) if reason.exit_code() == 0 => AttentionState::Done,
            (LoopState::Stopped, Some(_)) => AttentionState::Failed,
            _ => AttentionState::Other,
        }
    }
}

/// A pending approval request, as attention needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingRequest {
    /// The lane that asked; None for a single loop (or a producer outside lanes).
    pub lane: Option<String>,
    pub title: String,
}

/// What the control room saw at one moment: each lane's state, by name, and the
/// pending requests, by id.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Observation {
    pub lanes: BTreeMap<String, AttentionState>,
    pub pending: BTreeMap<String, PendingRequest>,
}

/// Why a human is called.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventKind {
    ApprovalRequested,
    LaneHeld,
    LaneFailed,
    LaneDone,
}

impl EventKind {
    /// The name given to `on_attention` as `CLOWDER_EVENT`.
    pub fn as_str(self) -> &'static str {
        match self {
            EventKind::ApprovalRequested => "approval_requested",
            EventKind::LaneHeld => "lane_held",
            EventKind::LaneFailed => "lane_failed",
            EventKind::LaneDone => "lane_done",
        }
    }
}

/// One call for attention.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AttentionEvent {
    /// The lane it is about; "" when there is none.
    pub lane: String,
    pub event: EventKind,
    /// One line for a human (made safe for the terminal only when written).
    pub text: String,
}

/// The calls for attention between two observations. With no previous one (at
/// start-up) lanes already held, failed or done are not announced, but pending
/// requests are, once. A lane seen for the first time is not announced either:
/// what counts is a lane *becoming* held, failed or done.
pub fn detect(previous: Option<&Observation>, current: &Observation) -> Vec<AttentionEvent> {
    let mut events: Vec<AttentionEvent> = current
        .pending
        .iter()
        .filter(|(id, _)| previous.is_none_or(|p| !p.pending.contains_key(*id)))
        .map(|(_, request)| approval_event(request))
        .collect();
    let Some(previous) = previous else {
        return events;
    };
    for (lane, state) in &current.lanes {
        let Some(before) = previous.lanes.get(lane) else {
            continue;
        };
        if before == state {
            continue;
        }
        let (event, word) = match state {
            AttentionState::Held => (EventKind::LaneHeld, "held"),
            AttentionState::Failed => (EventKind::LaneFailed, "failed"),
            AttentionState::Done => (EventKind::LaneDone, "done"),
            AttentionState::Other => continue,
        };
        events.push(AttentionEvent {
            lane: lane.clone(),
            event,
            text: format!("lane {lane} is {word}"),
        });
    }
    events
}

fn approval_event(request: &PendingRequest) -> AttentionEvent {
    let lane = request.lane.clone().unwrap_or_default();
    let text = if lane.is_empty() {
        format!("approval requested: {}", request.title)
    } else {
        format!("{lane}: approval requested: {}", request.title)
    };
    AttentionEvent {
        lane,
        event: EventKind::ApprovalRequested,
        text,
    }
}

/// Signals calls for attention as `[ui]` says: escapes on the terminal, and the
/// `on_attention` command off the caller's thread.
#[derive(Debug, Clone)]
pub struct Notifier {
    notify: Notify,
    command: Option<String>,
    dir: PathBuf,
    timeout: Duration,
    running: Arc<AtomicUsize>,
}

impl Notifier {
    /// `fleet_dir` is where `on_attention` runs: the fleet's (or the loop's) folder.
    pub fn new(config: &UiConfig, fleet_dir: &Path) -> Notifier {
        Notifier {
            notify: config.notify,
            command: config.on_attention().map(str::to_string),
            dir: fleet_dir.to_path_buf(),
            timeout: COMMAND_TIMEOUT,
            running: Arc::new(AtomicUsize::new(0)),
        }
    }

    /// The same notifier with another limit for `on_attention`.
    pub fn with_timeout(mut self, timeout: Duration) -> Notifier {
        self.timeout = timeout;
        self
    }

    /// Writes the escapes for `events` to `terminal` (one bell for them all) and
    /// starts `on_attention` once per event. Never blocks on the command.
    pub fn notify(&self, terminal: &mut impl Write, events: &[AttentionEvent]) -> io::Result<()> {
        if events.is_empty() {
            return Ok(());
        }
        for event in events {
            self.run_command(event);
        }
        terminal.write_all(escapes(self.notify, events).as_bytes())?;
        terminal.flush()
    }

    fn run_command(&self, event: &AttentionEvent) {
        let Some(command) = &self.command else {
            return;
        };
        if self.running.fetch_add(1, Ordering::SeqCst) >= MAX_RUNNING {
            self.running.fetch_sub(1, Ordering::SeqCst);
            tracing::warn!(
                "[ui] on_attention not run for {} (lane {:?}): {MAX_RUNNING} still running",
                event.event.as_str(),
                event.lane
            );
            return;
        }
        let job = Job {
            command: command.clone(),
            dir: self.dir.clone(),
            lane: event.lane.clone(),
            event: event.event.as_str(),
            timeout: self.timeout,
        };
        let running = Arc::clone(&self.running);
        let spawned = std::thread::Builder::new()
            .name("on_attention".into())
            .spawn(move || {
                job.run();
                running.fetch_sub(1, Ordering::SeqCst);
            });
        if let Err(err) = spawned {
            self.running.fetch_sub(1, Ordering::SeqCst);
            tracing::warn!("[ui] on_attention: cannot start a thread: {err}");
        }
    }
}

/// The bytes that signal `events` on a terminal, as `notify` chooses.
fn escapes(notify: Notify, events: &[AttentionEvent]) -> String {
    let mut out = String::new();
    if notify.osc() {
        let shown = if events.len() > MAX_NOTIFICATIONS {
            MAX_NOTIFICATIONS - 1
        } else {
            events.len()
        };
        for event in &events[..shown] {
            let title = if event.lane.is_empty() {
                "clowder".to_string()
            } else {
                format!("clowder: {}", event.lane)
            };
            out.push_str(&notification(&title, &event.text));
        }
        if shown < events.len() {
            let more = format!("{} more lanes or requests need you", events.len() - shown);
            out.push_str(&notification("clowder", &more));
        }
    }
    if notify.bell() {
        out.push('\x07');
    }
    out
}

/// One desktop notification in both escapes terminals know: OSC 9 (iTerm2's)
/// and OSC 777 (urxvt's); a terminal that knows neither ignores them.
fn notification(title: &str, body: &str) -> String {
    let (title, body) = (safe_text(title), safe_text(body));
    format!("\x1b]9;{body}\x07\x1b]777;notify;{title};{body}\x07")
}

/// Text that cannot end or add an escape sequence: control characters are shown
/// as visible escapes, `;` (the OSC 777 field separator) becomes `,`, and long
/// text is cut.
fn safe_text(text: &str) -> String {
    let visible = crate::escape::one_line(text).replace(';', ",");
    if visible.chars().count() <= MAX_TEXT {
        return visible;
    }
    let mut cut: String = visible.chars().take(MAX_TEXT - 1).collect();
    cut.push('…');
    cut
}

/// One run of `on_attention`.
struct Job {
    command: String,
    dir: PathBuf,
    lane: String,
    event: &'static str,
    timeout: Duration,
}

impl Job {
    /// Runs the command to its end (or its timeout); a failure is logged, never raised.
    fn run(self) {
        let mut command = Command::new("sh");
        command
            .arg("-c")
            .arg(&self.command)
            .current_dir(&self.dir)
            .env("CLOWDER_LANE", &self.lane)
            .env("CLOWDER_EVENT", self.event)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        std::os::unix::process::CommandExt::process_group(&mut command, 0);
        let spawned = reaper::spawn_owned(OWNER, || command.spawn(), |child| Some(child.id()));
        let (mut child, _owned) = match spawned {
            Ok(spawned) => spawned,
            Err(err) => {
                tracing::warn!("[ui] on_attention `{}` did not start: {err}", self.command);
                return;
            }
        };
        let started = Instant::now();
        loop {
            match child.try_wait() {
                Ok(Some(status)) if status.success() => return,
                Ok(Some(status)) => {
                    tracing::warn!(
                        "[ui] on_attention `{}` failed ({status}) for {} (lane {:?})",
                        self.command,
                        self.event,
                        self.lane
                    );
                    return;
                }
                Ok(None) if started.elapsed() >= self.timeout => break,
                Ok(None) => std::thread::sleep(Duration::from_millis(50)),
                Err(err) => {
                    tracing::warn!("[ui] on_attention `{}`: {err}", self.command);
                    return;
                }
            }
        }
        let pgid = i32::try_from(child.id()).unwrap_or(0);
        process::signal_group(pgid, Signal::SIGKILL);
        let _ = child.wait();
        tracing::warn!(
            "[ui] on_attention `{}` killed after {:?} for {} (lane {:?})",
            self.command,
            self.timeout,
            self.event,
            self.lane
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn observation(lanes: &[(&str, AttentionState)], pending: &[(&str, &str)]) -> Observation {
        Observation {
            lanes: lanes.iter().map(|(n, s)| (n.to_string(), *s)).collect(),
            pending: pending
                .iter()
                .map(|(id, lane)| {
                    let request = PendingRequest {
                        lane: (!lane.is_empty()).then(|| lane.to_string()),
                        title: format!("Bash: run {id}"),
                    };
                    (id.to_string(), request)
                })
                .collect(),
        }
    }

    #[test]
    fn a_snapshot_tells_held_done_and_failed() {
        let of = AttentionState::of;
        assert_eq!(of(LoopState::SessionRunning, None), Other);
        assert_eq!(of(LoopState::AwaitingApproval, None), Other);
        assert_eq!(of(LoopState::Held, None), Held);
        assert_eq!(
            of(LoopState::Stopped, Some(&ExitReason::MaxIterations)),
            Done
        );
        let fatal = ExitReason::Fatal {
            message: "boom".into(),
        };
        assert_eq!(of(LoopState::Stopped, Some(&fatal)), Failed);
    }

    fn kinds(events: &[AttentionEvent]) -> Vec<(String, &'static str)> {
        events
            .iter()
            .map(|e| (e.lane.clone(), e.event.as_str()))
            .collect()
    }

    use AttentionState::*;

    #[test]
    fn start_up_announces_pending_requests_but_not_lanes() {
        let now = observation(
            &[("a", Held), ("b", Done), ("c", Failed), ("d", Other)],
            &[("r1", "a"), ("r2", "")],
        );
        let events = detect(None, &now);
        assert_eq!(
            kinds(&events),
            vec![
                ("a".into(), "approval_requested"),
                ("".into(), "approval_requested")
            ]
        );
        assert_eq!(events[0].text, "a: approval requested: Bash: run r1");
        assert_eq!(events[1].text, "approval requested: Bash: run r2");
        // The next look announces them no more.
        assert!(detect(Some(&now), &now).is_empty());
    }

    #[test]
    fn each_new_request_is_announced_once() {
        let before = observation(&[("a", Other)], &[("r1", "a")]);
        let after = observation(&[("a", Other)], &[("r1", "a"), ("r2", "a")]);
        assert_eq!(
            kinds(&detect(Some(&before), &after)),
            vec![("a".into(), "approval_requested")]
        );
        // A request decided (gone) calls nobody.
        let decided = observation(&[("a", Other)], &[("r2", "a")]);
        assert!(detect(Some(&after), &decided).is_empty());
    }

    #[test]
    fn a_lane_becoming_held_failed_or_done_is_announced() {
        for (state, name) in [
            (Held, "lane_held"),
            (Failed, "lane_failed"),
            (Done, "lane_done"),
        ] {
            let before = observation(&[("a", Other), ("b", Other)], &[]);
            let after = observation(&[("a", state), ("b", Other)], &[]);
            let events = detect(Some(&before), &after);
            assert_eq!(kinds(&events), vec![("a".into(), name)], "{state:?}");
            assert!(events[0].text.starts_with("lane a is "), "{events:?}");
        }
    }

    #[test]
    fn moving_between_attention_states_is_announced_but_staying_is_not() {
        let held = observation(&[("a", Held)], &[]);
        let failed = observation(&[("a", Failed)], &[]);
        assert_eq!(
            kinds(&detect(Some(&held), &failed)),
            vec![("a".into(), "lane_failed")]
        );
        assert!(detect(Some(&failed), &failed).is_empty());
        // Going back to work needs no human.
        let running = observation(&[("a", Other)], &[]);
        assert!(detect(Some(&held), &running).is_empty());
        // And held again after that is a new call.
        assert_eq!(
            kinds(&detect(Some(&running), &held)),
            vec![("a".into(), "lane_held")]
        );
    }

    #[test]
    fn a_lane_seen_for_the_first_time_is_not_announced() {
        let before = observation(&[("a", Other)], &[]);
        let after = observation(&[("a", Other), ("new", Done)], &[]);
        assert!(detect(Some(&before), &after).is_empty());
    }

    fn event(lane: &str, text: &str) -> AttentionEvent {
        AttentionEvent {
            lane: lane.into(),
            event: EventKind::LaneHeld,
            text: text.into(),
        }
    }

    #[test]
    fn escapes_follow_the_notify_setting() {
        let events = [event("a", "lane a is held")];
        let osc = "\x1b]9;lane a is held\x07\x1b]777;notify;clowder: a;lane a is held\x07";
        assert_eq!(escapes(Notify::Both, &events), format!("{osc}\x07"));
        assert_eq!(escapes(Notify::Osc, &events), osc);
        assert_eq!(escapes(Notify::Bell, &events), "\x07");
        assert_eq!(escapes(Notify::Off, &events), "");
        // One bell for many events.
        let two = [event("a", "x"), event("b", "y")];
        assert_eq!(escapes(Notify::Bell, &two), "\x07");
    }

    #[test]
    fn many_events_make_a_few_notifications() {
        let events: Vec<AttentionEvent> = (0..10).map(|i| event(&format!("l{i}"), "x")).collect();
        let out = escapes(Notify::Osc, &events);
        assert_eq!(out.matches("\x1b]9;").count(), MAX_NOTIFICATIONS, "{out:?}");
        assert!(out.contains("clowder: l1;x"), "{out:?}");
        assert!(!out.contains("clowder: l2;"), "{out:?}");
        assert!(out.ends_with("\x1b]777;notify;clowder;8 more lanes or requests need you\x07"));
    }

    #[test]
    fn agent_text_cannot_inject_escapes() {
        let hostile = "rm -rf /\x07\x1b]0;pwned\x07\x1b[2J\u{9c}\u{9b}31m; x\ny";
        let out = escapes(Notify::Osc, &[event("a", hostile)]);
        // Exactly the two sequences we wrote: two ESC, two BEL, nothing else.
        assert_eq!(out.matches('\x1b').count(), 2, "{out:?}");
        assert_eq!(out.matches('\x07').count(), 2, "{out:?}");
        assert!(
            !out.chars()
                .any(|c| c.is_control() && c != '\x1b' && c != '\x07')
        );
        assert_eq!(out.matches(';').count(), 4, "only our separators: {out:?}");
    }

    #[test]
    fn long_text_is_cut() {
        let text = safe_text(&"é".repeat(1000));
        assert_eq!(text.chars().count(), MAX_TEXT);
        assert!(text.ends_with('…'));
        assert_eq!(safe_text("short"), "short");
    }

    fn notifier(dir: &Path, command: &str) -> Notifier {
        let config = UiConfig {
            notify: Notify::Off,
            on_attention: command.into(),
        };
        Notifier::new(&config, dir)
    }

    fn wait_for(mut condition: impl FnMut() -> bool) -> bool {
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            if condition() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        false
    }

    #[test]
    fn on_attention_runs_in_the_fleet_folder_with_lane_and_event() {
        let dir = tempfile::tempdir().expect("tempdir");
        let notifier = notifier(
            dir.path(),
            "printf '%s %s\\n' \"$CLOWDER_LANE\" \"$CLOWDER_EVENT\" >> seen.txt",
        );
        let mut terminal = Vec::new();
        let events = [
            event("a", "lane a is held"),
            AttentionEvent {
                lane: String::new(),
                event: EventKind::ApprovalRequested,
                text: "approval requested: x".into(),
            },
        ];
        notifier.notify(&mut terminal, &events).expect("notify");
        assert!(terminal.is_empty(), "notify = off writes nothing");
        let seen = dir.path().join("seen.txt");
        assert!(wait_for(|| {
            std::fs::read_to_string(&seen).is_ok_and(|t| t.lines().count() == 2)
        }));
        let mut lines: Vec<String> = std::fs::read_to_string(&seen)
            .expect("read")
            .lines()
            .map(str::to_string)
            .collect();
        lines.sort();
        assert_eq!(lines, [" approval_requested", "a lane_held"]);
    }

    #[test]
    fn a_slow_command_does_not_block_and_is_killed_after_its_timeout() {
        let dir = tempfile::tempdir().expect("tempdir");
        let notifier = notifier(dir.path(), "echo $$ > pid; exec sleep 60")
            .with_timeout(Duration::from_millis(300));
        let started = Instant::now();
        notifier
            .notify(&mut Vec::new(), &[event("a", "x")])
            .expect("notify");
        assert!(started.elapsed() < Duration::from_secs(5), "notify blocked");
        let pid_file = dir.path().join("pid");
        assert!(wait_for(
            || std::fs::read_to_string(&pid_file).is_ok_and(|t| t.ends_with('\n'))
        ));
        let pid: i32 = std::fs::read_to_string(&pid_file)
            .expect("read")
            .trim()
            .parse()
            .expect("pid");
        assert!(
            wait_for(|| !Path::new(&format!("/proc/{pid}")).exists()),
            "the command outlived its timeout"
        );
        assert!(wait_for(|| notifier.running.load(Ordering::SeqCst) == 0));
    }

    #[test]
    fn a_failing_command_is_not_fatal_and_frees_its_slot() {
        let dir = tempfile::tempdir().expect("tempdir");
        let notifier = notifier(dir.path(), "exit 3");
        for _ in 0..10 {
            notifier
                .notify(&mut Vec::new(), &[event("a", "x")])
                .expect("notify");
        }
        assert!(wait_for(|| notifier.running.load(Ordering::SeqCst) == 0));
    }

    #[test]
    fn at_most_a_few_commands_run_at_once() {
        let dir = tempfile::tempdir().expect("tempdir");
        let notifier =
            notifier(dir.path(), "echo x >> started; sleep 1").with_timeout(Duration::from_secs(5));
        let events: Vec<AttentionEvent> = (0..10).map(|i| event(&format!("l{i}"), "x")).collect();
        notifier.notify(&mut Vec::new(), &events).expect("notify");
        assert!(notifier.running.load(Ordering::SeqCst) <= MAX_RUNNING);
        assert!(wait_for(|| notifier.running.load(Ordering::SeqCst) == 0));
        let started = std::fs::read_to_string(dir.path().join("started")).expect("read");
        assert_eq!(started.lines().count(), MAX_RUNNING);
    }
}
