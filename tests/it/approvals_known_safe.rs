//! A prefix rule for a program people allow as read-only covers only the
//! options known to be safe (and those the rule names): through `clowder gate`,
//! each hole found outside (an option that runs a program, writes a file or
//! reaches further) is asked, and each program's everyday reads are allowed.

use crate::common;

use std::process::Child;

use common::gate::spawn_gate;
use common::*;

/// One prefix rule per program of the table, as people write them.
const RULES: &[&str] = &[
    "ls",
    "cat",
    "head",
    "tail",
    "wc",
    "grep",
    "rg",
    "find",
    "fd",
    "tree",
    "file",
    "stat",
    "du",
    "df",
    "diff",
    "cmp",
    "sort",
    "uniq",
    "cut",
    "tr",
    "xxd",
    "od",
    "jq",
    "less",
    "more",
    "man",
    "tar",
    "tar -tf",
    "git status",
    "git diff",
    "git log",
    "git show",
    "git ls-files",
    "git ls-remote",
    "git fetch",
    "git rev-parse",
    "git branch",
    "git blame",
    "git grep",
    "cargo metadata",
    "cargo tree",
];

/// Each of these ran under a prefix rule before: now each is asked.
const HOLES: &[&str] = &[
    "rg --pre ./evil.sh x",
    "rg --pre=./evil.sh x",
    "rg --hostname-bin=./evil.sh x",
    "rg -z x",
    "git ls-remote --upload-pack='touch PWNED' .",
    "git ls-remote --upload-pack 'touch PWNED' .",
    "git ls-remote --upl='touch PWNED' .",
    "git fetch --upload-pack='touch PWNED' .",
    "git fetch --upload-pack 'touch PWNED' .",
    "git fetch --upl='touch PWNED' .",
    "git fetch --upload-p='touch PWNED' .",
    "git fetch origin main:main",
    "tar -tf x.tar --index-file=out",
    "tar -tf x.tar --volno-file=out",
    "tar -tf x.tar --rsh-command=./evil.sh",
    "tar -tf x.tar --to-command=sh",
    "tar xf x.tar",
    "xxd -r x out",
    "xxd x out",
    "tree -o out",
    "sort --compress-program=sh x",
    "sort -o out x",
    "uniq in out",
    "file -C -m magic",
    "fd -x rm",
    "fd --exec-batch rm",
    "git log --output=out",
    "git diff --ext-diff",
    "git show --textconv HEAD",
    "git grep -O vim x",
    "git branch evil",
    "git branch -D main",
    "less -o log x",
    "man -P ./evil.sh ls",
    "cargo metadata --config build.rustc-wrapper='./evil.sh'",
    "cargo tree -Z unstable-options",
    "grep --no-such-option x",
    "ls --unknown-future-option",
    "cat *",
    "ls $OPTS",
];

/// The everyday reads of each program: still allowed.
const READS: &[&str] = &[
    "ls -la src",
    "ls -- \"$DIR\"",
    "cat -n src/main.rs ~/notes.txt",
    "cat src/*.rs",
    "head -n 20 README.md",
    "head -20 README.md",
    "tail -f log.txt",
    "wc -l src/lib.rs",
    "grep -rn --include='*.rs' todo src",
    "grep -e --pre x",
    "rg -n -g '*.rs' todo src",
    "find . -name '*.rs' -type f -mtime -3",
    "find src -exec grep -n todo '{}' +",
    "fd -e rs main",
    "tree -L 2 src",
    "file -b Cargo.toml",
    "stat -c %s Cargo.toml",
    "du -sh target",
    "df -h .",
    "diff -u a b",
    "cmp a b",
    "sort -k2 -t, data.csv",
    "uniq -c data.txt",
    "cut -d, -f1 data.csv",
    "tr -d x",
    "xxd -l 64 bin",
    "od -An -tx1 bin",
    "jq -r .name package.json",
    "less -N README.md",
    "more README.md",
    "man -k socket",
    "tar -tvzf x.tgz",
    "tar -tf x.tar",
    "git status --porcelain=v2 -b",
    "git diff --stat HEAD~3",
    "git log --oneline -5",
    "git log --format=%H -n 3 main",
    "git show --stat HEAD",
    "git ls-files -z --others --exclude-standard",
    "git ls-remote --heads origin",
    "git fetch origin main",
    "git rev-parse --abbrev-ref HEAD",
    "git branch -a",
    "git branch --list 'feat*'",
    "git blame -L 10,20 src/lib.rs",
    "git grep -n todo",
    "cargo metadata --format-version 1 --no-deps",
    "cargo tree -e normal --depth 1",
];

/// `allow`, or `ask` (queued for a person, then timed out), for each command.
fn decisions(commands: &[&str]) -> Vec<String> {
    let rules: Vec<String> = RULES
        .iter()
        .map(|prefix| format!("{{ tool = \"Bash\", prefix = {prefix:?} }}"))
        .collect();
    let project = Project::new(&format!("[approvals]\nallow = [{}]\n", rules.join(", ")));
    let gates: Vec<Child> = commands
        .iter()
        .map(|c| spawn_gate(&project, c, &["--timeout", "3s"]))
        .collect();
    gates
        .into_iter()
        .map(|gate| {
            let output = wait_with_deadline(gate, DEADLINE);
            assert_eq!(output.status.code(), Some(0));
            let (decision, reason) = gate_answer(&output);
            if decision == "deny" && reason.starts_with("timed out") {
                "ask".to_string()
            } else {
                decision
            }
        })
        .collect()
}

#[test]
fn options_not_known_to_be_safe_are_asked_under_a_prefix_rule() {
    let got = decisions(HOLES);
    let allowed: Vec<&str> = HOLES
        .iter()
        .zip(&got)
        .filter(|(_, d)| d.as_str() != "ask")
        .map(|(c, _)| *c)
        .collect();
    assert!(allowed.is_empty(), "allowed: {allowed:#?}");
}

#[test]
fn the_everyday_reads_of_each_program_are_still_allowed() {
    let got = decisions(READS);
    let wrong: Vec<String> = READS
        .iter()
        .zip(&got)
        .filter(|(_, d)| d.as_str() != "allow")
        .map(|(c, d)| format!("{c}: {d}"))
        .collect();
    assert!(wrong.is_empty(), "{wrong:#?}");
}

#[test]
fn a_rule_that_names_an_option_covers_it() {
    let project = Project::new(
        "[approvals]\nallow = [{ tool = \"Bash\", prefix = \"rg --pre ./unzip.sh\" }, { tool = \"Bash\", prefix = \"sort -o sorted.txt\" }]\n",
    );
    for (command, want) in [
        ("rg --pre ./unzip.sh todo", "allow"),
        ("rg --pre ./other.sh todo", "ask"),
        ("sort -o sorted.txt -r data.txt", "allow"),
        ("sort -o sorted.txt --compress-program=sh data.txt", "ask"),
    ] {
        let output = wait_with_deadline(
            spawn_gate(&project, command, &["--timeout", "3s"]),
            DEADLINE,
        );
        let (decision, reason) = gate_answer(&output);
        let got = if reason.starts_with("timed out") {
            "ask"
        } else {
            decision.as_str()
        };
        assert_eq!(got, want, "{command}");
    }
}
