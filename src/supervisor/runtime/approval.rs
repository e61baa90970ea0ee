//! The session's prompt, and the approvals asked before a session and at a doom loop.

use std::sync::Arc;

use chrono::Utc;

use super::{Internal, Runtime};
use crate::approvals::{Outcome as ApprovalOutcome, Queue, Request, RequestKind};
use crate::supervisor::core::Input;
use crate::supervisor::prompt;

impl Runtime {
    pub(super) fn build_prompt(&mut self, iteration: u64) {
        self.pending_iteration = iteration;
        let prompt_file = self.options.working_dir.join(self.config.prompt_path());
        let commands: Vec<String> = self
            .config
            .prompt
            .prepend_commands
            .iter()
            .map(|c| c.0.clone())
            .collect();
        let mut env = self.base_env();
        env.push(("HARNESS_ITERATION".into(), iteration.to_string()));
        env.push((
            "HARNESS_GLOBAL_ITERATION".into(),
            self.counter.next().to_string(),
        ));
        let waiting = self.waiting_notes();
        let notes = waiting.iter().map(|note| note.text.clone()).collect();
        self.notes_in_prompt = waiting;
        let prompt_config = &self.config.prompt;
        let extras = prompt::Extras {
            // From the run's second session on.
            continuation: (self.core.counters().sessions > 0)
                .then(|| prompt_config.continuation.clone()),
            continuation_mode: prompt_config.continuation_mode,
            handoff_file: prompt_config
                .handoff_path()
                .map(|path| self.options.working_dir.join(path)),
            notes,
        };
        let tx = self.internal_tx.clone();
        let cwd = self.options.working_dir.clone();
        let timeout = self.config.hooks.timeout_secs.0;
        let shell = self.shell.clone();
        tokio::spawn(async move {
            let built = prompt::build(
                &prompt_file,
                &commands,
                &extras,
                &env,
                &cwd,
                timeout,
                &shell,
            )
            .await;
            let message = match built {
                Ok(built) => Internal::PromptReady {
                    text: built.text,
                    warnings: built.warnings,
                    handoff_error: built.handoff_error,
                },
                Err(error) => Internal::PromptFailed(error),
            };
            let _ = tx.send(message);
        });
    }

    /// Puts a "may this session start?" request in the approval queue and waits
    /// for the answer off the loop's thread; no timeout: the loop waits for a human.
    pub(super) fn request_session_approval(&mut self, iteration: u64, critical: bool) {
        let prompt = self.pending_prompt.clone().unwrap_or_default();
        let max = self.config.session.max_iterations.0;
        let request = Request {
            id: String::new(),
            created: Utc::now(),
            kind: RequestKind::Session,
            title: format!(
                "start session {iteration}/{max}{}",
                if critical { " (critical)" } else { "" }
            ),
            tool_name: None,
            tool_input: None,
            session_id: None,
            cwd: Some(self.options.working_dir.display().to_string()),
            // Whole: the human approves the session this prompt starts.
            body: Some(prompt),
            lane: self.lane.as_ref().map(|lane| lane.name.clone()),
            abandoned: false,
        };
        self.ask_through_queue(request, |approved, reason| Input::SessionApproval {
            approved,
            reason,
        });
    }

    /// Asks whether a session that repeats the same tool call may go on.
    pub(super) fn request_doom_loop_approval(
        &mut self,
        iteration: u64,
        global: u64,
        tool: &str,
        input: &str,
        repeats: u64,
    ) {
        let request = Request {
            id: String::new(),
            created: Utc::now(),
            kind: RequestKind::Ask,
            title: format!(
                "doom loop: {tool} ×{repeats} with the same input — let session {iteration} (global {global}) go on?"
            ),
            tool_name: Some(tool.to_string()),
            tool_input: Some(serde_json::json!({ "input": input })),
            session_id: None,
            cwd: Some(self.options.working_dir.display().to_string()),
            body: Some(format!(
                "The session is paused. Approve to let it go on (the count starts again), reject to kill it.\n\n{tool}  {input}"
            )),
            lane: self.lane.as_ref().map(|lane| lane.name.clone()),
            abandoned: false,
        };
        self.ask_through_queue(request, move |approved, reason| Input::DoomLoopApproval {
            global,
            approved,
            reason,
        });
    }

    /// Submits `request` to the approval queue and waits for the answer off the
    /// loop's thread (no timeout: the loop waits for a human); the answer comes
    /// back as `to_input(approved, reason)`. A queue that cannot be used is a
    /// rejection: nothing goes on without a human's say.
    pub(super) fn ask_through_queue(
        &mut self,
        request: Request,
        to_input: impl Fn(bool, String) -> Input + Send + 'static,
    ) {
        let cancel = Arc::new(std::sync::atomic::AtomicBool::new(false));
        self.approval_cancel = Arc::clone(&cancel);
        let dir = self.options.working_dir.join(&self.config.approvals.dir.0);
        let tx = self.internal_tx.clone();
        tokio::task::spawn_blocking(move || {
            let answer = |approved: bool, reason: String| {
                let _ = tx.send(Internal::Core(Box::new(to_input(approved, reason))));
            };
            let queue = match Queue::open(&dir) {
                Ok(queue) => queue,
                Err(err) => {
                    return answer(
                        false,
                        format!("cannot ask through the approval queue: {err}"),
                    );
                }
            };
            let submitted = match queue.submit(request) {
                Ok(submitted) => submitted,
                Err(err) => {
                    return answer(
                        false,
                        format!("cannot ask through the approval queue: {err}"),
                    );
                }
            };
            let cancelled = || {
                cancel
                    .load(std::sync::atomic::Ordering::SeqCst)
                    .then_some(0)
            };
            match queue.wait(&submitted, None, &cancelled) {
                Ok(ApprovalOutcome::Approved { reason }) => {
                    answer(true, reason.unwrap_or_else(|| "approved".into()))
                }
                Ok(ApprovalOutcome::Rejected { reason }) => answer(false, reason),
                Ok(ApprovalOutcome::TimedOut) => answer(false, "timed out".into()),
                Ok(ApprovalOutcome::Removed) => {
                    answer(false, "the request was removed from the queue".into())
                }
                // The loop moved on; nobody is listening.
                Ok(ApprovalOutcome::Cancelled { .. }) => {}
                Err(err) => answer(false, format!("approval queue error: {err}")),
            }
        });
    }
}
