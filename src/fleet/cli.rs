//! `clowder lane …` and `clowder lanes`: the arguments and what is printed.

use std::path::{Path, PathBuf};

use clap::{Args, Subcommand};

use super::LaneName;
use super::actions;
use super::lanes::{self, AddOptions, EXIT_FAILED, Failure, LaneRow, Orphan, report};
use super::registry::{self, LaneKind, LaneState};
use super::task_lane;

/// The fleet's subcommands, flattened into clowder's own.
#[derive(Debug, Subcommand)]
pub enum FleetCommand {
    /// Add, stop, pause, resume, merge, push, restart, tell or remove a lane (a loop in its own git worktree)
    #[command(subcommand)]
    Lane(LaneCommand),
    /// List the lanes: state, iteration, cost, commits ahead of the base, approvals
    Lanes(LanesArgs),
}

#[derive(Debug, Subcommand)]
pub enum LaneCommand {
    /// Register a lane, with a worktree at .clowder/worktrees/NAME on a new branch clowder/NAME
    /// (or in a folder: --dir; over a task directory: --task, --watch-task)
    Add(AddArgs),
    /// Record the lane as stopped: it is not started again until resumed
    Stop(StopArgs),
    /// Record the lane as paused: no session of it runs until it is resumed
    Pause(NameArg),
    /// Record a paused or stopped lane as active again
    Resume(NameArg),
    /// Remove a lane; refused when its worktree or branch holds work its base lacks
    Rm(RmArgs),
    /// Merge the lane's branch (its committed tip) into its base through the
    /// verified merge queue ([fleet] verify); a conflict or a failed check
    /// becomes a review request
    Merge(MergeArgs),
    /// Push the lane's branch, and print the forge's pull-request page
    Push(PushArgs),
    /// Run a finished lane (done, failed or stopped) again, in its worktree on
    /// its branch, from iteration 1
    Restart(NameArg),
    /// Leave a note for the lane's next session (at the top of its prompt)
    Tell(LaneTellArgs),
}

#[derive(Debug, Args)]
pub struct MergeArgs {
    #[command(flatten)]
    pub lane: NameArg,
    /// Post the review request and wait for it (started by a failed merge)
    #[arg(long = super::actions::AWAIT_REVIEW_FLAG, hide = true)]
    pub await_review: bool,
}

#[derive(Debug, Args)]
pub struct PushArgs {
    #[command(flatten)]
    pub lane: NameArg,
    /// The remote to push to [default: [fleet] push, else origin]
    #[arg(long = "remote", value_name = "R")]
    pub remote: Option<String>,
}

#[derive(Debug, Args)]
pub struct LaneTellArgs {
    #[command(flatten)]
    pub lane: NameArg,
    /// The note; several words are joined with spaces
    #[arg(value_name = "TEXT", required = true, num_args = 1..)]
    pub text: Vec<String>,
}

#[derive(Debug, Args)]
pub struct NameArg {
    /// The lane's name (see `clowder lanes`)
    #[arg(value_name = "NAME")]
    pub name: String,
}

#[derive(Debug, Args)]
pub struct AddArgs {
    /// 1 to 40 characters: a-z, 0-9, '.', '_', '-', starting with a letter or digit
    #[arg(value_name = "NAME")]
    pub name: String,
    /// The lane's prompt file, relative to this folder (overrides session.prompt_file)
    #[arg(long = "prompt", value_name = "FILE")]
    pub prompt: Option<PathBuf>,
    /// Where the lane's branch starts [default: HEAD]
    #[arg(long = "base", value_name = "REF", conflicts_with = "dir")]
    pub base: Option<String>,
    /// Productive iterations the lane runs (overrides session.max_iterations)
    #[arg(long = "max-iterations", value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub max_iterations: Option<u64>,
    /// The lane's cost budget in US dollars (overrides guard.max_cost_usd for it)
    #[arg(long = "max-cost", value_name = "USD", value_parser = positive_usd)]
    pub max_cost: Option<f64>,
    /// Work in this existing folder instead of a new worktree (`.`: this folder)
    #[arg(long = "dir", value_name = "PATH")]
    pub dir: Option<PathBuf>,
    /// Run `clowder worker DIR` on this task directory as the lane's agent (no worktree)
    #[arg(long = "task", value_name = "DIR",
          conflicts_with_all = ["prompt", "base", "dir", "max_iterations", "max_cost", "watch_task"])]
    pub task: Option<PathBuf>,
    /// Follow a task directory that someone else's worker drives (no process of ours)
    #[arg(long = "watch-task", value_name = "DIR",
          conflicts_with_all = ["prompt", "base", "dir", "max_iterations", "max_cost"])]
    pub watch_task: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct StopArgs {
    #[command(flatten)]
    pub lane: NameArg,
    /// For a running lane: end its current session too, not only after it
    #[arg(long = "now")]
    pub now: bool,
}

#[derive(Debug, Args)]
pub struct RmArgs {
    #[command(flatten)]
    pub lane: NameArg,
    /// Remove the worktree even with work in it: keeps the branch (and saves
    /// uncommitted changes as a git stash)
    #[arg(long = "force")]
    pub force: bool,
}

#[derive(Debug, Args)]
pub struct LanesArgs {
    /// Print the lanes as a JSON array
    #[arg(long = "json")]
    pub json: bool,
}

fn positive_usd(text: &str) -> Result<f64, String> {
    match text.trim_start_matches('$').parse::<f64>() {
        Ok(usd) if usd.is_finite() && usd > 0.0 => Ok(usd),
        _ => Err("expected a positive amount of US dollars, such as 5 or 2.50".to_string()),
    }
}

/// Runs a fleet subcommand in the current folder and returns the exit code.
pub fn run(command: FleetCommand) -> i32 {
    let root = match std::env::current_dir() {
        Ok(root) => root,
        Err(err) => {
            eprintln!("clowder: error: cannot read the current folder: {err}");
            return EXIT_FAILED;
        }
    };
    report(match command {
        FleetCommand::Lanes(args) => list(&root, args.json),
        FleetCommand::Lane(command) => lane(&root, command),
    })
}

fn parse_name(name: &str) -> Result<LaneName, Failure> {
    LaneName::parse(name).map_err(Failure::Usage)
}

fn lane(root: &Path, command: LaneCommand) -> Result<(), Failure> {
    // A lane add or rm that was killed midway is finished or undone first
    // (the lane `lane rm` names is its own to finish).
    let removing = match &command {
        LaneCommand::Rm(args) => Some(parse_name(&args.lane.name)?),
        _ => None,
    };
    for line in lanes::settle(root, removing.as_ref())? {
        println!("clowder: {line}");
    }
    let done = match command {
        LaneCommand::Add(args) => return add(root, args),
        LaneCommand::Stop(args) => {
            let name = parse_name(&args.lane.name)?;
            let mut done = lanes::set_state(root, &name, LaneState::Stopped, args.now)?;
            let registry = registry::load(root)?;
            if let Some(lane) = registry.lane(&name).filter(|lane| lane.kind.is_task()) {
                done.push(task_lane::request_stop(root, lane).map_err(Failure::Failed)?);
            }
            done
        }
        LaneCommand::Pause(args) => {
            lanes::set_state(root, &parse_name(&args.name)?, LaneState::Paused, false)?
        }
        LaneCommand::Resume(args) => {
            lanes::set_state(root, &parse_name(&args.name)?, LaneState::Active, false)?
        }
        LaneCommand::Rm(args) => {
            let name = parse_name(&args.lane.name)?;
            let mut done = lanes::remove(root, &name, args.force)?;
            done.insert(0, format!("lane {name} removed"));
            done
        }
        LaneCommand::Tell(args) => {
            super::tell::for_a_lane(root, &parse_name(&args.lane.name)?, &args.text)?
        }
        LaneCommand::Merge(args) => {
            let name = parse_name(&args.lane.name)?;
            let config = root_config()?;
            let queue = actions::lane_merge()?;
            if args.await_review {
                std::process::exit((queue.await_review)(root, &name, &config));
            }
            (queue.merge)(root, &name, &config)?
        }
        LaneCommand::Push(args) => {
            let name = parse_name(&args.lane.name)?;
            let config = root_config()?;
            actions::push(root, &name, args.remote.as_deref(), &config, false)?
        }
        LaneCommand::Restart(args) => actions::restart(root, &parse_name(&args.name)?)?,
    };
    for line in done {
        println!("clowder: {line}");
    }
    Ok(())
}

/// The fleet's harness.toml (its defaults when there is none).
fn root_config() -> Result<crate::config::Config, Failure> {
    crate::config::Config::load(Path::new(crate::config::DEFAULT_CONFIG_FILE), false)
        .map_err(|err| Failure::Usage(format!("bad configuration: {err}")))
}

fn add(root: &Path, args: AddArgs) -> Result<(), Failure> {
    let name = parse_name(&args.name)?;
    let task = match (&args.task, &args.watch_task) {
        (Some(dir), _) => Some((LaneKind::Task, dir)),
        (None, Some(dir)) => Some((LaneKind::WatchTask, dir)),
        (None, None) => None,
    };
    if let Some((kind, dir)) = task {
        let lane = task_lane::add(root, &name, kind, dir)?;
        let what = if kind == LaneKind::Task {
            "runs `clowder worker` on the task in"
        } else {
            "follows the task in"
        };
        println!("clowder: lane {name} added: {what} {}", lane.dir.display());
        println!(
            "clowder: its files go to {}",
            super::lane_files_dir(Path::new(""), &name).display()
        );
        return Ok(());
    }
    let options = AddOptions {
        prompt_file: args.prompt,
        base: args.base,
        max_iterations: args.max_iterations,
        max_cost_usd: args.max_cost,
        dir: args.dir,
    };
    let lane = lanes::add(root, &name, options)?;
    match (&lane.branch, &lane.base) {
        (Some(branch), Some(base)) => println!(
            "clowder: lane {name} added: worktree {} on branch {branch} from {}",
            lane.dir.display(),
            lanes::short_ref(base)
        ),
        _ => println!(
            "clowder: lane {name} added: works in {}",
            lane.dir.display()
        ),
    }
    println!(
        "clowder: its files go to {}",
        super::lane_files_dir(Path::new(""), &name).display()
    );
    Ok(())
}

fn list(root: &Path, json: bool) -> Result<(), Failure> {
    let registry = registry::load(root)?;
    let config = crate::approvals::commands::approvals_config()
        .inspect_err(|err| {
            eprintln!("clowder: warning: {err}; reading the approval queue in its default folder");
        })
        .ok();
    let approvals = config.as_ref().map_or_else(
        || PathBuf::from(crate::approvals::DEFAULT_DIR),
        |config| config.dir.0.clone(),
    );
    let now = chrono::Utc::now();
    let (mut rows, unclaimed) = match super::client::connect(root) {
        Some(host) => host_rows(root, &registry, &host.snapshot, now),
        None => lanes::rows(root, &registry, &approvals, now),
    };
    for (lane, row) in registry.lanes.iter().zip(rows.iter_mut()) {
        task_lane::fill_row(root, lane, row, now);
        // The agent may have rewritten its worktree's rules: said, never used.
        let own_folder = root.join(&lane.dir);
        if let Some(config) = &config
            && !lane.kind.is_task()
            && own_folder.canonicalize().ok() != root.canonicalize().ok()
            && let Some(note) = crate::approvals::host_rules::differs_in(&own_folder, config)
        {
            row.problems.push(note);
        }
    }
    let orphans = lanes::orphans(root, &registry);
    if json {
        let text = serde_json::to_string_pretty(&rows)
            .map_err(|err| Failure::Failed(format!("cannot encode the lanes: {err}")))?;
        println!("{}", crate::escape::json_visible(&text));
        for orphan in &orphans {
            eprintln!("clowder: orphan: {}", orphan_line(orphan));
        }
        for pending in &registry.pending {
            eprintln!("clowder: {}", pending_line(pending));
        }
        return Ok(());
    }
    print!("{}", table(&rows));
    for row in &rows {
        if let Some(why) = &row.ungated {
            println!("clowder: lane {}: UNGATED — {why}", row.name);
        }
        for problem in &row.problems {
            println!("clowder: lane {}: {problem}", row.name);
        }
    }
    for pending in &registry.pending {
        println!("clowder: {}", pending_line(pending));
    }
    if unclaimed > 0 {
        println!(
            "clowder: {unclaimed} pending approval request(s) come from no lane's folder (see `clowder queue`)"
        );
    }
    for orphan in &orphans {
        println!("clowder: orphan: {}", orphan_line(orphan));
    }
    Ok(())
}

/// The rows as the host serving the folder reports them: its lanes' latest
/// states and its pending requests (attributed as `clowder queue` does); a lane
/// it never reported is read from its status file.
fn host_rows(
    root: &Path,
    registry: &registry::Registry,
    host: &super::wire::HostSnapshot,
    now: chrono::DateTime<chrono::Utc>,
) -> (Vec<LaneRow>, usize) {
    let requests: Vec<_> = host
        .requests
        .iter()
        .cloned()
        .map(super::wire::PendingRequest::into_request)
        .collect();
    let reported = |name: &LaneName| {
        let facts = host.facts.iter().find(|facts| &facts.lane == name)?;
        Some((
            std::sync::Arc::clone(facts.snapshot.as_ref()?),
            facts.queued,
        ))
    };
    lanes::rows_of(root, registry, &requests, &reported, now)
}

fn pending_line(pending: &registry::Pending) -> String {
    let (name, verb) = match pending.change {
        registry::Change::Adding => (&pending.lane.name, "add"),
        registry::Change::Removing => (&pending.lane.name, "rm"),
    };
    format!(
        "lane {name}: an interrupted `lane {verb} {name}` is half done; the next lane command or fleet start finishes or undoes it (`clowder lane rm {name}` removes what is left)"
    )
}

fn orphan_line(orphan: &Orphan) -> String {
    format!(
        "{}: {} (nothing was deleted)",
        orphan.path.display(),
        orphan.problem
    )
}

/// The lanes as aligned columns, or a hint when there are none.
pub fn table(rows: &[LaneRow]) -> String {
    if rows.is_empty() {
        return "no lanes (add one with `clowder lane add NAME`)\n".to_string();
    }
    let dash = || "-".to_string();
    let mut lines: Vec<[String; 8]> = vec![[
        "NAME".into(),
        "STATE".into(),
        "ITER".into(),
        "GLOBAL".into(),
        "IDLE".into(),
        "COST".into(),
        "AHEAD".into(),
        "APPROVALS".into(),
    ]];
    for row in rows {
        let mut state = row.state.clone();
        if let Some(task) = &row.task_status {
            state.push_str(&format!(" (task {task})"));
        }
        if row.requested != LaneState::Active {
            state.push_str(&format!(" [{}]", row.requested.as_str()));
        }
        if row.ungated.is_some() {
            state.push_str(" UNGATED");
        }
        let iteration = match (row.iteration, row.max_iterations) {
            (Some(i), Some(max)) => format!("{i}/{max}"),
            (Some(i), None) => i.to_string(),
            (None, _) => dash(),
        };
        lines.push([
            row.name.clone(),
            state,
            iteration,
            row.global_iteration.map_or_else(dash, |g| g.to_string()),
            row.idle_secs.map_or_else(dash, crate::fmt::duration),
            row.cost_usd.map_or_else(dash, |c| format!("${c:.4}")),
            row.commits_ahead.map_or_else(dash, |a| a.to_string()),
            row.pending_approvals.to_string(),
        ]);
    }
    crate::fmt::columns(&lines)
}
