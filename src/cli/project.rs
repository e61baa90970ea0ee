//! `clowder init` without a hook flag: sets up a project in the current folder
//! (`harness.toml`, `PROMPT.md`, the agent's gate hook, `.clowder/` kept out of git).
//! A file that is there already (a shell loop's `PROMPT.md`) is kept, never
//! overwritten: init writes what is missing and says which is which.

use std::io::{BufRead, IsTerminal, Write};
use std::path::{Path, PathBuf};

use crate::approvals::claude_hook::{CLAUDE_SETTINGS, merge_hook};
use crate::approvals::codex_hook;
use crate::approvals::commands::EXIT_ERROR;
use crate::approvals::escape;

/// The agent a new project runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Agent {
    Claude,
    Codex,
}

impl Agent {
    fn program(self) -> &'static str {
        match self {
            Agent::Claude => "claude",
            Agent::Codex => "codex",
        }
    }
}

/// The folder every file clowder writes goes in, kept out of git.
use crate::store::paths::STATE_DIR;
const FILES: [&str; 2] = ["harness.toml", "PROMPT.md"];

/// `clowder init [--agent A] [--budget USD] [--promise WORD]`.
pub fn init(agent: Option<Agent>, budget: Option<f64>, promise: Option<String>) -> i32 {
    match run(agent, budget, promise) {
        Ok(()) => 0,
        Err(err) => {
            eprintln!("clowder init: error: {}", escape(&err));
            EXIT_ERROR
        }
    }
}

fn run(agent: Option<Agent>, budget: Option<f64>, promise: Option<String>) -> Result<(), String> {
    if let Some(budget) = budget
        && !(budget.is_finite() && budget > 0.0)
    {
        return Err(format!(
            "--budget {budget}: expected a positive number of USD"
        ));
    }
    // `symlink_metadata`: a dangling link there is a file to keep, too.
    let [keep_harness, keep_prompt] = FILES.map(|f| std::fs::symlink_metadata(f).is_ok());
    let (agent, harness) = if keep_harness {
        for (flag, given) in [
            ("--budget", budget.is_some()),
            ("--promise", promise.is_some()),
        ] {
            if given {
                println!(
                    "clowder: {flag} not applied: harness.toml is there and is kept (set it there)"
                );
            }
        }
        (agent.unwrap_or(configured_agent()?), None)
    } else {
        let agent = choose_agent(agent);
        let harness = new_harness(agent, budget, promise)?;
        (agent, Some(harness))
    };
    let command = codex_hook::gate_command()?;
    let hook_file = write_hook(agent, &command)?;
    if let Some(harness) = &harness {
        write_new(FILES[0], harness)?;
    }
    if !keep_prompt {
        write_new(FILES[1], PROMPT_MD)?;
    }
    let excluded = exclude_state_dir()?;
    summary(
        agent,
        [keep_harness, keep_prompt],
        hook_file,
        &command,
        excluded.as_deref(),
    );
    Ok(())
}

/// A new project's `harness.toml`, asked for what the flags do not say (at a
/// terminal), and refused before anything is written if the config would be.
fn new_harness(
    agent: Agent,
    budget: Option<f64>,
    promise: Option<String>,
) -> Result<String, String> {
    let interactive = std::io::stdin().is_terminal();
    let budget = match budget {
        None if interactive => ask_budget()?,
        given => given,
    };
    let promise = match promise {
        None if interactive => ask("Completion word (empty: none): ")?,
        given => given.filter(|p| !p.trim().is_empty()),
    };
    let harness = harness_toml(agent, budget, promise.as_deref());
    // A promise the config refuses (one on two lines) is refused here, before any write.
    crate::config::Config::parse(&harness, Path::new(FILES[0]))
        .map_err(|err| format!("{err}; nothing was written"))?;
    Ok(harness)
}

/// The agent of the `harness.toml` that is kept: its hook is the one to merge.
fn configured_agent() -> Result<Agent, String> {
    let config = crate::config::Config::load(Path::new(FILES[0]), true)
        .map_err(|err| format!("{err}; nothing was written"))?;
    let program = Path::new(&config.agent.command.0)
        .file_name()
        .map(|name| name.to_string_lossy().into_owned())
        .unwrap_or_default();
    Ok(if program == "codex" {
        Agent::Codex
    } else {
        Agent::Claude
    })
}

fn summary(agent: Agent, kept: [bool; 2], hook_file: &str, command: &str, exclude: Option<&Path>) {
    let mut wrote = Vec::new();
    let mut kept_files = Vec::new();
    for (file, was_there) in FILES.into_iter().zip(kept) {
        if was_there {
            kept_files.push(file);
        } else {
            wrote.push(file);
        }
    }
    let kept = kept_files;
    if !wrote.is_empty() {
        // Only a harness.toml of init's own puts clowder's files there.
        let under = if wrote.contains(&FILES[0]) {
            format!(" (every file clowder writes goes under {STATE_DIR}/)")
        } else {
            String::new()
        };
        println!("clowder: wrote {}{under}", wrote.join(" and "));
    }
    if !kept.is_empty() {
        println!(
            "clowder: kept {} as {} (nothing in {} was changed)",
            kept.join(" and "),
            if kept.len() == 1 {
                "it was"
            } else {
                "they were"
            },
            if kept.len() == 1 { "it" } else { "them" },
        );
    }
    println!("clowder: {hook_file} runs `{}`", escape(command));
    if let Some(exclude) = exclude {
        println!("clowder: {STATE_DIR}/ is listed in {}", exclude.display());
    }
    println!(
        "clowder: each loop and lane also hands {} this hook on its command line, so an agent cannot edit it away",
        agent.program()
    );
    if agent == Agent::Codex {
        println!(
            "clowder: Codex run by hand runs the hook only in a project it trusts: `codex exec --trust` once"
        );
    }
    if wrote.contains(&FILES[1]) {
        println!("next: edit PROMPT.md, then run `clowder` (or `clowder --headless 5`)");
    } else {
        println!(
            "next: `clowder --dry-run` shows the settings, then run `clowder` (or `clowder --headless 5`)"
        );
    }
}

/// The warning for a prompt file that still is init's template: the agent
/// would be given "Describe the task here."; `None` when it is not (or
/// cannot be read: the preflight says that).
pub fn template_warning(prompt: &Path) -> Option<String> {
    let text = std::fs::read_to_string(prompt).ok()?;
    let placeholder = PROMPT_MD.lines().last().unwrap_or_default();
    text.lines().any(|line| line.trim() == placeholder).then(|| {
        format!(
            "{} is still the template `clowder init` wrote (\"{placeholder}\"): write the task there first",
            prompt.display()
        )
    })
}

/// `--agent`, else claude if it is on PATH, else codex if it is, else claude.
fn choose_agent(asked: Option<Agent>) -> Agent {
    let claude = on_path("claude");
    let codex = on_path("codex");
    let chosen = asked.unwrap_or(if claude.is_none() && codex.is_some() {
        Agent::Codex
    } else {
        Agent::Claude
    });
    let found = match chosen {
        Agent::Claude => &claude,
        Agent::Codex => &codex,
    };
    match found {
        Some(path) => println!("clowder: using {} ({})", chosen.program(), path.display()),
        None => println!(
            "clowder: {} was not found on PATH; harness.toml runs it anyway: install it before `clowder`",
            chosen.program()
        ),
    }
    chosen
}

pub(super) fn on_path(program: &str) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(program))
        .find(|file| {
            std::fs::metadata(file)
                .is_ok_and(|meta| meta.is_file() && meta.permissions().mode() & 0o111 != 0)
        })
}

/// One line from the terminal; empty: none.
fn ask(question: &str) -> Result<Option<String>, String> {
    print!("{question}");
    let _ = std::io::stdout().flush();
    let mut line = String::new();
    std::io::stdin()
        .lock()
        .read_line(&mut line)
        .map_err(|err| format!("cannot read the answer: {err}"))?;
    let line = line.trim();
    Ok((!line.is_empty()).then(|| line.to_owned()))
}

fn ask_budget() -> Result<Option<f64>, String> {
    loop {
        let Some(answer) = ask("Budget for the run in USD (empty: none): ")? else {
            return Ok(None);
        };
        match answer.trim_start_matches('$').parse::<f64>() {
            Ok(usd) if usd.is_finite() && usd > 0.0 => return Ok(Some(usd)),
            _ => println!("  a positive number, e.g. 5 or 2.50"),
        }
    }
}

/// Merges the gate hook into the agent's project config; returns that file.
fn write_hook(agent: Agent, command: &str) -> Result<&'static str, String> {
    let file = match agent {
        Agent::Claude => CLAUDE_SETTINGS,
        Agent::Codex => codex_hook::CONFIG,
    };
    match agent {
        Agent::Claude => merge_hook(Path::new(file), command)?,
        Agent::Codex => codex_hook::merge(Path::new(file), command)?,
    };
    Ok(file)
}

fn write_new(path: &str, text: &str) -> Result<(), String> {
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)
        .map_err(|err| format!("cannot create {path}: {err}"))?;
    file.write_all(text.as_bytes())
        .map_err(|err| format!("cannot write {path}: {err}"))
}

/// The repository's exclude file when this folder is in a git repository:
/// git's own answer (a linked worktree's `.git` is a file), else `.git/info/exclude`.
fn exclude_file() -> Option<PathBuf> {
    let asked = std::process::Command::new("git")
        .args(["rev-parse", "--git-path", "info/exclude"])
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .output();
    match asked {
        Ok(out) if out.status.success() => {
            let path = String::from_utf8_lossy(&out.stdout).trim().to_owned();
            (!path.is_empty()).then(|| PathBuf::from(path))
        }
        Ok(_) => None,
        Err(_) => Path::new(".git")
            .is_dir()
            .then(|| PathBuf::from(".git/info/exclude")),
    }
}

/// Adds `.clowder/` to the repository's exclude file once. Returns that file
/// when there is one.
fn exclude_state_dir() -> Result<Option<PathBuf>, String> {
    let Some(exclude) = exclude_file() else {
        return Ok(None);
    };
    let shown = exclude.display();
    let text = match std::fs::read_to_string(&exclude) {
        Ok(text) => text,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(err) => return Err(format!("cannot read {shown}: {err}")),
    };
    let listed = text.lines().any(|l| {
        matches!(
            l.trim(),
            ".clowder" | ".clowder/" | "/.clowder" | "/.clowder/"
        )
    });
    if listed {
        return Ok(Some(exclude));
    }
    if let Some(parent) = exclude.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent)
            .map_err(|err| format!("cannot create {}: {err}", parent.display()))?;
    }
    let sep = if text.is_empty() || text.ends_with('\n') {
        ""
    } else {
        "\n"
    };
    let mut file = std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .open(&exclude)
        .map_err(|err| format!("cannot open {shown}: {err}"))?;
    writeln!(file, "{sep}{STATE_DIR}/").map_err(|err| format!("cannot write {shown}: {err}"))?;
    Ok(Some(exclude))
}

fn agent_table(agent: Agent) -> String {
    match agent {
        Agent::Claude => "\
[agent]
# The agent clowder starts for each session. With --input-format stream-json the
# prompt goes to its stdin as the first message, and a note told while the
# session runs (`clowder tell`, `t`) goes in next: the agent reads it at its next step.
command = \"claude\"
args = [\"-p\", \"--input-format\", \"stream-json\", \"--output-format\", \"stream-json\", \"--replay-user-messages\", \"--verbose\", \"--dangerously-skip-permissions\"]
"
        .to_owned(),
        Agent::Codex => format!(
            "\
[agent]
# The agent clowder starts for each session; {{prompt}} is replaced by the prompt.
# {bypass}: an unattended loop has nobody to review the gate hook.
command = \"codex\"
args = [\"exec\", \"--json\", \"{bypass}\", \"{{prompt}}\"]
",
            bypass = codex_hook::BYPASS_TRUST
        ),
    }
}

/// The project's `harness.toml`: the keys a new project sets, each explained;
/// the reference `harness.toml` in clowder's repository lists every other key.
fn harness_toml(agent: Agent, budget: Option<f64>, promise: Option<&str>) -> String {
    let budget = match budget {
        Some(usd) => format!("max_cost_usd = {usd:?}"),
        None => "# max_cost_usd = 5.0".to_owned(),
    };
    let promise = match promise {
        Some(word) => format!(
            "promise = {}",
            toml_edit::Value::from(word).decorated("", "")
        ),
        None => "# promise = \"DONE\"".to_owned(),
    };
    format!(
        "\
# clowder's configuration for this project, written by `clowder init`.
# Every key not set here keeps its default; `clowder --dry-run` prints them all.

{agent}
[session]
# How many productive sessions `clowder` runs when no number is given.
max_iterations = 25
# The prompt, read fresh for every session.
prompt_file = \"PROMPT.md\"
# One output file per session (the agent's JSON lines).
output_dir = \"{STATE_DIR}/sessions\"
# The last session number: a second run continues from it.
counter_file = \"{STATE_DIR}/iteration_counter\"

[output]
# One JSON event per line: loop_start, session_start, session_complete, loop_end, ...
event_log = \"{STATE_DIR}/events.jsonl\"
# The loop's state as JSON, read by `clowder --status`.
status_file = \"{STATE_DIR}/harness.status\"

[shutdown]
# Create this file to stop after the current session.
stop_file = \"{STATE_DIR}/STOP\"

[guard]
# The run stops (exit 4) once its sessions have cost this many USD.
{budget}

[completion]
# The run ends once the agent's final message says this word.
{promise}
",
        agent = agent_table(agent),
    )
}

const PROMPT_MD: &str = "\
<!--
  The prompt clowder gives the agent at the start of every session, read fresh
  each time: edit it while the loop runs. These comments are sent too; delete
  them once the task below is written.
  Say what to do, how to check it is done, and what to leave alone. If
  harness.toml sets [completion] promise, tell the agent to say that word
  when everything is done.
-->

Describe the task here.
";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_written_config_parses_with_every_choice() {
        for agent in [Agent::Claude, Agent::Codex] {
            for (budget, promise) in [(None, None), (Some(2.5), Some("ALL \"DONE\""))] {
                let text = harness_toml(agent, budget, promise);
                let config = crate::config::Config::parse(&text, Path::new("harness.toml"))
                    .unwrap_or_else(|err| panic!("{err}\n{text}"));
                assert_eq!(config.agent.command.0, agent.program());
                let live = crate::agent::live_input::LiveInput::of(&config.agent.args);
                assert_eq!(live.is_some(), agent == Agent::Claude);
                assert_eq!(config.completion.promise(), promise);
                assert_eq!(config.guard.max_cost_usd.0 > 0.0, budget.is_some());
                assert!(config.output.event_log.starts_with(STATE_DIR));
                assert!(config.session.output_dir.0.starts_with(STATE_DIR));
                assert!(config.session.counter_file.0.starts_with(STATE_DIR));
                assert!(config.output.status_file.0.starts_with(STATE_DIR));
            }
        }
    }
}
