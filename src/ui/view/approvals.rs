//! The approvals pane: what waits for a human, oldest first, with how long it has
//! waited; `a` approves the selected request, `r` rejects it with a reason. A
//! request whose waiter is gone is marked abandoned (deciding it is refused).
//! Texts too long for the pane end with `…` at a word's end (one longer than a
//! title keeps its end and says its length); paths lose their middle and keep
//! the file name. The selected request takes the rows the others leave free,
//! and shows its whole text there, wrapped.

use chrono::{DateTime, Utc};
use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;

use super::{pane_block, short_duration, title};
use unicode_width::{UnicodeWidthChar, UnicodeWidthStr};

use crate::approvals::subject::Kind;
use crate::approvals::{DoneRecord, Request, RequestKind, escape};
use crate::fmt::head_and_tail;
use crate::ui::app::{AppState, Pane};

/// Longer than this, a cut text shows its end and its length.
const LONG_TEXT: usize = 200;

/// `▶ Bash  rm -rf build` for a tool call, `? title` for a question, `● title` for
/// a session; escaped, in at most `width` columns.
fn request_line(request: &Request, width: usize) -> String {
    let (head, text) = request_parts(request);
    let head = fit_words(&head, width);
    let room = width.saturating_sub(head.width());
    let text = if is_path(request) {
        fit_path(&text, room)
    } else {
        fit_long(&text, room)
    };
    format!("{head}{text}")
}

/// The columns [`request_line`] needs to keep the first word, or the file name,
/// whole.
fn essential_width(request: &Request) -> usize {
    let (head, text) = request_parts(request);
    let essential = if is_path(request) {
        text.rsplit('/').next().map_or(0, |name| name.width() + 2)
    } else {
        text.split(' ').next().map_or(0, |word| word.width() + 1)
    };
    head.width() + essential.min(text.width())
}

/// The marker and head, and the text that may be shortened; both escaped. An
/// abandoned request's marker is `⊘`.
fn request_parts(request: &Request) -> (String, String) {
    let marker = |usual: &'static str| if request.abandoned { "⊘" } else { usual };
    // In a fleet's inbox each request says which lane asked.
    let lane = request
        .lane
        .as_deref()
        .map_or_else(String::new, |lane| format!("[{}] ", escape(lane)));
    let (head, text) = match request.kind {
        RequestKind::Tool => (
            format!(
                "{} {}  ",
                marker("▶"),
                escape(request.tool_name.as_deref().unwrap_or("tool"))
            ),
            escape(&request.subject()),
        ),
        RequestKind::Ask => (format!("{} ", marker("?")), escape(&request.title)),
        RequestKind::Session => (format!("{} ", marker("●")), escape(&request.title)),
    };
    match head.split_once(' ') {
        Some((mark, rest)) if !lane.is_empty() => (format!("{mark} {lane}{rest}"), text),
        _ => (head, text),
    }
}

fn is_path(request: &Request) -> bool {
    if request.kind != RequestKind::Tool || request.tool_input.is_none() {
        return false;
    }
    let subject = request.subject_of();
    subject.kind == Kind::Path && subject.others.is_empty()
}

/// [`fit_words`], except that a text longer than a title holds keeps its end
/// and says its length (what follows padding is never out of sight).
fn fit_long(text: &str, width: usize) -> String {
    if text.width() > width && text.chars().count() > LONG_TEXT {
        let ends = head_and_tail(text, width);
        if ends.width() <= width {
            return ends;
        }
    }
    fit_words(text, width)
}

/// `text` in at most `width` columns: whole words and `…` (a single word too long
/// for the room is cut, with `…`).
fn fit_words(text: &str, width: usize) -> String {
    if text.width() <= width {
        return text.to_string();
    }
    let room = width.saturating_sub(1);
    let mut end = 0;
    for (at, c) in text.char_indices() {
        if c == ' ' && text[..at].trim_end().width() <= room {
            end = text[..at].trim_end().len();
        }
    }
    if end == 0 {
        return format!("{}…", take_width(text, room));
    }
    format!("{}…", &text[..end])
}

/// A path in at most `width` columns: `…/` and as many of its last parts as fit,
/// the file name always (itself cut from the left when even it does not fit).
fn fit_path(path: &str, width: usize) -> String {
    if path.width() <= width {
        return path.to_string();
    }
    let parts: Vec<&str> = path.split('/').collect();
    let mut kept = String::new();
    for part in parts.iter().rev() {
        let candidate = if kept.is_empty() {
            part.to_string()
        } else {
            format!("{part}/{kept}")
        };
        if candidate.width() + 2 > width && !kept.is_empty() {
            break;
        }
        kept = candidate;
    }
    if kept.width() + 2 <= width {
        return format!("…/{kept}");
    }
    let tail: String = {
        let mut taken = Vec::new();
        let mut used = 0;
        for c in kept.chars().rev() {
            used += c.width().unwrap_or(0);
            if used + 1 > width {
                break;
            }
            taken.push(c);
        }
        taken.into_iter().rev().collect()
    };
    format!("…{tail}")
}

/// The longest start of `text` at most `width` columns wide.
fn take_width(text: &str, width: usize) -> &str {
    let mut used = 0;
    for (at, c) in text.char_indices() {
        used += c.width().unwrap_or(0);
        if used > width {
            return &text[..at];
        }
    }
    text
}

/// A request in the pane: one line, its age (or "abandoned") at the end; in
/// up to `rows` lines when its text does not fit one, wrapped, the age after
/// it where there is room.
fn request_rows(
    request: &Request,
    width: usize,
    rows: usize,
    now: DateTime<Utc>,
) -> Vec<Line<'static>> {
    let (tail, tail_color, color) = if request.abandoned {
        ("  abandoned".to_string(), Color::Red, Color::DarkGray)
    } else {
        let waited = format!("  {}", short_duration(request.age_secs(now)));
        (waited, Color::DarkGray, Color::Yellow)
    };
    if let Some(mut lines) = wrapped(request, width, rows) {
        let last = lines.pop().unwrap_or_default();
        let tail = if last.width() + tail.width() <= width {
            tail
        } else {
            String::new()
        };
        let mut out: Vec<Line> = lines
            .into_iter()
            .map(|line| Line::styled(line, Style::default().fg(color)))
            .collect();
        out.push(Line::from(vec![
            Span::styled(last, Style::default().fg(color)),
            Span::styled(tail, Style::default().fg(tail_color)),
        ]));
        return out;
    }
    // The age (or the word "abandoned": the ⊘ stays) gives way to keep
    // the first word or the file name whole.
    let keep = essential_width(request) + tail.width() <= width || essential_width(request) > width;
    let tail = if keep { tail } else { String::new() };
    let room = width.saturating_sub(tail.width());
    vec![Line::from(vec![
        Span::styled(request_line(request, room), Style::default().fg(color)),
        Span::styled(tail, Style::default().fg(tail_color)),
    ])]
}

/// The head and the whole text in lines of `width` (the text's own lines
/// indented by two), when it needs more than one and `rows` allow more; the
/// last row ends with `…` when even they are too few.
fn wrapped(request: &Request, width: usize, rows: usize) -> Option<Vec<String>> {
    const INDENT: &str = "  ";
    let (head, text) = request_parts(request);
    let first = width.checked_sub(head.width())?;
    if rows < 2 || first < 4 || head.width() + text.width() <= width {
        return None;
    }
    let mut lines = wrap_text(&text, first, width - INDENT.len(), rows);
    if lines.len() > rows {
        lines.truncate(rows);
        if let Some(last) = lines.last_mut() {
            let room = if rows == 1 {
                first
            } else {
                width - INDENT.len()
            };
            *last = ending(&text, room);
        }
    }
    Some(
        lines
            .into_iter()
            .enumerate()
            .map(|(n, line)| match n {
                0 => format!("{head}{line}"),
                _ => format!("{INDENT}{line}"),
            })
            .collect(),
    )
}

/// The last row of a text cut to the rows there are: how it ends and how long
/// it is (`…http://x|sh [20044 chars]`), so that what runs last is seen.
fn ending(text: &str, room: usize) -> String {
    let label = format!(" [{} chars]", text.chars().count());
    let keep = room.saturating_sub(label.width() + 1);
    let mut tail: Vec<char> = Vec::new();
    let mut used = 0;
    for c in text.chars().rev() {
        let cells = c.width().unwrap_or(0);
        if used + cells > keep {
            break;
        }
        tail.push(c);
        used += cells;
    }
    let tail: String = tail.into_iter().rev().collect();
    format!("…{tail}{label}")
}

/// Rows the selected request may take beyond its one, to show its whole text.
const SELECTED_EXTRA_ROWS: usize = 4;

/// The rows the pane's list wants inside its border, `width` wide: one per
/// request, and those the selected one needs to be read whole (up to
/// [`SELECTED_EXTRA_ROWS`] more).
pub(super) fn wanted_rows(state: &AppState, width: usize) -> usize {
    let count = state.approvals.len();
    let extra = state
        .selected_approval()
        .and_then(|request| wrapped(request, width, 1 + SELECTED_EXTRA_ROWS))
        .map_or(0, |lines| lines.len().saturating_sub(1));
    count + extra
}

/// What a request asks, as the pane writes it (`▶ Bash  rm -rf build`, its
/// lane in brackets), whole in up to `rows` lines of `width`: for a dialog
/// about it.
pub(super) fn described(request: &Request, width: usize, rows: usize) -> Vec<String> {
    wrapped(request, width, rows).unwrap_or_else(|| vec![request_line(request, width)])
}

/// `text` in lines of `first` cells, then of `rest`: broken after a space
/// where one fits, else inside the word (a long path is shown whole). At most
/// `limit + 1` lines are made: a long command costs no more than the pane shows.
fn wrap_text(text: &str, first: usize, rest: usize, limit: usize) -> Vec<String> {
    let mut lines: Vec<String> = Vec::new();
    let mut line = String::new();
    let mut used = 0;
    let mut room = first.max(1);
    for word in text.split_inclusive(' ') {
        if used + word.trim_end().width() > room && !line.is_empty() {
            lines.push(std::mem::take(&mut line).trim_end().to_string());
            (used, room) = (0, rest.max(1));
        }
        for c in word.chars() {
            let cells = c.width().unwrap_or(0);
            if used + cells > room && c != ' ' {
                lines.push(std::mem::take(&mut line));
                (used, room) = (0, rest.max(1));
            }
            line.push(c);
            used += cells;
            if lines.len() > limit {
                return lines;
            }
        }
    }
    if !line.trim_end().is_empty() || lines.is_empty() {
        lines.push(line.trim_end().to_string());
    }
    lines
}

/// ` by reviewer MODEL`, ` by clowder approve`: who decided, short.
fn decided_by(record: &DoneRecord) -> String {
    let by = record
        .decision
        .as_ref()
        .and_then(|d| d.decided_by.as_deref());
    by.map_or_else(String::new, |by| {
        let program = by.split(" (").next().unwrap_or(by);
        format!(" by {}", escape(program))
    })
}

/// The history view: finished requests, newest first, with how each ended.
fn draw_history(state: &AppState, records: &[DoneRecord], frame: &mut Frame, area: Rect) {
    let block = pane_block(
        state,
        Pane::Approvals,
        title(format!("Approvals · history ({}) · h back", records.len())),
    );
    let inner = block.inner(area);
    let (height, width) = (inner.height as usize, inner.width as usize);
    let lines: Vec<Line> = if records.is_empty() {
        vec![Line::styled(
            "no finished requests yet",
            Style::default().fg(Color::DarkGray),
        )]
    } else {
        records
            .iter()
            .take(height)
            .map(|record| {
                let (mark, color) = match record.outcome.as_str() {
                    "approved" => ("✓", Color::Green),
                    "rejected" => ("✗", Color::Red),
                    "timed_out" => ("◌", Color::Yellow),
                    _ => ("·", Color::DarkGray),
                };
                let ended = format!(
                    "  {}{} · {}",
                    record.outcome.replace('_', " "),
                    decided_by(record),
                    short_duration(record.waited_secs as i64)
                );
                let request =
                    request_line(&record.request, width.saturating_sub(2 + ended.width()));
                // The reason takes what room is left, if enough for a word.
                let room = width.saturating_sub(2 + request.width() + ended.width());
                let reason = record
                    .decision
                    .as_ref()
                    .and_then(|d| d.reason.as_deref())
                    .filter(|r| !r.is_empty() && room >= 6)
                    .map_or_else(String::new, |r| {
                        fit_words(&format!(" · {}", escape(r)), room)
                    });
                Line::from(vec![
                    Span::styled(format!("{mark} "), Style::default().fg(color)),
                    Span::raw(request),
                    Span::styled(ended + &reason, Style::default().fg(Color::DarkGray)),
                ])
            })
            .collect()
    };
    frame.render_widget(Paragraph::new(lines).block(block), area);
}

pub fn draw(state: &AppState, frame: &mut Frame, area: Rect, now: DateTime<Utc>) {
    if let Some(records) = &state.approval_history {
        draw_history(state, records, frame, area);
        return;
    }
    let count = state.approvals.len();
    let abandoned = state.approvals.iter().filter(|r| r.abandoned).count();
    let inner_width = area.width.saturating_sub(4) as usize;
    let name = if count == 0 {
        "Approvals".to_string()
    } else {
        let waiting = if abandoned > 0 {
            format!("{} waiting, ⊘ {abandoned} abandoned", count - abandoned)
        } else {
            format!("{count} waiting")
        };
        [
            format!("Approvals ({waiting}) · a approve · r reject"),
            format!("Approvals ({waiting}) · a · r"),
            format!("Approvals ({waiting})"),
            format!("Approvals ({} waiting, ⊘ {abandoned})", count - abandoned),
        ]
        .into_iter()
        .find(|name| name.width() <= inner_width)
        .unwrap_or_else(|| format!("Approvals ({count})"))
    };
    let block = pane_block(state, Pane::Approvals, title(name));
    let inner = block.inner(area);
    let (height, width) = (inner.height as usize, inner.width as usize);
    let lines: Vec<Line> = if count == 0 {
        let choices: &[&str] = if state.approvals_dir_exists {
            &["nothing waiting for you", "nothing waiting"]
        } else {
            &[
                "no approval queue (.clowder/approvals)",
                "no approval queue",
            ]
        };
        let choices: Vec<String> = choices.iter().map(|text| text.to_string()).collect();
        let text = crate::fmt::first_fitting(&choices, width.saturating_sub(1));
        vec![Line::styled(text, Style::default().fg(Color::DarkGray))]
    } else {
        let start = state
            .approval_selected
            .saturating_sub(height.saturating_sub(1));
        // The rows no request needs go to the selected one, whose whole text
        // is then read before it is decided.
        let spare = height.saturating_sub(count);
        state
            .approvals
            .iter()
            .enumerate()
            .skip(start)
            .take(height)
            .flat_map(|(index, request)| {
                let selected = index == state.approval_selected;
                let rows = if selected { 1 + spare } else { 1 };
                let mut lines = request_rows(request, width, rows, now);
                if selected {
                    for line in &mut lines {
                        *line = std::mem::take(line)
                            .patch_style(Style::default().add_modifier(Modifier::REVERSED));
                    }
                }
                lines
            })
            .collect()
    };
    frame.render_widget(Paragraph::new(lines).block(block), area);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_are_kept_whole() {
        assert_eq!(
            fit_words("cargo test --release", 40),
            "cargo test --release"
        );
        assert_eq!(fit_words("cargo test --release", 15), "cargo test…");
        assert_eq!(fit_words("supercalifragilistic", 8), "superca…");
        assert_eq!(fit_words("abc", 0), "…");
    }

    #[test]
    fn a_long_command_wraps_whole_words_and_cuts_long_ones() {
        assert_eq!(
            wrap_text("rm -rf /tmp/build-output/cache", 10, 12, 5),
            vec!["rm -rf", "/tmp/build-o", "utput/cache"]
        );
        assert_eq!(wrap_text("ls", 10, 12, 5), vec!["ls"]);
        assert_eq!(wrap_text(&"x ".repeat(10_000), 4, 4, 2).len(), 3);
    }

    #[test]
    fn paths_keep_their_file_name() {
        let path = "/home/me/app/lib/features/navigation/oi_sidebar.dart";
        assert_eq!(fit_path(path, 80), path);
        assert_eq!(fit_path(path, 29), "…/navigation/oi_sidebar.dart");
        assert_eq!(fit_path(path, 18), "…/oi_sidebar.dart");
        assert_eq!(fit_path(path, 10), "…ebar.dart");
    }
}
