//! `clowder plan …`: the arguments and what is printed.

use std::path::PathBuf;

use clap::{Args, Subcommand};

use super::control::Request;
use super::file::{self, Plan};
use super::state::{PLANS_DIR, PlanState, PlanStatus};
use super::status;

/// Bad input: the plan file is refused.
const EXIT_USAGE: i32 = 2;
/// A saved plan is missing or unreadable.
const EXIT_FAILED: i32 = 1;

#[derive(Debug, Subcommand)]
pub enum PlanCommand {
    /// Check a plan file and print the order in which its steps can run
    Check(CheckArgs),
    /// List a saved plan's steps (every plan's without NAME): state, lane, branch, iterations, cost
    Status(StatusArgs),
    /// Start a plan in the fleet (each step a lane), or resume it where it stopped
    Run(RunArgs),
    /// Start no new step until resumed (running steps go on)
    Pause(NameArgs),
    /// Go on with a paused plan (a rejected step is asked about again)
    Resume(NameArgs),
    /// Give up on a plan: its running steps' lanes are stopped, the plan is failed
    Stop(NameArgs),
    /// Merge a step under review into base by hand, once its branch is fixed
    Merge(MergeArgs),
    /// Start a failed plan's failed or blocked steps (or those named) again, on fresh branches
    Retry(RetryArgs),
    /// Forget a plan that does not run: its state, events and folder go; its steps' lanes, worktrees and branches stay
    Rm(NameArgs),
}

#[derive(Debug, Args)]
pub struct RetryArgs {
    /// The plan's name ([plan] name)
    #[arg(value_name = "NAME")]
    pub name: String,
    /// The steps to start again (default: every failed or blocked step)
    #[arg(value_name = "STEP")]
    pub steps: Vec<String>,
    /// Print log lines instead of the control room
    #[arg(long = "headless")]
    pub headless: bool,
}

#[derive(Debug, Args)]
pub struct RunArgs {
    /// The plan file, e.g. plan.toml
    #[arg(value_name = "FILE")]
    pub file: PathBuf,
    /// Print log lines instead of the control room
    #[arg(long = "headless")]
    pub headless: bool,
    /// Start the plan over from its file, changed or not: steps merged into base
    /// stay merged, the others start again (their branches kept under other names)
    #[arg(long = "restart")]
    pub restart: bool,
}

#[derive(Debug, Args)]
pub struct NameArgs {
    /// The plan's name ([plan] name)
    #[arg(value_name = "NAME")]
    pub name: String,
}

#[derive(Debug, Args)]
pub struct MergeArgs {
    /// The plan's name ([plan] name)
    #[arg(value_name = "NAME")]
    pub name: String,
    /// The step's id
    #[arg(value_name = "STEP")]
    pub step: String,
}

#[derive(Debug, Args)]
pub struct StatusArgs {
    /// The plan's name (its state is .clowder/plans/NAME.json)
    #[arg(value_name = "NAME")]
    pub name: Option<String>,
    /// Print a JSON array of plans instead of tables
    #[arg(long = "json")]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct CheckArgs {
    /// The plan file, e.g. plan.toml
    #[arg(value_name = "FILE")]
    pub file: PathBuf,
}

/// Runs a plan subcommand; `open_room` opens the control room for `run` and `retry`.
pub fn run(command: PlanCommand, open_room: super::run::OpenRoom) -> i32 {
    match command {
        PlanCommand::Check(args) => check(&args),
        PlanCommand::Status(args) => status(&args),
        PlanCommand::Run(args) => {
            super::run::run(&args.file, args.headless, args.restart, open_room)
        }
        PlanCommand::Pause(args) => control(&args.name, Request::Pause),
        PlanCommand::Resume(args) => control(&args.name, Request::Resume),
        PlanCommand::Stop(args) => control(&args.name, Request::Stop),
        PlanCommand::Merge(args) => control(&args.name, Request::Merge(args.step)),
        PlanCommand::Retry(args) => {
            super::run::retry(&args.name, &args.steps, args.headless, open_room)
        }
        PlanCommand::Rm(args) => remove(&args.name),
    }
}

fn remove(name: &str) -> i32 {
    let root = match std::env::current_dir() {
        Ok(root) => root,
        Err(err) => {
            eprintln!("clowder: error: cannot read the current folder: {err}");
            return EXIT_FAILED;
        }
    };
    match super::remove::remove(&root, name) {
        Ok(said) => {
            println!("clowder: {said}");
            0
        }
        Err(err) => {
            eprintln!("clowder: error: {err}");
            EXIT_FAILED
        }
    }
}

fn control(name: &str, request: Request) -> i32 {
    let root = match std::env::current_dir() {
        Ok(root) => root,
        Err(err) => {
            eprintln!("clowder: error: cannot read the current folder: {err}");
            return EXIT_FAILED;
        }
    };
    match super::control::command(&root, name, request) {
        Ok(said) => {
            println!("clowder: {said}");
            0
        }
        Err(err) => {
            eprintln!("clowder: error: {err}");
            EXIT_FAILED
        }
    }
}

/// The harness `plan run` in this folder would use: its `harness.toml`, or the defaults.
fn harness_config() -> Result<crate::config::Config, crate::config::ConfigError> {
    let path = std::path::Path::new(crate::config::DEFAULT_CONFIG_FILE);
    crate::config::Config::load(path, false)
}

fn check(args: &CheckArgs) -> i32 {
    let config = match harness_config() {
        Ok(config) => config,
        Err(err) => {
            eprintln!("clowder: error: {err}");
            return EXIT_USAGE;
        }
    };
    let harness = file::Harness {
        promise: config.completion.promise(),
    };
    match file::load_for(&args.file, harness) {
        Ok(plan) => {
            print_plan(&plan, "");
            0
        }
        Err(errors) => {
            for err in errors {
                eprintln!("clowder: error: {err}");
            }
            EXIT_USAGE
        }
    }
}

fn status(args: &StatusArgs) -> i32 {
    let root = match std::env::current_dir() {
        Ok(root) => root,
        Err(err) => {
            eprintln!("clowder: error: cannot read the current folder: {err}");
            return EXIT_FAILED;
        }
    };
    let files = match status::plan_files(&root, args.name.as_deref()) {
        Ok(files) => files,
        Err(err) => {
            eprintln!("clowder: error: {err}");
            return EXIT_FAILED;
        }
    };
    let mut rows = Vec::new();
    for file in files {
        match PlanState::load(&file) {
            Ok(state) => rows.push(status::row(&root, &state)),
            Err(err) => {
                eprintln!("clowder: error: {err}");
                return EXIT_USAGE;
            }
        }
    }
    if args.json {
        let json = serde_json::to_string_pretty(&rows)
            .expect("plan rows serialise because every field is plain data");
        println!("{}", crate::escape::json_visible(&json));
    } else if rows.is_empty() {
        println!("no plans (their state is kept in {PLANS_DIR}/)");
    } else {
        let tables: Vec<String> = rows.iter().map(status::table).collect();
        print!("{}", tables.join("\n"));
    }
    // Scripts learn from the exit code alone that a plan shown has failed.
    let failed = rows
        .iter()
        .any(|row| row.status == PlanStatus::Failed.to_string());
    if failed { EXIT_FAILED } else { 0 }
}

fn print_plan(plan: &Plan, indent: &str) {
    // A sub-plan merges into its step's branch whatever its own `base` says.
    let base = match (indent.is_empty(), plan.base.as_deref()) {
        (false, _) => "its step's branch",
        (true, Some(base)) => base,
        (true, None) => "the current branch",
    };
    let done_when_timeout = super::checks::limit_text(plan.done_when_timeout);
    let verify = if plan.verify.is_empty() {
        format!("no check (done_when_timeout {done_when_timeout})")
    } else {
        format!(
            "verify {:?} (verify_timeout {}, done_when_timeout {done_when_timeout})",
            plan.verify,
            super::checks::limit_text(plan.verify_timeout)
        )
    };
    println!(
        "{indent}plan {} ({}): {} step{}, base {base}, autonomy {}, max_parallel {}, {verify}",
        plan.name,
        plan.file.display(),
        plan.steps.len(),
        if plan.steps.len() == 1 { "" } else { "s" },
        plan.autonomy,
        plan.max_parallel,
    );
    for (n, wave) in file::waves(plan).iter().enumerate() {
        println!("{indent}{}: {}", n + 1, wave.join(", "));
    }
    for sub in &plan.subplans {
        print_plan(sub, &format!("{indent}  "));
    }
}
