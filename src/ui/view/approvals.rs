//! The approvals pane: what waits for a human in the approval queue.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::{Color, Style};
use ratatui::text::Line;
use ratatui::widgets::Paragraph;

use super::{pane_block, title};
use crate::ui::app::{AppState, Pane};

pub fn draw(state: &AppState, frame: &mut Frame, area: Rect) {
    let count = state.approvals.len();
    let name = if count > 0 {
        format!("Approvals ({count} pending)")
    } else {
        "Approvals".to_string()
    };
    let block = pane_block(state, Pane::Approvals, title(name));
    let lines: Vec<Line> = if count == 0 {
        let text = if state.approvals_dir_exists {
            "nothing waiting for you"
        } else {
            "no approval queue (.clowder/approvals)"
        };
        vec![Line::styled(text, Style::default().fg(Color::DarkGray))]
    } else {
        state
            .approvals
            .iter()
            .map(|name| Line::styled(format!("? {name}"), Style::default().fg(Color::Yellow)))
            .collect()
    };
    frame.render_widget(Paragraph::new(lines).block(block), area);
}
