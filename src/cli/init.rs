//! `clowder init`: sets up a project (see `project`), or with `--claude-hook` /
//! `--codex-hook` prints or merges only the agent's gate hook.

use std::path::Path;

use clap::Args;

use crate::approvals::commands::EXIT_ERROR;
use crate::approvals::{claude_hook, escape};

#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("hook").args(["claude_hook", "codex_hook"])))]
pub struct InitArgs {
    /// Print the Claude Code hook that sends Bash, Edit and Write calls through `clowder gate`
    #[arg(long = "claude-hook")]
    pub claude_hook: bool,
    /// Print the Codex hook (0.124 and later) that sends Bash and apply_patch calls through `clowder gate`
    #[arg(long = "codex-hook")]
    pub codex_hook: bool,
    /// Merge the hook into .claude/settings.json (or .codex/config.toml) instead of printing it
    #[arg(long = "write", requires = "hook")]
    pub write: bool,
    /// Without a hook flag: the agent the project runs (default: claude if on PATH, else codex)
    #[arg(long = "agent", value_enum, conflicts_with = "hook")]
    pub agent: Option<super::project::Agent>,
    /// Without a hook flag: the run's budget in USD (`[guard] max_cost_usd`)
    #[arg(long = "budget", value_name = "USD", conflicts_with = "hook")]
    pub budget: Option<f64>,
    /// Without a hook flag: the word that ends the run once the agent says it (`[completion] promise`)
    #[arg(long = "promise", value_name = "WORD", conflicts_with = "hook")]
    pub promise: Option<String>,
}

/// Why Codex may not run the hook, and what to do: said by `init --codex-hook`.
const CODEX_TRUST_NOTE: &str = "\
# A clowder loop or lane hands its `codex exec` this hook itself (-c, with
# --dangerously-bypass-hook-trust), whatever this file says. Run by hand, Codex runs the
# hook only when two things are trusted, and skips it in silence otherwise:
#  - the project: Codex ignores .codex/config.toml in a folder it does not trust; trust it
#    once with `codex exec --trust` (or trust_level = \"trusted\" under [projects] in ~/.codex/config.toml);
#  - the hook: trust it once in `codex` (/hooks), or put --dangerously-bypass-hook-trust on
#    the `codex exec` line. That trust is saved by the entry's hash: a changed entry
#    (clowder at another path) needs it again.
# Codex before 0.124 has no hooks: its calls are not gated.";

/// `clowder init --claude-hook|--codex-hook [--write]`.
pub fn init(args: InitArgs) -> i32 {
    if !args.claude_hook && !args.codex_hook {
        return super::project::init(args.agent, args.budget, args.promise);
    }
    if args.codex_hook {
        return init_codex(args.write);
    }
    if !args.write {
        println!("{}", claude_hook::CLAUDE_HOOK_SNIPPET);
        return 0;
    }
    let path = Path::new(claude_hook::CLAUDE_SETTINGS);
    match claude_hook::merge_hook(path, "clowder gate") {
        Ok(true) => {
            println!(
                "clowder: added the `clowder gate` PreToolUse hook to {}",
                path.display()
            );
            0
        }
        Ok(false) => {
            println!(
                "clowder: {} already runs `clowder gate`; nothing changed",
                path.display()
            );
            0
        }
        Err(err) => {
            eprintln!("clowder init: error: {}", escape(&err));
            EXIT_ERROR
        }
    }
}

/// `clowder init --codex-hook [--write]`: prints the entry (valid TOML, the
/// note in comments), or merges it into the project's `.codex/config.toml`.
fn init_codex(write: bool) -> i32 {
    use crate::approvals::codex_hook;
    let command = match codex_hook::gate_command() {
        Ok(command) => command,
        Err(err) => {
            eprintln!("clowder init: error: {}", escape(&err));
            return EXIT_ERROR;
        }
    };
    if !write {
        println!(
            "# {}: the `clowder gate` PreToolUse hook",
            codex_hook::CONFIG
        );
        print!("{}", codex_hook::snippet(&command));
        println!("{CODEX_TRUST_NOTE}");
        return 0;
    }
    let path = Path::new(codex_hook::CONFIG);
    match codex_hook::merge(path, &command) {
        Ok(added) => {
            if added {
                println!(
                    "clowder: added the `clowder gate` PreToolUse hook ({}) to {}",
                    escape(&command),
                    path.display()
                );
            } else {
                println!(
                    "clowder: {} already runs `clowder gate`; nothing changed",
                    path.display()
                );
            }
            println!("{CODEX_TRUST_NOTE}");
            0
        }
        Err(err) => {
            eprintln!("clowder init: error: {}", escape(&err));
            EXIT_ERROR
        }
    }
}
