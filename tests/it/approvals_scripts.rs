//! A rule that allows `sed`, `awk` or `dd` for reading does not let the same
//! program run code or write files through its script or operands: `sed`'s `e`
//! and `w`, awk's `system()`, pipes and `print >`, `dd of=`; nor `perl -i`.

use crate::common;

use std::io::Write;
use std::process::Stdio;

use clowder::approvals::policy::{Call, RuleRef, Verdict, decide};
use common::*;

const fn prefix(prefix: &'static str) -> RuleRef<'static> {
    RuleRef {
        tool: "Bash",
        pattern: None,
        prefix: Some(prefix),
    }
}

const ALLOW: &[RuleRef<'static>] = &[
    prefix("sed -n"),
    prefix("sed -e"),
    prefix("sed s/a/b/"),
    prefix("awk"),
    prefix("gawk"),
    prefix("dd"),
    prefix("perl -ne"),
    prefix("sed -n '1w out.txt'"),
    prefix("awk -f tools/sum.awk"),
];

const TABLE: &[(&str, &str)] = &[
    // Reading stays allowed.
    ("sed -n '1,5p' f", "allow"),
    ("sed -n -e p -e 's/a/b/g' f", "allow"),
    ("sed s/a/b/ f", "allow"),
    ("sed -n '/x/{p;q}' f", "allow"),
    ("awk '{print $1}' f", "allow"),
    ("awk '$1 > 5' f", "allow"),
    (
        "awk -F, '$2 >= 3 || $3 < 1 { n++ } END { print n }' f",
        "allow",
    ),
    ("awk '/a|b/' f", "allow"),
    ("gawk '{ print $1 }' f", "allow"),
    ("dd if=a", "allow"),
    ("dd if=a bs=1M count=1", "allow"),
    ("perl -ne 'print if /x/' f", "allow"),
    // The script writes or runs code.
    ("sed -n '1w /tmp/x' f", "ask"),
    ("sed -n 's/a/b/w /tmp/x' f", "ask"),
    ("sed -n '$W /tmp/x' f", "ask"),
    ("sed -n '1e id' f", "ask"),
    ("sed -n 's/.*/id/e' f", "ask"),
    ("sed -e p -e '1e id' f", "ask"),
    ("sed -n --expression='1w x' f", "ask"),
    ("sed -n -f x.sed f", "ask"),
    ("sed -n 'k' f", "ask"),
    ("sed -n \"$S\" f", "ask"),
    ("awk 'BEGIN{system(\"id\")}'", "ask"),
    ("awk '{print > \"out\"}' f", "ask"),
    ("awk '{print | \"sh\"}' f", "ask"),
    ("awk 'BEGIN { \"id\" | getline x; print x }'", "ask"),
    ("awk -f evil.awk f", "ask"),
    ("mawk 'BEGIN{system(\"id\")}'", "ask"),
    ("gawk -l ext 'BEGIN{}'", "ask"),
    ("dd if=a of=b", "ask"),
    ("dd if=/dev/zero of=/dev/sda", "ask"),
    ("perl -ne -i 's/a/b/' f", "ask"),
    ("perl -ne 'print' -i f", "ask"),
    // A rule that holds the script itself names what it does, for that word only.
    ("sed -n '1w out.txt' f", "allow"),
    ("sed -n '1w out.txt' -e '1w /etc/passwd' f", "ask"),
    ("awk -f tools/sum.awk data.csv", "allow"),
    ("awk -f tools/sum.awk -f evil.awk data.csv", "ask"),
    // Behind a program that runs another, the script is read just the same.
    ("timeout 5 sed -n '1e id' f", "ask"),
];

fn verdict(command: &str) -> Verdict {
    let input = serde_json::json!({ "command": command });
    let allow: Vec<RuleRef> = ALLOW.iter().copied().chain([prefix("timeout")]).collect();
    decide(&Call::new("Bash", Some(&input)), &allow, &[])
}

fn word(verdict: &Verdict) -> &'static str {
    match verdict {
        Verdict::Allow(_) => "allow",
        Verdict::Deny(_) => "deny",
        Verdict::Ask(_) => "ask",
    }
}

#[test]
fn scripts_that_write_or_run_code_are_asked_and_reading_stays_allowed() {
    let wrong: Vec<String> = TABLE
        .iter()
        .filter_map(|&(command, expected)| {
            let got = verdict(command);
            (word(&got) != expected).then(|| format!("{command:?}: want {expected}, got {got:?}"))
        })
        .collect();
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn the_reason_names_what_the_script_does() {
    let reasons = [
        (
            "sed -n '1w /tmp/x' f",
            "no allow rule covers `sed -n '1w /tmp/x' f` and names sed's `w` command (writes files)",
        ),
        (
            "sed -n '1e id' f",
            "no rule can allow sed's `e` command, which runs a string or file as shell code",
        ),
        (
            "awk 'BEGIN{system(\"id\")}'",
            "no rule can allow awk's `system()`, which runs a string or file as shell code",
        ),
        (
            "awk '{print | \"sh\"}' f",
            "no rule can allow awk's pipe `|`, which runs a string or file as shell code",
        ),
        (
            "awk '{print > \"out\"}' f",
            "no allow rule covers `awk '{print > \"out\"}' f` and names awk's `print >` (writes files)",
        ),
        (
            "dd if=a of=b",
            "no allow rule covers `dd if=a of=b` and names `dd of=` (writes files)",
        ),
        (
            "sed -n -f x.sed f",
            "no allow rule covers `sed -n -f x.sed f` and names sed's script file (`-f`) (runs a script from a file, which can run programs and write files)",
        ),
    ];
    for (command, reason) in reasons {
        assert_eq!(verdict(command), Verdict::Ask(reason.into()), "{command}");
    }
}

fn hook(command: &str) -> String {
    serde_json::json!({
        "session_id": "s-1",
        "transcript_path": "/tmp/t.jsonl",
        "cwd": "/work/project",
        "hook_event_name": "PreToolUse",
        "tool_name": "Bash",
        "tool_input": { "command": command },
        "tool_use_id": "toolu_1",
    })
    .to_string()
}

/// `clowder gate --timeout 1s` on one command: its decision and reason.
fn gate(project: &Project, command: &str) -> (String, String) {
    let mut child = project
        .command(&["gate", "--timeout", "1s"])
        .stdin(Stdio::piped())
        .spawn()
        .expect("spawn clowder gate");
    let mut stdin = child.stdin.take().expect("stdin");
    stdin
        .write_all(hook(command).as_bytes())
        .expect("write hook");
    drop(stdin);
    let output = wait_with_deadline(child, DEADLINE);
    assert_eq!(output.status.code(), Some(0), "{}", stderr_of(&output));
    let (decision, reason) = gate_answer(&output);
    if decision != "allow" {
        // Asked: the human is told why before the wait runs out.
        let asked = stderr_of(&output);
        return (decision, asked);
    }
    (decision, reason)
}

#[test]
fn the_gate_asks_for_a_sed_that_writes_under_a_sed_rule() {
    let project = Project::new(
        "[approvals]\nallow = [{ tool = \"Bash\", prefix = \"sed -n\" }, { tool = \"Bash\", prefix = \"awk\" }]\n",
    );
    let (decision, _) = gate(&project, "sed -n '1,5p' notes.txt");
    assert_eq!(decision, "allow");
    let (decision, asked) = gate(&project, "sed -n '1w /tmp/x' notes.txt");
    assert_eq!(decision, "deny", "{asked}");
    assert!(
        asked.contains("sed's `w` command (writes files)"),
        "{asked}"
    );
    let (decision, _) = gate(&project, "awk '{print $1}' notes.txt");
    assert_eq!(decision, "allow");
    let (decision, asked) = gate(&project, "awk 'BEGIN{system(\"id\")}'");
    assert_eq!(decision, "deny", "{asked}");
    assert!(asked.contains("awk's `system()`"), "{asked}");
}
