//! `clowder gate eval FILE…`: a labelled corpus of tool calls run through the
//! rules, counted as a table: destructive calls allowed (which must be none),
//! destructive calls stopped, safe calls allowed, and safe calls asked (the
//! friction a person pays).

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::policy::{Call, RuleRef, Verdict, decide};
use crate::config::ApprovalsConfig;

/// One line of a corpus: a call and what it is.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Labelled {
    tool: String,
    input: serde_json::Value,
    expect: Expect,
    #[serde(default)]
    note: Option<String>,
}

#[derive(Debug, Deserialize, Clone, Copy, PartialEq)]
#[serde(rename_all = "lowercase")]
enum Expect {
    Safe,
    Destructive,
}

/// What the rules did with one call.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Outcome {
    Allowed,
    Denied,
    Asked,
}

/// A destructive call that got through, and what let it.
#[derive(Debug, Serialize)]
pub struct Leak {
    pub file: PathBuf,
    pub line: usize,
    pub tool: String,
    pub input: serde_json::Value,
    pub note: Option<String>,
    pub allowed_by: String,
}

/// The counts of one label.
#[derive(Debug, Default, Serialize, PartialEq)]
pub struct Counts {
    pub allowed: usize,
    pub denied: usize,
    pub asked: usize,
}

impl Counts {
    fn add(&mut self, outcome: Outcome) {
        match outcome {
            Outcome::Allowed => self.allowed += 1,
            Outcome::Denied => self.denied += 1,
            Outcome::Asked => self.asked += 1,
        }
    }

    fn total(&self) -> usize {
        self.allowed + self.denied + self.asked
    }
}

/// The whole evaluation, as `--json` prints it.
#[derive(Debug, Default, Serialize)]
pub struct Report {
    pub calls: usize,
    pub destructive: Counts,
    pub safe: Counts,
    pub destructive_allowed: Vec<Leak>,
    /// Safe calls asked: where the rules cost a person's time.
    pub safe_asked: Vec<String>,
}

/// Runs every call of `files` through `config`'s rules. An unreadable file or
/// line is an error that names the file, the line and what was expected.
pub fn evaluate(files: &[PathBuf], config: &ApprovalsConfig) -> Result<Report, String> {
    let allow: Vec<RuleRef> = config.allow.iter().map(|r| r.policy()).collect();
    let deny: Vec<RuleRef> = config.deny.iter().map(|r| r.policy()).collect();
    let mut report = Report::default();
    for file in files {
        let text = std::fs::read_to_string(file)
            .map_err(|err| format!("{}: cannot read: {err}", file.display()))?;
        for (at, line) in text.lines().enumerate() {
            if line.trim().is_empty() || line.trim_start().starts_with('#') {
                continue;
            }
            let call = parse_line(file, at + 1, line)?;
            let verdict = decide(&Call::new(&call.tool, Some(&call.input)), &allow, &deny);
            report.count(file, at + 1, call, verdict);
        }
    }
    Ok(report)
}

fn parse_line(file: &Path, line: usize, text: &str) -> Result<Labelled, String> {
    let mut reader = serde_json::Deserializer::from_str(text);
    serde_path_to_error::deserialize(&mut reader).map_err(|err| {
        let key = err.path().to_string();
        let inner = err.into_inner();
        let place = if key == "." {
            String::new()
        } else {
            format!(" key `{key}`:")
        };
        format!(
            "{}:{line}:{place} {inner} (expected a JSON object with `tool`, `input` and `expect` = \"safe\" or \"destructive\", and an optional `note`)",
            file.display()
        )
    })
}

impl Report {
    fn count(&mut self, file: &Path, line: usize, call: Labelled, verdict: Verdict) {
        self.calls += 1;
        let outcome = match &verdict {
            Verdict::Allow(_) => Outcome::Allowed,
            Verdict::Deny(_) => Outcome::Denied,
            Verdict::Ask(_) => Outcome::Asked,
        };
        match call.expect {
            Expect::Destructive => {
                self.destructive.add(outcome);
                if let Verdict::Allow(reason) = verdict {
                    self.destructive_allowed.push(Leak {
                        file: file.to_path_buf(),
                        line,
                        tool: call.tool,
                        input: call.input,
                        note: call.note,
                        allowed_by: reason,
                    });
                }
            }
            Expect::Safe => {
                self.safe.add(outcome);
                if outcome == Outcome::Asked {
                    let subject = super::subject::of(&call.tool, Some(&call.input)).text;
                    self.safe_asked.push(format!("{}: {subject}", call.tool));
                }
            }
        }
    }

    /// The table a person reads.
    pub fn table(&self) -> String {
        let percent = |part: usize, whole: usize| {
            if whole == 0 {
                0.0
            } else {
                100.0 * part as f64 / whole as f64
            }
        };
        let row = |label: &str, c: &Counts| {
            format!(
                "{label:<22} {:>7} {:>7} {:>7} {:>7}\n",
                c.total(),
                c.allowed,
                c.denied,
                c.asked
            )
        };
        let mut out = format!(
            "{:<22} {:>7} {:>7} {:>7} {:>7}\n",
            "", "calls", "allowed", "denied", "asked"
        );
        out.push_str(&row("destructive", &self.destructive));
        out.push_str(&row("safe", &self.safe));
        out.push_str(&format!(
            "\ndestructive calls allowed: {} (must be 0)\n",
            self.destructive.allowed
        ));
        out.push_str(&format!(
            "destructive calls stopped: {} of {} ({} denied by a rule, {} asked)\n",
            self.destructive.denied + self.destructive.asked,
            self.destructive.total(),
            self.destructive.denied,
            self.destructive.asked
        ));
        out.push_str(&format!(
            "safe calls allowed: {} of {} ({:.1} %); asked (friction): {} ({:.1} %)\n",
            self.safe.allowed,
            self.safe.total(),
            percent(self.safe.allowed, self.safe.total()),
            self.safe.asked,
            percent(self.safe.asked, self.safe.total()),
        ));
        for leak in &self.destructive_allowed {
            let note = leak
                .note
                .as_deref()
                .map(|n| format!("\n  note: {}", super::escape(n)));
            out.push_str(&format!(
                "\nALLOWED {}:{}: {} {}\n  by: {}{}\n",
                leak.file.display(),
                leak.line,
                super::escape(&leak.tool),
                super::escape(&leak.input.to_string()),
                super::escape(&leak.allowed_by),
                note.unwrap_or_default()
            ));
        }
        out
    }
}
