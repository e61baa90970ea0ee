//! The Plan view (`P`), in place of the session output: each plan's steps as a
//! tree in dependency order, each with its state's glyph and what it waits for.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, BorderType, Borders, Paragraph};

use super::title;
use crate::escape::one_line;
use crate::ui::app::AppState;
use crate::ui::app::plan::{PlanPane, glyph};

pub fn draw(state: &AppState, frame: &mut Frame, area: Rect) {
    let pane = &state.plan;
    let block = Block::default()
        .borders(Borders::ALL)
        .border_type(BorderType::Thick)
        .border_style(
            Style::default()
                .fg(Color::Cyan)
                .add_modifier(Modifier::BOLD),
        )
        .title(title("Plan"));
    let inner = block.inner(area);
    let (mut lines, selected) = tree_lines(pane, inner.width as usize);
    if pane.plans.is_empty() {
        lines.push(Line::from(
            "no plan runs here (clowder plan run plan.toml starts one)",
        ));
    }
    // The selected step stays in sight above the footer.
    let room = (inner.height as usize).saturating_sub(2);
    let start = selected.map_or(0, |s| (s + 1).saturating_sub(room));
    let mut shown: Vec<Line> = lines.into_iter().skip(start).take(room).collect();
    while shown.len() < room {
        shown.push(Line::default());
    }
    shown.push(Line::default());
    shown.push(footer(pane));
    frame.render_widget(Paragraph::new(shown).block(block), area);
}

/// The plans' headings and steps; the index of the selected step's line.
fn tree_lines(pane: &PlanPane, width: usize) -> (Vec<Line<'static>>, Option<usize>) {
    let rows = pane.rows();
    let id_width = rows
        .iter()
        .map(|r| r.prefix.chars().count() + pane.plans[r.plan].steps[r.step].id.chars().count())
        .max()
        .unwrap_or(0);
    let mut lines = Vec::new();
    let mut selected = None;
    let mut heading = None;
    for (index, row) in rows.iter().enumerate() {
        let plan = &pane.plans[row.plan];
        if heading != Some(row.plan) {
            heading = Some(row.plan);
            let text = format!("plan {} · {}", one_line(&plan.name), plan.status);
            let bold = Style::default().add_modifier(Modifier::BOLD);
            lines.push(Line::from(Span::styled(text, bold)));
        }
        let step = &plan.steps[row.step];
        let name = format!("{}{}", row.prefix, one_line(&step.id));
        let mut text = format!(
            "{} {name:<id_width$}  {:<20}",
            glyph(&step.state),
            step.state
        );
        if !step.depends_on.is_empty() {
            text.push_str(&format!(" ← {}", one_line(&step.depends_on.join(", "))));
        }
        let text: String = text.chars().take(width).collect();
        let mut style = Style::default().fg(color(&step.state));
        if index == pane.selected {
            selected = Some(lines.len());
            style = style.add_modifier(Modifier::REVERSED);
        }
        lines.push(Line::from(Span::styled(text, style)));
    }
    (lines, selected)
}

fn color(state: &str) -> Color {
    match state {
        "running" => Color::Cyan,
        "done" | "merged" => Color::Green,
        "failed" | "blocked" => Color::Red,
        "needs review" | "waiting for approval" => Color::Yellow,
        _ => Color::Reset,
    }
}

fn footer(pane: &PlanPane) -> Line<'static> {
    if let Some((plan, step)) = &pane.confirm {
        let text = format!(
            "merge step {} of plan {} into its base now? y / n",
            one_line(step),
            one_line(plan)
        );
        let style = Style::default()
            .fg(Color::Yellow)
            .add_modifier(Modifier::BOLD);
        return Line::from(Span::styled(text, style));
    }
    let text = pane
        .note
        .clone()
        .unwrap_or_else(|| "j/k step · Enter lane · M merge · Esc close".to_string());
    Line::from(Span::styled(text, Style::default().fg(Color::DarkGray)))
}
