//! When the runtime looks again: poll periods, status refreshes, the tick and the echoed output.

use std::collections::VecDeque;
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::Utc;

use super::{
    IDLE_LOOK, Internal, MAX_POLL, MIN_LOOK_GAP, Runtime, STATUS_HEARTBEAT, STATUS_REFRESH,
    STOP_NOW_REQUEST, VERBOSE_CHUNK, VERBOSE_POLL, written_ago,
};
use crate::protocol::{Command, ExitReason, Snapshot};
use crate::store::control;
use crate::supervisor::core::{Input, Now};
use crate::wake::Watch;

impl Runtime {
    pub(super) fn poll_period(&self) -> Duration {
        let mut period = self.config.watchdog.check_interval_secs.0.min(MAX_POLL);
        if self.options.verbose {
            period = period.min(VERBOSE_POLL);
        }
        period.max(Duration::from_millis(20))
    }

    /// Hands the snapshot to its watchers unless only its time changed: a look
    /// that found nothing new wakes no one (the control room, the host).
    pub(super) fn publish(&self, mut snapshot: Snapshot) {
        self.snapshots.send_if_modified(|latest| {
            let now = snapshot.last_update;
            snapshot.last_update = latest.last_update;
            if snapshot == **latest {
                return false;
            }
            snapshot.last_update = now;
            *latest = Arc::new(snapshot);
            true
        });
    }

    /// Watches what [`Runtime::on_tick`] looks at besides the output: STOP, the
    /// requests, the activity file.
    pub(super) fn watch_control_files(&self) -> Option<Watch> {
        let mut files = vec![self.stop_file.clone()];
        for request in [
            control::PAUSE_REQUEST,
            control::RESUME_REQUEST,
            STOP_NOW_REQUEST,
        ] {
            files.push(self.control_dir.join(request));
        }
        let activity = self.lane.as_ref().and_then(|l| l.activity_file.as_ref());
        files.extend(activity.cloned());
        // A folder is watched only if it is there.
        let notes = crate::store::notes::dir(&self.control_dir);
        if std::fs::create_dir_all(&notes).is_ok() {
            files.push(notes.join(crate::store::notes::BELL));
        }
        let wake = self.internal_tx.clone();
        Watch::start(&files, move || {
            let _ = wake.send(Internal::Look);
        })
    }

    /// When to look at the files next: every [`Runtime::poll_period`] unless
    /// they are watched; then when the core or the status file needs it, and at
    /// least every [`IDLE_LOOK`].
    pub(super) fn next_look(&self) -> Instant {
        let Some(last) = self.last_look else {
            return Instant::now();
        };
        let watched = |watch: &Option<Watch>| watch.as_ref().is_some_and(Watch::working);
        let output_watched = self
            .session
            .as_ref()
            .is_none_or(|session| watched(&session.output_watch));
        if self.options.verbose || !watched(&self.look_watch) || !output_watched {
            return last + self.poll_period();
        }
        let idle = self.config.watchdog.check_interval_secs.0.min(IDLE_LOOK);
        let mut due = last + idle.max(MIN_LOOK_GAP);
        due = due.min(self.core.next_tick_due().unwrap_or(due));
        due = due.min(self.status_due().unwrap_or(due));
        due.max(last + MIN_LOOK_GAP)
    }

    /// When the status file is to be written again while a session runs: soon
    /// after the output grew, else as a heartbeat.
    pub(super) fn status_due(&self) -> Option<Instant> {
        if !self.core.session_running() {
            return None;
        }
        let Some(written) = self.last_status_write else {
            return Some(Instant::now());
        };
        let latest = self.snapshots.borrow();
        let grew = (latest.output_bytes, latest.last_output_growth) != self.status_growth;
        Some(
            written
                + if grew {
                    STATUS_REFRESH
                } else {
                    STATUS_HEARTBEAT
                },
        )
    }

    /// The reader thread read more output: its size for the watchdog.
    pub(super) fn output_grew(&mut self, queue: &mut VecDeque<Input>) {
        let Some(session) = &mut self.session else {
            return;
        };
        if let Ok(meta) = std::fs::metadata(&session.output_file) {
            queue.push_back(Input::OutputSize {
                bytes: meta.len(),
                written_ago: written_ago(&meta),
            });
        }
        if self.options.verbose {
            self.echo_output();
        }
    }

    pub(super) fn now(&self) -> Now {
        Now {
            mono: Instant::now(),
            wall: Utc::now(),
        }
    }

    pub(super) fn on_tick(&mut self, queue: &mut VecDeque<Input>) {
        self.last_look = Some(Instant::now());
        if self.exit.is_some() {
            return;
        }
        self.look_at_session(queue);
        if self.stop_file.exists() {
            queue.push_back(Input::StopFileSeen);
        }
        self.take_control_requests(queue);
        self.take_reviewer_spend(queue);
        // Each new note is decided as soon as seen: now, or the next session.
        self.route_notes();
        if self.held_iteration.is_some() && self.stop_file.exists() {
            self.stop_before_start(ExitReason::StopFile, "stopped while paused".into());
        }
        queue.push_back(Input::Tick);
        if self.status_due().is_some_and(|at| at <= Instant::now()) {
            self.write_status();
        }
    }

    /// What the gate's reviewer spent since the last look, for the run's totals.
    pub(super) fn take_reviewer_spend(&mut self, queue: &mut VecDeque<Input>) {
        if self.config.approvals.reviewer.is_some() {
            let spend = crate::store::spend::take(&self.control_dir);
            if spend.calls > 0 {
                queue.push_back(Input::ReviewerSpent(spend));
            }
        }
    }

    /// The running session's output and activity files, as the watchdog sees them.
    fn look_at_session(&mut self, queue: &mut VecDeque<Input>) {
        let Some(session) = &mut self.session else {
            return;
        };
        if let Ok(meta) = std::fs::metadata(&session.output_file) {
            queue.push_back(Input::OutputSize {
                bytes: meta.len(),
                written_ago: written_ago(&meta),
            });
        }
        let activity = self.lane.as_ref().and_then(|l| l.activity_file.as_ref());
        if let Some(meta) = activity.and_then(|file| std::fs::metadata(file).ok())
            && let Ok(modified) = meta.modified()
            && session.activity_seen.replace(modified) != Some(modified)
        {
            queue.push_back(Input::Activity {
                written_ago: written_ago(&meta),
            });
        }
        // For a change the watch did not report.
        if let Some(reader) = &session.reader {
            reader.wake();
        }
        if self.options.verbose {
            self.echo_output();
        }
    }

    /// From `clowder pause` / `clowder resume` (or `clowder lane …`) elsewhere.
    fn take_control_requests(&mut self, queue: &mut VecDeque<Input>) {
        let dir = self.control_dir.clone();
        if control::take_in(&dir, control::PAUSE_REQUEST) {
            self.lane_paused = self.lane.is_some();
            queue.push_back(Input::Command(Command::Pause));
        }
        if control::take_in(&dir, control::RESUME_REQUEST) {
            queue.push_back(Input::Command(Command::Resume));
            self.lane_paused = false;
            if let Some(iteration) = self.held_iteration.take() {
                self.take_slot(iteration);
            }
        }
        if self.lane.is_some() && control::take_in(&dir, STOP_NOW_REQUEST) {
            queue.push_back(Input::Command(Command::StopNow));
            if self.held_iteration.is_some() {
                self.stop_before_start(ExitReason::UserStop, "stopped while paused".into());
            }
        }
    }

    /// Copies what the agent wrote since the last look to the reporter.
    pub(super) fn echo_output(&mut self) {
        let Some(session) = &mut self.session else {
            return;
        };
        let Ok(mut file) = File::open(&session.output_file) else {
            return;
        };
        if file.seek(SeekFrom::Start(session.echoed)).is_err() {
            return;
        }
        let mut buf = Vec::new();
        if let Ok(read) = file.take(VERBOSE_CHUNK as u64).read_to_end(&mut buf) {
            session.echoed += read as u64;
            if read > 0 {
                self.reporter.agent_output(&buf);
            }
        }
    }
}
