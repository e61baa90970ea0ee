//! The live session's output as its reader shows it: the single loop's screen
//! takes the display lines from the reader that decodes every line for the
//! guards anyway, instead of a follower decoding the same file a second time.
//!
//! The last [`MAX_OUTPUT_LINES`] lines are kept even while the pane shows an
//! older session, so that going back to the live one shows them at once. A file
//! the reader does not show (an older session, or a live one whose reader has
//! not said so yet) is followed as before.

use std::collections::VecDeque;
use std::path::PathBuf;

use super::app::MAX_OUTPUT_LINES;
use crate::agent::follow::FollowUpdate;
use crate::agent::{Rendered, SessionStats};

/// What the screen does with an update from the reader.
#[derive(Debug)]
pub enum Tapped {
    /// The pane does not show this file: kept for later.
    Kept,
    /// The pane shows this file from the reader already: new lines for it.
    Forward(FollowUpdate),
    /// The pane showed this file from a follower: stop it, show these instead.
    Switch(FollowUpdate),
}

/// The live session's lines, as the reader sent them.
#[derive(Debug, Default)]
pub struct LiveOutput {
    /// The file the reader shows, once it said so.
    file: Option<PathBuf>,
    lines: VecDeque<Rendered>,
    stats: SessionStats,
    /// The file the output pane shows.
    followed: Option<PathBuf>,
    /// Whether the pane's lines come from here, not from a follower.
    from_reader: bool,
}

impl LiveOutput {
    /// The pane is to show `file`: its lines so far (from the start) if the
    /// reader shows it; `None` if a follower must read it.
    pub fn follow(&mut self, file: PathBuf) -> Option<FollowUpdate> {
        self.from_reader = self.file.as_ref() == Some(&file);
        self.followed = Some(file);
        self.from_reader.then(|| self.replay())
    }

    /// Takes an update from the reader.
    pub fn take(&mut self, update: FollowUpdate) -> Tapped {
        if update.reset || self.file.as_ref() != Some(&update.file) {
            self.file = Some(update.file.clone());
            self.lines.clear();
        }
        self.lines.extend(update.lines.iter().cloned());
        let excess = self.lines.len().saturating_sub(MAX_OUTPUT_LINES);
        self.lines.drain(..excess);
        self.stats = update.stats.clone();
        if self.followed.as_ref() != Some(&update.file) {
            Tapped::Kept
        } else if self.from_reader {
            Tapped::Forward(update)
        } else {
            self.from_reader = true;
            Tapped::Switch(self.replay())
        }
    }

    /// Whether a follower's update is still wanted: not for a file the pane
    /// now shows from the reader.
    pub fn wants_followed(&self, update: &FollowUpdate) -> bool {
        !(self.from_reader && self.followed.as_ref() == Some(&update.file))
    }

    fn replay(&self) -> FollowUpdate {
        FollowUpdate {
            file: self.file.clone().unwrap_or_default(),
            lines: self.lines.iter().cloned().collect(),
            stats: self.stats.clone(),
            reset: true,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::LineKind;

    fn line(text: &str) -> Rendered {
        Rendered {
            kind: LineKind::Text,
            text: text.into(),
            detail: None,
            tool_use_id: None,
            is_error: false,
        }
    }

    fn update(file: &str, texts: &[&str], reset: bool) -> FollowUpdate {
        FollowUpdate {
            file: file.into(),
            lines: texts.iter().map(|t| line(t)).collect(),
            stats: SessionStats::default(),
            reset,
        }
    }

    fn texts(update: &FollowUpdate) -> Vec<&str> {
        update.lines.iter().map(|l| l.text.as_str()).collect()
    }

    #[test]
    fn a_file_the_reader_shows_is_replayed_then_forwarded() {
        let mut live = LiveOutput::default();
        assert!(matches!(live.take(update("a", &["1"], true)), Tapped::Kept));
        let replay = live.follow("a".into()).expect("shown by the reader");
        assert!(replay.reset);
        assert_eq!(texts(&replay), ["1"]);
        match live.take(update("a", &["2"], false)) {
            Tapped::Forward(next) => assert_eq!(texts(&next), ["2"]),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_followed_file_switches_to_the_reader_when_it_says_so() {
        let mut live = LiveOutput::default();
        assert!(
            live.follow("b".into()).is_none(),
            "not shown yet: follow it"
        );
        let followed = update("b", &["x"], false);
        assert!(live.wants_followed(&followed));
        match live.take(update("b", &["1", "2"], true)) {
            Tapped::Switch(replay) => {
                assert!(replay.reset);
                assert_eq!(texts(&replay), ["1", "2"]);
            }
            other => panic!("{other:?}"),
        }
        assert!(!live.wants_followed(&followed));
    }

    #[test]
    fn an_older_session_is_followed_while_the_live_one_is_kept() {
        let mut live = LiveOutput::default();
        live.take(update("live", &["1"], true));
        assert!(live.follow("old".into()).is_none());
        assert!(matches!(
            live.take(update("live", &["2"], false)),
            Tapped::Kept
        ));
        let back = live.follow("live".into()).expect("kept");
        assert_eq!(texts(&back), ["1", "2"]);
    }

    #[test]
    fn a_new_session_starts_afresh_and_only_the_last_lines_are_kept() {
        let mut live = LiveOutput::default();
        live.take(update("one", &["old"], true));
        let many: Vec<String> = (0..MAX_OUTPUT_LINES + 5).map(|i| i.to_string()).collect();
        let many: Vec<&str> = many.iter().map(String::as_str).collect();
        live.take(update("two", &many[..10], true));
        live.take(update("two", &many[10..], false));
        let replay = live.follow("two".into()).expect("shown");
        assert_eq!(replay.lines.len(), MAX_OUTPUT_LINES);
        assert_eq!(replay.lines[0].text, "5");
        assert_eq!(
            replay.lines.last().map(|l| l.text.as_str()),
            Some(many[many.len() - 1])
        );
    }
}
