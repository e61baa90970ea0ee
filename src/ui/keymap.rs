//! The keys, declared once: this table drives the key handling in `app`, the
//! help overlay and the status line. One letter means one thing everywhere.

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

/// Where a binding applies. The main view looks in the focused pane's context
/// first, then in [`Context::Main`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Context {
    Main,
    /// The Lanes pane (with lanes).
    Lanes,
    Output,
    Approvals,
    Events,
    /// A full text on top of everything: a tool call, an event, the help.
    Detail,
    QuitDialog,
    /// The kill, stop-now, remove and merge questions.
    Confirm,
    /// The Plan view (`P`), while it is shown.
    Plan,
}

impl Context {
    pub fn heading(self) -> &'static str {
        match self {
            Context::Main => "Everywhere",
            Context::Lanes => {
                "Lanes pane (with lanes, p K s S D X M U R o e t act on the selected lane)"
            }
            Context::Output => "Session output pane",
            Context::Approvals => "Approvals pane (a, A, r work from any pane)",
            Context::Events => "Events pane",
            Context::Detail => "A full text (tool call, event, this help)",
            Context::QuitDialog => "Quit dialog",
            Context::Confirm => "Kill / stop-now / remove / merge questions",
            Context::Plan => "Plan view (P)",
        }
    }
}

/// What a key does; `app` carries it out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    PauseResume,
    Kill,
    StopAfter,
    StopNow,
    Approve,
    ApproveAlways,
    Reject,
    FocusNext,
    FocusPrev,
    Zoom,
    Unzoom,
    Quit,
    Help,
    Down,
    Up,
    PageDown,
    PageUp,
    Top,
    Follow,
    Search,
    SearchNext,
    SearchPrev,
    Expand,
    PrevSession,
    NextSession,
    History,
    Close,
    StopAfterThenQuit,
    StopNowThenQuit,
    Detach,
    Confirm,
    Cancel,
    /// `1`–`9`: show that lane (the digit says which).
    SelectLane,
    /// `D`: the selected lane's diff against its base.
    Diff,
    /// `X`: remove the selected lane (as `lane rm`, asks first).
    RemoveLane,
    /// `P`: the Plan view, in place of the session output.
    PlanView,
    /// `M`: merge the selected plan step that needs review (asks first).
    Merge,
    /// `R`: start a failed plan's failed or blocked steps again (`clowder plan retry`).
    RetryPlan,
    /// `n`: the new-lane dialog (with lanes).
    NewLane,
    /// `t`: a note for the selected lane's (or the loop's) next session.
    Tell,
    /// `M`: merge the selected lane's branch into its base (`clowder lane merge`).
    MergeLane,
    /// `U`: push the selected lane's branch (`clowder lane push`).
    PushLane,
    /// `R`: run the selected finished lane again (`clowder lane restart`).
    RestartLane,
    /// `o`: a shell in the selected lane's worktree, the room suspended meanwhile.
    OpenShell,
    /// `e`: `$VISUAL` or `$EDITOR` in the selected lane's worktree.
    OpenEditor,
    /// `/` in the Lanes pane: list only the lanes whose name holds what is typed.
    FilterLanes,
    /// `w`: list only the lanes that need you (again: every lane).
    NeedsYouOnly,
    /// `O`: order the lanes by state, cost, idle time, then as usual again.
    SortLanes,
    /// `Ctrl-Z`: suspend to the shell. Taken where the terminal's input is read
    /// ([`crate::ui::terminal`]), before any prompt or dialog, as the shell's
    /// job control would take it.
    Suspend,
}

/// One key: a code, and whether Ctrl is held.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Key {
    pub code: KeyCode,
    pub ctrl: bool,
}

const fn k(c: char) -> Key {
    Key {
        code: KeyCode::Char(c),
        ctrl: false,
    }
}

const fn code(code: KeyCode) -> Key {
    Key { code, ctrl: false }
}

const CTRL_C: Key = Key {
    code: KeyCode::Char('c'),
    ctrl: true,
};

const CTRL_Z: Key = Key {
    code: KeyCode::Char('z'),
    ctrl: true,
};

/// One row of the table.
#[derive(Debug, Clone, Copy)]
pub struct Binding {
    pub keys: &'static [Key],
    /// How the help and the status line write the keys.
    pub label: &'static str,
    pub context: Context,
    pub action: Action,
    pub help: &'static str,
    /// The status line's keys and word; `None` keeps it out of the status line.
    pub status: Option<(&'static str, &'static str)>,
}

const fn bind(
    keys: &'static [Key],
    label: &'static str,
    context: Context,
    action: Action,
    help: &'static str,
    status: Option<(&'static str, &'static str)>,
) -> Binding {
    Binding {
        keys,
        label,
        context,
        action,
        help,
        status,
    }
}

use Action as A;
use Context as C;

/// Every key of the control room, in the order the help and the status line
/// show them. Text prompts (search, a rejection's reason) take keys as text and
/// are not in here.
#[rustfmt::skip]
pub const KEYMAP: &[Binding] = &[
    bind(&[k('p')], "p", C::Main, A::PauseResume, "pause / resume the session (SIGSTOP / SIGCONT to its group); resumes a held loop", Some(("p", "pause"))),
    bind(&[k('K')], "K", C::Main, A::Kill, "kill the session now (asks first); the loop goes on", Some(("K", "kill"))),
    bind(&[k('s')], "s", C::Main, A::StopAfter, "stop after this session (again: cancel)", Some(("s", "stop after"))),
    bind(&[k('S')], "S", C::Main, A::StopNow, "stop now: kill the session and stop the loop (asks first)", Some(("S", "stop now"))),
    bind(&[k('a')], "a", C::Main, A::Approve, "approve the selected request in the approval queue", Some(("a", "approve"))),
    bind(&[k('A')], "A", C::Main, A::ApproveAlways, "approve, and always allow each of its commands (exact words)", None),
    bind(&[k('r')], "r", C::Main, A::Reject, "reject it: type a reason, Enter sends, Esc cancels", Some(("r", "reject"))),
    bind(&[k('j'), code(KeyCode::Down)], "j k ↑ ↓", C::Output, A::Down, "scroll the output (stops following)", Some(("j/k", "scroll"))),
    bind(&[k('k'), code(KeyCode::Up)], "", C::Output, A::Up, "", None),
    bind(&[code(KeyCode::PageDown)], "PgUp PgDn", C::Output, A::PageDown, "scroll a page", None),
    bind(&[code(KeyCode::PageUp)], "", C::Output, A::PageUp, "", None),
    bind(&[k('g'), code(KeyCode::Home)], "g / G", C::Output, A::Top, "top / follow the tail", None),
    bind(&[k('G'), code(KeyCode::End)], "", C::Output, A::Follow, "", None),
    bind(&[k('/')], "/  n  N", C::Output, A::Search, "search the output; once searching, next and previous match", Some(("/", "search"))),
    bind(&[k('n')], "", C::Output, A::SearchNext, "", None),
    bind(&[k('N')], "", C::Output, A::SearchPrev, "", None),
    bind(&[code(KeyCode::Enter)], "Enter", C::Output, A::Expand, "expand the selected tool call and its result", Some(("Enter", "expand"))),
    bind(&[k('[')], "[  ]", C::Output, A::PrevSession, "previous / next session of this run", Some(("[ ]", "sessions"))),
    bind(&[k(']')], "", C::Output, A::NextSession, "", None),
    bind(&[k('j'), code(KeyCode::Down)], "j k ↑ ↓", C::Approvals, A::Down, "select another request", Some(("j/k", "select"))),
    bind(&[k('k'), code(KeyCode::Up)], "", C::Approvals, A::Up, "", None),
    bind(&[code(KeyCode::Enter)], "Enter", C::Approvals, A::Expand, "show the whole request", Some(("Enter", "show"))),
    bind(&[k('h')], "h", C::Approvals, A::History, "history: how finished requests ended", Some(("h", "history"))),
    bind(&[k('j'), code(KeyCode::Down)], "j k ↑ ↓", C::Events, A::Down, "select an event (G: follow the newest)", Some(("j/k", "select"))),
    bind(&[k('k'), code(KeyCode::Up)], "", C::Events, A::Up, "", None),
    bind(&[k('G'), code(KeyCode::End)], "", C::Events, A::Follow, "", None),
    bind(&[code(KeyCode::Enter)], "Enter", C::Events, A::Expand, "show the event's full record", Some(("Enter", "record"))),
    bind(&[k('1'), k('2'), k('3'), k('4'), k('5'), k('6'), k('7'), k('8'), k('9')], "1 … 9", C::Main, A::SelectLane, "show the lane with that number in its row (with lanes)", None),
    bind(&[k('D')], "D", C::Main, A::Diff, "the selected lane's diff against its base: git diff --stat, then the patch", Some(("D", "diff"))),
    bind(&[k('X')], "X", C::Main, A::RemoveLane, "remove the selected lane as `clowder lane rm` does (asks first; refuses to lose work)", None),
    bind(&[k('M')], "M", C::Main, A::MergeLane, "merge the selected lane's committed branch into its base, checked, as `clowder lane merge` (asks first)", None),
    bind(&[k('U')], "U", C::Main, A::PushLane, "push the selected lane's branch, as `clowder lane push` (says the pull-request page)", None),
    bind(&[k('R')], "R", C::Main, A::RestartLane, "run the selected finished lane again from iteration 1 (`clowder lane restart`)", None),
    bind(&[k('o')], "o", C::Main, A::OpenShell, "a shell ($SHELL) in the selected lane's worktree; exit it to come back", None),
    bind(&[k('e')], "e", C::Main, A::OpenEditor, "$VISUAL or $EDITOR (else vi) in the selected lane's worktree", None),
    bind(&[k('P')], "P", C::Main, A::PlanView, "the Plan view: each plan's steps as a tree, with states", Some(("P", "plan"))),
    bind(&[k('j'), code(KeyCode::Down)], "j k ↑ ↓", C::Plan, A::Down, "select a step", None),
    bind(&[k('k'), code(KeyCode::Up)], "", C::Plan, A::Up, "", None),
    bind(&[code(KeyCode::Enter)], "Enter", C::Plan, A::Expand, "show the step's lane (selected in the Lanes pane)", None),
    bind(&[k('M')], "M", C::Plan, A::Merge, "merge the selected step that needs review into base, as `clowder plan merge` (asks first)", None),
    bind(&[k('R')], "R", C::Plan, A::RetryPlan, "start the failed plan's failed or blocked steps again, on fresh branches, as `clowder plan retry`", None),
    bind(&[code(KeyCode::Esc), k('P')], "Esc / P", C::Plan, A::Close, "close the Plan view", None),
    bind(&[k('t')], "t", C::Main, A::Tell, "tell: a note for the selected lane (or the loop); its next session reads it at the top of its prompt. Enter leaves it, Esc cancels", Some(("t", "tell"))),
    bind(&[k('j'), code(KeyCode::Down)], "j k ↑ ↓", C::Lanes, A::Down, "select a lane: the other panes show it", Some(("j/k", "lane"))),
    bind(&[k('k'), code(KeyCode::Up)], "", C::Lanes, A::Up, "", None),
    bind(&[k('/')], "/", C::Lanes, A::FilterLanes, "list only the lanes whose name holds what you type (as you type); Enter keeps the filter, Esc clears it", Some(("/", "filter"))),
    bind(&[k('w')], "w", C::Main, A::NeedsYouOnly, "list only the lanes that need you: waiting, held, failed (again: every lane)", None),
    bind(&[k('O')], "O", C::Main, A::SortLanes, "order the lanes by state, by cost, by idle time, then as usual again", None),
    bind(&[code(KeyCode::Tab)], "Tab / Shift-Tab", C::Main, A::FocusNext, "move the focus between panes", Some(("Tab", "focus"))),
    bind(&[code(KeyCode::BackTab)], "", C::Main, A::FocusPrev, "", None),
    bind(&[k('z')], "z", C::Main, A::Zoom, "zoom the focused pane (Esc: back)", Some(("z", "zoom"))),
    bind(&[code(KeyCode::Esc)], "", C::Main, A::Unzoom, "", None),
    bind(&[k('n')], "n", C::Main, A::NewLane, "new lane (with lanes): a name, a prompt file or typed prompt, a base", Some(("n", "new lane"))),
    bind(&[k('q'), CTRL_C], "q, Ctrl-C", C::Main, A::Quit, "quit: asks whether to stop the loop", Some(("q", "quit"))),
    bind(&[k('?')], "?", C::Main, A::Help, "this help", Some(("?", "help"))),
    bind(&[CTRL_Z], "Ctrl-Z", C::Main, A::Suspend, "suspend to the shell (the session is paused); `fg` comes back", None),
    bind(&[k('j'), code(KeyCode::Down)], "j k ↑ ↓", C::Detail, A::Down, "scroll", None),
    bind(&[k('k'), code(KeyCode::Up)], "", C::Detail, A::Up, "", None),
    bind(&[code(KeyCode::PageDown)], "PgUp PgDn", C::Detail, A::PageDown, "scroll a page", None),
    bind(&[code(KeyCode::PageUp)], "", C::Detail, A::PageUp, "", None),
    bind(&[code(KeyCode::Esc), code(KeyCode::Enter), k('q'), k('?'), CTRL_C], "Esc", C::Detail, A::Close, "close", None),
    bind(&[k('s')], "s", C::QuitDialog, A::StopAfterThenQuit, "stop after this session, then quit", None),
    bind(&[k('S')], "S", C::QuitDialog, A::StopNowThenQuit, "stop now (kill the session), then quit", None),
    bind(&[k('d')], "d", C::QuitDialog, A::Detach, "detach: quit; the loop (or the lanes) run on in the background", None),
    bind(&[k('c'), k('n'), code(KeyCode::Esc), CTRL_C], "c", C::QuitDialog, A::Cancel, "cancel (Esc)", None),
    bind(&[k('y'), code(KeyCode::Enter)], "y", C::Confirm, A::Confirm, "yes (or the same key again)", None),
    bind(&[k('n'), k('c'), code(KeyCode::Esc), CTRL_C], "n / Esc", C::Confirm, A::Cancel, "cancel", None),
];

impl Key {
    fn matches(&self, event: &KeyEvent) -> bool {
        self.code == event.code && self.ctrl == event.modifiers.contains(KeyModifiers::CONTROL)
    }
}

/// The first binding of `context` that `key` matches.
pub fn lookup(context: Context, key: &KeyEvent) -> Option<&'static Binding> {
    KEYMAP
        .iter()
        .find(|b| b.context == context && b.keys.iter().any(|k| k.matches(key)))
}

/// The bindings of `context` that the help lists (the ones with a text).
pub fn documented(context: Context) -> impl Iterator<Item = &'static Binding> {
    KEYMAP
        .iter()
        .filter(move |b| b.context == context && !b.help.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Within one context a key has one meaning.
    #[test]
    fn no_key_is_bound_twice_in_a_context() {
        for (i, a) in KEYMAP.iter().enumerate() {
            for b in &KEYMAP[i + 1..] {
                if a.context == b.context {
                    for key in a.keys {
                        assert!(!b.keys.contains(key), "{key:?} twice in {:?}", a.context);
                    }
                }
            }
        }
    }

    /// A letter of the main view means the same in the quit dialog: `s` stops
    /// after this session, `S` stops now.
    #[test]
    fn the_quit_dialog_uses_the_main_views_letters() {
        let press = |c| KeyEvent::new(KeyCode::Char(c), KeyModifiers::NONE);
        let main = |c| lookup(Context::Main, &press(c)).map(|b| b.action);
        let dialog = |c| lookup(Context::QuitDialog, &press(c)).map(|b| b.action);
        assert_eq!(main('s'), Some(Action::StopAfter));
        assert_eq!(dialog('s'), Some(Action::StopAfterThenQuit));
        assert_eq!(main('S'), Some(Action::StopNow));
        assert_eq!(dialog('S'), Some(Action::StopNowThenQuit));
    }
}
