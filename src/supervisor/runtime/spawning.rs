//! Starting a session: spawning the agent, containing it, reading its output, recording it.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use chrono::Utc;
use tokio::sync::mpsc;

use super::{Internal, LiveSession, Runtime, free_space, git_head, is_out_of_space};
use crate::agent::follow::FollowUpdate;
use crate::store::counter::create_output_file;
use crate::store::running::Record;
use crate::supervisor::analysis::SessionReader;
use crate::supervisor::core::{Input, Level};
use crate::supervisor::reading::{ReaderThread, Report};
use crate::supervisor::{cgroup, process, prompt};
use crate::wake::Watch;

impl Runtime {
    pub(super) fn spawn_session(&mut self, prompt_text: &str) -> Input {
        let (global, output_file, file) = match self.open_output_file() {
            Ok(opened) => opened,
            Err(input) => return input,
        };
        let args = self
            .gate
            .apply(prompt::agent_args(&self.config.agent.args, prompt_text));
        let git_head_before = git_head(&self.options.working_dir);
        let token = format!("{}s{global}", self.shell.token_prefix);
        let env = self.session_env(global, &output_file, &token);
        let cgroup = self.session_cgroup(global);
        let mut containment = process::Containment {
            token: token.clone(),
            cgroup,
        };
        // Recorded before it starts, and again once its pid is known.
        self.record_session(global, 0, Some(self.shell.own_start), &containment);
        let mut spawned = match self.spawn_contained(&args, &env, &file, &mut containment) {
            Ok(spawned) => spawned,
            Err(err) => {
                self.running.remove(&containment.token);
                self.slot = None;
                return Input::SpawnFailed {
                    global: Some(global),
                    error: format!("`{}`: {err}", self.config.agent.command.0),
                };
            }
        };
        drop(file);
        let (kill_tx, kill_rx) = mpsc::unbounded_channel();
        let steer = self.start_steering(&mut spawned, prompt_text, global);
        let (pid, pgid) = (spawned.pid, spawned.pgid);
        let start_ticks = process::read_proc_stat(pid).map(|info| info.start_ticks);
        self.record_session(global, pid, start_ticks, &containment);
        self.supervise(spawned, containment, kill_rx);
        let reader = self.start_reader(global, &output_file);
        let output_watch = watch_output(&reader, &output_file);
        self.session = Some(LiveSession {
            global,
            pid,
            start_ticks,
            pgid,
            token,
            output_file: output_file.clone(),
            kill: kill_tx,
            git_head_before,
            echoed: 0,
            reader: Some(reader),
            output_watch,
            activity_seen: self.activity_before(),
            steer,
        });
        Input::Spawned {
            global,
            pid,
            pgid,
            output_file,
        }
    }

    /// Feeds the prompt to an agent that takes messages while it runs.
    fn start_steering(
        &mut self,
        spawned: &mut process::Spawned,
        prompt_text: &str,
        global: u64,
    ) -> Option<super::steering::Steer> {
        self.clear_note_answers();
        let input = self.live_input?;
        let stdin = spawned.stdin.take()?;
        let tx = self.internal_tx.clone();
        Some(super::steering::Steer::start(
            input,
            stdin,
            prompt_text,
            global,
            tx,
        ))
    }

    /// When the lane's activity file was last written before the session: a
    /// write from before it is no sign of its life.
    fn activity_before(&self) -> Option<std::time::SystemTime> {
        self.lane
            .as_ref()
            .and_then(|lane| lane.activity_file.as_ref())
            .and_then(|file| std::fs::metadata(file).ok()?.modified().ok())
    }

    /// The next session's number and output file, its number saved; or the
    /// input that says why there is none.
    fn open_output_file(&mut self) -> Result<(u64, PathBuf, File), Input> {
        let prefix = self.config.session.output_prefix(&self.config.agent);
        let (global, output_file, file) =
            match create_output_file(&self.output_dir, &prefix, self.counter.next()) {
                Ok(created) => created,
                Err(err) if is_out_of_space(&err) => {
                    return Err(Input::DiskFull {
                        dir: self.output_dir.clone(),
                        free_bytes: free_space(&self.output_dir).unwrap_or(0),
                    });
                }
                Err(err) => {
                    return Err(Input::SpawnFailed {
                        global: Some(self.counter.next()),
                        error: format!(
                            "cannot create the output file in {}: {err}",
                            self.output_dir.display()
                        ),
                    });
                }
            };
        // Persisted before the session starts: a crash never hands this number out again.
        if let Err(err) = self.counter.commit(global) {
            self.reporter.log(
                Utc::now(),
                Level::Warn,
                &format!("cannot save the iteration counter: {err}"),
            );
        }
        Ok((global, output_file, file))
    }

    /// The agent can tell which session it is, e.g. to name its own logs.
    fn session_env(&self, global: u64, output_file: &Path, token: &str) -> Vec<(String, String)> {
        let mut env = self.base_env();
        env.push((
            "HARNESS_ITERATION".into(),
            self.pending_iteration.to_string(),
        ));
        env.push(("HARNESS_GLOBAL_ITERATION".into(), global.to_string()));
        env.push((
            "HARNESS_OUTPUT_FILE".into(),
            output_file.display().to_string(),
        ));
        env.push((process::TOKEN_ENV.into(), token.to_string()));
        env.extend(self.gate.env.iter().cloned());
        env
    }

    /// Owns the session's process group until it is empty, then tells the loop.
    fn supervise(
        &self,
        spawned: process::Spawned,
        containment: process::Containment,
        kill_rx: mpsc::UnboundedReceiver<()>,
    ) {
        let tx = self.internal_tx.clone();
        let grace = self.core.settings().kill_grace;
        let pgid = spawned.pgid;
        let owned = spawned.owned;
        tokio::spawn(async move {
            let end =
                process::supervise_group(spawned.child, pgid, grace, kill_rx, containment).await;
            drop(owned);
            let _ = tx.send(Internal::GroupEnded(end));
        });
    }

    /// Starts the session's reader thread; its progress goes to the guards if
    /// they watch sessions, its display lines to the output tap if open.
    pub(super) fn start_reader(&mut self, global: u64, output_file: &Path) -> ReaderThread {
        let mut reader = SessionReader::new(
            output_file,
            Arc::clone(&self.detectors),
            self.config.agent.format,
            self.config.completion.promise(),
        );
        let progress = self.core.settings().guard.watches_sessions();
        if progress {
            reader.record_tool_calls();
        }
        let tap = self.output_tap.clone().filter(|tap| !tap.is_closed());
        if tap.is_some() {
            reader.show();
        }
        let tx = self.internal_tx.clone();
        let file = output_file.to_path_buf();
        let mut reset = true;
        let sink = Box::new(move |report| {
            let _ = tx.send(match report {
                Report::Grew => Internal::OutputWritten,
                Report::Progress(progress) => Internal::Progress { global, progress },
                Report::Retrying(retrying) => Internal::Retrying { global, retrying },
                Report::AgentError(reason) => Internal::AgentError { global, reason },
                Report::ResultRead => Internal::ResultRead { global },
                Report::Shown { lines, stats } => {
                    if let Some(tap) = &tap {
                        let file = file.clone();
                        let update = FollowUpdate {
                            file,
                            lines,
                            stats: *stats,
                            reset,
                        };
                        let _ = tap.send(update);
                        reset = false;
                    }
                    return;
                }
            });
        });
        match ReaderThread::start(reader, output_file, sink, progress) {
            Ok(reader) => reader,
            Err((reader, err)) => {
                self.reporter.log(
                    Utc::now(),
                    Level::Warn,
                    &format!(
                        "global={global}: cannot start a thread to read the output as it is written ({err}): it is read when the session ends"
                    ),
                );
                reader
            }
        }
    }

    /// Spawns the agent in its cgroup; if that fails, once more without one (the
    /// session is then ended by its group and token), so that a cgroup that
    /// refuses a process never stops the loop.
    pub(super) fn spawn_contained(
        &mut self,
        args: &[String],
        env: &[(String, String)],
        file: &File,
        containment: &mut process::Containment,
    ) -> std::io::Result<process::Spawned> {
        let io = &process::AgentIo {
            output: file,
            piped_stdin: self.live_input.is_some(),
        };
        let program = &self.config.agent.command.0;
        let cwd = &self.options.working_dir;
        let owner = self.lane.as_ref().map_or("", |lane| lane.name.as_str());
        let cgroup = containment.cgroup.as_deref();
        let first = process::spawn_agent(program, args, env, io, cwd, cgroup, owner);
        if first.is_ok() {
            return first;
        }
        let Some(cgroup) = containment.cgroup.take() else {
            return first;
        };
        cgroup::remove_tree(&cgroup);
        let second = process::spawn_agent(program, args, env, io, cwd, None, owner);
        if second.is_ok()
            && let Err(err) = &first
        {
            self.reporter.log(
                Utc::now(),
                Level::Warn,
                &format!(
                    "cannot start the agent in {}: {err}; this session is ended by its process group and {}",
                    cgroup.display(),
                    process::TOKEN_ENV
                ),
            );
        }
        second
    }

    /// The session's own cgroup, when sessions get one (a failure is logged and
    /// the session goes on under the process group and its token).
    pub(super) fn session_cgroup(&mut self, global: u64) -> Option<PathBuf> {
        match self.kill_method.create(&format!("session-{global}")) {
            Ok(cgroup) => cgroup,
            Err(err) => {
                self.reporter.log(
                    Utc::now(),
                    Level::Warn,
                    &format!("global={global}: no cgroup for the session: {err}"),
                );
                None
            }
        }
    }

    /// Records the session before it can do much, for a later start to end it
    /// if clowder dies.
    pub(super) fn record_session(
        &mut self,
        global: u64,
        pid: i32,
        start_ticks: Option<u64>,
        containment: &process::Containment,
    ) {
        let Some(start_ticks) = start_ticks else {
            return;
        };
        let record = Record {
            token: containment.token.clone(),
            kind: "session".into(),
            what: global.to_string(),
            clowder_pid: std::process::id(),
            pid,
            pgid: pid,
            start_ticks,
            cgroup: containment.cgroup.clone(),
        };
        if let Err(err) = self.running.add(&record) {
            self.reporter.log(
                Utc::now(),
                Level::Warn,
                &format!("global={global}: cannot record the session in .clowder/running: {err}"),
            );
        }
    }
}

/// Wakes the reader thread whenever the output file is written. Without a
/// thread nothing reads on a wake-up: the tick polls the size.
fn watch_output(reader: &ReaderThread, output_file: &Path) -> Option<Watch> {
    let waker = reader.threaded().then(|| reader.waker())?;
    Watch::start(&[output_file.to_path_buf()], move || waker.wake())
}
