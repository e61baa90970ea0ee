//! Keeps README.md and the book under docs/ true: their `clowder …` lines parse with
//! the real command line, their links and anchors resolve, their `harness.toml` and
//! `plan.toml` blocks load with the real loaders, and the blocks marked
//! ```` ```sh run=NAME ```` run as written through the built binary.
//!
//! docs/incoming/ is a staging folder for text not yet folded into the book: skipped.

use crate::common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use clap::{CommandFactory, FromArgMatches};
use common::git::isolate;

/// One Markdown file of the docs, as lines.
struct Doc {
    /// Relative to the repository, for messages.
    name: String,
    path: PathBuf,
    lines: Vec<String>,
}

/// A fenced code block: its info string, its first line's number (1-based) and its lines.
struct Block {
    info: String,
    line: usize,
    lines: Vec<String>,
}

impl Block {
    fn language(&self) -> &str {
        self.info.split_whitespace().next().unwrap_or("")
    }

    fn has_word(&self, word: &str) -> bool {
        self.info.split_whitespace().skip(1).any(|w| w == word)
    }

    fn run_name(&self) -> Option<&str> {
        self.info
            .split_whitespace()
            .find_map(|word| word.strip_prefix("run="))
    }

    fn text(&self) -> String {
        self.lines.iter().map(|l| format!("{l}\n")).collect()
    }
}

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// README.md and every docs/**/*.md but docs/incoming/.
fn docs() -> Vec<Doc> {
    let mut paths = vec![repo().join("README.md")];
    collect_markdown(&repo().join("docs"), &mut paths);
    paths
        .into_iter()
        .map(|path| {
            let text = std::fs::read_to_string(&path).expect("read a doc");
            let name = path
                .strip_prefix(repo())
                .expect("under the repository")
                .display()
                .to_string();
            let lines = text.lines().map(str::to_string).collect();
            Doc { name, path, lines }
        })
        .collect()
}

fn collect_markdown(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .expect("read docs/")
        .map(|entry| entry.expect("a docs/ entry").path())
        .collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            if path.file_name().is_some_and(|name| name != "incoming") {
                collect_markdown(&path, out);
            }
        } else if path.extension().is_some_and(|ext| ext == "md") {
            out.push(path);
        }
    }
}

/// The opening of a fence: its marker (``` or ~~~, as long as written) and info string.
fn fence_open(line: &str) -> Option<(String, String)> {
    let trimmed = line.trim_start();
    let marker_char = trimmed.chars().next().filter(|c| *c == '`' || *c == '~')?;
    let marker: String = trimmed.chars().take_while(|c| *c == marker_char).collect();
    (marker.len() >= 3).then(|| (marker.clone(), trimmed[marker.len()..].trim().to_string()))
}

/// The code blocks of `doc`, and its other lines (with their numbers) for links and headings.
fn split(doc: &Doc) -> (Vec<Block>, Vec<(usize, &str)>) {
    let mut blocks = Vec::new();
    let mut prose = Vec::new();
    let mut open: Option<(String, Block)> = None;
    for (index, line) in doc.lines.iter().enumerate() {
        let number = index + 1;
        match open.take() {
            Some((marker, mut block)) => {
                let trimmed = line.trim();
                if trimmed.starts_with(&marker)
                    && trimmed.trim_start_matches(&marker[..1]).is_empty()
                {
                    blocks.push(block);
                } else {
                    block.lines.push(line.clone());
                    open = Some((marker, block));
                }
            }
            None => match fence_open(line) {
                Some((marker, info)) => {
                    let block = Block {
                        info,
                        line: number,
                        lines: Vec::new(),
                    };
                    open = Some((marker, block));
                }
                None => prose.push((number, line.as_str())),
            },
        }
    }
    assert!(open.is_none(), "{}: a code block is never closed", doc.name);
    (blocks, prose)
}

// ---------------------------------------------------------------------------
// Command lines

/// The words of a `clowder …` line up to what ends the command for the shell (a pipe,
/// a redirection, `&&`, `;`, a comment), with usage notation resolved: `[…]` parts are
/// left out, `a|b` (no spaces) takes its first choice, `…` is dropped.
fn command_words(line: &str) -> Option<Vec<String>> {
    let line = line.trim();
    let line = line.strip_prefix("$ ").unwrap_or(line);
    if line != "clowder" && !line.starts_with("clowder ") {
        return None;
    }
    let cut = shell_cut(line);
    let words = shlex::split(cut)?;
    let mut out = Vec::new();
    let mut depth = 0usize;
    for word in words {
        let opens = word.starts_with('[');
        depth += usize::from(opens);
        let closes = word.ends_with(']') || word.ends_with("]…") || word.ends_with("...]");
        if depth == 0 && word != "…" && word != "..." {
            out.push(word.split('|').next().unwrap_or_default().to_string());
        }
        if closes {
            depth = depth.saturating_sub(1);
        }
    }
    Some(out)
}

/// `line` up to its first shell operator or comment outside quotes.
fn shell_cut(line: &str) -> &str {
    let bytes = line.as_bytes();
    let mut quote: Option<u8> = None;
    for (i, &b) in bytes.iter().enumerate() {
        let word_start = i == 0 || bytes[i - 1] == b' ';
        match quote {
            Some(q) if b == q => quote = None,
            Some(_) => {}
            None if b == b'\'' || b == b'"' => quote = Some(b),
            None if b == b'#' && word_start => return &line[..i],
            None if b == b';' || b == b'>' || b == b'<' => return &line[..i],
            None if (b == b'|' || b == b'&') && word_start => return &line[..i],
            None => {}
        }
    }
    line
}

#[test]
fn every_clowder_command_line_parses_with_the_real_command_line() {
    let mut checked = 0;
    let mut problems = Vec::new();
    for doc in docs() {
        let (blocks, _) = split(&doc);
        for block in blocks
            .iter()
            .filter(|b| !["text", "toml", "json"].contains(&b.language()))
        {
            for (offset, line) in block.lines.iter().enumerate() {
                let Some(words) = command_words(line) else {
                    continue;
                };
                checked += 1;
                let argv = words.iter().map(String::as_str);
                let parsed = clowder::cli::Args::command()
                    .try_get_matches_from(argv)
                    .and_then(|m| clowder::cli::Args::from_arg_matches(&m));
                if let Err(err) = parsed {
                    let at = block.line + 1 + offset;
                    problems.push(format!(
                        "{}:{at}: `{}`: {}",
                        doc.name,
                        line.trim(),
                        err.kind()
                    ));
                }
            }
        }
    }
    assert!(
        problems.is_empty(),
        "command lines that do not parse:\n{}",
        problems.join("\n")
    );
    assert!(
        checked > 40,
        "only {checked} command lines found: is the extraction broken?"
    );
}

#[test]
fn usage_notation_is_resolved_before_parsing() {
    let words = |line: &str| command_words(line).expect("a clowder line");
    assert_eq!(words("clowder --status [--json]"), ["clowder", "--status"]);
    assert_eq!(
        words("clowder completions bash|zsh|fish"),
        ["clowder", "completions", "bash"]
    );
    assert_eq!(
        words("clowder plan retry NAME [STEP…]"),
        ["clowder", "plan", "retry", "NAME"]
    );
    assert_eq!(words("clowder man > clowder.1  # roff"), ["clowder", "man"]);
    assert_eq!(
        words("clowder queue --json | jq ."),
        ["clowder", "queue", "--json"]
    );
    assert_eq!(words("$ clowder tasks   # all"), ["clowder", "tasks"]);
    assert_eq!(
        words("clowder task new n --prompt \"a # b; c\""),
        ["clowder", "task", "new", "n", "--prompt", "a # b; c"]
    );
    assert!(command_words("clowder: error: harness.toml").is_none());
}

// ---------------------------------------------------------------------------
// Links and anchors

/// The anchor GitHub and mdBook give a heading: lowercase, spaces to `-`, other
/// punctuation dropped (`_` and `-` kept).
fn anchor(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

/// The anchors of a document's headings (outside code blocks), numbered as GitHub
/// numbers repeats (`x`, `x-1`, …).
fn anchors(doc: &Doc) -> BTreeSet<String> {
    let (_, prose) = split(doc);
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let mut out = BTreeSet::new();
    for (_, line) in prose {
        let hashes = line.chars().take_while(|c| *c == '#').count();
        if !(1..=6).contains(&hashes) || !line[hashes..].starts_with(' ') {
            continue;
        }
        let base = anchor(&line[hashes..]);
        let count = seen.entry(base.clone()).or_insert(0);
        out.insert(if *count == 0 {
            base.clone()
        } else {
            format!("{base}-{count}")
        });
        *count += 1;
    }
    out
}

/// `line` without its inline code spans, whose brackets are not links.
fn without_code_spans(line: &str) -> String {
    let mut out = String::new();
    let mut rest = line;
    while let Some(start) = rest.find('`') {
        out.push_str(&rest[..start]);
        let ticks = rest[start..].chars().take_while(|c| *c == '`').count();
        let marker = &rest[start..start + ticks];
        let after = &rest[start + ticks..];
        match after.find(marker) {
            Some(end) => rest = &after[end + ticks..],
            None => {
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

/// The targets of `[text](target)` links and images on a line.
fn link_targets(line: &str) -> Vec<String> {
    let line = without_code_spans(line);
    let mut out = Vec::new();
    let mut rest = line.as_str();
    while let Some(at) = rest.find("](") {
        let after = &rest[at + 2..];
        let Some(end) = after.find(')') else { break };
        out.push(
            after[..end]
                .split_whitespace()
                .next()
                .unwrap_or("")
                .to_string(),
        );
        rest = &after[end..];
    }
    out
}

#[test]
fn every_relative_link_and_anchor_resolves() {
    let docs = docs();
    let by_path: BTreeMap<PathBuf, &Doc> = docs.iter().map(|d| (d.path.clone(), d)).collect();
    let mut problems = Vec::new();
    let mut checked = 0;
    for doc in &docs {
        let (_, prose) = split(doc);
        for (number, line) in prose {
            for target in link_targets(line) {
                if target.contains("://") || target.starts_with("mailto:") {
                    continue;
                }
                checked += 1;
                if let Err(why) = resolve(doc, &target, &by_path) {
                    problems.push(format!("{}:{number}: ({target}): {why}", doc.name));
                }
            }
        }
    }
    assert!(
        problems.is_empty(),
        "broken links:\n{}",
        problems.join("\n")
    );
    assert!(
        checked > 30,
        "only {checked} links found: is the extraction broken?"
    );
}

fn resolve(doc: &Doc, target: &str, by_path: &BTreeMap<PathBuf, &Doc>) -> Result<(), String> {
    let (file, fragment) = match target.split_once('#') {
        Some((file, fragment)) => (file, Some(fragment)),
        None => (target, None),
    };
    let path = if file.is_empty() {
        doc.path.clone()
    } else {
        let dir = doc.path.parent().expect("a doc has a folder");
        normalise(&dir.join(file))
    };
    if !path.exists() {
        return Err(format!("{} does not exist", path.display()));
    }
    let Some(fragment) = fragment else {
        return Ok(());
    };
    let Some(target_doc) = by_path.get(&path) else {
        return Err("an anchor into a file that is not a checked Markdown file".into());
    };
    if anchors(target_doc).contains(fragment) {
        Ok(())
    } else {
        Err(format!(
            "no heading makes #{fragment} in {}",
            target_doc.name
        ))
    }
}

/// `path` with `.` and `..` resolved on the text.
fn normalise(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for part in path.components() {
        match part {
            std::path::Component::ParentDir => {
                out.pop();
            }
            std::path::Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

#[test]
fn anchors_follow_the_heading_rules() {
    assert_eq!(
        anchor(" Processes: nothing outlives clowder"),
        "processes-nothing-outlives-clowder"
    );
    assert_eq!(anchor(" The agent's own retries"), "the-agents-own-retries");
    assert_eq!(anchor(" `clowder init`"), "clowder-init");
    assert_eq!(
        anchor(" Pause, resume, stop, restart"),
        "pause-resume-stop-restart"
    );
    let targets = link_targets("see [a](x.md#b) and `[not](a link)` or ![img](../p.svg)");
    assert_eq!(targets, ["x.md#b", "../p.svg"]);
}

// ---------------------------------------------------------------------------
// TOML blocks

#[test]
fn every_harness_and_plan_block_loads_with_the_real_loaders() {
    let mut problems = Vec::new();
    let mut counts = BTreeMap::new();
    for doc in docs() {
        let (blocks, _) = split(&doc);
        for block in blocks.iter().filter(|b| b.language() == "toml") {
            let at = format!("{}:{}", doc.name, block.line);
            let kind = ["harness", "plan", "codex"]
                .into_iter()
                .find(|k| block.has_word(k));
            *counts.entry(kind.unwrap_or("unmarked")).or_insert(0) += 1;
            let result = match kind {
                Some("harness") => load_harness(&block.text(), &at),
                Some("plan") => load_plan(&block.text()),
                Some(_) => toml::from_str::<toml::Table>(&block.text())
                    .map(drop)
                    .map_err(|e| e.to_string()),
                None => Err("mark the block ```toml harness, ```toml plan or ```toml codex".into()),
            };
            if let Err(err) = result {
                problems.push(format!("{at}: {err}"));
            }
        }
    }
    assert!(
        problems.is_empty(),
        "TOML blocks that do not load:\n{}",
        problems.join("\n")
    );
    assert!(
        counts.get("harness").is_some_and(|n| *n >= 5),
        "harness blocks: {counts:?}"
    );
    assert!(
        counts.get("plan").is_some_and(|n| *n >= 1),
        "plan blocks: {counts:?}"
    );
}

fn load_harness(text: &str, at: &str) -> Result<(), String> {
    clowder::config::Config::parse(text, Path::new(at))
        .map(drop)
        .map_err(|err| err.to_string())
}

/// Loads a plan block as `plan.toml` in a scratch folder, where each `prompt_file` it
/// names exists.
fn load_plan(text: &str) -> Result<(), String> {
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let table: toml::Table = toml::from_str(text).map_err(|e| e.to_string())?;
    let steps = table
        .get("step")
        .and_then(|s| s.as_array())
        .cloned()
        .unwrap_or_default();
    for step in &steps {
        if let Some(file) = step.get("prompt_file").and_then(|f| f.as_str()) {
            let path = dir.path().join(file);
            std::fs::create_dir_all(path.parent().expect("a prompt file has a folder"))
                .map_err(|e| e.to_string())?;
            std::fs::write(&path, "Do the step. Say TASK_COMPLETE when done.\n")
                .map_err(|e| e.to_string())?;
        }
    }
    let path = dir.path().join("plan.toml");
    std::fs::write(&path, text).map_err(|e| e.to_string())?;
    clowder::plan::file::load(&path)
        .map(drop)
        .map_err(|errors| {
            errors
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join("; ")
        })
}

#[test]
fn the_configuration_reference_is_the_repository_harness_toml() {
    let chapter = docs()
        .into_iter()
        .find(|d| d.name == "docs/configuration.md")
        .expect("docs/configuration.md");
    let (blocks, _) = split(&chapter);
    let block = blocks
        .iter()
        .find(|b| b.language() == "toml" && b.has_word("harness"))
        .expect("a ```toml harness block in docs/configuration.md");
    let reference = std::fs::read_to_string(repo().join("harness.toml")).expect("harness.toml");
    assert!(
        block.text() == reference,
        "docs/configuration.md:{}: its block differs from harness.toml; copy harness.toml into it",
        block.line
    );
}

// ---------------------------------------------------------------------------
// Blocks that run as written

/// The blocks marked `run=NAME`, and where each must be.
const RUN_BLOCKS: [(&str, &str); 8] = [
    ("demo", "README.md"),
    ("claude", "README.md"),
    ("codex", "README.md"),
    ("demo-loop", "docs/getting-started.md"),
    ("by-hand", "docs/getting-started.md"),
    ("task", "docs/tasks.md"),
    ("lanes", "docs/lanes.md"),
    ("plan", "docs/plans.md"),
];

/// Generous: a block takes seconds; this only bounds a broken one.
const RUN_DEADLINE: Duration = Duration::from_secs(240);

/// A scratch home with programs on PATH that stand in for what a reader has: clowder
/// (the built binary), cargo (whose `run --release --` runs it), claude and codex
/// (fake agents), an editor that writes a prompt, and an LLM for task workers.
struct Sandbox {
    dir: tempfile::TempDir,
}

impl Sandbox {
    fn new() -> Sandbox {
        let dir = tempfile::tempdir().expect("tempdir");
        let bin = dir.path().join("bin");
        std::fs::create_dir_all(&bin).expect("bin");
        std::fs::create_dir_all(dir.path().join("home")).expect("home");
        std::os::unix::fs::symlink(common::clowder_bin(), bin.join("clowder"))
            .expect("link clowder");
        let fake = repo().join("tests/agents/fake-agent.sh");
        let codex_out = repo().join("tests/fixtures/agent/codex_promise.jsonl");
        let scripts = [
            ("cargo", "[ \"$1 $2 $3\" = 'run --release --' ] || { echo \"cargo: not in this test: $*\" >&2; exit 97; }\nshift 3\nexec clowder \"$@\"\n".to_string()),
            ("claude", format!("exec {} normal\n", fake.display())),
            ("codex", format!("case \" $* \" in *' --version '*) echo 'codex-cli 0.169.0'; exit 0;; *' --trust '*) exit 0;; esac\ncat {}\n", codex_out.display())),
            ("editor", "[ -s \"$1\" ] || echo 'Fix the failing test, then commit.' > \"$1\"\n".to_string()),
            ("fake-llm", "path=$(sed -n 's/.*Write \\([^ ]*\\) about.*/\\1/p' | head -n 1)\nprintf '{\"reasoning\":\"notes\",\"actions\":[{\"tool\":\"write_file\",\"args\":{\"path\":\"%s\",\"content\":\"Cats sleep a lot.\"}}]}\\n' \"$path\"\n".to_string()),
        ];
        for (name, body) in scripts {
            write_script(&bin.join(name), &body);
        }
        Sandbox { dir }
    }

    fn bin(&self) -> PathBuf {
        self.dir.path().join("bin")
    }

    /// A fresh working folder for one block.
    fn work(&self, name: &str) -> PathBuf {
        let work = self.dir.path().join("work").join(name);
        std::fs::create_dir_all(&work).expect("work folder");
        work
    }
}

fn write_script(path: &Path, body: &str) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::write(path, format!("#!/bin/sh\n{body}")).expect("write a script");
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
}

/// What a reader has before the block: the repository's assets for the demos, a git
/// repository for a project, the LLM for a task.
fn prepare(sandbox: &Sandbox, name: &str, work: &Path) {
    match name {
        "demo" | "demo-loop" => setup(
            Command::new("cp")
                .arg("-R")
                .arg(repo().join("assets"))
                .arg(work),
        ),
        "claude" | "codex" => git(work, &["init", "-q"]),
        "lanes" => {
            git(work, &["init", "-q", "-b", "main"]);
            write(work, "lanes/docs.md", "Bring the docs up to date.\n");
            std::fs::create_dir_all(work.join("../scratch")).expect("../scratch");
            git(work, &["add", "."]);
            let who = ["-c", "user.name=t", "-c", "user.email=t@t"];
            git(work, &[&who[..], &["commit", "-q", "-m", "start"]].concat());
        }
        "plan" => {
            git(work, &["init", "-q", "-b", "main"]);
            let (plan, harness) = plan_chapter_blocks();
            write(work, "plan.toml", &plan);
            write(work, "harness.toml", &harness);
            for file in ["tasks/schema.md", "tasks/docs.md"] {
                write(work, file, "Do it. Say TASK_COMPLETE when done.\n");
            }
        }
        "task" => {
            let llm = sandbox.bin().join("fake-llm").display().to_string();
            write(
                work,
                "harness.toml",
                &format!("[worker]\nllm = [{llm:?}]\nllm_timeout = 60\n"),
            );
        }
        _ => {}
    }
}

fn setup(command: &mut Command) {
    let status = isolate(command).status().expect("run a setup command");
    assert!(status.success(), "{command:?}: {status}");
}

fn git(work: &Path, args: &[&str]) {
    setup(Command::new("git").args(args).current_dir(work));
}

fn write(work: &Path, file: &str, text: &str) {
    let path = work.join(file);
    std::fs::create_dir_all(path.parent().expect("a file has a folder")).expect("mkdir");
    std::fs::write(&path, text).expect("write a setup file");
}

fn spawn_block(sandbox: &Sandbox, work: &Path, block: &Block) -> Child {
    let path = format!(
        "{}:{}",
        sandbox.bin().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut command = Command::new("sh");
    isolate(&mut command)
        .args(["-e", "-c", &block.text()])
        .current_dir(work)
        .env("PATH", path)
        .env("HOME", sandbox.dir.path().join("home"))
        .env("EDITOR", sandbox.bin().join("editor"))
        .env("DEMO_PACE", "0.02")
        .stdin(Stdio::null())
        .stdout(Stdio::from(
            std::fs::File::create(work.join("block.out")).expect("out"),
        ))
        .stderr(Stdio::from(
            std::fs::File::create(work.join("block.err")).expect("err"),
        ));
    command.spawn().expect("spawn sh")
}

/// Approves what the demo's release lane asks, as a reader would with `a`.
fn approve_waiting(work: &Path) {
    let fleet = work.join("target/demo/fleet");
    let Ok(entries) = std::fs::read_dir(fleet.join(".clowder/approvals/pending")) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().to_string();
        if let Some(id) = name.strip_suffix(".json") {
            let _ = common::git::clowder_command(&fleet, &["approve", id]).output();
        }
    }
}

fn run_block(sandbox: &Sandbox, name: &str, block: &Block) -> Result<PathBuf, String> {
    let work = sandbox.work(name);
    prepare(sandbox, name, &work);
    let mut child = spawn_block(sandbox, &work, block);
    let start = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait for sh") {
            break status;
        }
        if start.elapsed() > RUN_DEADLINE {
            let _ = child.kill();
            let _ = child.wait();
            return Err(format!("still running after {RUN_DEADLINE:?}"));
        }
        approve_waiting(&work);
        std::thread::sleep(Duration::from_millis(200));
    };
    if status.success() {
        Ok(work)
    } else {
        let err = std::fs::read_to_string(work.join("block.err")).unwrap_or_default();
        let tail: Vec<&str> = err.lines().rev().take(15).collect();
        let tail: Vec<&str> = tail.into_iter().rev().collect();
        Err(format!("{status}; its stderr ends:\n{}", tail.join("\n")))
    }
}

/// The plan chapter's first plan and harness blocks: the files its `plan check` reads.
fn plan_chapter_blocks() -> (String, String) {
    let doc = docs()
        .into_iter()
        .find(|d| d.name == "docs/plans.md")
        .expect("docs/plans.md");
    let (blocks, _) = split(&doc);
    let first = |kind: &str| {
        blocks
            .iter()
            .find(|b| b.language() == "toml" && b.has_word(kind))
            .map(Block::text)
            .unwrap_or_default()
    };
    (first("plan"), first("harness"))
}

/// A ```` ```text output ```` block right after a run block is what it prints, exactly.
fn check_output(expected: Option<&String>, work: &Path) -> Result<(), String> {
    let Some(expected) = expected else {
        return Ok(());
    };
    let printed = std::fs::read_to_string(work.join("block.out")).map_err(|e| e.to_string())?;
    if &printed == expected {
        Ok(())
    } else {
        Err(format!(
            "it printed:\n{printed}\nwhere the docs show:\n{expected}"
        ))
    }
}

/// What a block must leave behind, besides succeeding.
fn check_result(name: &str, work: &Path) -> Result<(), String> {
    match name {
        "task" => {
            let state = std::fs::read_to_string(work.join("notes/state.json"))
                .map_err(|e| e.to_string())?;
            let state: serde_json::Value =
                serde_json::from_str(&state).map_err(|e| e.to_string())?;
            let violations = &state["counters"]["security_violations"];
            if violations != 0 {
                return Err(format!(
                    "the task's writes were refused: security_violations {violations}"
                ));
            }
            let written = work.join("notes/artifacts/cats.md");
            written
                .is_file()
                .then_some(())
                .ok_or(format!("{} was not written", written.display()))
        }
        "claude" | "codex" => {
            let status = std::fs::read_to_string(work.join(".clowder/harness.status"))
                .map_err(|e| format!("no .clowder/harness.status after the loop: {e}"))?;
            let status: serde_json::Value =
                serde_json::from_str(&status).map_err(|e| e.to_string())?;
            let productive = &status["counters"]["productive"];
            // The README says `clowder --headless 2`: two productive sessions.
            (productive == 2)
                .then_some(())
                .ok_or(format!("{productive} productive sessions, not 2"))
        }
        "lanes" => {
            let fleet = std::fs::read_to_string(work.join(".clowder/fleet.json"))
                .map_err(|e| e.to_string())?;
            let fleet: serde_json::Value =
                serde_json::from_str(&fleet).map_err(|e| e.to_string())?;
            let names: Vec<&str> = fleet["lanes"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|lane| lane["name"].as_str())
                .collect();
            (names == ["docs", "scratch"])
                .then_some(())
                .ok_or(format!("lanes left: {names:?}"))
        }
        _ => Ok(()),
    }
}

#[test]
fn the_examples_marked_to_run_run_as_written() {
    let mut found: BTreeMap<String, (String, Block)> = BTreeMap::new();
    let mut outputs: BTreeMap<String, String> = BTreeMap::new();
    for doc in docs() {
        let (blocks, _) = split(&doc);
        let mut blocks = blocks.into_iter().peekable();
        while let Some(block) = blocks.next() {
            let Some(name) = block.run_name().map(str::to_string) else {
                continue;
            };
            if let Some(next) = blocks.peek().filter(|b| b.has_word("output")) {
                outputs.insert(name.clone(), next.text());
            }
            let place = format!("{}:{}", doc.name, block.line);
            assert!(
                found.insert(name.clone(), (place, block)).is_none(),
                "two blocks run={name}"
            );
        }
    }
    let expected: BTreeMap<&str, &str> = RUN_BLOCKS.into_iter().collect();
    let names: Vec<&String> = found.keys().collect();
    assert_eq!(
        names,
        expected.keys().collect::<Vec<_>>(),
        "the run= blocks of the docs"
    );
    let sandbox = Sandbox::new();
    let mut problems = Vec::new();
    for (name, (place, block)) in &found {
        assert!(
            place.starts_with(expected[name.as_str()]),
            "run={name} is at {place}"
        );
        let result = run_block(&sandbox, name, block).and_then(|work| {
            check_result(name, &work)?;
            check_output(outputs.get(name), &work)
        });
        if let Err(err) = result {
            problems.push(format!("{place} (run={name}): {err}"));
        }
    }
    assert!(
        problems.is_empty(),
        "examples that do not run:\n{}",
        problems.join("\n\n")
    );
}

// ---------------------------------------------------------------------------
// The README itself, and the event names

#[test]
fn the_readme_is_short_and_gives_the_test_command_ci_runs() {
    let readme = std::fs::read_to_string(repo().join("README.md")).expect("README.md");
    let lines = readme.lines().count();
    assert!(
        lines <= 250,
        "README.md has {lines} lines; the rest belongs in docs/"
    );
    let ci = std::fs::read_to_string(repo().join(".ci/run")).expect(".ci/run");
    let command = ci
        .lines()
        .rev()
        .find(|line| line.contains("cargo test"))
        .expect(".ci/run runs cargo test")
        .trim();
    assert!(
        readme.lines().any(|line| line.trim() == command),
        "README.md must give the test command .ci/run runs, on a line of its own: {command}"
    );
}

/// `"name"` strings of `src/protocol.rs`'s `Event::name`, and the plan's event kinds
/// (`StepDone` is written `step_done`).
fn event_names() -> Vec<String> {
    let protocol = std::fs::read_to_string(repo().join("src/protocol.rs")).expect("protocol.rs");
    let names = regex::Regex::new(r#"Event::\w+(?: \{ \.\. \})? => "(\w+)""#).expect("regex");
    let mut out: Vec<String> = names
        .captures_iter(&protocol)
        .map(|c| c[1].to_string())
        .collect();
    let scheduler =
        std::fs::read_to_string(repo().join("src/plan/scheduler.rs")).expect("scheduler.rs");
    let body = scheduler
        .split("pub enum EventKind {")
        .nth(1)
        .and_then(|rest| rest.split('}').next())
        .expect("the plan's EventKind");
    let variant = regex::Regex::new(r"(?m)^\s*([A-Z]\w*),").expect("regex");
    let snake = regex::Regex::new(r"([a-z])([A-Z])").expect("regex");
    out.extend(
        variant
            .captures_iter(body)
            .map(|c| snake.replace_all(&c[1], "${1}_${2}").to_lowercase()),
    );
    out
}

#[test]
fn every_event_is_in_the_events_chapter() {
    let chapter = std::fs::read_to_string(repo().join("docs/events.md")).expect("docs/events.md");
    let names = event_names();
    assert!(
        names.len() > 35,
        "only {} event names found in the source",
        names.len()
    );
    let missing: Vec<&String> = names
        .iter()
        .filter(|name| !chapter.contains(&format!("`{name}`")))
        .collect();
    assert!(
        missing.is_empty(),
        "events missing from docs/events.md: {missing:?}"
    );
}

#[test]
fn every_subcommand_is_shown_in_a_code_block() {
    let mut shown = BTreeSet::new();
    for doc in docs() {
        let (blocks, _) = split(&doc);
        for line in blocks.iter().flat_map(|b| b.lines.iter()) {
            if let Some(words) = command_words(line) {
                shown.extend(words.get(1).cloned());
            }
        }
    }
    let missing: Vec<String> = clowder::cli::Args::command()
        .get_subcommands()
        .map(|sub| sub.get_name().to_string())
        .filter(|name| name != "help" && !shown.contains(name))
        .collect();
    assert!(
        missing.is_empty(),
        "subcommands no docs example shows: {missing:?}"
    );
}

/// Spans the text shows being refused.
const MEANT_TO_FAIL: [&str; 1] = ["clowder lnaes"];

/// Prose may name a command without its arguments (`clowder plan run`); only a
/// word the command line does not know is wrong.
fn names_a_command(kind: clap::error::ErrorKind) -> bool {
    use clap::error::ErrorKind::*;
    matches!(
        kind,
        MissingRequiredArgument
            | MissingSubcommand
            | DisplayHelpOnMissingArgumentOrSubcommand
            | DisplayHelp
            | DisplayVersion
    )
}

/// The `clowder …` code spans of a prose line (not a quoted `decided_by`, `(user …)`).
fn inline_commands(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = line;
    while let Some(start) = rest.find('`') {
        let after = &rest[start + 1..];
        let Some(end) = after.find('`') else { break };
        let span = &after[..end];
        if span.starts_with("clowder ")
            && !span.contains('(')
            && !span
                .split_whitespace()
                .nth(1)
                .is_some_and(|w| w.ends_with(':'))
        {
            out.push(span.to_string());
        }
        rest = &after[end + 1..];
    }
    out
}

#[test]
fn every_clowder_command_in_the_text_parses_too() {
    let mut problems = Vec::new();
    for doc in docs() {
        let (_, prose) = split(&doc);
        for (number, line) in prose {
            for span in inline_commands(line) {
                let words = command_words(&span).unwrap_or_default();
                let parsed = clowder::cli::Args::command().try_get_matches_from(&words);
                let refused = parsed
                    .as_ref()
                    .err()
                    .map(clap::Error::kind)
                    .filter(|kind| !names_a_command(*kind));
                if refused.is_some() != MEANT_TO_FAIL.contains(&span.as_str()) {
                    problems.push(format!("{}:{number}: `{span}`: {refused:?}", doc.name));
                }
            }
        }
    }
    assert!(
        problems.is_empty(),
        "commands in the text that do not parse:\n{}",
        problems.join("\n")
    );
}
