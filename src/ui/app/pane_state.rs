//! What the output and events panes hold, and where the user is in each: a
//! bounded window of rendered lines, and the events with their full records.

use super::*;

/// One entry of the events pane: a few words, and the full record behind them.
#[derive(Debug, Clone, PartialEq)]
pub struct EventLine {
    pub at: DateTime<Utc>,
    pub level: Level,
    /// Its wordings, longest first; the pane shows the first that fits.
    pub text: Vec<String>,
    /// What Enter shows: the event's JSON record, or the whole log line.
    pub detail: String,
}

/// Where the user is in the events pane.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct EventsView {
    /// Index into the events; `None` follows the newest.
    pub selected: Option<usize>,
    /// The selected event's full record is shown on top.
    pub expanded: bool,
    pub scroll: u16,
}

impl EventsView {
    /// The entry the keys act on.
    pub fn current(&self, count: usize) -> Option<usize> {
        match self.selected {
            Some(index) => Some(index.min(count.checked_sub(1)?)),
            None => count.checked_sub(1),
        }
    }

    pub(super) fn act(&mut self, action: Action, count: usize) {
        let Some(current) = self.current(count) else {
            return;
        };
        match action {
            Action::Up => self.selected = Some(current.saturating_sub(1)),
            Action::Down if current + 1 >= count => self.selected = None,
            Action::Down => self.selected = Some(current + 1),
            Action::Follow => self.selected = None,
            Action::Expand => {
                self.selected = Some(current);
                self.expanded = true;
                self.scroll = 0;
            }
            _ => {}
        }
    }

    /// Keeps the selection on the same entry when the oldest is dropped.
    pub(super) fn dropped_front(&mut self) {
        if let Some(selected) = self.selected.as_mut() {
            *selected = selected.saturating_sub(1);
        }
    }
}

/// The output pane: a bounded window of rendered lines and where the user is in it.
#[derive(Debug, Clone, Default)]
pub struct OutputView {
    pub lines: VecDeque<Rendered>,
    /// Lines dropped from the front to keep memory bounded.
    pub dropped: u64,
    /// Index of the selected line; `None` means follow the tail.
    pub selected: Option<usize>,
    pub search: Option<String>,
    /// The search prompt being typed (keys go here, not to global bindings).
    pub search_input: Option<String>,
    pub expanded: Option<usize>,
    pub expanded_scroll: u16,
    /// The pane's last drawn height, for page moves.
    pub page: usize,
}

impl OutputView {
    pub fn following(&self) -> bool {
        self.selected.is_none()
    }

    /// The expanded line's full text: a tool call's input together with its result.
    pub fn expanded_detail(&self) -> Option<(String, String)> {
        let line = self.lines.get(self.expanded?)?;
        let mut detail = line.detail.as_deref().unwrap_or_default().to_owned();
        if line.kind == LineKind::ToolCall
            && let Some(id) = &line.tool_use_id
            && let Some(result) = self.lines.iter().find(|other| {
                other.kind == LineKind::ToolResult && other.tool_use_id.as_ref() == Some(id)
            })
        {
            let status = if result.is_error {
                "result (error)"
            } else {
                "result"
            };
            let body = result.detail.as_deref().unwrap_or(&result.text);
            detail.push_str(&format!("\n\n── {status} ──\n{body}"));
        }
        Some((line.text.clone(), detail))
    }

    pub(super) fn push(&mut self, line: Rendered) {
        if self.lines.len() >= MAX_OUTPUT_LINES {
            self.lines.pop_front();
            self.dropped += 1;
            if let Some(selected) = self.selected.as_mut() {
                *selected = selected.saturating_sub(1);
            }
            if let Some(expanded) = self.expanded.as_mut() {
                *expanded = expanded.saturating_sub(1);
            }
        }
        match self.call_slot(&line) {
            Some(at) => {
                self.lines.insert(at, line);
                for index in [self.selected.as_mut(), self.expanded.as_mut()]
                    .into_iter()
                    .flatten()
                {
                    if *index >= at {
                        *index += 1;
                    }
                }
            }
            None => self.lines.push_back(line),
        }
    }

    /// Where a tool result goes when its call is not the last one shown
    /// (parallel calls): right under its own call, found by id.
    pub(super) fn call_slot(&self, line: &Rendered) -> Option<usize> {
        const LOOK_BACK: usize = 500;
        let id = line
            .tool_use_id
            .as_ref()
            .filter(|_| line.kind == LineKind::ToolResult)?;
        let start = self.lines.len().saturating_sub(LOOK_BACK);
        let call = (start..self.lines.len()).rev().find(|&i| {
            self.lines[i].kind == LineKind::ToolCall
                && self.lines[i].tool_use_id.as_ref() == Some(id)
        })?;
        let later_call = self
            .lines
            .range(call + 1..)
            .any(|l| l.kind == LineKind::ToolCall);
        if !later_call {
            return None;
        }
        let mut at = call + 1;
        while self
            .lines
            .get(at)
            .is_some_and(|l| l.kind == LineKind::ToolResult && l.tool_use_id.as_ref() == Some(id))
        {
            at += 1;
        }
        Some(at)
    }

    pub(super) fn clear(&mut self) {
        self.lines.clear();
        self.dropped = 0;
        self.selected = None;
        self.expanded = None;
    }

    pub(super) fn last_index(&self) -> usize {
        self.lines.len().saturating_sub(1)
    }

    pub(super) fn current(&self) -> usize {
        self.selected.unwrap_or_else(|| self.last_index())
    }

    pub(super) fn move_by(&mut self, delta: isize) {
        if self.lines.is_empty() {
            return;
        }
        let target =
            (self.current() as isize + delta).clamp(0, self.last_index() as isize) as usize;
        // Moving down onto the last line resumes following.
        self.selected = if delta > 0 && target == self.last_index() {
            None
        } else {
            Some(target)
        };
    }

    pub(super) fn find(&mut self, forward: bool) -> bool {
        let Some(query) = self.search.as_ref().map(|q| q.to_lowercase()) else {
            return false;
        };
        if query.is_empty() || self.lines.is_empty() {
            return false;
        }
        let count = self.lines.len();
        let start = self.current();
        for step in 1..=count {
            let index = if forward {
                (start + step) % count
            } else {
                (start + count - step % count) % count
            };
            let line = &self.lines[index];
            let hit = line.text.to_lowercase().contains(&query)
                || line
                    .detail
                    .as_ref()
                    .is_some_and(|d| d.to_lowercase().contains(&query));
            if hit {
                self.selected = Some(index);
                return true;
            }
        }
        false
    }
}
