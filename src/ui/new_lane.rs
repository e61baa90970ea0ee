//! The new-lane dialog (`n` in the control room): a name checked as it is typed,
//! a prompt file or a typed prompt, and a base; [`submit`] then adds the lane as
//! `clowder lane add` does.
//!
//! Wiring: hold an `Option<NewLaneDialog>`; while it is open it owns every key
//! ([`NewLaneDialog::handle_key`]) and is drawn last over the whole screen
//! ([`NewLaneDialog::render`]). On [`DialogOutcome::Submit`], run [`submit`] off
//! the screen's thread (it runs git); the dialog stays open, waiting
//! ([`NewLaneDialog::adding`]), until [`NewLaneDialog::refuse`] puts a refusal
//! under its field, or the lane is added and the dialog closed.

use std::path::{Path, PathBuf};

use crossterm::event::{KeyCode, KeyEvent, KeyEventKind, KeyModifiers};
use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, BorderType, Borders, Clear, Paragraph, Wrap};
use ratatui_textarea::TextArea;

use crate::fleet::LaneName;
pub use crate::fleet::new_lane::{NewLaneRequest, PromptSource, submit};

/// The dialog's fields, in Tab order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Field {
    Name,
    PromptFile,
    Prompt,
    Base,
}

const FIELDS: [Field; 4] = [Field::Name, Field::PromptFile, Field::Prompt, Field::Base];

impl Field {
    fn label(self) -> &'static str {
        match self {
            Field::Name => "Name",
            Field::PromptFile => "Prompt file",
            Field::Prompt => "or a prompt",
            Field::Base => "Base",
        }
    }

    fn placeholder(self) -> &'static str {
        match self {
            Field::Name => "a-z, 0-9, '.', '_', '-' (e.g. auth)",
            Field::PromptFile => "e.g. tasks/auth.md (relative to the fleet folder)",
            Field::Prompt => "type the lane's prompt here (Enter: new line)",
            Field::Base => "the current HEAD",
        }
    }
}

/// What a key did to the dialog.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DialogOutcome {
    Continue,
    Cancel,
    Submit(NewLaneRequest),
}

/// The dialog's state: one text area per field, the focused field, and the
/// problem that kept the last submit back.
#[derive(Debug, Clone)]
pub struct NewLaneDialog {
    root: PathBuf,
    fields: [TextArea<'static>; 4],
    focus: usize,
    /// Why the last submit was refused, and the field it is about (none: the
    /// request as a whole).
    refused: Option<(Option<Field>, String)>,
    /// The lanes there are: a name among them is flagged as it is typed.
    taken: Vec<String>,
    /// The lane submitted and not yet added or refused.
    adding: Option<LaneName>,
}

impl NewLaneDialog {
    /// `root` is the fleet folder, against which a prompt file is checked.
    pub fn new(root: &Path) -> NewLaneDialog {
        let fields = FIELDS.map(|field| {
            let mut text = TextArea::default();
            text.set_placeholder_text(field.placeholder());
            text.set_cursor_line_style(Style::default());
            text
        });
        let mut dialog = NewLaneDialog {
            root: root.to_path_buf(),
            fields,
            focus: 0,
            refused: None,
            taken: Vec::new(),
            adding: None,
        };
        dialog.show_focus();
        dialog
    }

    /// The names of the lanes there are, refused as the new lane's name.
    pub fn with_taken(mut self, names: impl IntoIterator<Item = String>) -> NewLaneDialog {
        self.taken = names.into_iter().collect();
        self
    }

    /// The lane submitted and waiting for the host's answer.
    pub fn adding(&self) -> Option<&LaneName> {
        self.adding.as_ref()
    }

    /// The host refused the submitted lane: the dialog keeps what was typed and
    /// shows `why` under the field it is about, with the focus there.
    pub fn refuse(&mut self, why: String) {
        let field = self.field_of(&why);
        self.adding = None;
        if let Some(field) = field
            && let Some(index) = FIELDS.iter().position(|f| *f == field)
        {
            self.focus = index;
            self.show_focus();
        }
        self.refused = Some((field, why));
    }

    /// Which field a refusal from `submit` is about, by its words.
    fn field_of(&self, why: &str) -> Option<Field> {
        if why.starts_with("lane ") && why.contains("already exists") {
            Some(Field::Name)
        } else if why.contains("--base") {
            Some(Field::Base)
        } else if why.contains("prompt") {
            let typed = !self.text(Field::Prompt).trim().is_empty();
            Some(if typed {
                Field::Prompt
            } else {
                Field::PromptFile
            })
        } else {
            None
        }
    }

    /// Every key goes here while the dialog is open: nothing typed leaks into
    /// the control room's keys.
    pub fn handle_key(&mut self, key: KeyEvent) -> DialogOutcome {
        if key.kind == KeyEventKind::Release {
            return DialogOutcome::Continue;
        }
        let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
        match key.code {
            KeyCode::Esc => return DialogOutcome::Cancel,
            KeyCode::Char('c') if ctrl => return DialogOutcome::Cancel,
            // What was submitted stays as it is until the host answers.
            _ if self.adding.is_some() => {}
            KeyCode::Char('s') if ctrl => return self.try_submit(),
            KeyCode::Tab => self.move_focus(1),
            KeyCode::BackTab => self.move_focus(FIELDS.len() - 1),
            KeyCode::Enter if self.field() == Field::Base => return self.try_submit(),
            KeyCode::Enter if self.field() != Field::Prompt => self.move_focus(1),
            _ => self.type_key(key),
        }
        DialogOutcome::Continue
    }

    /// Pasted text goes into the focused field as typed text; a one-line field
    /// takes it on one line.
    pub fn paste(&mut self, text: &str) {
        if self.adding.is_some() {
            return;
        }
        let multi_line = self.field() == Field::Prompt;
        let text: String = text
            .chars()
            .filter_map(|c| match c {
                '\n' if multi_line => Some('\n'),
                '\n' | '\t' => Some(' '),
                c if c.is_control() => None,
                c => Some(c),
            })
            .collect();
        self.fields[self.focus].insert_str(text);
        self.refused = None;
    }

    fn field(&self) -> Field {
        FIELDS[self.focus]
    }

    fn text(&self, field: Field) -> String {
        let index = FIELDS.iter().position(|f| *f == field).unwrap_or(0);
        self.fields[index].lines().join("\n")
    }

    fn move_focus(&mut self, by: usize) {
        self.focus = (self.focus + by) % FIELDS.len();
        self.show_focus();
    }

    /// Only the focused field shows a cursor.
    fn show_focus(&mut self) {
        for (index, text) in self.fields.iter_mut().enumerate() {
            let cursor = if index == self.focus {
                Style::default().add_modifier(Modifier::REVERSED)
            } else {
                Style::default()
            };
            text.set_cursor_style(cursor);
        }
    }

    fn type_key(&mut self, key: KeyEvent) {
        let multi_line = self.field() == Field::Prompt;
        let text = &mut self.fields[self.focus];
        text.input(key);
        // A one-line field stays one line, whatever key inserted a break.
        if !multi_line && text.lines().len() > 1 {
            let joined = text.lines().concat();
            let mut fresh = TextArea::from([joined]);
            fresh.set_placeholder_text(FIELDS[self.focus].placeholder());
            fresh.set_cursor_line_style(Style::default());
            fresh.move_cursor(ratatui_textarea::CursorMove::End);
            *text = fresh;
            self.show_focus();
        }
        self.refused = None;
    }

    fn try_submit(&mut self) -> DialogOutcome {
        match self.request() {
            Ok(request) => {
                self.refused = None;
                self.adding = Some(request.name.clone());
                DialogOutcome::Submit(request)
            }
            Err(problem) => {
                self.refused = Some((None, problem));
                DialogOutcome::Continue
            }
        }
    }

    /// The request the fields make, or the first problem with them.
    fn request(&self) -> Result<NewLaneRequest, String> {
        let name = LaneName::parse(self.text(Field::Name).trim())?;
        if let Some(taken) = self.taken_problem(name.as_str()) {
            return Err(taken);
        }
        let file = self.text(Field::PromptFile).trim().to_string();
        let typed = self.text(Field::Prompt);
        let prompt = match (file.is_empty(), typed.trim().is_empty()) {
            (true, true) => PromptSource::Default,
            (false, true) => {
                self.file_problem(&file).map_or(Ok(()), Err)?;
                PromptSource::File(PathBuf::from(file))
            }
            (true, false) => PromptSource::Typed(typed),
            (false, false) => {
                return Err("give a prompt file or a typed prompt, not both".into());
            }
        };
        let base = self.text(Field::Base).trim().to_string();
        let base = (!base.is_empty()).then_some(base);
        Ok(NewLaneRequest { name, prompt, base })
    }

    fn file_problem(&self, file: &str) -> Option<String> {
        (!self.root.join(file).is_file()).then(|| format!("prompt file {file}: no such file"))
    }

    fn taken_problem(&self, name: &str) -> Option<String> {
        self.taken
            .iter()
            .any(|taken| taken == name)
            .then(|| format!("lane {name} already exists"))
    }

    /// What is wrong with a field now, shown under it as it is typed.
    fn live_problem(&self, field: Field) -> Option<String> {
        let text = self.text(field);
        let text = text.trim();
        match field {
            Field::Name if !text.is_empty() => LaneName::parse(text)
                .err()
                .or_else(|| self.taken_problem(text)),
            Field::PromptFile if !text.is_empty() => self.file_problem(text),
            _ => None,
        }
    }

    /// Draws the dialog centred in `area` (the whole screen, usually).
    pub fn render(&self, frame: &mut Frame, area: Rect) {
        let rect = area
            .centered_horizontally(Constraint::Length(area.width.min(76)))
            .centered_vertically(Constraint::Length(area.height.min(22)));
        frame.render_widget(Clear, rect);
        let block = Block::default()
            .borders(Borders::ALL)
            .border_type(BorderType::Double)
            .border_style(Style::default().fg(Color::Cyan))
            .title(Span::styled(
                " New lane — Tab next field · Enter on Base or Ctrl-S adds · Esc cancels ",
                Style::default().add_modifier(Modifier::BOLD),
            ));
        let inner = block.inner(rect);
        frame.render_widget(block, rect);
        let rows = Layout::vertical([
            Constraint::Length(3),
            Constraint::Length(2),
            Constraint::Min(3),
            Constraint::Length(3),
            Constraint::Length(1),
        ])
        .split(inner);
        for (index, field) in FIELDS.iter().enumerate() {
            self.render_field(frame, rows[index], index);
            let refused = self
                .refused
                .as_ref()
                .filter(|(about, _)| *about == Some(*field))
                .map(|(_, why)| why.clone());
            if let Some(problem) = refused.or_else(|| self.live_problem(*field)) {
                let row = rows[index];
                // The typed prompt fills its rows: its problem takes the last.
                let skip = match field {
                    Field::Prompt => row.height.saturating_sub(1),
                    _ => 1,
                };
                let below = Rect {
                    x: row.x + 2,
                    y: row.y + skip,
                    width: row.width.saturating_sub(2),
                    height: row.height.saturating_sub(skip),
                };
                let line = Line::styled(problem, Style::default().fg(Color::Red));
                let text = Paragraph::new(line).wrap(Wrap { trim: true });
                frame.render_widget(text, below);
            }
        }
        if let Some(name) = &self.adding {
            let line = Line::styled(
                format!("adding lane {name}…"),
                Style::default().fg(Color::DarkGray),
            );
            frame.render_widget(Paragraph::new(line), rows[4]);
        } else if let Some((None, problem)) = &self.refused {
            let line = Line::styled(problem.clone(), Style::default().fg(Color::Red));
            frame.render_widget(Paragraph::new(line), rows[4]);
        }
    }

    fn render_field(&self, frame: &mut Frame, row: Rect, index: usize) {
        let [label, input] =
            Layout::horizontal([Constraint::Length(13), Constraint::Min(1)]).areas(row);
        let style = if index == self.focus {
            Style::default()
                .fg(Color::Cyan)
                .add_modifier(Modifier::BOLD)
        } else {
            Style::default()
        };
        let label_line = Line::styled(FIELDS[index].label(), style);
        frame.render_widget(Paragraph::new(label_line), label);
        // A one-line field keeps the rows below it for its problem.
        let input = match FIELDS[index] {
            Field::Prompt
                if self
                    .refused
                    .as_ref()
                    .is_some_and(|(f, _)| *f == Some(Field::Prompt)) =>
            {
                Rect {
                    height: input.height.saturating_sub(1),
                    ..input
                }
            }
            Field::Prompt => input,
            _ => Rect { height: 1, ..input },
        };
        frame.render_widget(&self.fields[index], input);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ratatui::Terminal;
    use ratatui::backend::TestBackend;

    fn key(code: KeyCode) -> KeyEvent {
        KeyEvent::new(code, KeyModifiers::NONE)
    }

    fn ctrl(c: char) -> KeyEvent {
        KeyEvent::new(KeyCode::Char(c), KeyModifiers::CONTROL)
    }

    fn type_text(dialog: &mut NewLaneDialog, text: &str) {
        for c in text.chars() {
            let code = if c == '\n' {
                KeyCode::Enter
            } else {
                KeyCode::Char(c)
            };
            assert_eq!(dialog.handle_key(key(code)), DialogOutcome::Continue);
        }
    }

    fn request(name: &str, prompt: PromptSource, base: Option<&str>) -> NewLaneRequest {
        NewLaneRequest {
            name: LaneName::parse(name).expect("a valid name"),
            prompt,
            base: base.map(str::to_string),
        }
    }

    #[test]
    fn tab_walks_the_fields_and_enter_on_base_submits() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut dialog = NewLaneDialog::new(dir.path());
        type_text(&mut dialog, "auth");
        dialog.handle_key(key(KeyCode::Tab));
        dialog.handle_key(key(KeyCode::Tab));
        assert_eq!(dialog.field(), Field::Prompt);
        type_text(&mut dialog, "Fix the login.\nWith tests.");
        dialog.handle_key(key(KeyCode::Tab));
        assert_eq!(dialog.field(), Field::Base);
        type_text(&mut dialog, "main");
        assert_eq!(
            dialog.handle_key(key(KeyCode::Enter)),
            DialogOutcome::Submit(request(
                "auth",
                PromptSource::Typed("Fix the login.\nWith tests.".into()),
                Some("main")
            ))
        );
    }

    #[test]
    fn shift_tab_goes_back_and_enter_in_a_one_line_field_moves_on() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut dialog = NewLaneDialog::new(dir.path());
        dialog.handle_key(key(KeyCode::BackTab));
        assert_eq!(dialog.field(), Field::Base);
        dialog.handle_key(key(KeyCode::BackTab));
        assert_eq!(dialog.field(), Field::Prompt);
        dialog.handle_key(key(KeyCode::Tab));
        dialog.handle_key(key(KeyCode::Tab));
        assert_eq!(dialog.field(), Field::Name);
        type_text(&mut dialog, "docs\n");
        assert_eq!(dialog.field(), Field::PromptFile);
        assert_eq!(dialog.text(Field::Name), "docs");
    }

    #[test]
    fn ctrl_s_submits_from_anywhere_with_the_defaults() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut dialog = NewLaneDialog::new(dir.path());
        type_text(&mut dialog, "docs");
        assert_eq!(
            dialog.handle_key(ctrl('s')),
            DialogOutcome::Submit(request("docs", PromptSource::Default, None))
        );
    }

    #[test]
    fn esc_and_ctrl_c_cancel() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut dialog = NewLaneDialog::new(dir.path());
        type_text(&mut dialog, "x");
        assert_eq!(dialog.handle_key(key(KeyCode::Esc)), DialogOutcome::Cancel);
        assert_eq!(dialog.handle_key(ctrl('c')), DialogOutcome::Cancel);
    }

    #[test]
    fn a_bad_name_is_shown_as_typed_and_blocks_submit() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut dialog = NewLaneDialog::new(dir.path());
        assert_eq!(
            dialog.live_problem(Field::Name),
            None,
            "empty is not yet wrong"
        );
        type_text(&mut dialog, "Auth");
        let problem = dialog.live_problem(Field::Name).expect("a problem");
        assert!(problem.contains("invalid lane name \"Auth\""), "{problem}");
        assert_eq!(dialog.handle_key(ctrl('s')), DialogOutcome::Continue);
        assert!(dialog.refused.is_some());
        // Typing again clears the refusal; a good name passes.
        dialog.handle_key(key(KeyCode::Backspace));
        dialog.handle_key(key(KeyCode::Backspace));
        dialog.handle_key(key(KeyCode::Backspace));
        dialog.handle_key(key(KeyCode::Backspace));
        assert!(dialog.refused.is_none());
        type_text(&mut dialog, "auth");
        assert_eq!(dialog.live_problem(Field::Name), None);
    }

    #[test]
    fn the_prompt_file_must_exist_and_excludes_a_typed_prompt() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join("task.md"), "do it\n").expect("write");
        let mut dialog = NewLaneDialog::new(dir.path());
        type_text(&mut dialog, "a\nmissing.md");
        let problem = dialog.live_problem(Field::PromptFile).expect("missing");
        assert!(problem.contains("no such file"), "{problem}");
        for _ in 0.."missing.md".len() {
            dialog.handle_key(key(KeyCode::Backspace));
        }
        type_text(&mut dialog, "task.md");
        assert_eq!(
            dialog.request(),
            Ok(request("a", PromptSource::File("task.md".into()), None))
        );
        dialog.handle_key(key(KeyCode::Tab));
        type_text(&mut dialog, "typed too");
        assert_eq!(
            dialog.request(),
            Err("give a prompt file or a typed prompt, not both".into())
        );
    }

    fn git(dir: &Path, args: &[&str]) {
        let status = std::process::Command::new("git")
            .arg("-C")
            .arg(dir)
            .args(args)
            .stdout(std::process::Stdio::null())
            .status()
            .expect("run git");
        assert!(status.success(), "git {args:?}");
    }

    fn repo() -> tempfile::TempDir {
        let dir = tempfile::tempdir().expect("tempdir");
        git(dir.path(), &["init", "--quiet", "--initial-branch=main"]);
        git(dir.path(), &["config", "user.name", "Dialog Tester"]);
        git(dir.path(), &["config", "user.email", "dialog@example.com"]);
        git(dir.path(), &["config", "commit.gpgsign", "false"]);
        std::fs::write(dir.path().join("README.md"), "hello\n").expect("write");
        git(dir.path(), &["add", "README.md"]);
        git(dir.path(), &["commit", "--quiet", "-m", "first"]);
        dir
    }

    #[test]
    fn submit_adds_the_lane_with_its_typed_prompt() {
        let repo = repo();
        let root = repo.path();
        let typed = PromptSource::Typed("Write the docs.".into());
        let message = submit(root, &request("docs", typed, None)).expect("added");
        assert!(message.contains("clowder/docs"), "{message}");
        let fleet = std::fs::read_to_string(root.join(".clowder/fleet.json")).expect("fleet");
        let fleet: serde_json::Value = serde_json::from_str(&fleet).expect("json");
        let lane = &fleet["lanes"][0];
        assert_eq!(lane["name"], "docs");
        assert_eq!(lane["prompt_file"], ".clowder/prompts/docs.md");
        assert!(root.join(".clowder/worktrees/docs/README.md").is_file());
        assert_eq!(
            std::fs::read_to_string(root.join(".clowder/prompts/docs.md")).expect("prompt"),
            "Write the docs.\n"
        );

        // The same name again: refused, and the prompt file is not touched.
        let again = PromptSource::Typed("Other text.".into());
        let err = submit(root, &request("docs", again, None)).expect_err("exists");
        assert_eq!(err, "lane docs already exists");
        assert_eq!(
            std::fs::read_to_string(root.join(".clowder/prompts/docs.md")).expect("prompt"),
            "Write the docs.\n"
        );
    }

    #[test]
    fn a_failed_submit_creates_nothing() {
        let repo = repo();
        let root = repo.path();
        let typed = PromptSource::Typed("x".into());
        let err = submit(root, &request("api", typed, Some("no-such-ref"))).expect_err("bad base");
        assert!(err.contains("--base no-such-ref"), "{err}");
        assert!(!root.join(".clowder/prompts/api.md").exists());
        assert!(!root.join(".clowder/worktrees/api").exists());
        assert!(!root.join(".clowder/lanes/api").exists());
        let fleet = root.join(".clowder/fleet.json");
        assert!(
            !fleet.exists()
                || !std::fs::read_to_string(&fleet)
                    .expect("read")
                    .contains("api")
        );

        // A typed prompt never replaces a file already there.
        std::fs::create_dir_all(root.join(".clowder/prompts")).expect("mkdir");
        std::fs::write(root.join(".clowder/prompts/web.md"), "mine\n").expect("write");
        let typed = PromptSource::Typed("theirs".into());
        let err = submit(root, &request("web", typed, None)).expect_err("exists");
        assert!(err.contains("already exists"), "{err}");
        assert_eq!(
            std::fs::read_to_string(root.join(".clowder/prompts/web.md")).expect("read"),
            "mine\n"
        );
        assert!(!root.join(".clowder/worktrees/web").exists());
    }

    #[test]
    fn an_existing_name_is_flagged_as_typed_and_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut dialog = NewLaneDialog::new(dir.path()).with_taken(["auth".to_string()]);
        type_text(&mut dialog, "aut");
        assert_eq!(dialog.live_problem(Field::Name), None);
        type_text(&mut dialog, "h");
        assert_eq!(
            dialog.live_problem(Field::Name),
            Some("lane auth already exists".into())
        );
        assert_eq!(dialog.handle_key(ctrl('s')), DialogOutcome::Continue);
        assert_eq!(dialog.adding(), None);
    }

    fn screen(dialog: &NewLaneDialog) -> String {
        let mut terminal = Terminal::new(TestBackend::new(80, 24)).expect("terminal");
        terminal
            .draw(|frame| dialog.render(frame, frame.area()))
            .expect("draw");
        terminal.backend().to_string()
    }

    #[test]
    fn a_refusal_keeps_what_was_typed_and_shows_under_its_field() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut dialog = NewLaneDialog::new(dir.path());
        type_text(&mut dialog, "api");
        for _ in 0..3 {
            dialog.handle_key(key(KeyCode::Tab));
        }
        type_text(&mut dialog, "nope");
        let submitted = dialog.handle_key(key(KeyCode::Enter));
        assert!(
            matches!(submitted, DialogOutcome::Submit(_)),
            "{submitted:?}"
        );
        assert_eq!(dialog.adding().map(LaneName::as_str), Some("api"));
        assert!(screen(&dialog).contains("adding lane api…"));
        // Nothing is typed while the host works; Esc still closes.
        type_text(&mut dialog, "x");
        assert_eq!(
            dialog.handle_key(key(KeyCode::Enter)),
            DialogOutcome::Continue
        );
        assert_eq!(dialog.text(Field::Base), "nope");

        dialog.refuse("--base nope: no such commit".into());
        assert_eq!(dialog.adding(), None);
        assert_eq!(dialog.field(), Field::Base, "the focus goes to the field");
        assert_eq!(dialog.text(Field::Name), "api");
        let shown = screen(&dialog);
        let lines: Vec<&str> = shown.lines().collect();
        let base = lines
            .iter()
            .position(|l| l.contains("║Base"))
            .expect("Base");
        assert!(lines[base].contains("nope"), "{shown}");
        assert!(
            lines[base + 1].contains("--base nope: no such commit"),
            "{shown}"
        );

        // Fixed, it goes again.
        for _ in 0..4 {
            dialog.handle_key(key(KeyCode::Backspace));
        }
        assert!(dialog.refused.is_none());
        let again = dialog.handle_key(key(KeyCode::Enter));
        assert!(matches!(again, DialogOutcome::Submit(_)), "{again:?}");

        dialog.refuse("lane api already exists".into());
        assert_eq!(dialog.field(), Field::Name);
        let shown = screen(&dialog);
        let lines: Vec<&str> = shown.lines().collect();
        let name = lines
            .iter()
            .position(|l| l.contains("║Name"))
            .expect("Name");
        assert!(
            lines[name + 1].contains("lane api already exists"),
            "{shown}"
        );
    }

    #[test]
    fn the_dialog_snapshot() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut dialog = NewLaneDialog::new(dir.path());
        type_text(
            &mut dialog,
            "Auth\n\nFix the login form.\nKeep the tests green.",
        );
        let mut terminal = Terminal::new(TestBackend::new(80, 24)).expect("terminal");
        terminal
            .draw(|frame| dialog.render(frame, frame.area()))
            .expect("draw");
        insta::assert_snapshot!(terminal.backend());
    }
}
