//! The human's notes (`clowder tell`) that wait for the next session: logged
//! when the loop first sees them, put at the top of the next session's
//! prompt, removed once that session runs. (Those a running session takes
//! now: `steering`.)

use chrono::Utc;

use super::Runtime;
use crate::protocol::Event;
use crate::store::notes::{self, Note};
use crate::supervisor::core::Level;

impl Runtime {
    /// The notes waiting for a session, oldest first; each is logged as
    /// `note_queued` the first time any run of the loop sees it.
    pub(super) fn waiting_notes(&mut self) -> Vec<Note> {
        let (mut waiting, problems) = notes::pending(&self.control_dir);
        for problem in problems {
            if self.note_problems.insert(problem.clone()) {
                let message = format!("{problem}; it is left where it is");
                self.reporter.log(Utc::now(), Level::Warn, &message);
            }
        }
        let why = if self.live_input.is_some() {
            "no session takes notes now"
        } else {
            notes::ONLY_AT_START
        };
        for note in waiting.iter_mut().filter(|note| !note.announced) {
            let text = notes::one_line(&note.text);
            let line = format!("status=note_queued: \"{text}\": left for the next session ({why})");
            self.reporter.log(Utc::now(), Level::Info, &line);
            self.emit(&Event::NoteQueued {
                note: note.id.clone(),
                text: note.text.clone(),
                queued_at: note.queued_at,
                why: Some(why.to_string()),
            });
            if let Err(err) = notes::mark_announced(note) {
                let message = format!("cannot mark {} as logged: {err}", note.path.display());
                self.reporter.log(Utc::now(), Level::Warn, &message);
            }
        }
        waiting
    }

    /// The session `global` started with the prompt's notes: they are delivered.
    pub(super) fn notes_delivered(&mut self, global: u64) {
        for note in std::mem::take(&mut self.notes_in_prompt) {
            if let Err(err) = notes::remove(&note) {
                let message = format!(
                    "cannot remove the delivered note {}: {err}; the next session gets it again",
                    note.path.display()
                );
                self.reporter.log(Utc::now(), Level::Warn, &message);
            }
            let iteration = self.pending_iteration;
            let text = notes::one_line(&note.text);
            let line =
                format!("iteration={iteration} global={global} status=note_delivered: \"{text}\"");
            self.reporter.log(Utc::now(), Level::Info, &line);
            self.emit(&Event::NoteDelivered {
                note: note.id,
                text: note.text,
                iteration,
                global,
                how: crate::protocol::NoteHow::Prompt,
            });
        }
    }
}
