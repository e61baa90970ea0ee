//! What an `[approvals]` rule may decide: a Bash command split into its simple
//! commands by a shell parser, paths compared by whole components, and the shell
//! constructs that no rule can ever allow.

use std::path::{Component, Path};

use brush_parser::ast;
use brush_parser::word::{WordPiece, WordPieceWithSource};

use super::subject::{self, Kind};
use super::url_prefix;

/// Programs that run a string or a file as shell code: a rule never allows them.
const SHELLS: &[&str] = &[
    "sh", "bash", "dash", "zsh", "ksh", "mksh", "oksh", "pdksh", "ash", "yash", "posh", "rbash",
    "busybox", "fish", "csh", "tcsh", "pwsh", "eval", "source", ".", "trap",
];

/// Programs that run another program named in their arguments; a shell among
/// those arguments (`env sh -c …`, `xargs bash -c …`) is never allowed.
const WRAPPERS: &[&str] = &[
    "env",
    "exec",
    "command",
    "builtin",
    "nohup",
    "nice",
    "ionice",
    "timeout",
    "time",
    "stdbuf",
    "setsid",
    "sudo",
    "doas",
    "su",
    "runuser",
    "xargs",
    "parallel",
    "find",
    "watch",
    "flock",
    "strace",
    "ltrace",
    "taskset",
    "chrt",
    "unbuffer",
    "script",
    "chroot",
    "nsenter",
    "unshare",
    "fakeroot",
    "systemd-run",
];

/// Substitutions nested deeper than this are not followed (the call is asked anyway).
const MAX_DEPTH: usize = 8;

/// Deeper nesting of brackets and compound commands is not handed to the parser,
/// whose recursion would overflow the stack (the call is asked anyway).
const MAX_NESTING: usize = 64;

/// One rule as written in `[approvals] allow` or `deny`; the regexes were
/// checked when the config loaded.
#[derive(Debug, Clone, Copy)]
pub struct RuleRef<'a> {
    pub tool: &'a str,
    pub pattern: Option<&'a str>,
    pub prefix: Option<&'a str>,
}

impl crate::config::Rule {
    /// The rule as the policy reads it.
    pub fn policy(&self) -> RuleRef<'_> {
        RuleRef {
            tool: &self.tool.0,
            pattern: self.pattern.as_ref().map(|p| p.0.as_str()),
            prefix: self.prefix.as_deref(),
        }
    }

    /// `Bash prefix "cargo test"`, for messages.
    pub fn describe(&self) -> String {
        self.policy().describe()
    }
}

impl RuleRef<'_> {
    /// `tool `Bash` starting with "cargo test"`, for messages.
    pub fn describe(&self) -> String {
        let mut text = format!("tool `{}`", self.tool);
        if let Some(pattern) = self.pattern {
            text.push_str(&format!(" matching /{pattern}/"));
        }
        if let Some(prefix) = self.prefix {
            text.push_str(&format!(" starting with {prefix:?}"));
        }
        text
    }

    fn tool_matches(&self, tool: &str) -> bool {
        regex::Regex::new(&format!("^(?:{})$", self.tool)).is_ok_and(|re| re.is_match(tool))
    }

    fn pattern_matches(&self, text: &str) -> bool {
        self.pattern
            .is_none_or(|p| regex::Regex::new(p).is_ok_and(|re| re.is_match(text)))
    }

    /// Whether the rule covers one simple command: its prefix as whole words, its
    /// regex searched in the words joined by single spaces.
    fn covers_command(&self, command: &Simple) -> bool {
        let literal = command.words.iter().take_while(|w| w.literal);
        self.starts(literal.map(|w| w.text.as_str())) && self.pattern_matches(&command.text())
    }

    /// Whether a deny rule hits a command: any simple command, nested ones
    /// included, or the raw text (so an unreadable command is still refused).
    fn denies_command(&self, raw: &str, script: &Script) -> bool {
        let raw_hit = self.pattern_matches(raw) && self.starts(raw.split_whitespace());
        raw_hit
            || script.commands.iter().any(|command| {
                self.pattern_matches(&command.text())
                    && self.starts(command.words.iter().map(|w| w.text.as_str()))
            })
    }

    /// Whether `words` begin with the prefix's words (true without a prefix).
    fn starts<'w>(&self, mut words: impl Iterator<Item = &'w str>) -> bool {
        self.prefix.is_none_or(|prefix| {
            prefix_words(prefix)
                .iter()
                .all(|want| words.next() == Some(want.as_str()))
        })
    }

    /// A path rule: the prefix by whole components after `.` and `..` are
    /// resolved without touching the disk; a path whose `..` climbs above its
    /// start is never covered.
    fn covers_path(&self, path: &str) -> bool {
        let Some(normal) = normalize(path) else {
            return false;
        };
        let under = self.prefix.is_none_or(|prefix| {
            normalize(prefix).is_some_and(|p| p.0 == normal.0 && normal.1.starts_with(&p.1))
        });
        under && self.pattern_matches(&joined(&normal))
    }

    fn denies_path(&self, path: &str) -> bool {
        let prefix_hit = |text: &str| {
            self.prefix.is_none_or(|prefix| {
                text.starts_with(prefix)
                    || normalize(prefix)
                        .zip(normalize(text))
                        .is_some_and(|(p, t)| p.0 == t.0 && t.1.starts_with(&p.1))
            })
        };
        let normal = normalize(path).map(|n| joined(&n));
        (self.pattern_matches(path) && prefix_hit(path))
            || normal.is_some_and(|n| self.pattern_matches(&n) && prefix_hit(&n))
    }

    /// Free text (a search pattern, a query): the prefix must end where the text
    /// does or at a separator (`/`, `?`, `#`, a space).
    fn covers_text(&self, text: &str) -> bool {
        let boundary = |c: char| c.is_whitespace() || matches!(c, '/' | '?' | '#');
        let under = self.prefix.is_none_or(|prefix| {
            text.strip_prefix(prefix).is_some_and(|rest| {
                rest.is_empty() || prefix.ends_with(boundary) || rest.starts_with(boundary)
            })
        });
        under && self.pattern_matches(text)
    }

    /// A URL, already known to be one without control characters or white space:
    /// the prefix read as a URL ([`url_prefix::covers`]); a pattern must match
    /// both the text as written and as a parser reads it.
    fn covers_url(&self, raw: &str, url: &url::Url) -> bool {
        self.prefix
            .is_none_or(|prefix| url_prefix::covers(prefix, url))
            && self.pattern_matches(raw)
            && self.pattern_matches(url.as_str())
    }

    /// A deny rule hits a URL as written, or as a parser reads it.
    fn denies_url(&self, raw: &str) -> bool {
        let as_written =
            self.pattern_matches(raw) && self.prefix.is_none_or(|p| raw.starts_with(p));
        as_written
            || url_prefix::parsed(raw).is_some_and(|url| {
                self.pattern_matches(url.as_str())
                    && self
                        .prefix
                        .is_none_or(|p| url.as_str().starts_with(p) || url_prefix::covers(p, &url))
            })
    }

    /// The whole input of a tool whose subject is not known: no field is guessed;
    /// a prefix must be the whole input exactly, a pattern is searched in it.
    fn covers_json(&self, json: &str) -> bool {
        self.prefix.is_none_or(|prefix| prefix == json) && self.pattern_matches(json)
    }
}

/// A tool call as the rules see it.
#[derive(Debug)]
pub struct Call {
    tool: String,
    subject: Subject,
    /// Other texts of the input a deny rule also hits: the fields that look like
    /// a subject, or every string of an input whose subject is not known.
    also: Vec<String>,
}

#[derive(Debug)]
enum Subject {
    Shell { raw: String, script: Script },
    Path(String),
    Url(String),
    Text(String),
    Json(String),
}

impl Call {
    /// Reads the subject from the field the tool really uses ([`subject::of`],
    /// the same table the queue shows it by).
    pub fn new(tool: &str, input: Option<&serde_json::Value>) -> Call {
        let found = subject::of(tool, input);
        let also: Vec<String> = match (found.kind, input) {
            (Kind::Json, Some(input)) => subject::texts(input)
                .into_iter()
                .map(str::to_string)
                .collect(),
            _ => found
                .others
                .iter()
                .filter_map(|(_, value)| value.as_str().map(str::to_string))
                .collect(),
        };
        let subject = match found.kind {
            Kind::Shell => Subject::Shell {
                script: analyze(&found.text),
                raw: found.text,
            },
            Kind::Path => Subject::Path(found.text),
            Kind::Url => Subject::Url(found.text),
            Kind::Text => Subject::Text(found.text),
            Kind::Json => Subject::Json(found.text),
        };
        Call {
            tool: tool.to_string(),
            subject,
            also,
        }
    }
}

/// What the rules decided.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    Allow(String),
    Deny(String),
    /// A human decides; the text says why no rule could.
    Ask(String),
}

/// Deny rules first (any simple command, nested ones included); then a call is
/// allowed only when every simple command in it is covered by an allow rule and
/// nothing in it is a construct no rule can prove harmless.
pub fn decide(call: &Call, allow: &[RuleRef], deny: &[RuleRef]) -> Verdict {
    let (allow, deny) = (for_tool(allow, &call.tool), for_tool(deny, &call.tool));
    let denied = deny.iter().find(|rule| match &call.subject {
        Subject::Shell { raw, script } => rule.denies_command(raw, script),
        Subject::Path(path) => rule.denies_path(path),
        Subject::Url(raw) => rule.denies_url(raw),
        Subject::Text(text) | Subject::Json(text) => {
            rule.pattern_matches(text) && rule.prefix.is_none_or(|p| text.starts_with(p))
        }
    } || call.also.iter().any(|text| rule.denies_path(text)));
    if let Some(rule) = denied {
        return Verdict::Deny(format!(
            "denied by the rule {} in [approvals] deny",
            rule.describe()
        ));
    }
    let used = match &call.subject {
        Subject::Shell { script, .. } => match allowing_rules(script, &allow) {
            Ok(used) => used,
            Err(why) => return Verdict::Ask(why),
        },
        Subject::Path(path) => allow
            .iter()
            .filter(|r| r.covers_path(path))
            .take(1)
            .collect(),
        Subject::Url(raw) => {
            if let Some(why) = url_prefix::never_allowed(raw) {
                return Verdict::Ask(format!("no rule can allow {why}"));
            }
            let Some(url) = url_prefix::parsed(raw) else {
                return Verdict::Ask("no rule can allow a URL that cannot be parsed".into());
            };
            allow
                .iter()
                .filter(|r| r.covers_url(raw, &url))
                .take(1)
                .collect()
        }
        Subject::Text(text) => allow
            .iter()
            .filter(|r| r.covers_text(text))
            .take(1)
            .collect(),
        Subject::Json(json) => allow
            .iter()
            .filter(|r| r.covers_json(json))
            .take(1)
            .collect(),
    };
    match used.as_slice() {
        [] => Verdict::Ask("no allow rule covers it".into()),
        [rule] => Verdict::Allow(format!(
            "allowed by the rule {} in [approvals] allow",
            rule.describe()
        )),
        rules => Verdict::Allow(format!(
            "allowed by the rules {} in [approvals] allow",
            rules
                .iter()
                .map(|r| r.describe())
                .collect::<Vec<_>>()
                .join("; ")
        )),
    }
}

fn for_tool<'a>(rules: &[RuleRef<'a>], tool: &str) -> Vec<RuleRef<'a>> {
    rules
        .iter()
        .filter(|r| r.tool_matches(tool))
        .copied()
        .collect()
}

/// The allow rules that cover every simple command, or why there are none.
fn allowing_rules<'r, 'a>(
    script: &Script,
    allow: &'r [RuleRef<'a>],
) -> Result<Vec<&'r RuleRef<'a>>, String> {
    if let Some(why) = script.unprovable.first() {
        return Err(format!("no rule can allow {why}"));
    }
    if script.commands.is_empty() {
        return Err("there is no command to check".into());
    }
    let mut used: Vec<&RuleRef> = Vec::new();
    for command in &script.commands {
        let rule = allow
            .iter()
            .find(|rule| rule.covers_command(command))
            .ok_or_else(|| format!("no allow rule covers `{}`", command.text()))?;
        if !used.iter().any(|u| std::ptr::eq(*u, rule)) {
            used.push(rule);
        }
    }
    Ok(used)
}

/// What the `A` key writes for a call, and the sentence that tells the user
/// what it covers (or why nothing was written).
#[derive(Debug, Clone, PartialEq)]
pub struct AlwaysRule {
    pub prefixes: Vec<String>,
    pub note: String,
}

/// The rules that make this exact call pass next time: one per simple command
/// for shell code (none when a part of it can never be allowed), the exact path
/// or text otherwise.
pub fn always_rule(tool: &str, input: Option<&serde_json::Value>) -> AlwaysRule {
    let once = |why: String| AlwaysRule {
        prefixes: Vec::new(),
        note: format!("approved once; no rule written: {why}"),
    };
    match Call::new(tool, input).subject {
        Subject::Shell { script, .. } => {
            if let Some(why) = script.unprovable.first() {
                return once(format!("a rule can never allow {why}"));
            }
            let mut prefixes: Vec<String> = Vec::new();
            for command in &script.commands {
                let Some(prefix) = command.quoted() else {
                    return once(format!(
                        "`{}` has words that are not plain text ($VAR, ~, globs)",
                        command.text()
                    ));
                };
                if !prefixes.contains(&prefix) {
                    prefixes.push(prefix);
                }
            }
            if prefixes.is_empty() {
                return once("there is no command in it".into());
            }
            let listed: Vec<String> = prefixes.iter().map(|p| format!("`{p}`")).collect();
            AlwaysRule {
                note: format!(
                    "always allowed: {tool} commands whose words start with {}; each part of a chain is checked on its own",
                    listed.join(" or ")
                ),
                prefixes,
            }
        }
        Subject::Path(path) => AlwaysRule {
            note: format!(
                "always allowed: {tool} on `{path}` and anything under it (whole path components; `..` cannot climb out)"
            ),
            prefixes: vec![path],
        },
        Subject::Url(raw) => match url_prefix::never_allowed(&raw) {
            Some(why) => once(format!("a rule can never allow {why}")),
            None => AlwaysRule {
                note: format!(
                    "always allowed: {tool} of `{raw}` and the paths under it (same scheme, host and port; whole path segments)"
                ),
                prefixes: vec![raw],
            },
        },
        Subject::Text(text) | Subject::Json(text) if text.is_empty() => {
            once("the call has no input to match".into())
        }
        Subject::Text(text) => AlwaysRule {
            note: format!("always allowed: {tool} calls starting with `{text}`"),
            prefixes: vec![text],
        },
        Subject::Json(json) => AlwaysRule {
            note: format!("always allowed: {tool} with exactly the input `{json}`"),
            prefixes: vec![json],
        },
    }
}

/// The words of a Bash rule's prefix, read like a command (so quotes work).
fn prefix_words(prefix: &str) -> Vec<String> {
    let script = analyze(prefix);
    match script.commands.as_slice() {
        [command] if script.unprovable.is_empty() && command.words.iter().all(|w| w.literal) => {
            command.words.iter().map(|w| w.text.clone()).collect()
        }
        _ => prefix.split_whitespace().map(str::to_string).collect(),
    }
}

/// `(absolute, components)` with `.` dropped and `..` resolved; `None` when
/// `..` climbs above the start of a relative path.
fn normalize(path: &str) -> Option<(bool, Vec<String>)> {
    let mut absolute = false;
    let mut parts: Vec<String> = Vec::new();
    for component in Path::new(path).components() {
        match component {
            Component::RootDir => absolute = true,
            Component::CurDir | Component::Prefix(_) => {}
            Component::ParentDir => {
                if parts.pop().is_none() && !absolute {
                    return None;
                }
            }
            Component::Normal(part) => parts.push(part.to_string_lossy().into_owned()),
        }
    }
    Some((absolute, parts))
}

fn joined((absolute, parts): &(bool, Vec<String>)) -> String {
    let body = parts.join("/");
    if *absolute { format!("/{body}") } else { body }
}

/// A command line read by the shell parser: its simple commands (those inside
/// substitutions too) and the constructs found that no rule can allow.
#[derive(Debug, Default)]
struct Script {
    commands: Vec<Simple>,
    unprovable: Vec<String>,
}

/// One simple command: the words a program is started with.
#[derive(Debug)]
struct Simple {
    words: Vec<Word>,
}

/// A word after quote removal; `literal` is false when the shell would expand
/// it (`$VAR`, `~`, globs, braces), and then `text` is the word as written.
#[derive(Debug)]
struct Word {
    text: String,
    literal: bool,
}

impl Simple {
    fn text(&self) -> String {
        let words: Vec<&str> = self.words.iter().map(|w| w.text.as_str()).collect();
        words.join(" ")
    }

    /// The words quoted so that they read back the same, when all are literal.
    fn quoted(&self) -> Option<String> {
        if !self.words.iter().all(|w| w.literal) {
            return None;
        }
        shlex::try_join(self.words.iter().map(|w| w.text.as_str())).ok()
    }
}

/// Parses a command line; never fails: what cannot be parsed is recorded as a
/// construct no rule can allow.
fn analyze(command: &str) -> Script {
    let mut script = Script::default();
    script.source(command, 0);
    script
}

fn parser_options() -> brush_parser::ParserOptions {
    brush_parser::ParserOptions::default()
}

impl Script {
    fn flag(&mut self, why: impl Into<String>) {
        let why = why.into();
        if !self.unprovable.contains(&why) {
            self.unprovable.push(why);
        }
    }

    fn source(&mut self, text: &str, depth: usize) {
        if depth > MAX_DEPTH {
            self.flag("substitutions nested this deep");
            return;
        }
        if nesting(text) > MAX_NESTING {
            self.flag(format!("more than {MAX_NESTING} levels of nesting"));
            return;
        }
        let mut parser = brush_parser::Parser::new(text.as_bytes(), &parser_options());
        match parser.parse_program() {
            Ok(program) => {
                for list in &program.complete_commands {
                    self.list(list, depth);
                }
            }
            Err(err) => self.flag(format!("a command the shell parser cannot read ({err})")),
        }
    }

    fn list(&mut self, list: &ast::CompoundList, depth: usize) {
        for ast::CompoundListItem(and_or, _) in &list.0 {
            self.pipeline(&and_or.first, depth);
            for next in &and_or.additional {
                match next {
                    ast::AndOr::And(pipeline) | ast::AndOr::Or(pipeline) => {
                        self.pipeline(pipeline, depth)
                    }
                }
            }
        }
    }

    fn pipeline(&mut self, pipeline: &ast::Pipeline, depth: usize) {
        for command in &pipeline.seq {
            self.command(command, depth);
        }
    }

    fn command(&mut self, command: &ast::Command, depth: usize) {
        match command {
            ast::Command::Simple(simple) => self.simple(simple, depth),
            ast::Command::Compound(compound, redirects) => {
                self.compound(compound, depth);
                self.redirects(redirects.as_ref(), depth);
            }
            ast::Command::Function(function) => {
                self.flag("a function definition (it can redefine a command)");
                self.compound(&function.body.0, depth);
                self.redirects(function.body.1.as_ref(), depth);
            }
            ast::Command::ExtendedTest(test, redirects) => {
                // Its operands may be evaluated as arithmetic, which can run code.
                self.flag("a `[[ … ]]` test");
                self.test_words(&test.expr, depth);
                self.redirects(redirects.as_ref(), depth);
            }
        }
    }

    fn compound(&mut self, compound: &ast::CompoundCommand, depth: usize) {
        use ast::CompoundCommand as C;
        match compound {
            C::Arithmetic(_) => self.flag("arithmetic evaluation `(( … ))`"),
            C::ArithmeticForClause(clause) => {
                self.flag("arithmetic evaluation `(( … ))`");
                self.list(&clause.body.list, depth);
            }
            C::BraceGroup(group) => self.list(&group.list, depth),
            C::Subshell(subshell) => self.list(&subshell.list, depth),
            C::ForClause(clause) => {
                self.flag("a variable assignment (`for NAME in …`)");
                for value in clause.values.iter().flatten() {
                    self.word(value, depth);
                }
                self.list(&clause.body.list, depth);
            }
            C::CaseClause(clause) => {
                self.word(&clause.value, depth);
                for item in &clause.cases {
                    for pattern in &item.patterns {
                        self.word(pattern, depth);
                    }
                    if let Some(body) = &item.cmd {
                        self.list(body, depth);
                    }
                }
            }
            C::IfClause(clause) => {
                self.list(&clause.condition, depth);
                self.list(&clause.then, depth);
                for other in clause.elses.iter().flatten() {
                    if let Some(condition) = &other.condition {
                        self.list(condition, depth);
                    }
                    self.list(&other.body, depth);
                }
            }
            C::WhileClause(clause) | C::UntilClause(clause) => {
                self.list(&clause.0, depth);
                self.list(&clause.1.list, depth);
            }
            C::Coprocess(coprocess) => self.command(&coprocess.body, depth),
        }
    }

    fn test_words(&mut self, expr: &ast::ExtendedTestExpr, depth: usize) {
        use ast::ExtendedTestExpr as T;
        match expr {
            T::And(a, b) | T::Or(a, b) => {
                self.test_words(a, depth);
                self.test_words(b, depth);
            }
            T::Not(a) | T::Parenthesized(a) => self.test_words(a, depth),
            T::UnaryTest(_, word) => {
                self.word(word, depth);
            }
            T::BinaryTest(_, left, right) => {
                self.word(left, depth);
                self.word(right, depth);
            }
        }
    }

    fn simple(&mut self, simple: &ast::SimpleCommand, depth: usize) {
        let mut words = Vec::new();
        for item in simple.prefix.iter().flat_map(|p| &p.0) {
            if let ast::CommandPrefixOrSuffixItem::AssignmentWord(_, word) = item {
                self.flag("a variable assignment before or instead of a command (`NAME=value`)");
                self.word(word, depth);
            } else {
                self.item(item, &mut words, depth);
            }
        }
        if let Some(name) = &simple.word_or_name {
            words.push(self.word(name, depth));
        }
        for item in simple.suffix.iter().flat_map(|s| &s.0) {
            self.item(item, &mut words, depth);
        }
        if words.is_empty() {
            return;
        }
        self.interpreters(&words, depth);
        self.commands.push(Simple { words });
    }

    fn item(&mut self, item: &ast::CommandPrefixOrSuffixItem, words: &mut Vec<Word>, depth: usize) {
        use ast::CommandPrefixOrSuffixItem as I;
        match item {
            I::IoRedirect(redirect) => self.redirect(redirect, depth),
            I::Word(word) | I::AssignmentWord(_, word) => words.push(self.word(word, depth)),
            I::ProcessSubstitution(_, subshell) => {
                self.flag("process substitution `<(…)` / `>(…)`");
                self.list(&subshell.list, depth + 1);
            }
        }
    }

    /// Shells, `eval` and the like run a string as code that no rule has seen.
    fn interpreters(&mut self, words: &[Word], depth: usize) {
        let base = |word: &Word| word.text.rsplit('/').next().unwrap_or_default().to_string();
        let first = &words[0];
        if !first.literal {
            self.flag(format!(
                "a command whose name is not plain text (`{}`)",
                first.text
            ));
            return;
        }
        let name = base(first);
        if SHELLS.contains(&name.as_str()) {
            self.flag(format!(
                "`{name}`, which runs a string or file as shell code"
            ));
            self.code_strings(words, depth);
        } else if WRAPPERS.contains(&name.as_str()) {
            for (at, word) in words.iter().enumerate().skip(1) {
                if !word.literal {
                    self.flag(format!(
                        "`{name}` with an argument that is not plain text (`{}`)",
                        word.text
                    ));
                } else if SHELLS.contains(&base(word).as_str()) {
                    self.flag(format!("`{name} {}`, which runs shell code", base(word)));
                    self.code_strings(&words[at..], depth);
                    return;
                }
            }
        }
    }

    /// Reads the code in `-c STRING` and `eval WORDS…` (from the shell's name
    /// on), only so that deny rules see the commands it would run.
    fn code_strings(&mut self, words: &[Word], depth: usize) {
        let base = |w: &Word| w.text.rsplit('/').next().unwrap_or_default().to_string();
        if base(&words[0]) == "eval" {
            let rest: Vec<&str> = words[1..].iter().map(|w| w.text.as_str()).collect();
            self.source(&rest.join(" "), depth + 1);
            return;
        }
        for (at, word) in words.iter().enumerate().skip(1) {
            let option_c = word.text.starts_with('-') && word.text.contains('c');
            if option_c && let Some(code) = words.get(at + 1) {
                self.source(&code.text, depth + 1);
            }
        }
    }

    fn redirects(&mut self, redirects: Option<&ast::RedirectList>, depth: usize) {
        for redirect in redirects.iter().flat_map(|r| &r.0) {
            self.redirect(redirect, depth);
        }
    }

    fn redirect(&mut self, redirect: &ast::IoRedirect, depth: usize) {
        use ast::IoFileRedirectKind as K;
        use ast::IoFileRedirectTarget as T;
        match redirect {
            ast::IoRedirect::File(_, kind, target) => match target {
                T::Fd(_) => {}
                T::ProcessSubstitution(_, subshell) => {
                    self.flag("process substitution `<(…)` / `>(…)`");
                    self.list(&subshell.list, depth + 1);
                }
                T::Duplicate(word) => {
                    let word = self.word(word, depth);
                    self.duplicate(&word);
                }
                T::Filename(word) => {
                    let word = self.word(word, depth);
                    match kind {
                        K::Read => self.read_from(&word),
                        K::DuplicateInput | K::DuplicateOutput => self.duplicate(&word),
                        _ => self.write_to(&word),
                    }
                }
            },
            ast::IoRedirect::HereDocument(_, here) => {
                self.flag("a here-document (`<<`)");
                if here.requires_expansion {
                    // Only so that deny rules see what its substitutions run.
                    if let Ok(pieces) =
                        brush_parser::word::parse_heredoc(&here.doc.value, &parser_options())
                    {
                        let (mut text, mut literal) = (String::new(), true);
                        self.pieces(
                            &here.doc.value,
                            &pieces,
                            &mut text,
                            &mut literal,
                            true,
                            depth,
                        );
                    }
                }
            }
            ast::IoRedirect::HereString(_, word) => {
                self.flag("a here-string (`<<<`)");
                self.word(word, depth);
            }
            ast::IoRedirect::OutputAndError(word, _) => {
                let word = self.word(word, depth);
                self.write_to(&word);
            }
        }
    }

    /// `>&2`, `2>&1`, `<&-` only move descriptors; `>&FILE` writes a file.
    fn duplicate(&mut self, word: &Word) {
        let fd = word.literal
            && (word.text == "-"
                || (!word.text.is_empty() && word.text.chars().all(|c| c.is_ascii_digit())));
        if !fd {
            self.write_to(word);
        }
    }

    fn write_to(&mut self, word: &Word) {
        if !(word.literal && word.text == "/dev/null") {
            self.flag(format!("output redirected to a file (`{}`)", word.text));
        }
    }

    fn read_from(&mut self, word: &Word) {
        if !word.literal || word.text.starts_with("/dev/tcp/") || word.text.starts_with("/dev/udp/")
        {
            self.flag(format!("input redirected from `{}`", word.text));
        }
    }

    /// Quote removal, recording every expansion and following substitutions.
    fn word(&mut self, word: &ast::Word, depth: usize) -> Word {
        let (mut text, mut literal) = (String::new(), true);
        match brush_parser::word::parse(&word.value, &parser_options()) {
            Ok(pieces) => self.pieces(&word.value, &pieces, &mut text, &mut literal, false, depth),
            Err(err) => {
                self.flag(format!("a word the shell parser cannot read ({err})"));
                literal = false;
            }
        }
        if !literal {
            text = word.value.clone();
        }
        Word { text, literal }
    }

    fn pieces(
        &mut self,
        source: &str,
        pieces: &[WordPieceWithSource],
        text: &mut String,
        literal: &mut bool,
        quoted: bool,
        depth: usize,
    ) {
        for piece in pieces {
            match &piece.piece {
                WordPiece::Text(t) => {
                    *literal &= quoted || !t.contains(['*', '?', '[', '{', '(']);
                    text.push_str(t);
                }
                WordPiece::SingleQuotedText(t) => text.push_str(t),
                WordPiece::EscapeSequence(t) => text.push_str(&unescape(t, quoted)),
                WordPiece::DoubleQuotedSequence(inner)
                | WordPiece::GettextDoubleQuotedSequence(inner) => {
                    self.pieces(source, inner, text, literal, true, depth)
                }
                WordPiece::AnsiCQuotedText(_) | WordPiece::TildeExpansion(_) => *literal = false,
                WordPiece::ParameterExpansion(_) => {
                    *literal = false;
                    let written = source
                        .get(piece.start_index..piece.end_index)
                        .unwrap_or(source);
                    if written.contains(['`', '[', '(']) {
                        self.flag(format!(
                            "a parameter expansion that can run commands (`{written}`)"
                        ));
                    }
                }
                WordPiece::CommandSubstitution(inner) => {
                    *literal = false;
                    self.flag("command substitution `$(…)`");
                    self.source(inner, depth + 1);
                }
                WordPiece::BackquotedCommandSubstitution(inner) => {
                    *literal = false;
                    self.flag("backquotes `…`");
                    self.source(inner, depth + 1);
                }
                WordPiece::ArithmeticExpression(_) => {
                    *literal = false;
                    self.flag("arithmetic expansion `$(( … ))`");
                }
            }
        }
    }
}

/// How deep brackets and compound commands nest, counted without regard to
/// quoting (an overestimate only makes the call asked).
fn nesting(text: &str) -> usize {
    let (mut depth, mut deepest) = (0usize, 0usize);
    for token in text.split(|c: char| c.is_whitespace() || c == ';') {
        for c in token.chars() {
            match c {
                '(' | '{' => depth += 1,
                ')' | '}' => depth = depth.saturating_sub(1),
                _ => {}
            }
            deepest = deepest.max(depth);
        }
        match token {
            "if" | "while" | "until" | "for" | "case" | "select" => depth += 1,
            "fi" | "done" | "esac" => depth = depth.saturating_sub(1),
            _ => {}
        }
        deepest = deepest.max(depth);
    }
    deepest
}

/// `\x` is `x` outside quotes; inside double quotes only `$`, `` ` ``, `"`, `\`
/// and a newline lose their backslash.
fn unescape(sequence: &str, quoted: bool) -> String {
    let rest = sequence.strip_prefix('\\').unwrap_or(sequence);
    match rest {
        "\n" => String::new(),
        "$" | "`" | "\"" | "\\" => rest.to_string(),
        _ if quoted => sequence.to_string(),
        _ => rest.to_string(),
    }
}
