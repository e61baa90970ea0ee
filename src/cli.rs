//! The command line: flags compatible with the shell loops clowder replaces, and
//! what each mode does (`--status`, `--dry-run`, the loop itself).

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::time::Instant;

use clap::{Parser, Subcommand};

use crate::approvals::commands as approvals;
use crate::config::{Config, DEFAULT_CONFIG_FILE, Overrides};
use crate::console::{Console, Verbosity, summary_line};
use crate::store::status;
use crate::supervisor::runtime::{Runtime, RuntimeOptions};

mod attach;
mod attach_room;
mod demo;
mod init;
mod meta;
mod project;
mod serve;

/// Exit code for bad command-line input or configuration: nothing was run.
pub const EXIT_USAGE: i32 = 2;

#[derive(Debug, Parser)]
#[command(
    name = "clowder",
    version,
    args_conflicts_with_subcommands = true,
    about = "Run a coding agent session after session, under a watchdog",
    long_about = "Run a coding agent (claude -p, codex exec, aider, any program) session after session, \
under a watchdog: stale sessions are killed, empty ones retried, rate limits backed off, \
hooks run, and a status file and an event log kept.\n\n\
Reads harness.toml and PROMPT.md from the current folder. Touch STOP to stop after the \
current session; Ctrl-C once finishes the session, twice within 3 s kills it.",
    after_help = "Exit codes: 0 done (max iterations, STOP file, user stop), 1 fatal error, \
2 bad configuration or usage, 3 too many rate limits in a row, 4 a run budget ([guard] max_cost_usd, \
max_runtime) reached, 130/143/129 stopped by SIGINT/SIGTERM/SIGHUP."
)]
pub struct Args {
    /// Productive iterations to run (overrides session.max_iterations)
    #[arg(value_name = "MAX_ITERATIONS")]
    pub max_iterations: Option<u64>,

    /// Config file [default: harness.toml, optional]
    #[arg(short = 'c', long = "config", value_name = "PATH")]
    pub config: Option<PathBuf>,

    /// Prompt file (overrides session.prompt_file)
    #[arg(short = 'p', long = "prompt", value_name = "PATH")]
    pub prompt: Option<PathBuf>,

    /// Folder for the session output files (overrides session.output_dir)
    #[arg(short = 'o', long = "output-dir", value_name = "PATH")]
    pub output_dir: Option<PathBuf>,

    /// Minutes without output before a session is killed (overrides watchdog.stale_timeout_mins)
    #[arg(long = "timeout", value_name = "MINS")]
    pub timeout: Option<f64>,

    /// Retries of a session that produced nothing (overrides retry.max_empty_retries)
    #[arg(long = "retries", value_name = "N")]
    pub retries: Option<u32>,

    /// Check the configuration, print the resolved settings, and exit
    #[arg(long = "dry-run")]
    pub dry_run: bool,

    /// Show the agent's output between the log lines
    #[arg(short = 'v', long = "verbose", conflicts_with = "quiet")]
    pub verbose: bool,

    /// Print only errors and the summary line
    #[arg(short = 'q', long = "quiet")]
    pub quiet: bool,

    /// Print the state of the loop running in this folder (from harness.status)
    #[arg(long = "status")]
    pub status: bool,

    /// With --status: print the raw status JSON
    #[arg(long = "json", requires = "status")]
    pub json: bool,

    /// As a fleet host: keep running and serving after every lane has ended,
    /// start lanes added or resumed later, until SIGTERM (a host on a server)
    #[arg(long = "stay", requires = "headless")]
    pub stay: bool,

    /// Print log lines instead of opening the control room
    #[arg(long = "headless")]
    pub headless: bool,

    #[command(subcommand)]
    pub command: Option<Command>,
}

/// The approval queue's subcommands (see README, "Approvals").
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Claude Code PreToolUse hook: queue the tool call and wait for a human's decision
    Gate(approvals::GateArgs),
    /// List the pending approval requests
    Queue(approvals::QueueArgs),
    /// Approve a pending request
    Approve(approvals::ApproveArgs),
    /// Reject a pending request; the reason is passed to the agent
    Reject(approvals::RejectArgs),
    /// Ask a human a yes/no question: exit 0 approved, 1 rejected, 3 timed out
    Ask(approvals::AskArgs),
    /// Set up a project here (harness.toml, PROMPT.md, the gate hook); `--claude-hook`/`--codex-hook` print (or with --write merge) only the hook
    Init(init::InitArgs),
    /// Pause the session of the loop running in this folder (SIGSTOP to its process group)
    Pause,
    /// Resume a paused session, or a loop held by a rejected session gate
    Resume,
    /// Leave a note for the next session of the loop in this folder (at the top of its prompt)
    Tell(TellArgs),
    /// Print a shell completion script (see docs/getting-started.md for where to install it)
    Completions {
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Print the man page (roff), e.g. `clowder man > clowder.1`
    Man,
    /// Run the fleet demo: three lanes of a demo agent in a scratch repository, target/demo/fleet
    Demo(demo::DemoArgs),
    /// About harness.toml itself
    #[command(subcommand)]
    Config(meta::ConfigCommand),
    #[command(flatten)]
    Fleet(crate::fleet::cli::FleetCommand),
    /// Plans: steps with dependencies, each run as a lane (check, run, status, pause, resume, stop, merge, retry, rm)
    #[command(subcommand)]
    Plan(crate::plan::cli::PlanCommand),
    /// Run a task directory's JSON-actions loop: the LLM answers, sandboxed file tools act
    Worker(crate::worker::cli::WorkerArgs),
    /// Make (`new`) or stop (`stop`) a task directory
    Task(crate::worker::cli::TaskArgs),
    /// List tasks: status, iteration, heartbeat age, last action
    Tasks(crate::worker::cli::TasksArgs),
    /// Open the control room on a running host: a folder, ssh://host/path, or --via 'COMMAND'
    Attach(attach::AttachArgs),
    /// Serve the web inbox: see the fleet and decide its requests from a browser or a phone
    Serve(serve::ServeArgs),
}

#[derive(Debug, clap::Args)]
pub struct TellArgs {
    /// The note; several words are joined with spaces
    #[arg(value_name = "TEXT", required = true, num_args = 1..)]
    pub text: Vec<String>,
}

/// Runs clowder with the process's arguments and returns the exit code.
pub fn main() -> i32 {
    crate::fleet::actions::set_lane_merge(crate::plan::lane_merge::LANE_MERGE);
    crate::console::exit_on_failed_stdout();
    let args = parse_args(std::env::args_os().collect());
    init_diagnostics();
    run(args)
}

/// Parses the command line; a mistyped subcommand gets clap's suggestion
/// rather than the positional number's "invalid value".
fn parse_args(argv: Vec<std::ffi::OsString>) -> Args {
    use clap::{CommandFactory, FromArgMatches};
    let err = match Args::command().try_get_matches_from(&argv) {
        Ok(matches) => match Args::from_arg_matches(&matches) {
            Ok(args) => return args,
            Err(err) => err,
        },
        Err(err) => err,
    };
    if err.kind() == clap::error::ErrorKind::ValueValidation {
        // The same command without a positional slot: clap then reads the word
        // as a subcommand and suggests the nearest one, when one is near.
        let usage = Args::command().render_usage().to_string();
        let without_number = Args::command()
            .mut_arg("max_iterations", |arg| {
                arg.long("max-iterations").hide(true)
            })
            .override_usage(usage.trim_start_matches("Usage: ").to_string());
        if let Err(as_subcommand) = without_number.try_get_matches_from(&argv)
            && as_subcommand
                .get(clap::error::ContextKind::SuggestedSubcommand)
                .is_some()
        {
            as_subcommand.exit();
        }
    }
    err.exit()
}

/// clowder's own diagnostics go to the file named by `CLOWDER_LOG`, never to the
/// screen (the console and the control room belong to the loop).
fn init_diagnostics() {
    let Some(path) = std::env::var_os("CLOWDER_LOG") else {
        return;
    };
    let file = match std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
    {
        Ok(file) => file,
        Err(err) => {
            eprintln!(
                "clowder: warning: cannot open CLOWDER_LOG file {}: {err}",
                PathBuf::from(&path).display()
            );
            return;
        }
    };
    let filter = tracing_subscriber::EnvFilter::try_from_env("CLOWDER_LOG_LEVEL")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(false)
        .with_writer(std::sync::Mutex::new(file))
        .try_init();
}

pub fn run(args: Args) -> i32 {
    if let Some(command) = args.command {
        return run_command(command);
    }
    let cwd = match std::env::current_dir() {
        Ok(cwd) => cwd,
        Err(err) => {
            eprintln!("clowder: error: cannot read the current folder: {err}");
            return 1;
        }
    };
    let (config_path, required) = match &args.config {
        Some(path) => (path.clone(), true),
        None => (PathBuf::from(DEFAULT_CONFIG_FILE), false),
    };

    let has_lanes = match crate::fleet::host::has_lanes(&cwd) {
        Ok(has_lanes) => has_lanes,
        Err(err) => {
            eprintln!("clowder: error: {err}");
            return EXIT_USAGE;
        }
    };
    if args.status && has_lanes {
        return crate::fleet::status::print(&cwd, args.json);
    }
    if args.status {
        return print_status(&status_path(&cwd, &config_path, required), args.json);
    }
    // A host already runs here (detached, or headless): the room attaches to it.
    let interactive = !args.headless && !args.dry_run && std::io::stdout().is_terminal();
    if interactive && crate::fleet::serve::check_served(&cwd).is_ok() {
        let here = crate::ui::HostTarget {
            name: None,
            target: crate::fleet::remote::Target::Folder(cwd),
        };
        return crate::ui::run_attached(vec![here]);
    }

    let mut config = match Config::load(&config_path, required) {
        Ok(config) => config,
        Err(err) => {
            eprintln!("clowder: error: {err}");
            eprintln!("clowder: nothing was run");
            return EXIT_USAGE;
        }
    };
    let overrides = Overrides {
        max_iterations: args.max_iterations,
        prompt_file: args.prompt.clone(),
        output_dir: args.output_dir.clone(),
        stale_timeout_mins: args.timeout,
        max_empty_retries: args.retries,
    };
    if let Err(err) = config.apply(&overrides) {
        eprintln!("clowder: error: {err}");
        eprintln!("clowder: nothing was run");
        return EXIT_USAGE;
    }
    if !args.dry_run && (has_lanes || args.stay) {
        return run_fleet(config, cwd, &args);
    }
    let problem = preflight(&config, &cwd).err();
    // The agent would be given the placeholder: said before the settings and at start.
    if let Some(warning) = project::template_warning(config.prompt_path()) {
        eprintln!("clowder: warning: {warning}");
    }
    if args.dry_run {
        // The settings are worth seeing even when the agent or prompt is missing.
        let printed = print_dry_run(&config, &config_path, required, &cwd);
        if printed != 0 {
            return printed;
        }
    }
    if let Some(problem) = problem {
        eprintln!("clowder: error: {problem}");
        eprintln!("clowder: nothing was run");
        return EXIT_USAGE;
    }
    if args.dry_run {
        return 0;
    }
    if let Some(why) = crate::approvals::handed::handover(&config.agent, &cwd).ungated {
        eprintln!("clowder: warning: ungated: {why}");
    }

    // One loop per folder; held until this function returns (or the process dies).
    let mut lock = match crate::store::lock::InstanceLock::acquire(&cwd) {
        Ok(lock) => lock,
        Err(err) => {
            eprintln!("clowder: error: {err}");
            eprintln!("clowder: nothing was run");
            return EXIT_USAGE;
        }
    };
    crate::store::status_pointer::record(&cwd, &config.loop_files(&cwd).status);
    let headless = args.headless || !std::io::stdout().is_terminal();
    if !headless {
        let format = config.agent.format;
        // The shell waits for a parent that only waits, so that quitting the
        // control room can leave the loop running (see `detach`).
        let detacher = crate::detach::fork_waiter();
        if detacher.is_some() {
            let _ = lock.write_holder();
        }
        return crate::ui::run(config, config_path, cwd, format, detacher);
    }
    let verbosity = if args.quiet {
        Verbosity::Quiet
    } else if args.verbose {
        Verbosity::Verbose
    } else {
        Verbosity::Normal
    };
    run_headless(config, cwd, verbosity)
}

/// The status file `--status` reads: that of the config named with `-c`; else
/// that of the loop last started here (with `-c` or not); else harness.toml's.
fn status_path(cwd: &Path, config_path: &Path, required: bool) -> PathBuf {
    if !required && let Some(recorded) = crate::store::status_pointer::recorded(cwd) {
        return recorded;
    }
    // A broken config must not hide the status of a loop that is running.
    let config = Config::load(config_path, required).unwrap_or_default();
    config.loop_files(cwd).status
}

/// Leaves a request for the loop running in this folder, which takes it within
/// a second; refused when no loop runs here.
fn send_control(request: &str) -> i32 {
    let cwd = match std::env::current_dir() {
        Ok(cwd) => cwd,
        Err(err) => {
            eprintln!("clowder: error: cannot read the current folder: {err}");
            return 1;
        }
    };
    // Taking the lock means nobody holds it: there is no loop to tell.
    if crate::store::lock::InstanceLock::acquire(&cwd).is_ok() {
        eprintln!("clowder: error: no clowder loop is running in this folder");
        return 1;
    }
    match crate::store::control::request(&cwd, request) {
        Ok(path) => {
            println!("clowder: asked the loop to {request} ({})", path.display());
            0
        }
        Err(err) => {
            eprintln!("clowder: error: {err}");
            1
        }
    }
}

fn run_command(command: Command) -> i32 {
    if only_lists(&command) {
        die_quietly_on_closed_pipe();
    }
    match command {
        Command::Fleet(fleet) => crate::fleet::cli::run(fleet),
        Command::Plan(args) => crate::plan::cli::run(args, crate::ui::run_fleet_with),
        Command::Pause => send_control(crate::store::control::PAUSE_REQUEST),
        Command::Resume => send_control(crate::store::control::RESUME_REQUEST),
        Command::Tell(args) => crate::fleet::tell::run(&args.text),
        Command::Completions { shell } => meta::completions(shell),
        Command::Man => meta::man(),
        Command::Demo(args) => demo::run(args),
        Command::Config(command) => meta::config(command),
        Command::Worker(args) => crate::worker::cli::worker(args),
        Command::Task(args) => crate::worker::cli::task(args),
        Command::Tasks(args) => crate::worker::cli::tasks(args),
        Command::Attach(args) => attach::run(args),
        Command::Serve(args) => serve::run(args),
        // The gate reads the config itself (a broken one must deny, not fail open).
        Command::Gate(args) => approvals::gate(args),
        Command::Init(args) => init::init(args),
        Command::Queue(mut args) => match resolve_queue_dir(&mut args.dir) {
            Ok(()) => {
                let listed = host_of(&args.dir).map(|host| {
                    let requests = host.snapshot.requests.into_iter();
                    requests
                        .map(crate::fleet::wire::PendingRequest::into_request)
                        .collect()
                });
                approvals::queue(args, listed, &|requests| {
                    crate::fleet::request_lane::attribute(Path::new("."), requests)
                })
            }
            Err(code) => code,
        },
        Command::Approve(mut args) => match resolve_queue_dir(&mut args.dir) {
            Ok(()) => decide(
                &args.dir,
                &args.id,
                crate::approvals::Decision::Approve,
                args.reason,
            ),
            Err(code) => code,
        },
        Command::Reject(mut args) => match resolve_queue_dir(&mut args.dir) {
            Ok(()) => decide(
                &args.dir,
                &args.id,
                crate::approvals::Decision::Reject(args.reason),
                None,
            ),
            Err(code) => code,
        },
        Command::Ask(mut args) => match resolve_queue_dir(&mut args.dir) {
            Ok(()) => approvals::ask(args),
            Err(code) => code,
        },
    }
}

/// The host serving this folder, when the queue is its own (no `--dir`).
fn host_of(dir: &approvals::DirArg) -> Option<crate::fleet::client::Client> {
    dir.given
        .is_none()
        .then(|| crate::fleet::client::connect(Path::new(".")))
        .flatten()
}

/// `clowder approve` / `reject`: through the host serving this folder, which
/// writes the decision as the CLI would; else, or when the host refuses it,
/// on the files, which say why in the CLI's own words and exit code.
fn decide(
    dir: &approvals::DirArg,
    id: &str,
    decision: crate::approvals::Decision,
    note: Option<String>,
) -> i32 {
    use crate::fleet::client::{Answer, note as trouble};
    use crate::fleet::wire::WireDecision;
    if let Some(mut host) = host_of(dir) {
        let (who, verb) = approvals::decider(&decision);
        let wire = match &decision {
            crate::approvals::Decision::Approve => WireDecision::Approve {
                reason: note.clone(),
            },
            crate::approvals::Decision::Reject(reason) => WireDecision::Reject {
                reason: reason.clone(),
            },
        };
        match host.decide(id, wire, who) {
            Answer::Done(_) => {
                println!("{verb} {id}");
                return 0;
            }
            Answer::Refused(_) => {}
            Answer::Trouble(err) => trouble(&err),
        }
    }
    approvals::decide(&dir.dir, id, decision, note)
}

/// Commands that only print a listing and start nothing.
fn only_lists(command: &Command) -> bool {
    use crate::fleet::cli::FleetCommand;
    use crate::plan::cli::PlanCommand;
    matches!(
        command,
        Command::Queue(_)
            | Command::Tasks(_)
            | Command::Fleet(FleetCommand::Lanes(_))
            | Command::Plan(PlanCommand::Status(_))
    )
}

/// A listing piped into `head` ends like `ls` does when the reader goes: by
/// SIGPIPE, silently. Rust ignores SIGPIPE, which turns the closed pipe into a
/// panic in `println!`. Only for listings: a loop must outlive a closed pipe.
fn die_quietly_on_closed_pipe() {
    // SAFETY: SIG_DFL is a valid disposition; no handler code runs.
    let _ = unsafe {
        nix::sys::signal::signal(
            nix::sys::signal::Signal::SIGPIPE,
            nix::sys::signal::SigHandler::SigDfl,
        )
    };
}

/// Resolves the queue folder from `[approvals] dir`; a broken config is exit 2.
fn resolve_queue_dir(dir: &mut approvals::DirArg) -> Result<(), i32> {
    let config = approvals::approvals_config().map_err(|err| {
        eprintln!("clowder: error: {err}");
        EXIT_USAGE
    })?;
    dir.resolve(Some(&config));
    Ok(())
}

/// Problems that would make every session fail: caught before anything runs.
fn preflight(config: &Config, cwd: &Path) -> Result<(), String> {
    let prompt = cwd.join(config.prompt_path());
    if !prompt.is_file() {
        return Err(format!(
            "prompt file {} not found: create it, or name another with --prompt or [session] prompt_file",
            config.prompt_path().display()
        ));
    }
    let command = &config.agent.command.0;
    if find_program(command, cwd).is_none() {
        return Err(format!(
            "agent command `{command}` not found (in PATH or relative to {}): set [agent] command in the config",
            cwd.display()
        ));
    }
    crate::config::preflight::check(config, cwd)
}

/// Where `program` would be run from, as `execvp` would find it.
fn find_program(program: &str, cwd: &Path) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let executable = |path: &Path| {
        path.metadata()
            .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    if program.contains('/') {
        let path = cwd.join(program);
        return executable(&path).then_some(path);
    }
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|dir| dir.join(program))
        .find(|path| executable(path))
}

fn print_dry_run(config: &Config, config_path: &Path, required: bool, cwd: &Path) -> i32 {
    let source = if config_path.exists() {
        config_path.display().to_string()
    } else if required {
        format!("{} (missing)", config_path.display())
    } else {
        format!("compiled defaults ({} not found)", config_path.display())
    };
    let agent = find_program(&config.agent.command.0, cwd)
        .map_or_else(|| "not found".to_string(), |p| p.display().to_string());
    println!(
        "# clowder {} — dry run: configuration is valid",
        env!("CARGO_PKG_VERSION")
    );
    println!("# config: {source}");
    println!("# prompt file in force: {}", config.prompt_path().display());
    println!("# agent: {agent}");
    println!("# notes (`clowder tell`): {}", notes_reach(config));
    println!("# gate: {}", gate_tiers(config));
    println!(
        "# output files: {}/{}-N.jsonl",
        config.session.output_dir.0.display(),
        config.session.output_prefix(&config.agent)
    );
    println!("# kill method: {}", crate::supervisor::cgroup::describe());
    match toml::to_string_pretty(config) {
        Ok(text) => {
            println!();
            print!("{text}");
            0
        }
        Err(err) => {
            eprintln!("clowder: error: cannot print the settings: {err}");
            1
        }
    }
}

/// Who decides a gated call, in order: `2 deny rules, 5 allow rules, reviewer
/// qwen2.5 (openai at http://…, decide), then you`.
fn gate_tiers(config: &Config) -> String {
    let approvals = &config.approvals;
    let reviewer = approvals.reviewer.as_ref().map_or_else(String::new, |r| {
        format!(
            "reviewer {} ({} at {}, {}), ",
            r.model.0,
            serde_json::to_value(r.api)
                .ok()
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_default(),
            r.endpoint(),
            serde_json::to_value(r.mode)
                .ok()
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_default(),
        )
    });
    format!(
        "{} deny rules, {} allow rules, {reviewer}then you",
        approvals.deny.len(),
        approvals.allow.len()
    )
}

/// How a note told while a session runs reaches this agent.
fn notes_reach(config: &Config) -> &'static str {
    match crate::agent::live_input::LiveInput::of(&config.agent.args) {
        Some(_) => "reach the running session now (the agent reads its stdin as it runs)",
        None => "wait for the next session (this agent reads notes only at start)",
    }
}

fn print_status(path: &Path, json: bool) -> i32 {
    let (snapshot, raw) = match status::read(path) {
        Ok(read) => read,
        Err(err) => {
            eprintln!("clowder: {err}");
            // No loop ran here (1); a status file that is there but unreadable is
            // a state file error (2), as for every configuration error.
            return match std::fs::symlink_metadata(path) {
                Ok(_) => 2,
                Err(_) => 1,
            };
        }
    };
    // The file quotes the agent (a hold's reason, a limit's words).
    if json {
        print!("{}", crate::escape::json_visible(&raw));
        return 0;
    }
    let alive = status::writer_alive(&snapshot);
    let size = snapshot
        .output_file
        .as_ref()
        .and_then(|file| std::fs::metadata(file).ok())
        .map(|m| m.len());
    let shown = status::render(&snapshot, alive, chrono::Utc::now(), size);
    println!("{}", crate::escape::visible_lines(&shown));
    0
}

/// Runs every lane of the fleet in `cwd`: with the control room over every
/// lane in a terminal, else headless.
fn run_fleet(config: Config, cwd: PathBuf, args: &Args) -> i32 {
    let lanes = match crate::fleet::host::lane_configs(&cwd, &config) {
        Ok(lanes) => lanes,
        Err(err) => {
            eprintln!("clowder: error: {err}");
            eprintln!("clowder: nothing was run");
            return EXIT_USAGE;
        }
    };
    for (name, lane_config) in &lanes {
        if let Err(problem) = preflight(lane_config, &cwd) {
            eprintln!("clowder: error: lane {name}: {problem}");
            eprintln!("clowder: nothing was run");
            return EXIT_USAGE;
        }
    }
    let _lock = match crate::store::lock::InstanceLock::acquire(&cwd) {
        Ok(lock) => lock,
        Err(err) => {
            eprintln!("clowder: error: {err}");
            eprintln!("clowder: nothing was run");
            return EXIT_USAGE;
        }
    };
    if !args.headless && std::io::stdout().is_terminal() {
        let config_path = args.config.clone().unwrap_or(DEFAULT_CONFIG_FILE.into());
        // The plans run here before, for the Plan view.
        let plans = crate::plan::room_viewer(cwd.clone());
        return crate::ui::run_fleet_viewing(cwd, config, config_path, plans);
    }
    let verbosity = if args.quiet {
        Verbosity::Quiet
    } else if args.verbose {
        Verbosity::Verbose
    } else {
        Verbosity::Normal
    };
    // The plans run here before, for the socket's clients (the web page).
    let plans = Some(crate::plan::room_viewer(cwd.clone()));
    if args.stay {
        return crate::fleet::host::run_staying(cwd, config, verbosity, plans);
    }
    crate::fleet::host::run_headless(cwd, config, verbosity, plans)
}

fn run_headless(config: Config, cwd: PathBuf, verbosity: Verbosity) -> i32 {
    let Some(runtime) = crate::supervisor::current_thread_runtime() else {
        return 1;
    };
    let started = Instant::now();
    let _notices = (verbosity != Verbosity::Quiet)
        .then(|| crate::fleet::waiting_notice::start(&cwd, cwd.join(&config.approvals.dir.0)));
    let approvals_dir = cwd.join(&config.approvals.dir.0);
    let ui = config.ui.clone();
    let root = cwd.clone();
    let options = RuntimeOptions {
        working_dir: cwd.clone(),
        verbose: verbosity == Verbosity::Verbose,
    };
    let outcome = runtime.block_on(async {
        // Served as a fleet of one: `clowder attach` reaches it.
        let single = crate::fleet::serve::single::SingleLoop::new(&cwd);
        let serve_options = crate::fleet::serve::ServeOptions {
            root: cwd.clone(),
            approvals_dir: approvals_dir.clone(),
            format: config.agent.format,
            watched: std::sync::Arc::default(),
            outputs: Some(config.loop_files(&cwd).output_dir),
            notified: config.ui.calls_out(),
        };
        let max_iterations = config.session.max_iterations.0;
        let reporter = single.reporter(Box::new(Console::new(verbosity)));
        let (supervisor, snapshots) = Runtime::new(config, options, reporter)?;
        // The sender lives as long as the loop, whoever else holds one.
        let (commands_tx, commands_rx) = tokio::sync::mpsc::unbounded_channel();
        let served = single.serve(
            serve_options,
            snapshots.clone(),
            commands_tx.clone(),
            max_iterations,
        );
        let _serving = match served {
            Ok(serving) => Some(serving),
            Err(why) => {
                let warning = format!("not served to `clowder attach`: {why}");
                use crate::supervisor::runtime::Reporter;
                let level = crate::supervisor::core::Level::Warn;
                Console::new(verbosity).log(chrono::Utc::now(), level, &warning);
                None
            }
        };
        // Nobody watches: the loop calls its human itself (`[ui] on_attention`).
        let say = crate::fleet::attention::console_say(verbosity);
        let attention =
            crate::fleet::attention::watch_loop(&root, approvals_dir, &ui, snapshots, say);
        let outcome = supervisor.run(commands_rx).await;
        drop(commands_tx);
        attention.loop_ended(&outcome.reason);
        attention.finish();
        Ok::<_, String>(outcome)
    });
    match outcome {
        Ok(outcome) => {
            let secs = started.elapsed().as_secs() as i64;
            crate::console::say(&summary_line(&outcome.reason, &outcome.snapshot, secs));
            outcome.reason.exit_code()
        }
        Err(err) => {
            eprintln!("clowder: error: {err}");
            1
        }
    }
}
