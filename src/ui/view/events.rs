//! The event pane: the supervisor's latest events, a few words each, with time.
//! Enter (with the pane focused) shows the selected event's full record.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;

use super::{pane_block, title};
use crate::escape::one_line;
use crate::fmt;
use crate::supervisor::core::Level;
use crate::ui::app::{AppState, Pane};

pub fn draw(state: &AppState, frame: &mut Frame, area: Rect) {
    let block = pane_block(state, Pane::Events, title("Events"));
    let inner = block.inner(area);
    let height = inner.height as usize;
    let count = state.events.len();
    let selected = state
        .events_view
        .selected
        .and_then(|_| state.events_view.current(count));
    // The selected entry stays in sight; otherwise the newest are shown.
    let end = selected.map_or(count, |s| (s + 1).max(height.min(count)));
    let start = end.saturating_sub(height);
    let text_width = (inner.width as usize).saturating_sub(10);
    let lines: Vec<Line> = state
        .events
        .iter()
        .enumerate()
        .skip(start)
        .take(end - start)
        .map(|(index, event)| {
            let color = match event.level {
                Level::Error => Color::Red,
                Level::Warn => Color::Yellow,
                Level::Info => Color::Reset,
                Level::Debug => Color::DarkGray,
            };
            let wordings: Vec<String> = event
                .text
                .iter()
                .map(|t| fmt::shorten_paths(&one_line(t), text_width))
                .collect();
            // Cut between words: Enter shows the whole record.
            let text = wordings
                .iter()
                .find(|w| fmt::width(w) <= text_width)
                .cloned()
                .unwrap_or_else(|| {
                    fmt::fit_words(wordings.last().map_or("", String::as_str), text_width)
                });
            let mut style = Style::default().fg(color);
            if Some(index) == selected && state.focus == Pane::Events {
                style = style.add_modifier(Modifier::REVERSED);
            }
            Line::from(vec![
                Span::styled(
                    format!("{} ", fmt::clock(event.at)),
                    Style::default().fg(Color::DarkGray),
                ),
                Span::styled(text, style),
            ])
        })
        .collect();
    frame.render_widget(Paragraph::new(lines).block(block), area);
}
