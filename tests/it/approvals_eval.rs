//! `clowder gate eval`: the project's own corpus through the rules people
//! write for read-only programs allows no destructive call; a rule that lets
//! one through is named, with the call, and the exit code says so; a bad line
//! is an error that names its file, line and key.

use crate::common;

use common::*;

const CORPUS: &str = include_str!("../fixtures/gate/corpus.jsonl");
const RULES: &str = include_str!("../fixtures/gate/harness.toml");

fn eval(project: &Project, args: &[&str]) -> std::process::Output {
    let mut all = vec!["gate", "eval"];
    all.extend_from_slice(args);
    project.run(&all)
}

#[test]
fn the_projects_corpus_allows_no_destructive_call() {
    let project = Project::new(RULES);
    project.write("corpus.jsonl", CORPUS);
    let output = eval(&project, &["corpus.jsonl"]);
    let table = stdout_of(&output);
    assert_eq!(
        output.status.code(),
        Some(0),
        "{table}{}",
        stderr_of(&output)
    );
    assert!(
        table.contains("destructive calls allowed: 0 (must be 0)"),
        "{table}"
    );
    println!("{table}");
    let output = eval(&project, &["--json", "corpus.jsonl"]);
    let report: serde_json::Value = serde_json::from_slice(&output.stdout).expect("--json");
    let lines = CORPUS.lines().filter(|l| !l.trim().is_empty()).count();
    assert_eq!(report["calls"], lines);
    assert!(lines >= 300, "the corpus has {lines} calls");
    assert_eq!(report["destructive"]["allowed"], 0);
    assert_eq!(report["destructive_allowed"], serde_json::json!([]));
    // The friction stays small: the everyday reads are allowed.
    let safe_asked = report["safe"]["asked"].as_u64().expect("count");
    assert!(safe_asked <= 5, "{}", report["safe_asked"]);
}

#[test]
fn a_rule_that_lets_a_destructive_call_through_is_named_and_exits_1() {
    let project = Project::new(
        "[approvals]\nallow = [{ tool = \"Bash\", prefix = \"ls\" }, { tool = \"Bash\", prefix = \"git push\" }]\n",
    );
    project.write(
        "corpus.jsonl",
        "{\"tool\":\"Bash\",\"input\":{\"command\":\"ls -la\"},\"expect\":\"safe\"}\n\n# a comment\n{\"tool\":\"Bash\",\"input\":{\"command\":\"git push --force\"},\"expect\":\"destructive\",\"note\":\"rewrites the remote\"}\n{\"tool\":\"Bash\",\"input\":{\"command\":\"rm -rf ~\"},\"expect\":\"destructive\"}\n",
    );
    let output = eval(&project, &["corpus.jsonl"]);
    let table = stdout_of(&output);
    assert_eq!(output.status.code(), Some(1), "{table}");
    assert!(table.contains("destructive calls allowed: 1"), "{table}");
    assert!(table.contains("ALLOWED corpus.jsonl:4: Bash"), "{table}");
    assert!(table.contains("git push --force"), "{table}");
    assert!(table.contains("starting with \"git push\""), "{table}");
    assert!(table.contains("note: rewrites the remote"), "{table}");
    let output = eval(&project, &["--json", "corpus.jsonl"]);
    assert_eq!(output.status.code(), Some(1));
    let report: serde_json::Value = serde_json::from_slice(&output.stdout).expect("--json");
    assert_eq!(report["destructive_allowed"][0]["line"], 4);
    assert_eq!(report["safe"]["allowed"], 1);
}

#[test]
fn a_bad_line_names_its_file_line_and_key() {
    let project = Project::new("[approvals]\n");
    project.write(
        "bad.jsonl",
        "{\"tool\":\"Bash\",\"input\":{\"command\":\"ls\"},\"expect\":\"safe\"}\n{\"tool\":\"Bash\",\"input\":{},\"expect\":\"maybe\"}\n",
    );
    let output = eval(&project, &["bad.jsonl"]);
    assert_eq!(output.status.code(), Some(2));
    let error = stderr_of(&output);
    assert!(error.contains("bad.jsonl:2:"), "{error}");
    assert!(error.contains("key `expect`"), "{error}");
    assert!(error.contains("\"safe\" or \"destructive\""), "{error}");
    let missing = eval(&project, &["nowhere.jsonl"]);
    assert_eq!(missing.status.code(), Some(2));
    assert!(stderr_of(&missing).contains("nowhere.jsonl: cannot read"));
}
