//! The worker's subcommands: `clowder worker`, `clowder task new|stop`, `clowder tasks`.

use std::path::PathBuf;

use chrono::Utc;
use clap::{Args, Subcommand};

use super::EXIT_USAGE;
use super::task::{self, Constraints, Task};
use crate::config::{Config, DEFAULT_CONFIG_FILE};

#[derive(Debug, Args)]
pub struct WorkerArgs {
    /// The task directory (made by `clowder task new`)
    #[arg(value_name = "TASK_DIR")]
    pub task_dir: PathBuf,
    /// Config file with the [worker] table [default: harness.toml, optional]
    #[arg(short = 'c', long = "config", value_name = "PATH")]
    pub config: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct TaskArgs {
    #[command(subcommand)]
    pub command: TaskCommand,
}

#[derive(Debug, Subcommand)]
pub enum TaskCommand {
    /// Make a task directory: task.json and artifacts/ (refused if task.json exists)
    New(NewArgs),
    /// Ask the worker running a task to stop (writes "status": "stopped" into state.json)
    Stop(StopArgs),
    /// Let a failed or stopped task go on: state.json says "running" again, for the next `clowder worker`
    Resume(StopArgs),
}

#[derive(Debug, Args)]
pub struct NewArgs {
    /// The task directory to make
    #[arg(value_name = "DIR")]
    pub dir: PathBuf,
    /// What the LLM is asked to do
    #[arg(long = "prompt", value_name = "TEXT")]
    pub prompt: String,
    /// A directory the tools may use, relative to DIR or absolute (repeat) [default: artifacts]
    #[arg(long = "allowed-path", value_name = "P")]
    pub allowed_paths: Vec<String>,
    /// Iterations to run
    #[arg(long = "max-iterations", value_name = "N", default_value_t = 10,
          value_parser = clap::value_parser!(u64).range(1..))]
    pub max_iterations: u64,
    /// Seconds after the first start at which the worker stops
    #[arg(long = "timeout-seconds", value_name = "S", default_value_t = 3600,
          value_parser = clap::value_parser!(u64).range(1..))]
    pub timeout_seconds: u64,
}

#[derive(Debug, Args)]
pub struct StopArgs {
    /// The task directory
    #[arg(value_name = "DIR")]
    pub dir: PathBuf,
}

#[derive(Debug, Args)]
pub struct TasksArgs {
    /// Task directories [default: the current folder if it is one, and its subfolders holding a task.json]
    #[arg(value_name = "DIR")]
    pub dirs: Vec<PathBuf>,
    /// Print JSON (an array, one object per task)
    #[arg(long = "json")]
    pub json: bool,
}

pub fn worker(args: WorkerArgs) -> i32 {
    let (path, required) = match &args.config {
        Some(path) => (path.clone(), true),
        None => (PathBuf::from(DEFAULT_CONFIG_FILE), false),
    };
    let config = match Config::load(&path, required) {
        Ok(config) => config.worker,
        Err(err) => {
            eprintln!("clowder: error: {err}");
            return EXIT_USAGE;
        }
    };
    if let Some(problem) = config.problem() {
        eprintln!("clowder: error: {}: {problem}", path.display());
        return EXIT_USAGE;
    }
    super::run::run(&args.task_dir, &config, &path)
}

pub fn task(args: TaskArgs) -> i32 {
    match args.command {
        TaskCommand::New(args) => new_task(args),
        TaskCommand::Stop(args) => stop_task(args),
        TaskCommand::Resume(args) => resume_task(args),
    }
}

fn new_task(args: NewArgs) -> i32 {
    if args.prompt.trim().is_empty() {
        eprintln!("clowder: error: --prompt: expected a non-empty text");
        return EXIT_USAGE;
    }
    if let Some(bad) = args
        .allowed_paths
        .iter()
        .find(|p| p.is_empty() || p.contains('\0'))
    {
        eprintln!("clowder: error: --allowed-path {bad:?}: expected a directory path");
        return EXIT_USAGE;
    }
    let allowed_paths = if args.allowed_paths.is_empty() {
        vec![task::ARTIFACTS_DIR.to_string()]
    } else {
        args.allowed_paths
    };
    let created_at = Utc::now();
    let name = args
        .dir
        .file_name()
        .map_or_else(|| "task".to_string(), |n| n.to_string_lossy().into_owned());
    let new = Task {
        task_id: format!("{name}-{}", created_at.format("%Y%m%dT%H%M%S")),
        prompt: args.prompt,
        constraints: Constraints {
            max_iterations: args.max_iterations,
            timeout_seconds: args.timeout_seconds,
            allowed_paths,
        },
        created_at,
    };
    match task::create(&args.dir, &new) {
        Ok(()) => {
            println!("clowder: task {} in {}", new.task_id, args.dir.display());
            0
        }
        Err(err) => {
            eprintln!("clowder: error: {err}");
            1
        }
    }
}

fn stop_task(args: StopArgs) -> i32 {
    match task::request_stop(&args.dir, "stopped by clowder task stop") {
        Ok(task::StopAsked::Asked) => {
            println!(
                "clowder: asked the worker of {} to stop",
                args.dir.display()
            );
            0
        }
        Ok(task::StopAsked::AlreadyEnded(status)) => {
            println!("clowder: the task is already {}", status.as_str());
            0
        }
        Ok(task::StopAsked::BeforeStart) => {
            println!(
                "clowder: the task had not started: {} now says stopped, so its worker stops at once (`clowder task resume {}` undoes it)",
                task::STATE_FILE,
                args.dir.display()
            );
            0
        }
        Err(err) => {
            eprintln!("clowder: error: {err}");
            1
        }
    }
}

fn resume_task(args: StopArgs) -> i32 {
    let dir = args.dir.display();
    match task::request_resume(&args.dir) {
        Ok(task::ResumeAsked::Resumed { was, reason }) => {
            let how = match was {
                task::Status::Failed => "had failed",
                _ => "was stopped",
            };
            println!(
                "clowder: the task {how} ({reason}); it now says running: `clowder worker {dir}` goes on with it"
            );
            0
        }
        Ok(task::ResumeAsked::NotNeeded(why)) => {
            println!("clowder: nothing to resume: {why}");
            0
        }
        Ok(task::ResumeAsked::Refused(why)) => {
            eprintln!("clowder: error: {dir}: not resumed: {why}");
            1
        }
        Err(err) => {
            eprintln!("clowder: error: {err}");
            1
        }
    }
}

pub fn tasks(args: TasksArgs) -> i32 {
    let dirs = if args.dirs.is_empty() {
        super::list::find_tasks(std::path::Path::new("."))
    } else {
        args.dirs
    };
    let rows: Vec<_> = dirs.iter().map(|dir| super::list::row(dir)).collect();
    if args.json {
        match serde_json::to_string_pretty(&rows) {
            Ok(text) => println!("{}", crate::escape::json_visible(&text)),
            Err(err) => {
                eprintln!("clowder: error: {err}");
                return 1;
            }
        }
    } else if rows.is_empty() {
        println!("clowder: no task here (a task directory holds a task.json)");
    } else {
        print!("{}", super::list::render(&rows));
    }
    0
}
