//! `clowder init` without a hook flag: a project set up in one command, its
//! files kept under `.clowder/` and out of git through a whole session; files
//! already there (a shell loop's `PROMPT.md`) kept, the template prompt warned of.

use crate::common;

/// The `[agent] args` that `clowder init --agent claude` writes.
const CLAUDE_ARGS: &str = "args = [\"-p\", \"--input-format\", \"stream-json\", \"--output-format\", \"stream-json\", \"--replay-user-messages\", \"--verbose\", \"--dangerously-skip-permissions\"]";

use std::path::{Path, PathBuf};
use std::process::Output;

use common::git::{clowder_command, git_in, init_with_one_commit};
use common::{DEADLINE, fake_agent_script, stderr_of, stdout_of, wait_with_deadline};
use tempfile::TempDir;

/// A repository, and a bin folder holding the fake agents the test puts on PATH.
struct Setup {
    repo: TempDir,
    bin: TempDir,
}

impl Setup {
    fn new(agents: &[&str]) -> Setup {
        let repo = tempfile::tempdir().expect("tempdir");
        init_with_one_commit(repo.path());
        let bin = tempfile::tempdir().expect("tempdir");
        for agent in agents {
            std::os::unix::fs::symlink(fake_agent_script(), bin.path().join(agent))
                .expect("link a fake agent");
        }
        Setup { repo, bin }
    }

    fn root(&self) -> &Path {
        self.repo.path()
    }

    fn read(&self, rel: &str) -> String {
        std::fs::read_to_string(self.root().join(rel)).unwrap_or_else(|e| panic!("read {rel}: {e}"))
    }

    /// `clowder args…` with only the fake agents on PATH (or, with
    /// `system_too`, ahead of the system's PATH, for the agent's shell).
    fn clowder(&self, args: &[&str], system_too: bool) -> Output {
        let mut path = self.bin.path().as_os_str().to_owned();
        if system_too {
            path.push(":");
            path.push(std::env::var_os("PATH").unwrap_or_default());
        }
        let child = clowder_command(self.root(), args)
            .env("PATH", path)
            .spawn()
            .expect("spawn clowder");
        wait_with_deadline(child, DEADLINE)
    }

    fn init(&self, args: &[&str]) -> Output {
        self.init_with(args, false)
    }

    /// `clowder init args…`, which must succeed; `system_too` as for `clowder`
    /// (with it, init finds the repository through git itself).
    fn init_with(&self, args: &[&str], system_too: bool) -> Output {
        let mut all = vec!["init"];
        all.extend_from_slice(args);
        let output = self.clowder(&all, system_too);
        assert!(
            output.status.success(),
            "clowder init failed: {}",
            stderr_of(&output)
        );
        output
    }
}

fn clowder_path() -> String {
    common::clowder_bin().display().to_string()
}

fn exclude_lines(setup: &Setup) -> usize {
    setup
        .read(".git/info/exclude")
        .lines()
        .filter(|l| l.trim() == ".clowder/")
        .count()
}

#[test]
fn init_writes_a_project_whose_session_leaves_git_clean() {
    let setup = Setup::new(&["claude"]);
    let out = setup.init_with(&[], true);
    let said = stdout_of(&out);
    assert!(said.contains("using claude"), "{said}");
    assert!(said.contains("next:"), "{said}");

    let harness = setup.read("harness.toml");
    assert!(
        harness.contains("output_dir = \".clowder/sessions\""),
        "{harness}"
    );
    assert!(harness.contains("command = \"claude\""), "{harness}");
    assert!(setup.read("PROMPT.md").contains("<!--"));
    let settings: serde_json::Value =
        serde_json::from_str(&setup.read(".claude/settings.json")).expect("settings json");
    let command = settings["hooks"]["PreToolUse"][0]["hooks"][0]["command"]
        .as_str()
        .expect("hook command");
    assert_eq!(command, format!("{} gate", clowder_path()));
    assert!(Path::new(command.split(' ').next().unwrap_or("")).is_absolute());
    assert_eq!(exclude_lines(&setup), 1);

    // The written configuration loads with the real parser.
    let dry = setup.clowder(&["--dry-run"], true);
    assert!(dry.status.success(), "dry run: {}", stderr_of(&dry));

    // Run the fake agent in place of claude (same name, found on PATH), and
    // commit what init wrote, as a user would.
    let harness = harness.replace(CLAUDE_ARGS, "args = [\"normal\"]");
    assert!(harness.contains("args = [\"normal\"]"));
    std::fs::write(setup.root().join("harness.toml"), harness).expect("write harness.toml");
    git_in(setup.root(), &["add", "-A"]);
    git_in(setup.root(), &["commit", "--quiet", "-m", "clowder init"]);

    let run = setup.clowder(&["--headless", "1"], true);
    assert!(run.status.success(), "session: {}", stderr_of(&run));
    assert!(
        setup
            .root()
            .join(".clowder/sessions/claude-iteration-1.jsonl")
            .is_file(),
        "the session's output is under .clowder/sessions"
    );
    assert!(setup.root().join(".clowder/events.jsonl").is_file());
    assert_eq!(git_in(setup.root(), &["status", "--porcelain"]), "");
}

#[test]
fn a_second_init_keeps_every_file_and_writes_only_what_is_missing() {
    let setup = Setup::new(&["claude"]);
    setup.init(&["--promise", "DONE"]);
    let files = [
        "harness.toml",
        "PROMPT.md",
        ".claude/settings.json",
        ".git/info/exclude",
    ];
    let before: Vec<String> = files.iter().map(|f| setup.read(f)).collect();

    let again = setup.init(&["--promise", "OTHER"]);
    let said = stdout_of(&again);
    assert!(
        said.contains("kept harness.toml and PROMPT.md as they were"),
        "{said}"
    );
    assert!(
        said.contains("--promise not applied: harness.toml is there"),
        "{said}"
    );
    let after: Vec<String> = files.iter().map(|f| setup.read(f)).collect();
    assert_eq!(before, after);

    // With only PROMPT.md left, init writes harness.toml and keeps the prompt.
    std::fs::write(setup.root().join("PROMPT.md"), "Fix the flaky test.\n").expect("write");
    std::fs::remove_file(setup.root().join("harness.toml")).expect("rm");
    let again = setup.init(&[]);
    let said = stdout_of(&again);
    assert!(said.contains("wrote harness.toml"), "{said}");
    assert!(said.contains("kept PROMPT.md as it was"), "{said}");
    assert_eq!(setup.read("PROMPT.md"), "Fix the flaky test.\n");
    assert!(
        setup
            .read("harness.toml")
            .contains("prompt_file = \"PROMPT.md\"")
    );
    // The hook and the exclude line stay single.
    assert_eq!(exclude_lines(&setup), 1);
    let settings: serde_json::Value =
        serde_json::from_str(&setup.read(".claude/settings.json")).expect("settings json");
    assert_eq!(
        settings["hooks"]["PreToolUse"].as_array().map(Vec::len),
        Some(1)
    );
}

/// A folder a shell loop ran in: its `PROMPT.md` is kept, the rest is set up,
/// and the loop runs on it with no warning about a template.
#[test]
fn init_in_a_shell_loops_folder_keeps_its_prompt() {
    let setup = Setup::new(&["claude"]);
    let prompt = "Read TODO.md and do the first item. Commit.\n";
    std::fs::write(setup.root().join("PROMPT.md"), prompt).expect("write");
    let out = setup.init_with(&[], true);
    let said = stdout_of(&out);
    assert!(said.contains("wrote harness.toml ("), "{said}");
    assert!(said.contains("kept PROMPT.md as it was"), "{said}");
    assert!(said.contains("next: `clowder --dry-run`"), "{said}");
    assert_eq!(setup.read("PROMPT.md"), prompt);
    assert!(setup.root().join(".claude/settings.json").is_file());
    let dry = setup.clowder(&["--dry-run"], true);
    assert!(dry.status.success(), "dry run: {}", stderr_of(&dry));
    assert!(!stderr_of(&dry).contains("template"), "{}", stderr_of(&dry));
}

/// The prompt init wrote, never filled in, is said at `--dry-run` and at start.
#[test]
fn a_prompt_left_as_inits_template_is_warned_about() {
    let setup = Setup::new(&["claude"]);
    setup.init_with(&[], true);
    let warning = "clowder: warning: PROMPT.md is still the template `clowder init` wrote (\"Describe the task here.\"): write the task there first";
    let dry = setup.clowder(&["--dry-run"], true);
    assert!(dry.status.success(), "dry run: {}", stderr_of(&dry));
    assert!(stderr_of(&dry).contains(warning), "{}", stderr_of(&dry));
    let harness = setup
        .read("harness.toml")
        .replace(CLAUDE_ARGS, "args = [\"normal\"]");
    std::fs::write(setup.root().join("harness.toml"), harness).expect("write harness.toml");
    let run = setup.clowder(&["--headless", "1"], true);
    assert!(run.status.success(), "session: {}", stderr_of(&run));
    assert!(stderr_of(&run).contains(warning), "{}", stderr_of(&run));
    // Written, the warning goes.
    std::fs::write(setup.root().join("PROMPT.md"), "Do the work.\n").expect("write");
    let dry = setup.clowder(&["--dry-run"], true);
    assert!(!stderr_of(&dry).contains("warning"), "{}", stderr_of(&dry));
}

#[test]
fn budget_and_promise_land_in_the_config() {
    let setup = Setup::new(&["claude"]);
    setup.init(&["--promise", "DONE", "--budget", "5"]);
    let harness = setup.read("harness.toml");
    assert!(harness.contains("max_cost_usd = 5.0"), "{harness}");
    assert!(harness.contains("promise = \"DONE\""), "{harness}");
    let dry = setup.clowder(&["--dry-run"], true);
    let shown = stdout_of(&dry);
    assert!(dry.status.success(), "dry run: {}", stderr_of(&dry));
    assert!(shown.contains("max_cost_usd = 5.0"), "{shown}");
    assert!(shown.contains("promise = \"DONE\""), "{shown}");

    let bad = setup.clowder(&["init", "--budget", "-1"], false);
    assert_eq!(bad.status.code(), Some(2));

    // A promise the config would refuse is refused before anything is written.
    let fresh = Setup::new(&["claude"]);
    let bad = fresh.clowder(&["init", "--promise", "two\nlines"], false);
    assert_eq!(bad.status.code(), Some(2), "{}", stderr_of(&bad));
    assert!(
        stderr_of(&bad).contains("completion.promise"),
        "{}",
        stderr_of(&bad)
    );
    assert!(!fresh.root().join("harness.toml").exists());
    assert!(!fresh.root().join(".claude").exists());
}

#[test]
fn codex_is_chosen_with_its_hook() {
    let setup = Setup::new(&["claude", "codex"]);
    let out = setup.init(&["--agent", "codex"]);
    assert!(
        stdout_of(&out).contains("using codex"),
        "{}",
        stdout_of(&out)
    );
    let harness = setup.read("harness.toml");
    assert!(harness.contains("command = \"codex\""), "{harness}");
    let codex = setup.read(".codex/config.toml");
    assert!(
        codex.contains(&format!("command = \"{} gate\"", clowder_path())),
        "{codex}"
    );
    assert!(!setup.root().join(".claude").exists());
    let dry = setup.clowder(&["--dry-run"], true);
    assert!(dry.status.success(), "dry run: {}", stderr_of(&dry));
}

#[test]
fn codex_alone_on_path_is_used_and_a_missing_agent_is_said() {
    let setup = Setup::new(&["codex"]);
    let out = setup.init(&[]);
    assert!(
        stdout_of(&out).contains("using codex"),
        "{}",
        stdout_of(&out)
    );

    let setup = Setup::new(&[]);
    let out = setup.init(&[]);
    assert!(
        stdout_of(&out).contains("claude was not found on PATH"),
        "{}",
        stdout_of(&out)
    );
    assert!(setup.read("harness.toml").contains("command = \"claude\""));
}

#[test]
fn outside_a_repository_nothing_is_excluded() {
    let dir = tempfile::tempdir().expect("tempdir");
    let output = clowder_command(dir.path(), &["init"])
        .env("PATH", PathBuf::from("/nonexistent"))
        .output()
        .expect("run clowder");
    assert!(output.status.success(), "{}", stderr_of(&output));
    assert!(dir.path().join("harness.toml").is_file());
    assert!(!dir.path().join(".git").exists());
}

#[test]
fn in_a_linked_worktree_the_repository_s_exclude_file_is_used() {
    let setup = Setup::new(&["claude"]);
    let linked = setup.root().join("linked");
    git_in(
        setup.root(),
        &["worktree", "add", "--quiet", "-b", "side", "linked"],
    );
    let child = clowder_command(&linked, &["init"])
        .env(
            "PATH",
            format!(
                "{}:{}",
                setup.bin.path().display(),
                std::env::var("PATH").unwrap_or_default()
            ),
        )
        .spawn()
        .expect("spawn clowder");
    let out = wait_with_deadline(child, DEADLINE);
    assert!(out.status.success(), "{}", stderr_of(&out));
    assert_eq!(exclude_lines(&setup), 1);
    git_in(&linked, &["add", "-A"]);
    std::fs::create_dir_all(linked.join(".clowder/sessions")).expect("mkdir");
    std::fs::write(linked.join(".clowder/sessions/x.jsonl"), "{}\n").expect("write");
    assert_eq!(
        git_in(&linked, &["status", "--porcelain", "--untracked-files=all"])
            .lines()
            .filter(|l| l.contains(".clowder"))
            .count(),
        0
    );
}
