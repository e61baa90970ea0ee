//! What an `[approvals]` rule may decide: each simple command of a Bash call (as
//! `shell.rs` splits it), paths compared by whole components, and the shell
//! constructs that no rule can ever allow.

use std::path::{Component, Path};

use super::patch;
use super::shell::{Power, Script, Simple, analyze, gives, prefix_words};
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
        crate::config::compiled_regex(&format!("^(?:{})$", self.tool))
            .is_some_and(|re| re.is_match(tool))
    }

    fn pattern_matches(&self, text: &str) -> bool {
        self.pattern
            .is_none_or(|p| crate::config::compiled_regex(p).is_some_and(|re| re.is_match(text)))
    }

    /// Whether the rule covers one simple command: its prefix as whole words, its
    /// regex searched in the words joined by spaces (a word holding a space
    /// quoted, so word boundaries show), and every option that writes, deletes
    /// or runs a program named by the rule.
    fn covers_command(&self, command: &Simple) -> bool {
        let literal = command.words.iter().take_while(|w| w.literal);
        self.starts(literal.map(|w| w.text.as_str()))
            && self.pattern_matches(&command.text())
            && command.needs.iter().all(|power| self.names(power, command))
            && self.known_safe(command)
    }

    /// Whether a prefix rule for a program of the known-safe table covers the
    /// command's options: only those known to be safe, and those its prefix
    /// writes. A pattern rule, or a program not in the table, is not limited.
    fn known_safe(&self, command: &Simple) -> bool {
        let Some(prefix) = self.prefix else {
            return true;
        };
        let words: Vec<super::safe_options::Arg> = command
            .words
            .iter()
            .map(|w| super::safe_options::Arg {
                text: &w.text,
                literal: w.literal,
            })
            .collect();
        super::safe_options::covers(&words, prefix_words(prefix).len())
    }

    /// Whether the rule names a power: its prefix starts with the program or
    /// holds the option as a word (`sort -o out.txt`), or its pattern holds the
    /// program or option as a whole word (`^tee( |$)`, `-delete$`).
    fn names(&self, power: &Power, command: &Simple) -> bool {
        if power.in_script() {
            return self.holds_script(power, command);
        }
        // Where the command gives the option: a rule names it only if it
        // names each of them (`sort -o out.txt -o /etc/passwd` is not named
        // by `sort -o out.txt`).
        let given_at: Vec<usize> = command.words[1..]
            .iter()
            .enumerate()
            .filter(|(_, w)| !power.option.is_empty() && gives(&w.text, power.option))
            .map(|(at, _)| at)
            .collect();
        let in_prefix = self.prefix.is_some_and(|prefix| {
            let words = prefix_words(prefix);
            if power.option.is_empty() {
                words
                    .first()
                    .is_some_and(|w| w.rsplit('/').next() == Some(power.program))
            } else {
                words.iter().skip(1).any(|w| gives(w, power.option))
                    && given_at.iter().all(|&at| at + 1 < words.len())
            }
        });
        let name = if power.option.is_empty() {
            power.program
        } else {
            power.option
        };
        let word_char = |c: char| c.is_alphanumeric() || c == '-' || c == '_';
        // A pattern cannot show which use of an option it vets: it names one
        // given once.
        let in_pattern = given_at.len() <= 1
            && self.pattern.is_some_and(|pattern| {
                pattern.match_indices(name).any(|(at, _)| {
                    !pattern[..at].ends_with(word_char)
                        && !pattern[at + name.len()..].starts_with(word_char)
                })
            });
        in_prefix || in_pattern
    }

    /// Whether the rule's prefix holds, word for word, every word of the
    /// command that gives a power found in its script (`prefix = "sed -n '1w
    /// out.txt'"`): a pattern cannot be read for what a script does.
    fn holds_script(&self, power: &Power, command: &Simple) -> bool {
        let Some(prefix) = self.prefix else {
            return false;
        };
        let held = prefix_words(prefix).len();
        let words: Vec<&str> = command.words[1..].iter().map(|w| w.text.as_str()).collect();
        let giving = power.giving(&words);
        !giving.is_empty() && giving.iter().all(|&at| at + 1 < held)
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
        .map(|p| format!("{} ({})", p.named(), p.effect()))
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
