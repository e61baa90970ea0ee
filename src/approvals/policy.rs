//! What an `[approvals]` rule may decide: a Bash command split into its simple
//! commands by a shell parser, paths compared by whole components, and the shell
//! constructs that no rule can ever allow.

use std::path::{Component, Path};

use brush_parser::ast;
use brush_parser::word::{WordPiece, WordPieceWithSource};

use super::patch;
use super::subject::{self, Kind};
use super::url_prefix;

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
    /// regex searched in the words joined by spaces (a word holding a space
    /// quoted, so word boundaries show), and every option that writes, deletes
    /// or runs a program named by the rule.
    fn covers_command(&self, command: &Simple) -> bool {
        let literal = command.words.iter().take_while(|w| w.literal);
        self.starts(literal.map(|w| w.text.as_str()))
            && self.pattern_matches(&command.text())
            && command.needs.iter().all(|power| self.names(power))
    }

    /// Whether the rule names a power: its prefix starts with the program or
    /// holds the option as a word (`sort -o out.txt`), or its pattern holds the
    /// program or option as a whole word (`^tee( |$)`, `-delete$`).
    fn names(&self, power: &Power) -> bool {
        let in_prefix = self.prefix.is_some_and(|prefix| {
            let words = prefix_words(prefix);
            if power.option.is_empty() {
                words
                    .first()
                    .is_some_and(|w| w.rsplit('/').next() == Some(power.program))
            } else {
                words.iter().skip(1).any(|w| gives(w, power.option))
            }
        });
        let name = if power.option.is_empty() {
            power.program
        } else {
            power.option
        };
        let word_char = |c: char| c.is_alphanumeric() || c == '-' || c == '_';
        let in_pattern = self.pattern.is_some_and(|pattern| {
            pattern.match_indices(name).any(|(at, _)| {
                !pattern[..at].ends_with(word_char)
                    && !pattern[at + name.len()..].starts_with(word_char)
            })
        });
        in_prefix || in_pattern
    }

    /// Whether a deny rule hits a command: any simple command, nested ones
    /// included, or the raw text (so an unreadable command is still refused).
    fn denies_command(&self, raw: &str, script: &Script) -> bool {
        let raw_hit = self.pattern_matches(raw) && self.starts(raw.split_whitespace());
        raw_hit
            || script.commands.iter().any(|command| {
                (self.pattern_matches(&command.text())
                    || self.pattern_matches(&command.plain_text()))
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
    /// The folder the agent works in, when its hook said: a patch's relative
    /// paths are judged as written and as resolved against it.
    cwd: Option<String>,
}

#[derive(Debug)]
enum Subject {
    Shell {
        raw: String,
        script: Script,
    },
    Path(String),
    Url(String),
    Text(String),
    Json(String),
    /// A Codex patch, judged file by file.
    Patch(String),
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
            Kind::Patch => Subject::Patch(found.text),
        };
        Call {
            tool: tool.to_string(),
            subject,
            also,
            cwd: None,
        }
    }

    /// The call made in `cwd` (the hook input's `cwd`).
    pub fn in_dir(mut self, cwd: Option<&str>) -> Call {
        self.cwd = cwd.map(str::to_string);
        self
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
    if let Subject::Patch(patch) = &call.subject {
        return decide_patch(call, patch, allow, deny);
    }
    let (allow, deny) = (for_tool(allow, &call.tool), for_tool(deny, &call.tool));
    let denied = deny.iter().find(|rule| match &call.subject {
        Subject::Shell { raw, script } => rule.denies_command(raw, script),
        Subject::Path(path) => rule.denies_path(path),
        Subject::Url(raw) => rule.denies_url(raw),
        Subject::Text(text) | Subject::Json(text) => {
            rule.pattern_matches(text) && rule.prefix.is_none_or(|p| text.starts_with(p))
        }
        // Judged by `decide_patch`, above.
        Subject::Patch(_) => false,
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
        Subject::Patch(_) => Vec::new(),
    };
    allowed(&used)
}

/// The verdict of the allow rules that cover a call (none: a human decides).
fn allowed(used: &[&RuleRef]) -> Verdict {
    match used {
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

/// The tools whose path rules judge the files of a Codex patch: its own name,
/// and the two Claude Code tools Codex itself matches `apply_patch` hooks by.
const PATCH_TOOLS: &[&str] = &["apply_patch", "Write", "Edit"];

/// A patch, file by file: any file a deny rule hits denies it; it is allowed
/// only when an allow rule covers every file it adds, changes, moves or
/// deletes. A patch that cannot be read is never allowed.
fn decide_patch(call: &Call, patch: &str, allow: &[RuleRef], deny: &[RuleRef]) -> Verdict {
    let (allow, deny) = (patch_rules(allow), patch_rules(deny));
    let denied = |rule: &RuleRef, what: &str| {
        Verdict::Deny(format!(
            "denied by the rule {} in [approvals] deny ({what})",
            rule.describe()
        ))
    };
    if let Some((rule, text)) = deny
        .iter()
        .find_map(|r| call.also.iter().find(|t| r.denies_path(t)).map(|t| (r, t)))
    {
        return denied(rule, &format!("the input also names `{text}`"));
    }
    let files = match patch::touched(patch) {
        Ok(files) => files,
        Err(why) => {
            return Verdict::Ask(format!(
                "no rule can allow a patch that cannot be read: {why}"
            ));
        }
    };
    let forms: Vec<Vec<String>> = files
        .iter()
        .map(|file| path_forms(&file.path, call.cwd.as_deref()))
        .collect();
    for (file, forms) in files.iter().zip(&forms) {
        if let Some(rule) = deny.iter().find(|r| forms.iter().any(|f| r.denies_path(f))) {
            return denied(
                rule,
                &format!("the patch would {} `{}`", file.op.word(), file.path),
            );
        }
    }
    let mut used: Vec<&RuleRef> = Vec::new();
    for (file, forms) in files.iter().zip(&forms) {
        let Some(rule) = allow
            .iter()
            .find(|r| forms.iter().any(|f| r.covers_path(f)))
        else {
            return Verdict::Ask(format!(
                "no allow rule covers `{}` (the patch would {} it)",
                file.path,
                file.op.word()
            ));
        };
        if !used.iter().any(|u| std::ptr::eq(*u, rule)) {
            used.push(rule);
        }
    }
    allowed(&used)
}

fn patch_rules<'a>(rules: &[RuleRef<'a>]) -> Vec<RuleRef<'a>> {
    rules
        .iter()
        .filter(|r| PATCH_TOOLS.iter().any(|tool| r.tool_matches(tool)))
        .copied()
        .collect()
}

/// A patch path as written and, when relative, resolved against the folder the
/// agent works in (Codex applies it there).
fn path_forms(path: &str, cwd: Option<&str>) -> Vec<String> {
    let mut forms = vec![path.to_string()];
    if let Some(cwd) = cwd
        && !Path::new(path).is_absolute()
        && Path::new(cwd).is_absolute()
    {
        forms.push(format!("{}/{path}", cwd.trim_end_matches('/')));
    }
    forms
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
            .ok_or_else(|| uncovered(command))?;
        if !used.iter().any(|u| std::ptr::eq(*u, rule)) {
            used.push(rule);
        }
    }
    Ok(used)
}

/// Why no allow rule covers a simple command.
fn uncovered(command: &Simple) -> String {
    let text = command.text();
    if command.needs.is_empty() {
        return format!("no allow rule covers `{text}`");
    }
    let needs: Vec<String> = command
        .needs
        .iter()
        .map(|p| format!("`{}` ({})", p.label(), p.effect()))
        .collect();
    format!(
        "no allow rule covers `{text}` and names {}",
        needs.join(" and ")
    )
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
        Subject::Patch(patch) => match patch::touched(&patch) {
            Err(why) => once(format!("the patch cannot be read: {why}")),
            Ok(files) => {
                let mut prefixes: Vec<String> = Vec::new();
                for file in files {
                    if !prefixes.contains(&file.path) {
                        prefixes.push(file.path);
                    }
                }
                let listed: Vec<String> = prefixes.iter().map(|p| format!("`{p}`")).collect();
                AlwaysRule {
                    note: format!(
                        "always allowed: {tool} on {} and anything under them (whole path components; `..` cannot climb out)",
                        listed.join(", ")
                    ),
                    prefixes,
                }
            }
        },
    }
}

/// The words of a command line as a shell reads them (quotes removed); plain
/// white space splits one that is not a single plain command.
pub fn shell_words(text: &str) -> Vec<String> {
    prefix_words(text)
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

/// What a program does beyond reading its arguments, and the word that makes it
/// do so. This is the one table the gate knows programs by; README lists it.
struct Power {
    program: &'static str,
    /// The option that does it (`-delete`, `--output`, `-o`); empty: the program
    /// does it by itself (`tee`, `bash`).
    option: &'static str,
    does: Does,
}

#[derive(Clone, Copy)]
enum Does {
    /// Runs a string or a file as shell code: no rule allows it.
    Code,
    /// Reads or sets a variable by a name, whose array subscript (`a[$(…)]`) is
    /// evaluated as arithmetic, which runs code: no rule allows it.
    Names,
    /// Runs the command in the words after its own options; that command is
    /// judged as a command of its own.
    Runs(Wrap),
    /// Runs the command from the next word to `;` or `{} +` (`find -exec`),
    /// judged as a command of its own.
    RunsUntilSemicolon,
    /// Runs a program named in its value or in the settings it changes: asked
    /// unless a rule names it.
    RunsNamed,
    /// Writes files: asked unless a rule names it.
    Writes,
    /// Deletes files: asked unless a rule names it.
    Deletes,
}

/// How a program that runs programs reads its own words before the command.
#[derive(Clone, Copy)]
struct Wrap {
    /// Options whose value is the next word.
    valued: &'static [&'static str],
    /// Options without a value.
    flags: &'static [&'static str],
    /// Words between its options and the command (`timeout`'s duration).
    operands: usize,
    /// It adds words read from its input to the command (`xargs`).
    appends_input: bool,
    /// Options with which it only looks the command up (`command -v`).
    looks_up: &'static [&'static str],
}

const fn power(program: &'static str, option: &'static str, does: Does) -> Power {
    Power {
        program,
        option,
        does,
    }
}

const fn code(program: &'static str) -> Power {
    power(program, "", Does::Code)
}

const fn runs(program: &'static str, wrap: Wrap) -> Power {
    power(program, "", Does::Runs(wrap))
}

const fn wrap(valued: &'static [&'static str], flags: &'static [&'static str]) -> Wrap {
    Wrap {
        valued,
        flags,
        operands: 0,
        appends_input: false,
        looks_up: &[],
    }
}

const fn wrap_then(valued: &'static [&'static str], flags: &'static [&'static str]) -> Wrap {
    Wrap {
        operands: 1,
        ..wrap(valued, flags)
    }
}

const PLAIN: Wrap = wrap(&[], &[]);

const POWERS: &[Power] = &[
    // Shells and the builtins that run a string or a file as code.
    code("sh"),
    code("bash"),
    code("dash"),
    code("zsh"),
    code("ksh"),
    code("mksh"),
    code("oksh"),
    code("pdksh"),
    code("ash"),
    code("yash"),
    code("posh"),
    code("rbash"),
    code("busybox"),
    code("fish"),
    code("csh"),
    code("tcsh"),
    code("pwsh"),
    code("eval"),
    code("source"),
    code("."),
    code("trap"),
    code("su"),
    code("runuser"),
    code("watch"),
    code("parallel"),
    code("script"),
    power("env", "-S", Does::Code),
    power("env", "--split-string", Does::Code),
    power("sudo", "-s", Does::Code),
    power("sudo", "--shell", Does::Code),
    power("sudo", "-i", Does::Code),
    power("sudo", "--login", Does::Code),
    power("doas", "-s", Does::Code),
    power("flock", "-c", Does::Code),
    power("flock", "--command", Does::Code),
    // Builtins that take variable names.
    power("let", "", Does::Names),
    power("declare", "", Does::Names),
    power("typeset", "", Does::Names),
    power("local", "", Does::Names),
    power("export", "", Does::Names),
    power("readonly", "", Does::Names),
    power("unset", "", Does::Names),
    power("read", "", Does::Names),
    power("mapfile", "", Does::Names),
    power("readarray", "", Does::Names),
    power("getopts", "", Does::Names),
    power("printf", "-v", Does::Names),
    power("test", "-v", Does::Names),
    power("[", "-v", Does::Names),
    // Programs that run the program named by the words after their options.
    runs(
        "env",
        wrap(
            &["-u", "--unset", "-C", "--chdir"],
            &[
                "-i",
                "--ignore-environment",
                "-0",
                "--null",
                "-v",
                "--debug",
            ],
        ),
    ),
    runs("exec", wrap(&["-a"], &["-c", "-l"])),
    runs(
        "command",
        Wrap {
            looks_up: &["-v", "-V"],
            ..wrap(&[], &["-p", "-v", "-V"])
        },
    ),
    runs("builtin", PLAIN),
    runs("nohup", PLAIN),
    runs("nice", wrap(&["-n", "--adjustment"], &[])),
    runs(
        "ionice",
        wrap(
            &[
                "-c",
                "--class",
                "-n",
                "--classdata",
                "-p",
                "--pid",
                "-P",
                "--pgid",
                "-u",
                "--uid",
            ],
            &["-t", "--ignore"],
        ),
    ),
    runs(
        "timeout",
        wrap_then(
            &["-s", "--signal", "-k", "--kill-after"],
            &["--foreground", "--preserve-status", "-v", "--verbose"],
        ),
    ),
    runs(
        "time",
        wrap(
            &["-f", "--format", "-o", "--output"],
            &[
                "-a",
                "--append",
                "-p",
                "--portability",
                "-v",
                "--verbose",
                "-q",
                "--quiet",
            ],
        ),
    ),
    runs(
        "stdbuf",
        wrap(&["-i", "-o", "-e", "--input", "--output", "--error"], &[]),
    ),
    runs(
        "setsid",
        wrap(&[], &["-c", "--ctty", "-f", "--fork", "-w", "--wait"]),
    ),
    runs(
        "sudo",
        wrap(
            &[
                "-u",
                "--user",
                "-g",
                "--group",
                "-C",
                "--close-from",
                "-D",
                "--chdir",
                "-h",
                "--host",
                "-p",
                "--prompt",
                "-r",
                "--role",
                "-t",
                "--type",
                "-T",
                "--command-timeout",
                "-U",
                "--other-user",
            ],
            &[
                "-A",
                "--askpass",
                "-b",
                "--background",
                "-E",
                "--preserve-env",
                "-H",
                "--set-home",
                "-k",
                "--reset-timestamp",
                "-n",
                "--non-interactive",
                "-P",
                "--preserve-groups",
                "-S",
                "--stdin",
                "-s",
                "--shell",
                "-i",
                "--login",
            ],
        ),
    ),
    runs("doas", wrap(&["-u", "-C"], &["-n", "-L", "-s"])),
    runs(
        "xargs",
        Wrap {
            appends_input: true,
            ..wrap(
                &[
                    "-a",
                    "--arg-file",
                    "-d",
                    "--delimiter",
                    "-E",
                    "-I",
                    "-L",
                    "-n",
                    "--max-args",
                    "-P",
                    "--max-procs",
                    "-s",
                    "--max-chars",
                    "--process-slot-var",
                ],
                &[
                    "-0",
                    "--null",
                    "-o",
                    "--open-tty",
                    "-p",
                    "--interactive",
                    "-r",
                    "--no-run-if-empty",
                    "-t",
                    "--verbose",
                    "-x",
                    "--exit",
                    "-e",
                    "--eof",
                    "-i",
                    "--replace",
                    "-l",
                    "--max-lines",
                ],
            )
        },
    ),
    runs(
        "flock",
        wrap_then(
            &["-w", "--timeout", "-E", "--conflict-exit-code"],
            &[
                "-s",
                "--shared",
                "-x",
                "-e",
                "--exclusive",
                "-u",
                "--unlock",
                "-n",
                "--nb",
                "--nonblock",
                "-o",
                "--close",
                "-F",
                "--no-fork",
                "--verbose",
            ],
        ),
    ),
    runs("strace", PLAIN),
    runs("ltrace", PLAIN),
    runs(
        "taskset",
        wrap_then(&[], &["-a", "--all-tasks", "-c", "--cpu-list"]),
    ),
    runs("chrt", wrap_then(&[], &[])),
    runs("unbuffer", wrap(&[], &["-p"])),
    runs("chroot", wrap_then(&[], &["--skip-chdir"])),
    runs("nsenter", PLAIN),
    runs("unshare", PLAIN),
    runs("fakeroot", PLAIN),
    runs("systemd-run", PLAIN),
    power("find", "-exec", Does::RunsUntilSemicolon),
    power("find", "-execdir", Does::RunsUntilSemicolon),
    power("find", "-ok", Does::RunsUntilSemicolon),
    power("find", "-okdir", Does::RunsUntilSemicolon),
    // Options that run a program they name.
    power("git", "-c", Does::RunsNamed),
    power("git", "--config-env", Does::RunsNamed),
    power("git", "--exec-path", Does::RunsNamed),
    power("git", "-O", Does::RunsNamed),
    power("git", "--open-files-in-pager", Does::RunsNamed),
    power("sort", "--compress-program", Does::RunsNamed),
    power("rsync", "-e", Does::RunsNamed),
    power("rsync", "--rsh", Does::RunsNamed),
    power("rsync", "--rsync-path", Does::RunsNamed),
    power("tar", "-I", Does::RunsNamed),
    power("tar", "--use-compress-program", Does::RunsNamed),
    power("tar", "--to-command", Does::RunsNamed),
    power("tar", "--checkpoint-action", Does::RunsNamed),
    power("tar", "-F", Does::RunsNamed),
    power("tar", "--info-script", Does::RunsNamed),
    power("tar", "--new-volume-script", Does::RunsNamed),
    // Options and programs that write or delete files.
    power("find", "-delete", Does::Deletes),
    power("find", "-fprint", Does::Writes),
    power("find", "-fprint0", Does::Writes),
    power("find", "-fprintf", Does::Writes),
    power("find", "-fls", Does::Writes),
    power("git", "--output", Does::Writes),
    power("git", "-o", Does::Writes),
    power("sort", "-o", Does::Writes),
    power("sort", "--output", Does::Writes),
    power("tee", "", Does::Writes),
    power("sed", "-i", Does::Writes),
    power("sed", "--in-place", Does::Writes),
    power("time", "-o", Does::Writes),
    power("time", "--output", Does::Writes),
    power("strace", "-o", Does::Writes),
    power("ltrace", "-o", Does::Writes),
    power("curl", "-o", Does::Writes),
    power("curl", "--output", Does::Writes),
    power("curl", "-O", Does::Writes),
    power("curl", "--remote-name", Does::Writes),
    power("curl", "-D", Does::Writes),
    power("curl", "--dump-header", Does::Writes),
    power("curl", "-c", Does::Writes),
    power("curl", "--cookie-jar", Does::Writes),
    power("wget", "", Does::Writes),
];

impl Power {
    /// `find -delete`, or `tee` for what the program does by itself.
    fn label(&self) -> String {
        if self.option.is_empty() {
            self.program.to_string()
        } else {
            format!("{} {}", self.program, self.option)
        }
    }

    /// What it does, for messages.
    fn effect(&self) -> &'static str {
        match self.does {
            Does::Code => "runs a string or file as shell code",
            Does::Names => "evaluates the array subscript of a variable name, which can run code",
            Does::Runs(_) | Does::RunsUntilSemicolon => "runs a program",
            Does::RunsNamed => "runs a program it names",
            Does::Writes => "writes files",
            Does::Deletes => "deletes files",
        }
    }

    /// Whether one of `words` gives this power (the program's own words only).
    fn given_by<'w>(&self, mut words: impl Iterator<Item = &'w str>) -> bool {
        self.option.is_empty() || words.any(|word| gives(word, self.option))
    }
}

/// Whether `word` gives `option`: exactly or with `=VALUE`; a long `--option`
/// by any abbreviation (GNU and git accept unique ones); a one-letter `-o`
/// anywhere in a bundle of short options (`-uo`, `-ofile`).
fn gives(word: &str, option: &str) -> bool {
    if let Some(long) = option.strip_prefix("--") {
        return word
            .strip_prefix("--")
            .map(|rest| rest.split('=').next().unwrap_or(rest))
            .is_some_and(|name| !name.is_empty() && long.starts_with(name));
    }
    let mut letters = option.chars().skip(1);
    if let (Some(letter), None) = (letters.next(), letters.next()) {
        return word.len() > 1
            && word.starts_with('-')
            && !word.starts_with("--")
            && word[1..].contains(letter);
    }
    word == option
        || word
            .strip_prefix(option)
            .is_some_and(|rest| rest.starts_with('='))
}

/// Substitutions and programs that run programs nested deeper than this are not
/// followed (the call is asked anyway).
const MAX_DEPTH: usize = 8;

/// Deeper nesting of any construct is not handed to the parser, whose recursion
/// could exhaust its stack (the call is asked anyway).
const MAX_NESTING: usize = 64;

/// Longer shell code is not parsed (the call is asked; deny rules still see the
/// raw text). With the stack below, this bound alone keeps the parser safe,
/// even from nesting the count above misses (a `]]` or `)` inside quotes): its
/// recursion needs at most about 4.7 KB of stack per byte of input (measured on
/// a debug build with `[[ ! ! … ]]`, the costliest construct; `$(` needs 4.2 KB),
/// so 16 KiB of code needs at most about 76 MB.
const MAX_CODE: usize = 16 * 1024;

/// The stack of the thread the parser runs on, whatever stack the caller has
/// (reserved address space; only what the parser touches is used).
const PARSE_STACK: usize = 256 * 1024 * 1024;

/// A command line read by the shell parser: its simple commands (those inside
/// substitutions, and those a program runs, too) and the constructs found that
/// no rule can allow.
#[derive(Debug, Default)]
struct Script {
    commands: Vec<Simple>,
    unprovable: Vec<String>,
    /// Commands judged because a program runs them: each can hold more.
    wrapped_judged: usize,
}

/// One simple command: the words a program is started with, and what in them
/// an allow rule must name (`find -delete`, `tee`).
#[derive(Debug)]
struct Simple {
    words: Vec<Word>,
    needs: Vec<&'static Power>,
}

impl std::fmt::Debug for Power {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.label())
    }
}

/// A word after quote removal; `literal` is false when the shell would expand
/// it (`$VAR`, `~`, globs, braces), and then `text` is the word as written.
#[derive(Debug, Clone)]
struct Word {
    text: String,
    literal: bool,
}

impl Word {
    /// The program's name without its folder.
    fn base(&self) -> &str {
        self.text.rsplit('/').next().unwrap_or_default()
    }

    /// An option, or a word whose value could be one.
    fn option_like(&self) -> bool {
        !self.literal || (self.text.len() > 1 && self.text.starts_with('-'))
    }
}

impl Simple {
    /// The words joined by spaces, a literal word holding a space, a quote or
    /// nothing quoted so that its boundaries show (`'echo /x'` is one word).
    fn text(&self) -> String {
        let words: Vec<String> = self
            .words
            .iter()
            .map(|w| {
                let bare = !w.text.is_empty()
                    && !w
                        .text
                        .contains(|c: char| c.is_whitespace() || matches!(c, '\'' | '"' | '\\'));
                if bare || !w.literal {
                    w.text.clone()
                } else {
                    shlex::try_quote(&w.text)
                        .map_or_else(|_| format!("{:?}", w.text), |q| q.into_owned())
                }
            })
            .collect();
        words.join(" ")
    }

    /// The words joined by single spaces as they are, for deny rules.
    fn plain_text(&self) -> String {
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

/// Parses a command line on a thread of its own, with a stack known to hold
/// the bounded input; never fails: what cannot be parsed, or what made the
/// parser fail, is recorded as a construct no rule can allow.
fn analyze(command: &str) -> Script {
    let text = command.to_string();
    let parse = std::thread::Builder::new()
        .name("shell-parse".into())
        .stack_size(PARSE_STACK)
        .spawn(move || {
            let mut script = Script::default();
            script.source(&text, 0);
            script
        });
    let failed = |why: String| {
        let mut script = Script::default();
        script.flag(why);
        script
    };
    match parse {
        Ok(handle) => handle
            .join()
            .unwrap_or_else(|_| failed("a command the shell parser failed on".into())),
        Err(err) => failed(format!("a command that could not be analysed ({err})")),
    }
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
        if text.len() > MAX_CODE {
            self.flag(format!("shell code longer than {MAX_CODE} bytes"));
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
        if !words.is_empty() {
            self.judge(words, depth, None);
        }
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

    /// One command as a program starts with it: what in it no rule can allow,
    /// what a rule must name, and the commands it runs, each judged as a
    /// command of its own (`behind`: the program that runs this one).
    fn judge(&mut self, words: Vec<Word>, depth: usize, behind: Option<Behind>) {
        if let Some(Behind { runner, .. }) = behind {
            for word in words[1..].iter().filter(|w| !w.literal) {
                self.flag(format!(
                    "`{}` in a command that `{runner}` runs: its value could change what runs (a `;` ends `find -exec`, a word can become an option)",
                    word.text
                ));
            }
        }
        let powers: Vec<&'static Power> = if words[0].literal {
            let name = words[0].base();
            POWERS.iter().filter(|p| p.program == name).collect()
        } else {
            self.flag(format!(
                "a command whose name is not plain text (`{}`)",
                words[0].text
            ));
            Vec::new()
        };
        if powers.is_empty() || depth > MAX_DEPTH {
            if !powers.is_empty() {
                self.flag("programs that run programs nested this deep");
            }
            self.commands.push(Simple {
                words,
                needs: Vec::new(),
            });
            return;
        }
        let (needs, wrapped) = self.powers(&powers, &words, depth, behind);
        self.commands.push(Simple { words, needs });
        for (words, behind) in wrapped {
            if self.wrapped_judged >= MAX_WRAPPED {
                self.flag("more commands run by other programs than the gate follows");
                return;
            }
            self.wrapped_judged += 1;
            self.judge(words, depth + 1, Some(behind));
        }
    }

    /// What the table says of one program's words: flags what no rule allows,
    /// returns what a rule must name and the commands the program runs.
    fn powers(
        &mut self,
        powers: &[&'static Power],
        words: &[Word],
        depth: usize,
        behind: Option<Behind>,
    ) -> (Vec<&'static Power>, Vec<(Vec<Word>, Behind)>) {
        let name = words[0].base();
        if let Some(Behind {
            runner,
            appends_input: true,
        }) = behind
        {
            self.flag(format!(
                "`{name}` behind `{runner}`: words read from its input could be options that run programs, write or delete"
            ));
        }
        let (own, runs) = own_words(powers, words);
        for word in own.iter().map(|&at| &words[at]).filter(|w| !w.literal) {
            self.flag(format!(
                "`{name}` with a word that is not plain text (`{}`): it could be an option that runs programs, writes or deletes",
                word.text
            ));
        }
        let mut needs = Vec::new();
        for &power in powers {
            if !power.given_by(own.iter().map(|&at| words[at].text.as_str())) {
                continue;
            }
            match power.does {
                Does::Code | Does::Names => {
                    self.flag(format!("`{}`, which {}", power.label(), power.effect()));
                    self.code_strings(words, depth);
                }
                Does::RunsNamed | Does::Writes | Does::Deletes => needs.push(power),
                Does::Runs(_) | Does::RunsUntilSemicolon => {}
            }
        }
        if runs.iter().any(|run| run.starts.len() > 1) {
            // Deny rules still see the readings (the first MAX_STARTS).
            self.flag(format!(
                "`{name}` with an option the gate does not know: which word starts the command it runs is unclear"
            ));
        }
        if runs.iter().any(|run| run.assignments) {
            self.flag("a variable assignment before or instead of a command (`NAME=value`)");
        }
        let wrapped = runs
            .iter()
            .flat_map(|run| {
                run.starts
                    .iter()
                    .take(MAX_STARTS)
                    .filter(|(start, end)| start < end)
                    .map(|&(start, end)| (words[start..end].to_vec(), run.behind))
            })
            .collect();
        (needs, wrapped)
    }

    /// Reads the code in `-c STRING` and the words from the program's name on
    /// as `eval` would, only so that deny rules see the commands it would run.
    fn code_strings(&mut self, words: &[Word], depth: usize) {
        let rest: Vec<&str> = words[1..].iter().map(|w| w.text.as_str()).collect();
        self.source(&rest.join(" "), depth + 1);
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
        // `{a,b}` and `{1..3}` expand, quotes or not between their parts; `{}` does not.
        let braces = word.value.contains('{')
            && word.value.contains('}')
            && (word.value.contains(',') || word.value.contains(".."));
        if !literal || braces {
            text = word.value.clone();
        }
        Word {
            text,
            literal: literal && !braces,
        }
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
                    *literal &= quoted || !t.contains(['*', '?', '[', '(']);
                    text.push_str(t);
                }
                WordPiece::SingleQuotedText(t) => text.push_str(t),
                WordPiece::EscapeSequence(t) => text.push_str(&unescape(t, quoted)),
                WordPiece::DoubleQuotedSequence(inner)
                | WordPiece::GettextDoubleQuotedSequence(inner) => {
                    self.pieces(source, inner, text, literal, true, depth)
                }
                WordPiece::AnsiCQuotedText(_) | WordPiece::TildeExpansion(_) => *literal = false,
                WordPiece::ParameterExpansion(expr) => {
                    *literal = false;
                    if !plain_parameter(expr) {
                        let written = source
                            .get(piece.start_index..piece.end_index)
                            .unwrap_or(source);
                        self.flag(format!(
                            "a parameter expansion other than a plain `$NAME` (`{written}`)"
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

/// `$NAME` or `${NAME}` of an ordinary variable, or a number the shell keeps
/// (`$?`, `$$`, `$!`, `$#`): the only expansions whose value is plain data. Any
/// other form can run code or read state a rule cannot see: transformations
/// (`${x@P}` expands a prompt string, `$(…)` included), indirection (`${!x}`),
/// offsets and subscripts (arithmetic, which reads variables as code), defaults
/// (a word of their own), and `$_` (the last word of the previous command).
fn plain_parameter(expr: &brush_parser::word::ParameterExpr) -> bool {
    use brush_parser::word::{Parameter, ParameterExpr, SpecialParameter as S};
    match expr {
        ParameterExpr::Parameter {
            parameter,
            indirect: false,
        } => match parameter {
            Parameter::Named(name) => name != "_",
            Parameter::Special(special) => matches!(
                special,
                S::LastExitStatus
                    | S::ProcessId
                    | S::LastBackgroundProcessId
                    | S::PositionalParameterCount
            ),
            _ => false,
        },
        _ => false,
    }
}

/// Where a program that runs programs has the command it runs: its possible
/// first and last words (more than one reading when an option the table does
/// not know might take a value: the call is then asked, and deny rules see
/// each reading).
struct Run {
    starts: Vec<(usize, usize)>,
    behind: Behind,
    assignments: bool,
}

/// The program that runs a command, for the command's own judgement.
#[derive(Clone, Copy)]
struct Behind {
    runner: &'static str,
    /// It adds words read from its input to the command (`xargs`).
    appends_input: bool,
}

/// The indices of the words that are the program's own (its options and
/// operands), and the commands it runs.
fn own_words(powers: &[&'static Power], words: &[Word]) -> (Vec<usize>, Vec<Run>) {
    let mut runs = Vec::new();
    let mut theirs = vec![false; words.len()];
    for power in powers {
        match power.does {
            Does::Runs(wrap) => {
                let (mut starts, assignments) = command_starts(wrap, words);
                let first = starts.first().copied().unwrap_or(words.len());
                if words[1..first]
                    .iter()
                    .any(|w| wrap.looks_up.contains(&w.text.as_str()))
                {
                    starts.clear();
                }
                for &start in &starts {
                    theirs[start..].iter_mut().for_each(|t| *t = true);
                }
                runs.push(Run {
                    starts: starts.into_iter().map(|s| (s, words.len())).collect(),
                    behind: Behind {
                        runner: power.program,
                        appends_input: wrap.appends_input,
                    },
                    assignments,
                });
            }
            Does::RunsUntilSemicolon => {
                let mut spans = Vec::new();
                let mut at = 1;
                while at < words.len() {
                    if words[at].text == power.option {
                        let end = (at + 1..words.len())
                            .find(|&i| {
                                words[i].text == ";"
                                    || (words[i].text == "+" && words[i - 1].text == "{}")
                            })
                            .unwrap_or(words.len());
                        theirs[at + 1..end].iter_mut().for_each(|t| *t = true);
                        spans.push((at + 1, end));
                        at = end;
                    }
                    at += 1;
                }
                runs.push(Run {
                    starts: spans,
                    behind: Behind {
                        runner: power.program,
                        appends_input: false,
                    },
                    assignments: false,
                });
            }
            _ => {}
        }
    }
    let own = (1..words.len()).filter(|&at| !theirs[at]).collect();
    (own, runs)
}

/// Where the command may start after a wrapper's options, operands and
/// `NAME=value` words; an option the table does not know may take the next
/// word as its value, so both readings are followed.
fn command_starts(wrap: Wrap, words: &[Word]) -> (Vec<usize>, bool) {
    let mut starts = std::collections::BTreeSet::new();
    let mut seen = std::collections::HashSet::new();
    let mut assignments = false;
    // (index, operands still to skip, options ended)
    let mut todo = vec![(1usize, wrap.operands, false)];
    while let Some(state) = todo.pop() {
        if !seen.insert(state) {
            continue;
        }
        let (at, left, ended) = state;
        let Some(word) = words.get(at) else {
            continue;
        };
        let text = word.text.as_str();
        if !ended && word.literal && text == "--" {
            todo.push((at + 1, left, true));
        } else if !ended && word.option_like() {
            let attached = text.starts_with("--") && text.contains('=')
                || wrap.valued.iter().any(|v| {
                    v.len() == 2 && text.len() > 2 && text.starts_with(v) && !text.starts_with("--")
                });
            let number = text
                .strip_prefix('-')
                .is_some_and(|n| !n.is_empty() && n.chars().all(|c| c.is_ascii_digit()));
            if wrap.valued.contains(&text) {
                todo.push((at + 2, left, false));
            } else if attached || number || wrap.flags.contains(&text) {
                todo.push((at + 1, left, false));
            } else {
                todo.push((at + 1, left, false));
                todo.push((at + 2, left, false));
            }
        } else if left == wrap.operands && word.literal && is_assignment(text) {
            assignments = true;
            todo.push((at + 1, left, ended));
        } else if left > 0 {
            todo.push((at + 1, left - 1, true));
        } else {
            starts.insert(at);
        }
    }
    (starts.into_iter().collect(), assignments)
}

/// Deny rules see at most this many readings of where a wrapped command starts.
const MAX_STARTS: usize = 8;

/// Commands run by other programs are judged up to this many in one call (the
/// call is asked past it): readings of unknown options multiply at each level.
const MAX_WRAPPED: usize = 256;

/// `NAME=value`, as `env` and `sudo` read it.
fn is_assignment(text: &str) -> bool {
    text.split_once('=').is_some_and(|(name, _)| {
        !name.is_empty()
            && !name.starts_with(|c: char| c.is_ascii_digit())
            && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
    })
}

/// How deep the parser could recurse, counted without regard to quoting (an
/// overestimate only makes the call asked): brackets of every kind (`(`, `$(`,
/// `((`, `{`, `${`, `[`, `[[`), compound commands, backquotes, and inside
/// `[[ … ]]` every `!`, `&&` and `||` (each is one more level there).
fn nesting(text: &str) -> usize {
    let (mut depth, mut deepest) = (0usize, 0usize);
    let mut tests: Vec<usize> = Vec::new();
    let mut backquoted = false;
    let mut escaped = false;
    for token in text.split(|c: char| c.is_whitespace() || c == ';') {
        if token.contains("[[") {
            tests.push(depth);
        }
        for c in token.chars() {
            match c {
                '(' | '{' | '[' => depth += 1,
                ')' | '}' | ']' => depth = depth.saturating_sub(1),
                '`' if escaped => depth += 1,
                '`' if backquoted => depth = depth.saturating_sub(1),
                '`' => depth += 1,
                '!' if !tests.is_empty() => depth += 1,
                _ => {}
            }
            if c == '`' && !escaped {
                backquoted = !backquoted;
            }
            escaped = c == '\\' && !escaped;
            deepest = deepest.max(depth);
        }
        if !tests.is_empty() {
            depth += token.matches("&&").count() + token.matches("||").count();
        }
        match token {
            "if" | "while" | "until" | "for" | "case" | "select" | "coproc" | "function" => {
                depth += 1
            }
            "fi" | "done" | "esac" => depth = depth.saturating_sub(1),
            _ => {}
        }
        deepest = deepest.max(depth);
        if token.contains("]]")
            && let Some(before) = tests.pop()
        {
            depth = before;
        }
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

#[cfg(test)]
mod patch_tests {
    use super::*;
    use serde_json::json;

    fn rule<'a>(tool: &'a str, prefix: &'a str) -> RuleRef<'a> {
        RuleRef {
            tool,
            pattern: None,
            prefix: Some(prefix),
        }
    }

    fn verdict(patch: &str, allow: &[RuleRef], deny: &[RuleRef]) -> Verdict {
        let call = Call::new("apply_patch", Some(&json!({ "command": patch }))).in_dir(Some("/p"));
        decide(&call, allow, deny)
    }

    const TWO: &str = "*** Begin Patch\n*** Add File: src/new.rs\n+x\n*** Update File: docs/a.md\n@@\n-a\n+b\n*** End Patch";

    #[test]
    fn every_file_must_be_covered_for_an_allow() {
        let src = rule("Write", "src");
        let docs = rule("Edit", "/p/docs");
        assert!(matches!(verdict(TWO, &[src, docs], &[]), Verdict::Allow(_)));
        match verdict(TWO, &[src], &[]) {
            Verdict::Ask(why) => assert!(why.contains("docs/a.md"), "{why}"),
            other => panic!("{other:?}"),
        }
        // A Bash rule is not a path rule.
        assert!(matches!(
            verdict(TWO, &[rule("Bash", "src"), docs], &[]),
            Verdict::Ask(_)
        ));
    }

    #[test]
    fn any_denied_file_denies_and_climbing_out_is_judged_where_it_lands() {
        let all = rule("apply_patch", "/p");
        let deny = rule("Write", "/etc");
        match verdict(TWO, &[all], &[rule("Edit", "docs")]) {
            Verdict::Deny(why) => assert!(why.contains("update `docs/a.md`"), "{why}"),
            other => panic!("{other:?}"),
        }
        let out = "*** Begin Patch\n*** Delete File: src/../../etc/passwd\n*** End Patch";
        assert!(matches!(verdict(out, &[all], &[deny]), Verdict::Deny(_)));
        assert!(matches!(verdict(out, &[all], &[]), Verdict::Ask(_)));
    }

    #[test]
    fn an_unreadable_patch_is_asked_whatever_the_rules() {
        let everything = RuleRef {
            tool: ".*",
            pattern: None,
            prefix: None,
        };
        match verdict("rm -rf /", &[everything], &[]) {
            Verdict::Ask(why) => assert!(why.contains("cannot be read"), "{why}"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn always_lists_each_file() {
        let rule = always_rule("apply_patch", Some(&json!({ "command": TWO })));
        assert_eq!(rule.prefixes, vec!["src/new.rs", "docs/a.md"]);
        let none = always_rule("apply_patch", Some(&json!({ "command": "x" })));
        assert!(none.prefixes.is_empty());
    }
}
