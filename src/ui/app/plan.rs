//! The Plan view's state: the plans the host last sent, the selected step, the
//! `M` question; and the steps of a plan as a tree in dependency order.

use crossterm::event::KeyEvent;

use super::{AppState, Pane, UiCommand, lanes};
use crate::fleet::LaneName;
use crate::fleet::link::HostRequest;
use crate::fleet::plans::{PlanSummary, StepSummary};
use crate::ui::keymap::{self, Action, Context};

/// The state word of a step that `M` merges.
const NEEDS_REVIEW: &str = "needs review";

#[derive(Debug, Clone, Default)]
pub struct PlanPane {
    pub plans: Vec<PlanSummary>,
    /// Shown in place of the session output.
    pub shown: bool,
    /// The view opened by itself when the first plan came; `P` rules after.
    pub opened: bool,
    /// Index into [`PlanPane::rows`].
    pub selected: usize,
    /// `M` asked: merge this plan's step?
    pub confirm: Option<(String, String)>,
    /// Why the last key did nothing.
    pub note: Option<String>,
}

/// One line of the Plan view.
#[derive(Debug, Clone, PartialEq)]
pub struct TreeRow {
    pub plan: usize,
    pub step: usize,
    /// The tree's lines before the step's name, e.g. `│  └─ `.
    pub prefix: String,
}

impl PlanPane {
    /// Every plan's steps as trees, one plan after another.
    pub fn rows(&self) -> Vec<TreeRow> {
        self.plans
            .iter()
            .enumerate()
            .flat_map(|(plan, summary)| {
                tree(&summary.steps)
                    .into_iter()
                    .map(move |(step, prefix)| TreeRow { plan, step, prefix })
            })
            .collect()
    }

    fn selected_step(&self) -> Option<(&PlanSummary, &StepSummary)> {
        let row = self.rows().into_iter().nth(self.selected)?;
        let plan = self.plans.get(row.plan)?;
        Some((plan, plan.steps.get(row.step)?))
    }
}

/// The glyph of a step's state word (as `plan status` words it).
pub fn glyph(state: &str) -> &'static str {
    match state {
        "pending" => "·",
        "waiting for approval" => "?",
        "ready" => "○",
        "running" => "●",
        "done" => "✓",
        "failed" => "✗",
        "blocked" => "⊘",
        "merged" => "◆",
        NEEDS_REVIEW => "!",
        _ => " ",
    }
}

/// The steps in dependency order, as a tree: each step sits under the one of
/// its dependencies that comes last in that order (the one it waits for
/// longest); the view names the others on its line. Returns each step's index
/// with the tree's lines before it. A step whose dependencies never resolve
/// (a cycle, an unknown id) comes last, at the top level.
pub fn tree(steps: &[StepSummary]) -> Vec<(usize, String)> {
    let (order, resolved) = dependency_order(steps);
    let position = |id: &str| order.iter().position(|&i| steps[i].id == id);
    let parent: Vec<Option<usize>> = (0..steps.len())
        .map(|i| {
            let mine = position(&steps[i].id).filter(|&at| at < resolved)?;
            steps[i]
                .depends_on
                .iter()
                .filter_map(|dep| position(dep))
                .filter(|&at| at < mine)
                .max()
                .map(|at| order[at])
        })
        .collect();
    let children = |of: Option<usize>| -> Vec<usize> {
        order.iter().copied().filter(|&i| parent[i] == of).collect()
    };
    let mut rows = Vec::new();
    // (step, the lines above it, last among its siblings, depth)
    let mut stack: Vec<(usize, String, bool, usize)> = Vec::new();
    let roots = children(None);
    for (n, &root) in roots.iter().enumerate().rev() {
        stack.push((root, String::new(), n + 1 == roots.len(), 0));
    }
    while let Some((step, above, last, depth)) = stack.pop() {
        let (prefix, below) = match depth {
            0 => (String::new(), String::new()),
            _ if last => (format!("{above}└─ "), format!("{above}   ")),
            _ => (format!("{above}├─ "), format!("{above}│  ")),
        };
        rows.push((step, prefix));
        let kids = children(Some(step));
        for (n, &kid) in kids.iter().enumerate().rev() {
            stack.push((kid, below.clone(), n + 1 == kids.len(), depth + 1));
        }
    }
    rows
}

/// Kahn's order, ties in the plan file's order; unresolved steps last, after
/// the count of those resolved.
fn dependency_order(steps: &[StepSummary]) -> (Vec<usize>, usize) {
    let mut order: Vec<usize> = Vec::with_capacity(steps.len());
    loop {
        let next = (0..steps.len()).find(|&i| {
            !order.contains(&i)
                && steps[i]
                    .depends_on
                    .iter()
                    .all(|dep| order.iter().any(|&o| &steps[o].id == dep))
        });
        match next {
            Some(i) => order.push(i),
            None => break,
        }
    }
    let resolved = order.len();
    let unresolved: Vec<usize> = (0..steps.len()).filter(|i| !order.contains(i)).collect();
    order.extend(unresolved);
    (order, resolved)
}

/// The host's latest plans; the selection stays in range. The first plan
/// that runs opens the view: `plan run` in a terminal shows its plan; plans
/// that ended wait for `P`.
pub(super) fn set_plans(state: &mut AppState, plans: Vec<PlanSummary>) {
    state.plan.plans = plans;
    let ended = |plan: &PlanSummary| matches!(plan.status.as_str(), "completed" | "failed");
    if !state.plan.opened && state.plan.plans.iter().any(|plan| !ended(plan)) {
        state.plan.opened = true;
        state.plan.shown = true;
    }
    let count = state.plan.rows().len();
    state.plan.selected = state.plan.selected.min(count.saturating_sub(1));
}

/// Keys while the Plan view is shown; `None` leaves the key to the main view.
pub(super) fn on_key(state: &mut AppState, key: &KeyEvent) -> Option<Vec<UiCommand>> {
    if !state.plan.shown {
        return None;
    }
    if let Some((plan, step)) = state.plan.confirm.clone() {
        let action = keymap::lookup(Context::Confirm, key).map(|b| b.action);
        let again = keymap::lookup(Context::Plan, key).map(|b| b.action) == Some(Action::Merge);
        match action {
            Some(Action::Confirm) => {}
            Some(Action::Cancel) => {
                state.plan.confirm = None;
                return Some(Vec::new());
            }
            _ if again => {}
            _ => return Some(Vec::new()),
        }
        state.plan.confirm = None;
        state.plan.note = Some(format!("merging step {step} of plan {plan}…"));
        return Some(vec![UiCommand::Host(HostRequest::MergeStep { plan, step })]);
    }
    let action = keymap::lookup(Context::Plan, key)?.action;
    state.plan.note = None;
    let count = state.plan.rows().len();
    match action {
        Action::Down => {
            state.plan.selected = (state.plan.selected + 1).min(count.saturating_sub(1))
        }
        Action::Up => state.plan.selected = state.plan.selected.saturating_sub(1),
        Action::Close => state.plan.shown = false,
        Action::Expand => return Some(show_lane(state)),
        Action::Merge => ask_merge(state),
        Action::RetryPlan => return Some(retry(state)),
        _ => return None,
    }
    Some(Vec::new())
}

/// `R`: the selected step's plan, when it has failed, starts its failed or
/// blocked steps again (its branches kept: nothing is asked).
fn retry(state: &mut AppState) -> Vec<UiCommand> {
    let Some((plan, _)) = state.plan.selected_step() else {
        state.plan.note = Some("no plan to retry".into());
        return Vec::new();
    };
    let (name, address) = (plan.name.clone(), plan.address.clone());
    if plan.status != "failed" {
        state.plan.note = Some(format!(
            "plan {name} is {}: R retries a failed plan",
            plan.status
        ));
        return Vec::new();
    }
    state.plan.note = Some(format!("retrying plan {name}…"));
    vec![UiCommand::Host(HostRequest::RetryPlan { plan: address })]
}

/// Enter: the step's lane in the Lanes pane, its output where the view was.
fn show_lane(state: &mut AppState) -> Vec<UiCommand> {
    let Some((_, step)) = state.plan.selected_step() else {
        return Vec::new();
    };
    let (id, lane, step) = (step.id.clone(), step.lane.clone(), step.clone());
    let registered = LaneName::parse(&lane).ok().filter(|name| {
        state
            .fleet
            .as_ref()
            .is_some_and(|f| f.rows.iter().any(|r| &r.name == name))
    });
    let Some(name) = registered else {
        // A completed plan's clean-up removes its merged steps' lanes.
        let why = if step.state == "merged" {
            format!("step {id} is merged: its lane was removed")
        } else {
            format!("step {id} has no lane yet")
        };
        state.plan.note = Some(why);
        return Vec::new();
    };
    state.plan.shown = false;
    state.focus = Pane::Lanes;
    lanes::select(state, &name)
}

/// `M`: asks before merging a step that needs review.
fn ask_merge(state: &mut AppState) {
    let Some((plan, step)) = state.plan.selected_step() else {
        return;
    };
    if step.state == NEEDS_REVIEW {
        state.plan.confirm = Some((plan.address.clone(), step.id.clone()));
    } else {
        state.plan.note = Some(format!(
            "step {} is {}: M merges a step that needs review",
            step.id, step.state
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn step(id: &str, deps: &[&str]) -> StepSummary {
        StepSummary {
            id: id.into(),
            state: "pending".into(),
            depends_on: deps.iter().map(|d| d.to_string()).collect(),
            lane: format!("p-{id}"),
        }
    }

    fn drawn(steps: &[StepSummary]) -> Vec<String> {
        tree(steps)
            .into_iter()
            .map(|(i, prefix)| format!("{prefix}{}", steps[i].id))
            .collect()
    }

    /// A diamond sits under the dependency it waits for last; an independent
    /// step is a root of its own; dependencies listed before their steps come first.
    #[test]
    fn the_tree_follows_the_dependency_order() {
        let steps = [
            step("d", &["b", "c"]),
            step("a", &[]),
            step("b", &["a"]),
            step("c", &["a"]),
            step("e", &[]),
        ];
        assert_eq!(
            drawn(&steps),
            ["a", "├─ b", "└─ c", "   └─ d", "e"].map(String::from)
        );
    }

    #[test]
    fn deeper_branches_keep_their_rails() {
        let steps = [
            step("a", &[]),
            step("b", &["a"]),
            step("b2", &["b"]),
            step("c", &["a"]),
        ];
        assert_eq!(
            drawn(&steps),
            ["a", "├─ b", "│  └─ b2", "└─ c"].map(String::from)
        );
    }

    /// A cycle or an unknown dependency never hides a step.
    #[test]
    fn unresolved_steps_come_last_at_the_top() {
        let steps = [step("x", &["y"]), step("y", &["x"]), step("z", &["nope"])];
        assert_eq!(drawn(&steps), ["x", "y", "z"].map(String::from));
    }
}
