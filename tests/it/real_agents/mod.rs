//! The pinned real agents, Claude Code and Codex from npm (`tests/agents/real`,
//! installed by `.ci/run` with `npm ci`), and how each is pointed at a local model
//! server: the `harness.toml` that runs it and the environment it needs.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

use crate::common::{Project, cannot_run};
use crate::model_server::ModelServer;

/// Which program, and which of its pinned versions.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Cli {
    Claude(&'static str),
    Codex(&'static str),
}

pub const CLAUDE_VERSIONS: [&str; 2] = ["2.1.332", "2.0.77"];
pub const CODEX_VERSIONS: [&str; 2] = ["0.169.0", "0.101.0"];

fn modules() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/agents/real/node_modules")
}

impl Cli {
    /// The program and the arguments before clowder's own: the native binary for
    /// Claude Code 2.1, `cli.js` under Node for 2.0, and Codex's npm launcher.
    fn program(self) -> Vec<PathBuf> {
        let m = modules();
        match self {
            Cli::Claude("2.0.77") => vec![PathBuf::from("node"), m.join("claude-code-2.0/cli.js")],
            Cli::Claude(_) => vec![m.join("@anthropic-ai/claude-code-linux-x64/claude")],
            Cli::Codex("0.101.0") => vec![m.join("codex-0.101/bin/codex.js")],
            Cli::Codex(_) => vec![m.join("codex-current/bin/codex.js")],
        }
    }

    fn package_json(self) -> PathBuf {
        let m = modules();
        match self {
            Cli::Claude("2.0.77") => m.join("claude-code-2.0/package.json"),
            Cli::Claude(_) => m.join("claude-code-current/package.json"),
            Cli::Codex("0.101.0") => m.join("codex-0.101/package.json"),
            Cli::Codex(_) => m.join("codex-current/package.json"),
        }
    }

    pub fn version(self) -> &'static str {
        match self {
            Cli::Claude(v) | Cli::Codex(v) => v,
        }
    }

    /// Whether the pinned program is installed at the version it claims. Without it
    /// the test says SKIPPED, or fails under CI, where `.ci/run` installs it.
    pub fn installed(self) -> bool {
        let wanted = format!("\"version\": \"{}\"", self.version());
        let found = std::fs::read_to_string(self.package_json())
            .is_ok_and(|text| text.contains(&wanted))
            && self
                .program()
                .iter()
                .skip_while(|p| p.is_relative())
                .all(|p| p.exists());
        if !found {
            cannot_run(&format!(
                "{self:?} is not installed: run `npm ci` in tests/agents/real"
            ));
        }
        found
    }

    /// `[agent]` for `harness.toml`.
    pub fn agent_table(self) -> String {
        let program = self.program();
        let command = program[0].display().to_string();
        let mut args: Vec<String> = program[1..]
            .iter()
            .map(|p| p.display().to_string())
            .collect();
        match self {
            Cli::Claude(_) => args.extend(
                [
                    "-p",
                    "{prompt}",
                    "--dangerously-skip-permissions",
                    "--verbose",
                    "--output-format",
                    "stream-json",
                    "--model",
                    "claude-sonnet-4-5",
                ]
                .map(String::from),
            ),
            Cli::Codex(_) => args.extend(
                [
                    "exec",
                    "--json",
                    "--skip-git-repo-check",
                    "--dangerously-bypass-approvals-and-sandbox",
                    "{prompt}",
                ]
                .map(String::from),
            ),
        }
        let args: Vec<String> = args.iter().map(|a| format!("{a:?}")).collect();
        format!(
            "[agent]\ncommand = {command:?}\nargs = [{}]\n",
            args.join(", ")
        )
    }

    /// Points the agent at `server` and keeps it off the network and out of the
    /// user's own settings: its home is inside the project's temporary folder.
    pub fn environment(self, project: &Project, server: &ModelServer) -> Vec<(String, String)> {
        let home = project.path("home");
        let _ = std::fs::create_dir_all(&home);
        let mut env = vec![
            ("HOME".to_string(), home.display().to_string()),
            ("NO_PROXY".into(), "127.0.0.1".into()),
        ];
        match self {
            Cli::Claude(_) => {
                env.extend(
                    [
                        ("ANTHROPIC_BASE_URL", server.base_url()),
                        ("ANTHROPIC_API_KEY", "sk-ant-local-test".into()),
                        ("IS_SANDBOX", "1".into()),
                        ("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1".into()),
                        ("DISABLE_TELEMETRY", "1".into()),
                        ("DISABLE_AUTOUPDATER", "1".into()),
                        ("DISABLE_ERROR_REPORTING", "1".into()),
                    ]
                    .map(|(k, v)| (k.to_string(), v)),
                );
            }
            Cli::Codex(_) => {
                let codex_home = home.join(".codex");
                let _ = std::fs::create_dir_all(&codex_home);
                let config = format!(
                    "model = \"gpt-5-codex\"\nmodel_provider = \"local\"\n\n[model_providers.local]\nname = \"local\"\nbase_url = \"{}/v1\"\nwire_api = \"responses\"\nenv_key = \"LOCAL_MODEL_KEY\"\nrequest_max_retries = 0\nstream_max_retries = 5\n",
                    server.base_url()
                );
                let _ = std::fs::write(codex_home.join("config.toml"), config);
                env.extend(
                    [
                        ("CODEX_HOME", codex_home.display().to_string()),
                        ("LOCAL_MODEL_KEY", "sk-local-test".into()),
                    ]
                    .map(|(k, v)| (k.to_string(), v)),
                );
            }
        }
        env
    }
}

/// A model server of the API `cli` speaks: Anthropic's for Claude Code,
/// OpenAI's Responses for Codex.
pub fn model_server(cli: Cli) -> ModelServer {
    match cli {
        Cli::Claude(_) => crate::model_server::anthropic::start(),
        Cli::Codex(_) => crate::model_server::openai::start(),
    }
}

/// The tool results `cli` sent back to `server`.
pub fn tool_results(cli: Cli, server: &ModelServer) -> Vec<crate::model_server::ToolResult> {
    match cli {
        Cli::Claude(_) => crate::model_server::anthropic::tool_results(server),
        Cli::Codex(_) => crate::model_server::openai::tool_results(server),
    }
}

/// A `clowder` command in `project` whose agent reaches `server`.
pub fn clowder(
    cli: Cli,
    server: &ModelServer,
    project: &Project,
    args: &[&str],
) -> std::process::Command {
    let mut command = project.command(args);
    for (key, value) in cli.environment(project, server) {
        command.env(key, value);
    }
    command
}

/// Runs `clowder` to its end; generous, since only a broken run takes long.
pub fn run(
    cli: Cli,
    server: &ModelServer,
    project: &Project,
    args: &[&str],
) -> std::process::Output {
    let child = clowder(cli, server, project, args)
        .spawn()
        .expect("spawn clowder");
    crate::common::wait_with_deadline(child, std::time::Duration::from_secs(180))
}

/// A `harness.toml` running Claude Code `cli` as `clowder init --agent claude`
/// sets it up: with stream-json input, so that a note reaches a running
/// session; `backoff` is the pause between sessions, `extra` as in [`config`].
pub fn live_input_config(cli: Cli, backoff: f64, extra: &str) -> String {
    let program = cli.program();
    let mut args: Vec<String> = program[1..]
        .iter()
        .map(|p| p.display().to_string())
        .collect();
    args.extend(
        [
            "-p",
            "--input-format",
            "stream-json",
            "--output-format",
            "stream-json",
            "--replay-user-messages",
            "--verbose",
            "--dangerously-skip-permissions",
            "--model",
            "claude-sonnet-4-5",
        ]
        .map(String::from),
    );
    let args: Vec<String> = args.iter().map(|a| format!("{a:?}")).collect();
    format!(
        "[agent]\ncommand = {:?}\nargs = [{}]\n\n[backoff]\ninitial_delay_secs = {backoff}\n\n[retry]\nretry_delay_secs = 0.05\n\n{extra}\n",
        program[0].display().to_string(),
        args.join(", ")
    )
}

/// A `harness.toml` running `cli` with short pauses between sessions, plus `extra`
/// (whole tables that the base does not have: `[completion]`, `[watchdog]`, …).
pub fn config(cli: Cli, extra: &str) -> String {
    format!(
        "{}\n[backoff]\ninitial_delay_secs = 0.05\nmax_delay_secs = 0.5\n\n[retry]\nretry_delay_secs = 0.05\n\n{extra}\n",
        cli.agent_table()
    )
}

/// The shell command of a control-room test: `clowder ARGS` with the agent's
/// environment, then `then` (e.g. `"echo CLOWDER_EXIT=$?; "`), then a sleep that
/// keeps the pane readable.
pub fn room_command(
    cli: Cli,
    server: &ModelServer,
    project: &Project,
    args: &[&str],
    then: &str,
) -> String {
    let quote = |s: &str| {
        shlex::try_quote(s)
            .map(|q| q.into_owned())
            .unwrap_or_default()
    };
    let env: Vec<String> = cli
        .environment(project, server)
        .iter()
        .map(|(k, v)| format!("{k}={}", quote(v)))
        .collect();
    let args: Vec<String> = args.iter().map(|a| quote(a)).collect();
    format!(
        "env {} {} {}; {then}sleep 600",
        env.join(" "),
        quote(&crate::common::clowder_bin().display().to_string()),
        args.join(" ")
    )
}

/// Presses `key` until the screen shows its effect. Under CI's load the room was
/// once seen to ignore an `r` sent right after the request appeared (the cause is
/// not known yet); pressing again keeps this test about the gate.
pub fn press_until(tmux: &crate::common::tmux::Tmux, key: &str, done: impl Fn(&str) -> bool) {
    for _ in 0..6 {
        tmux.keys(&[key]);
        if crate::common::wait_until(std::time::Duration::from_secs(10), || done(&tmux.screen())) {
            return;
        }
    }
    panic!("`{key}` had no effect; last screen:\n{}", tmux.screen());
}

/// One test per pinned version of each scenario, side by side, each failing
/// under its own name: `current::NAME` and `older::NAME` call `NAME(cli)`.
macro_rules! per_version {
    ($program:ident, $versions:ident: $($name:ident),* $(,)?) => {
        mod current {
            $( #[test] fn $name() {
                super::$name(crate::real_agents::Cli::$program(crate::real_agents::$versions[0]))
            } )*
        }
        mod older {
            $( #[test] fn $name() {
                super::$name(crate::real_agents::Cli::$program(crate::real_agents::$versions[1]))
            } )*
        }
    };
}
pub(crate) use per_version;
