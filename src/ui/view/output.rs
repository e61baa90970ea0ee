//! The session output pane: the agent's stream rendered readably (tool calls as
//! one line, results folded, thinking collapsed), following the tail unless the
//! user scrolled away.

use ansi_to_tui::IntoText;
use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;

use super::expand_tabs;
use super::{pane_block, title};
use crate::agent::stream::{LineKind, Rendered};
use crate::escape::one_line;
use crate::fmt;
use crate::ui::app::{AppState, Pane};

fn style_for(line: &Rendered) -> Style {
    let base = match line.kind {
        LineKind::System => Style::default().fg(Color::DarkGray),
        LineKind::Text => Style::default(),
        LineKind::Thinking => Style::default()
            .fg(Color::DarkGray)
            .add_modifier(Modifier::ITALIC),
        LineKind::ToolCall => Style::default().fg(Color::Cyan),
        LineKind::ToolResult => Style::default().fg(Color::Gray),
        LineKind::Result => Style::default()
            .fg(Color::Green)
            .add_modifier(Modifier::BOLD),
        LineKind::RateLimit => Style::default().fg(Color::Yellow),
        LineKind::Error => Style::default().fg(Color::Red),
        LineKind::Plain => Style::default(),
    };
    if line.is_error {
        base.fg(Color::Red)
    } else {
        base
    }
}

fn render_line(line: &Rendered, cells: usize) -> Line<'static> {
    if line.kind == LineKind::Plain && line.text.contains('\u{1b}') {
        // Colours the agent printed are kept; the parser already removed every
        // other escape sequence.
        if let Ok(text) = line.text.as_bytes().into_text()
            && let Some(first) = text.lines.into_iter().next()
        {
            return fit_spans(first, cells);
        }
    }
    // A display line can be hundreds of characters: laying out what the pane
    // clips off anyway would be most of a frame's work while an agent writes.
    let safe = one_line(&expand_tabs(&line.text));
    Line::from(Span::styled(cut(&safe, cells), style_for(line)))
}

/// `text` in `cells` cells; a line cut short ends with `…`.
fn cut(text: &str, cells: usize) -> String {
    let clipped = fmt::clip(text, cells);
    if clipped.len() == text.len() || cells == 0 {
        return clipped.to_owned();
    }
    format!("{}{}", fmt::clip(text, cells - 1), fmt::ELLIPSIS)
}

/// A coloured line in `cells` cells, its spans cut as [`cut`] cuts text.
fn fit_spans(line: Line<'static>, cells: usize) -> Line<'static> {
    if line.width() <= cells {
        return line;
    }
    let mut room = cells.saturating_sub(1);
    let mut spans = Vec::new();
    for span in line.spans {
        if room == 0 {
            break;
        }
        let kept = fmt::clip(&span.content, room).to_owned();
        room = room.saturating_sub(fmt::width(&kept));
        spans.push(Span::styled(kept, span.style));
    }
    spans.push(Span::raw(fmt::ELLIPSIS.to_string()));
    Line::from(spans).style(line.style)
}

pub fn draw(state: &AppState, frame: &mut Frame, area: Rect) {
    let output = &state.output;
    let viewing = match (state.viewing.global, state.viewing.live) {
        (Some(global), true) => format!("Session output · global {global} · live"),
        (Some(global), false) => format!("Session output · global {global} · earlier session"),
        (None, _) => "Session output".to_string(),
    };
    let mode = if output.following() {
        "follow"
    } else {
        "scroll (G to follow)"
    };
    let mut heading = title(viewing).spans;
    heading.push(Span::styled(
        format!("[{mode}] "),
        Style::default().fg(if output.following() {
            Color::Green
        } else {
            Color::Yellow
        }),
    ));
    if let Some(query) = &output.search {
        heading.push(Span::styled(
            format!("[/{query}] "),
            Style::default().fg(Color::Magenta),
        ));
    }
    let block = pane_block(state, Pane::Output, Line::from(heading));
    let inner = block.inner(area);
    let height = inner.height as usize;
    let total = output.lines.len();
    let current = output.selected.unwrap_or(total.saturating_sub(1));
    // Keep the current line in view, as low as possible when following.
    let start = if output.following() {
        total.saturating_sub(height)
    } else {
        current
            .saturating_sub(height.saturating_sub(1) / 2)
            .min(total.saturating_sub(height))
    };
    let mut lines: Vec<Line> = Vec::with_capacity(height);
    if total == 0 {
        let text = if state.viewing.file.is_some() {
            "waiting for output…"
        } else {
            "no session yet"
        };
        lines.push(Line::styled(text, Style::default().fg(Color::DarkGray)));
    }
    if output.dropped > 0 && start == 0 {
        lines.push(Line::styled(
            format!("… {} earlier lines not kept …", output.dropped),
            Style::default().fg(Color::DarkGray),
        ));
    }
    for (index, line) in output.lines.iter().enumerate().skip(start).take(height) {
        let mut rendered = render_line(line, inner.width as usize);
        if output.selected == Some(index) {
            rendered = rendered.patch_style(Style::default().add_modifier(Modifier::REVERSED));
        }
        lines.push(rendered);
    }
    frame.render_widget(Paragraph::new(lines).block(block), area);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_cut_short_ends_with_an_ellipsis() {
        assert_eq!(cut("session started", 20), "session started");
        assert_eq!(cut("session started", 15), "session started");
        assert_eq!(cut("session started", 10), "session s…");
        assert_eq!(cut("日本語のテキスト", 7), "日本語…");
        let coloured = Line::from(vec![Span::raw("red "), Span::raw("and blue")]);
        let fitted = fit_spans(coloured, 8);
        assert_eq!(fitted.width(), 8);
        assert_eq!(fitted.to_string(), "red and…");
    }
}
