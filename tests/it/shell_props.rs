//! Over generated bash, the gate never allows a command holding a construct that
//! is always asked, however deep or long it is, and `clowder gate` always answers
//! with exit 0 (a decision) or 2 (blocked), never by crashing.

use crate::common;

use std::io::Write;
use std::process::Stdio;

use clowder::approvals::policy::{Call, RuleRef, Verdict, decide};
use common::*;
use proptest::prelude::*;
use proptest::sample::select;

/// A rule covering every simple command: only the always-asked constructs can
/// keep a call from being allowed.
const EVERYTHING: &[RuleRef<'static>] = &[RuleRef {
    tool: "Bash",
    pattern: None,
    prefix: None,
}];

const SAFE: &[&str] = &[
    "ls",
    "ls -la src",
    "echo hi",
    "git status",
    "cargo test --lib",
    "echo \"$HOME\" ${PWD}",
    "grep -n todo src/lib.rs",
    "find . -name '*.rs'",
    "echo 'a b' \"c;d\"",
    "true",
    "timeout 5 ls",
    "echo $? 2>&1",
];

/// Arguments that make any command always asked.
const HAZARD_WORDS: &[&str] = &[
    "$(id)",
    "`id`",
    "\"$(id)\"",
    "${_@P}",
    "${x@E}",
    "${x@A}",
    "\"${x@Q}\"",
    "${!x}",
    "${!x@}",
    "${PWD:_}",
    "${PWD:0:_}",
    "$_",
    "\"${_}\"",
    "${x:-y}",
    "${#x}",
    "${a[$(id)]}",
    "${a[0]}",
    "$1",
    "<(id)",
    ">(id)",
    "$((1 + 1))",
    "> out.txt",
    ">> ~/.bashrc",
    "<<< x",
    "< $F",
];

/// Commands that are always asked.
const HAZARD_COMMANDS: &[&str] = &[
    "[[ -n x ]]",
    "(( x = 1 ))",
    "X=1",
    "LD_PRELOAD=x.so ls",
    "eval ls",
    "bash -c ls",
    "/bin/sh -c 'ls'",
    "f() { ls; }",
    "source x.sh",
    ". x.sh",
    "for x in a; do ls; done",
    "$CMD ls",
    "timeout 5 $CMD",
    "env -S ls",
    "env FOO=1 ls",
    "xargs sort",
    "find . -exec bash -c id ';'",
    "watch ls",
    "export X=1",
    "printf -v x y",
    "cat <<EOF\n$HOME\nEOF",
];

const SEPARATORS: &[&str] = &["; ", " && ", " || ", " | ", "\n"];

/// Bash text, and whether an always-asked construct is in it.
fn script() -> impl Strategy<Value = (String, bool)> {
    let leaf = prop_oneof![
        3 => select(SAFE).prop_map(|s| (s.to_string(), false)),
        1 => (select(SAFE), select(HAZARD_WORDS)).prop_map(|(c, h)| (format!("{c} {h}"), true)),
        1 => select(HAZARD_COMMANDS).prop_map(|h| (h.to_string(), true)),
    ];
    leaf.prop_recursive(6, 48, 2, |inner| {
        prop_oneof![
            (inner.clone(), inner.clone(), select(SEPARATORS))
                .prop_map(|((a, x), (b, y), sep)| (format!("{a}{sep}{b}"), x || y)),
            inner.clone().prop_map(|(a, x)| (format!("( {a}; )"), x)),
            // The parser reads `( ( a ) )` as arithmetic; the gate, as Bash does.
            inner.clone().prop_map(|(a, x)| (format!("( ( {a} ) )"), x)),
            inner.clone().prop_map(|(a, x)| (format!("{{ {a}; }}"), x)),
            (inner.clone(), inner.clone())
                .prop_map(|((a, x), (b, y))| (format!("if {a}; then {b}; fi"), x || y)),
            (inner.clone(), inner.clone())
                .prop_map(|((a, x), (b, y))| (format!("while {a}; do {b}; done"), x || y)),
            inner
                .clone()
                .prop_map(|(a, _)| (format!("echo \"$( {a} )\""), true)),
            // `!` only starts a pipeline: `ls | ! ls` is not bash.
            inner.prop_map(|(a, x)| (format!("{{ ! {a}; }}"), x)),
        ]
    })
}

/// One construct nested `levels` deep around `inner`.
fn nest(kind: usize, levels: usize, inner: &str) -> String {
    let (open, close) = [
        ("( ", " )"),
        ("{ ", "; }"),
        ("if true; then ", "; fi"),
        ("echo \"$(", ")\""),
        ("echo ${x:-", "}"),
        ("[[ ( ", " ) ]]"),
        ("[[ ']]' && ! ", " ]]"),
        ("timeout 5 ", ""),
        ("( echo ')'; ", " )"),
    ][kind % 9];
    format!("{}{inner}{}", open.repeat(levels), close.repeat(levels))
}

fn decision(command: &str) -> Verdict {
    let call = Call::new("Bash", Some(&serde_json::json!({ "command": command })));
    decide(&call, EVERYTHING, &[])
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// An always-asked construct anywhere keeps the call from being allowed;
    /// without one, a rule for every command allows it.
    #[test]
    fn always_asked_constructs_are_never_allowed((command, hazard) in script()) {
        let got = decision(&command);
        if hazard {
            prop_assert!(!matches!(got, Verdict::Allow(_)), "{command:?}: {got:?}");
        } else {
            prop_assert!(matches!(got, Verdict::Allow(_)), "{command:?}: {got:?}");
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    /// However deep or long: still a decision, and never an allow for a hazard.
    #[test]
    fn deep_and_long_commands_get_a_decision(
        (command, hazard) in script(),
        kind in 0usize..9,
        levels in 0usize..4000,
        padding in 0usize..3000,
    ) {
        let text = nest(kind, levels, &format!("{command}{}", "; ls".repeat(padding)));
        let got = decision(&text);
        if hazard {
            prop_assert!(!matches!(got, Verdict::Allow(_)), "{got:?}");
        }
    }
}

/// The hook input for a Bash call.
fn hook(command: &str) -> Vec<u8> {
    serde_json::json!({
        "hook_event_name": "PreToolUse",
        "tool_name": "Bash",
        "tool_input": { "command": command },
    })
    .to_string()
    .into_bytes()
}

#[test]
fn the_gate_exits_0_or_2_on_deep_and_long_input() {
    let project = Project::new(
        "[approvals]\nallow = [{ tool = \"Bash\" }]\ndeny = [{ tool = \"Bash\", prefix = \"rm -rf\" }]\n",
    );
    let mut inputs: Vec<String> = (0..9).map(|kind| nest(kind, 6_000, "ls")).collect();
    inputs.push(nest(6, 8_150, "-n x"));
    inputs.push(format!("rm -rf ~; {}", nest(1, 20_000, "ls")));
    inputs.push("ls; ".repeat(300_000));
    let gates: Vec<_> = inputs
        .iter()
        .map(|command| {
            let mut gate = project
                .command(&["gate", "--timeout", "5s"])
                .stdin(Stdio::piped())
                .spawn()
                .expect("spawn clowder gate");
            let mut stdin = gate.stdin.take().expect("stdin");
            // A gate that refuses a too-long input may close its end first.
            let _ = stdin.write_all(&hook(command));
            drop(stdin);
            gate
        })
        .collect();
    for (command, gate) in inputs.iter().zip(gates) {
        let output = wait_with_deadline(gate, DEADLINE);
        let shown: String = command.chars().take(40).collect();
        assert!(
            matches!(output.status.code(), Some(0 | 2)),
            "{shown:?} ({} bytes): {:?} {}",
            command.len(),
            output.status,
            stderr_of(&output)
        );
        if output.status.code() == Some(0) {
            assert!(stdout_of(&output).contains("\"permissionDecision\""));
        }
    }
}
