//! Telling the running session a note: for an agent that takes messages on
//! its stdin while it runs (see [`crate::agent::live_input`]), clowder owns
//! that stdin. The prompt goes in first; a note told meanwhile goes in next;
//! stdin is closed once the session's result is read, or when it is killed,
//! so the session ends as it would without notes.
//!
//! Each new note is decided once, at first sight: written to the session, or
//! left for the next one (see [`crate::store::notes`] for its files, which
//! make that decision survive a crash).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use chrono::Utc;
use tokio::io::AsyncWriteExt;
use tokio::process::ChildStdin;
use tokio::sync::mpsc;

use super::{Internal, Runtime};
use crate::agent::live_input::LiveInput;
use crate::protocol::{Event, NoteHow};
use crate::store::notes::{self, Note};
use crate::supervisor::core::Level;

/// How long a note's answer file is kept for its teller.
const ANSWER_KEPT: std::time::Duration = std::time::Duration::from_secs(60);

/// A running session's stdin, fed by a task of its own so that an agent slow
/// to read never holds up the loop.
pub(in crate::supervisor) struct Steer {
    input: LiveInput,
    feed: mpsc::UnboundedSender<Feed>,
    /// Set once the session takes no more notes (its result was read, it is
    /// being ended): the feeder writes nothing after it.
    closed: Arc<AtomicBool>,
    /// The session is paused: a note waits for the next session rather than
    /// in a pipe that a kill may empty unread.
    paused: bool,
}

enum Feed {
    Line {
        bytes: Vec<u8>,
        note: Option<Box<Note>>,
    },
    Close,
}

impl Steer {
    /// Starts feeding `stdin`, the prompt first.
    pub(super) fn start(
        input: LiveInput,
        stdin: ChildStdin,
        prompt: &str,
        global: u64,
        tx: mpsc::UnboundedSender<Internal>,
    ) -> Steer {
        let (feed, rx) = mpsc::unbounded_channel();
        let closed = Arc::new(AtomicBool::new(false));
        let bytes = input.message(prompt);
        let _ = feed.send(Feed::Line { bytes, note: None });
        tokio::spawn(run_feeder(stdin, rx, Arc::clone(&closed), global, tx));
        Steer {
            input,
            feed,
            closed,
            paused: false,
        }
    }

    /// Whether a note told now goes to the session.
    fn takes_notes(&self) -> bool {
        !self.paused && !self.closed.load(Ordering::Acquire)
    }

    /// The session takes no more notes; its stdin is closed once what was
    /// queued before is written.
    pub(super) fn close(&self) {
        self.closed.store(true, Ordering::Release);
        let _ = self.feed.send(Feed::Close);
    }

    pub(super) fn set_paused(&mut self, paused: bool) {
        self.paused = paused;
    }
}

/// Writes each line in turn; answers each note's write; closes stdin at the end.
async fn run_feeder(
    stdin: ChildStdin,
    mut rx: mpsc::UnboundedReceiver<Feed>,
    closed: Arc<AtomicBool>,
    global: u64,
    tx: mpsc::UnboundedSender<Internal>,
) {
    let mut stdin = Some(stdin);
    while let Some(feed) = rx.recv().await {
        let Feed::Line { bytes, note } = feed else {
            // End of input: the agent ends its session once it has read it.
            stdin = None;
            // What was queued after the close is answered, unwritten.
            rx.close();
            continue;
        };
        let written = match stdin.as_mut() {
            Some(_) if note.is_some() && closed.load(Ordering::Acquire) => {
                Err("the session took no more notes".to_string())
            }
            Some(stdin) => write_line(stdin, &bytes).await,
            None => Err("the session took no more notes".to_string()),
        };
        match note {
            Some(note) => {
                let note = *note;
                let _ = tx.send(Internal::NoteWritten {
                    global,
                    note,
                    written,
                });
            }
            None => {
                if let Err(err) = written {
                    tracing::warn!(
                        "global={global}: the prompt was not written to the agent: {err}"
                    );
                }
            }
        }
    }
}

async fn write_line(stdin: &mut ChildStdin, bytes: &[u8]) -> Result<(), String> {
    stdin
        .write_all(bytes)
        .await
        .map_err(|err| err.to_string())?;
    stdin.flush().await.map_err(|err| err.to_string())
}

impl Runtime {
    /// The session now running that takes notes, by its number.
    fn steerable(&self) -> Option<(u64, &Steer)> {
        let session = self.session.as_ref()?;
        let steer = session.steer.as_ref().filter(|s| s.takes_notes())?;
        Some((session.global, steer))
    }

    /// Decides every new note: the running session takes it now if it can;
    /// the rest wait for the next session (logged as `note_queued`).
    pub(super) fn route_notes(&mut self) {
        if let Some((global, steer)) = self.steerable() {
            let (waiting, _) = notes::pending(&self.control_dir);
            let (input, feed) = (steer.input, steer.feed.clone());
            for mut note in waiting.into_iter().filter(|note| note.fresh) {
                match notes::claim(&mut note, global) {
                    Ok(true) => {}
                    // Its teller stopped waiting: it is for the next session.
                    Ok(false) => continue,
                    Err(err) => {
                        let message = format!("cannot claim {}: {err}", note.path.display());
                        self.reporter.log(Utc::now(), Level::Warn, &message);
                        continue;
                    }
                }
                let bytes = input.message(&notes::prompt_block(std::slice::from_ref(&note.text)));
                let line = Feed::Line {
                    bytes,
                    note: Some(Box::new(note)),
                };
                if let Err(mpsc::error::SendError(Feed::Line {
                    note: Some(note), ..
                })) = feed.send(line)
                {
                    self.note_not_taken(*note, "the session has ended");
                }
            }
        }
        self.waiting_notes();
    }

    /// The feeder wrote a note to session `global`, or could not.
    pub(super) fn on_note_written(&mut self, global: u64, note: Note, written: Result<(), String>) {
        match written {
            Ok(()) => self.note_told(global, note),
            Err(err) => self.note_not_taken(note, &err),
        }
    }

    fn note_told(&mut self, global: u64, mut note: Note) {
        if let Err(err) = notes::mark_told(&mut note) {
            // The note is in the session all the same: only its teller's answer is late.
            let message = format!("cannot mark {} as told: {err}", note.path.display());
            self.reporter.log(Utc::now(), Level::Warn, &message);
        }
        let iteration = self.pending_iteration;
        let text = notes::one_line(&note.text);
        let line = format!(
            "iteration={iteration} global={global} status=note_delivered now: \"{text}\": {}",
            notes::TOLD_NOW
        );
        self.reporter.log(Utc::now(), Level::Info, &line);
        self.emit(&Event::NoteDelivered {
            note: note.id,
            text: note.text,
            iteration,
            global,
            how: NoteHow::Now,
        });
    }

    /// A claimed note the session did not take: it waits for the next one.
    fn note_not_taken(&mut self, mut note: Note, why: &str) {
        if let Err(err) = notes::unclaim(&mut note) {
            let message = format!(
                "cannot put {} back for the next session: {err}",
                note.path.display()
            );
            self.reporter.log(Utc::now(), Level::Error, &message);
            return;
        }
        let text = notes::one_line(&note.text);
        let line = format!("status=note_queued: \"{text}\": left for the next session ({why})");
        self.reporter.log(Utc::now(), Level::Info, &line);
        self.emit(&Event::NoteQueued {
            note: note.id,
            text: note.text,
            queued_at: note.queued_at,
            why: Some(why.to_string()),
        });
    }

    /// The running session takes no more notes (its result was read, it is
    /// being ended).
    pub(super) fn stop_steering(&mut self, global: Option<u64>) {
        if let Some(session) = &self.session
            && global.is_none_or(|g| g == session.global)
            && let Some(steer) = &session.steer
        {
            steer.close();
        }
    }

    /// Pauses or resumes the running session's group. A note told during
    /// a pause goes to the next session: a kill may end the pause, and a
    /// note in the pipe of a stopped agent would go with it, unread.
    pub(super) fn pause_group(&mut self, pgid: i32, paused: bool) {
        use nix::sys::signal::Signal;
        if let Some(steer) = self.session.as_mut().and_then(|s| s.steer.as_mut()) {
            steer.set_paused(paused);
        }
        let signal = if paused {
            Signal::SIGSTOP
        } else {
            Signal::SIGCONT
        };
        crate::supervisor::process::signal_group(pgid, signal);
    }

    /// Before the first session: a note left claimed by a run that died while
    /// it wrote it goes to the next session (its session died with that run),
    /// and the tellers learn whether this agent takes notes now.
    pub(super) fn recover_notes(&mut self) {
        notes::mark_live(&self.control_dir, self.live_input.is_some());
        for (note, global) in notes::left_claimed(&self.control_dir) {
            let why =
                format!("clowder stopped while it told session #{global}, which ended with it");
            self.note_not_taken(note, &why);
        }
    }

    /// Answers kept for tellers that have long read them are removed.
    pub(super) fn clear_note_answers(&self) {
        notes::clear_answers(&self.control_dir, ANSWER_KEPT);
    }
}
