//! The event pane: the supervisor's latest events, one line each, with time.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::{Color, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;

use super::{pane_block, title};
use crate::supervisor::core::Level;
use crate::ui::app::{AppState, Pane};
use crate::ui::sanitize;

pub fn draw(state: &AppState, frame: &mut Frame, area: Rect) {
    let block = pane_block(state, Pane::Events, title("Events"));
    let height = block.inner(area).height as usize;
    let start = state.events.len().saturating_sub(height);
    let lines: Vec<Line> = state
        .events
        .iter()
        .skip(start)
        .map(|event| {
            let color = match event.level {
                Level::Error => Color::Red,
                Level::Warn => Color::Yellow,
                Level::Info => Color::Reset,
                Level::Debug => Color::DarkGray,
            };
            Line::from(vec![
                Span::styled(
                    event.at.format("%H:%M:%S ").to_string(),
                    Style::default().fg(Color::DarkGray),
                ),
                Span::styled(sanitize(&event.text), Style::default().fg(color)),
            ])
        })
        .collect();
    frame.render_widget(Paragraph::new(lines).block(block), area);
}
