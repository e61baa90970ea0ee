//! The gate a loop hands its agent on the command line: Claude Code gets the
//! `clowder gate` PreToolUse hook through `--settings`, Codex through `-c`
//! overrides. A hook written in a file of the agent's folder may be missing (a
//! lane's worktree is made from HEAD, and `.claude/settings.json` is seldom
//! committed) or edited away by the agent itself; the command line is neither.
//! The gate is handed once the project asks for it: a `clowder gate` hook
//! registered in its (for lanes: the fleet root's) or the user's settings.
//!
//! A hook registered in a settings file as well would run the gate twice, and a
//! person would be asked twice. So the agent's environment says that the loop
//! handed it the gate ([`HANDED_ENV`]), and a `clowder gate` started without
//! [`HANDED_FLAG`] then steps aside: it answers nothing, and the handed one decides.

use std::path::Path;

use super::{claude_hook, codex_hook};
use crate::config::AgentConfig;

/// Set in the agent's environment when its loop handed it the gate.
pub const HANDED_ENV: &str = "CLOWDER_GATE_HANDED";
/// The `clowder gate` flag that marks the handed registration.
pub const HANDED_FLAG: &str = "--handed";

/// What a loop does about its agent's gate.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Handover {
    /// Inserted into the agent's arguments at `at`.
    pub args: Vec<String>,
    pub at: usize,
    /// Added to the agent's environment.
    pub env: Vec<(String, String)>,
    /// Why the agent's tool calls do not reach the gate, when they do not.
    pub ungated: Option<String>,
}

impl Handover {
    /// The session's arguments (the `{prompt}` already in) with the gate's own.
    pub fn apply(&self, mut args: Vec<String>) -> Vec<String> {
        let at = self.at.min(args.len());
        args.splice(at..at, self.args.iter().cloned());
        args
    }

    fn ungated(why: String) -> Handover {
        Handover {
            ungated: Some(why),
            ..Handover::default()
        }
    }
}

/// The agents whose hooks clowder knows how to hand over.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Known {
    /// Claude Code; its arguments start at this index (after `cli.js` when it
    /// runs under Node).
    Claude(usize),
    Codex,
}

/// Which agent `agent` runs, when it is recognisably Claude Code or Codex: the
/// program's name, or Claude Code's `cli.js` run by Node.
fn recognise(agent: &AgentConfig) -> Option<Known> {
    let program = Path::new(agent.command.0.as_str()).file_name()?;
    if program == "claude" {
        return Some(Known::Claude(0));
    }
    // `codex` on PATH, or the npm package's launcher run by its own path.
    if program == "codex" || program == "codex.js" {
        return Some(Known::Codex);
    }
    let script = agent.args.first()?;
    let script = Path::new(script);
    let package = script.parent()?.join("package.json");
    let is_claude_package = script.file_name().is_some_and(|n| n == "cli.js")
        && crate::store::small_file::read_to_string(&package)
            .ok()
            .and_then(|text| serde_json::from_str::<serde_json::Value>(&text).ok())
            .is_some_and(|json| json["name"] == "@anthropic-ai/claude-code");
    is_claude_package.then_some(Known::Claude(1))
}

/// What the loop whose agent is `agent`, in the project `project` (a fleet's
/// root, for its lanes), hands it. The gate is handed once the project asks for
/// it: `clowder gate` registered as a PreToolUse hook in the project's or the
/// user's settings for that agent (`clowder init` writes it). An agent that is
/// neither Claude Code nor Codex gets nothing and is not called ungated: whether
/// it asks the gate is its own business.
pub fn handover(agent: &AgentConfig, project: &Path) -> Handover {
    let Some(known) = recognise(agent) else {
        return Handover::default();
    };
    if known == Known::Codex
        && let Some(version) = codex_hook::version_without_hooks(&agent.command.0, project)
    {
        return Handover::ungated(format!(
            "Codex {version} runs no hooks (they came in 0.124): its tool calls are not gated"
        ));
    }
    if let Some(why) = not_opted_in(known, project) {
        return Handover::ungated(why);
    }
    let command = match codex_hook::gate_command() {
        Ok(command) => format!("{command} {HANDED_FLAG}"),
        Err(err) => return Handover::ungated(format!("cannot hand the agent its gate: {err}")),
    };
    match known {
        Known::Claude(at) => claude(agent, at, &command),
        Known::Codex => codex(agent, &command),
    }
}

/// Why the project has not asked for the gate, when it has not.
fn not_opted_in(known: Known, project: &Path) -> Option<String> {
    match known {
        Known::Claude(_) => {
            let home = std::env::var_os("HOME").filter(|h| !h.is_empty());
            let user = home.map(|h| Path::new(&h).join(claude_hook::CLAUDE_SETTINGS));
            let files = [
                Some(project.join(claude_hook::CLAUDE_SETTINGS)),
                Some(project.join(".claude/settings.local.json")),
                user,
            ];
            let asked = files
                .iter()
                .flatten()
                .any(|file| codex_hook::json_registers(file));
            (!asked).then(|| format!(
                "no `clowder gate` PreToolUse hook is registered for Claude Code ({}); run `clowder init --claude-hook --write`",
                claude_hook::CLAUDE_SETTINGS
            ))
        }
        Known::Codex => {
            let in_user =
                codex_hook::codex_home().is_some_and(|h| codex_hook::folder_registers(&h));
            let asked = in_user || codex_hook::folder_registers(&project.join(".codex"));
            (!asked).then(|| format!(
                "no `clowder gate` PreToolUse hook is registered for Codex ({}); run `clowder init --codex-hook --write`",
                codex_hook::CONFIG
            ))
        }
    }
}

fn has(agent: &AgentConfig, flag: &str) -> bool {
    agent
        .args
        .iter()
        .any(|a| a == flag || a.starts_with(&format!("{flag}=")))
}

fn handed_env() -> Vec<(String, String)> {
    vec![(HANDED_ENV.to_string(), "1".to_string())]
}

fn claude(agent: &AgentConfig, at: usize, command: &str) -> Handover {
    if has(agent, "--bare") {
        return Handover::ungated(
            "Claude Code runs no hooks with --bare in [agent] args: its tool calls are not gated"
                .into(),
        );
    }
    if has(agent, "--settings") {
        return Handover::ungated(
            "[agent] args pass Claude Code their own --settings, and clowder cannot hand it the gate beside them: put the `clowder gate` hook (`clowder init --claude-hook`) in that settings file"
                .into(),
        );
    }
    Handover {
        args: vec!["--settings".into(), claude_settings(command)],
        at,
        env: handed_env(),
        ungated: None,
    }
}

/// The settings handed to Claude Code: the hook, and hooks switched on, since
/// `disableAllHooks` in a settings file the agent can write would silence it.
pub fn claude_settings(command: &str) -> String {
    let mut entry = claude_hook::claude_hook_entry();
    entry["hooks"][0]["command"] = serde_json::Value::from(command);
    serde_json::json!({
        "disableAllHooks": false,
        "hooks": { "PreToolUse": [entry] }
    })
    .to_string()
}

/// Codex gets the hook as a `-c` override (which no project trust gates), and
/// the flag that runs it unreviewed, right after `exec`.
fn codex(agent: &AgentConfig, command: &str) -> Handover {
    let Some(exec) = agent.args.iter().position(|a| a == "exec" || a == "e") else {
        return Handover::ungated(
            "[agent] args run no `codex exec`, and clowder hands the gate only to `codex exec`"
                .into(),
        );
    };
    let mut args = vec!["-c".to_string(), codex_override(command)];
    if !has(agent, codex_hook::BYPASS_TRUST) {
        args.push(codex_hook::BYPASS_TRUST.to_string());
    }
    Handover {
        args,
        at: exec + 1,
        env: handed_env(),
        ungated: None,
    }
}

/// `hooks.PreToolUse=[…]`: the entry `clowder init --codex-hook` writes, as
/// one inline TOML value.
pub fn codex_override(command: &str) -> String {
    let mut handler = toml_edit::InlineTable::new();
    handler.insert("type", "command".into());
    handler.insert("command", command.into());
    handler.insert("timeout", codex_hook::TIMEOUT_SECS.into());
    let mut handlers = toml_edit::Array::new();
    handlers.push(handler);
    let mut group = toml_edit::InlineTable::new();
    group.insert("matcher", codex_hook::MATCHER.into());
    group.insert("hooks", toml_edit::Value::Array(handlers));
    let mut groups = toml_edit::Array::new();
    groups.push(group);
    format!("hooks.PreToolUse={groups}")
}

/// Whether this `clowder gate` should step aside: its loop handed the agent
/// the gate, and this one is not that registration.
pub fn steps_aside(handed_flag: bool) -> bool {
    !handed_flag && std::env::var_os(HANDED_ENV).is_some_and(|v| !v.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn agent(command: &str, args: &[&str]) -> AgentConfig {
        AgentConfig {
            command: crate::config::NonEmptyString(command.into()),
            args: args.iter().map(|a| a.to_string()).collect(),
            format: crate::agent::stream::AgentFormat::Auto,
        }
    }

    #[test]
    fn claude_gets_its_settings_first_and_other_agents_nothing() {
        let dir = tempfile::tempdir().expect("tempdir");
        let here = dir.path();
        let unasked = handover(&agent("/usr/bin/claude", &["-p", "{prompt}"]), here);
        assert!(unasked.args.is_empty() && unasked.ungated.is_some());
        let settings = here.join(claude_hook::CLAUDE_SETTINGS);
        claude_hook::merge_hook(&settings, "/x/clowder gate").expect("hook written");
        let handed = handover(&agent("/usr/bin/claude", &["-p", "{prompt}"]), here);
        assert_eq!(handed.at, 0);
        assert_eq!(handed.args[0], "--settings");
        let settings: serde_json::Value = serde_json::from_str(&handed.args[1]).expect("json");
        assert_eq!(settings["disableAllHooks"], false);
        let command = settings["hooks"]["PreToolUse"][0]["hooks"][0]["command"]
            .as_str()
            .expect("command");
        // This test's own program, which is not named clowder, runs the gate.
        assert!(command.ends_with(" gate --handed"), "{command}");
        assert_eq!(
            handed.apply(vec!["-p".into(), "do it".into()])[2..],
            ["-p", "do it"]
        );
        assert_eq!(handed.env, [(HANDED_ENV.to_string(), "1".to_string())]);
        assert_eq!(
            handover(&agent("aider", &["{prompt}"]), here),
            Handover::default()
        );
        let bare = handover(&agent("claude", &["--bare", "-p", "{prompt}"]), here);
        assert!(bare.args.is_empty() && bare.ungated.is_some());
    }

    #[test]
    fn codex_gets_its_override_after_exec() {
        let dir = tempfile::tempdir().expect("tempdir");
        // No such program: its version says nothing, so it is taken to run hooks.
        let codex = dir.path().join("codex");
        codex_hook::merge(&dir.path().join(codex_hook::CONFIG), "/x/clowder gate")
            .expect("hook written");
        let handed = handover(
            &agent(
                &codex.display().to_string(),
                &["exec", "--json", "{prompt}"],
            ),
            dir.path(),
        );
        assert_eq!(handed.at, 1, "{handed:?}");
        assert_eq!(handed.args[0], "-c");
        assert_eq!(handed.args[2], codex_hook::BYPASS_TRUST);
        let (key, value) = handed.args[1].split_once('=').expect("key=value");
        assert_eq!(key, "hooks.PreToolUse");
        let doc: toml_edit::DocumentMut = format!("v = {value}").parse().expect("toml");
        let group = &doc["v"][0];
        assert_eq!(group["matcher"].as_str(), Some(codex_hook::MATCHER));
        let command = group["hooks"][0]["command"].as_str().expect("command");
        assert!(command.ends_with(" gate --handed"), "{command}");
    }
}
