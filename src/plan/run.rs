//! `clowder plan run FILE`: checks the plan, loads or creates its state, and runs
//! it in the fleet host (the driver next to the lanes, in one process).

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use super::driver::Driver;
use super::file::{self, Plan};
use super::state::{PlanState, PlanStatus};
use crate::config::{Config, DEFAULT_CONFIG_FILE};
use crate::console::Verbosity;
use crate::fleet::plans::RoomDriver;
use crate::fleet::worktree;

/// Bad input: the plan file or the config is refused.
const EXIT_USAGE: i32 = 2;
const EXIT_FAILED: i32 = 1;

/// `headless`: print log lines even in a terminal (else the control room shows the plan).
pub fn run(plan_file: &Path, headless: bool, restart: bool, open_room: OpenRoom) -> i32 {
    let config = match Config::load(Path::new(DEFAULT_CONFIG_FILE), false) {
        Ok(config) => config,
        Err(err) => {
            eprintln!("clowder: error: {err}");
            eprintln!("clowder: nothing was run");
            return EXIT_USAGE;
        }
    };
    let harness = file::Harness {
        promise: config.completion.promise(),
    };
    let plan = match file::load_for(plan_file, harness) {
        Ok(plan) => plan,
        Err(errors) => {
            for err in errors {
                eprintln!("clowder: error: {err}");
            }
            eprintln!("clowder: nothing was run");
            return EXIT_USAGE;
        }
    };
    let root = match std::env::current_dir() {
        Ok(root) => root,
        Err(err) => {
            eprintln!("clowder: error: cannot read the current folder: {err}");
            return EXIT_FAILED;
        }
    };
    match prepare(&root, &plan, plan_file, restart) {
        Ok(Prepared::Settled(code)) => code,
        Ok(Prepared::Run(state)) => drive(root, config, state, headless, open_room),
        Err((code, err)) => {
            eprintln!("clowder: error: {err}");
            eprintln!("clowder: nothing was run");
            code
        }
    }
}

enum Prepared {
    /// Finished before: nothing to run; the exit code.
    Settled(i32),
    Run(PlanState),
}

fn prepare(
    root: &Path,
    plan: &Plan,
    plan_file: &Path,
    restart: bool,
) -> Result<Prepared, (i32, String)> {
    let path = PlanState::path(root, &plan.name);
    if path.exists() {
        let state = PlanState::load(&path).map_err(|err| (EXIT_USAGE, err))?;
        let fresh = PlanState::new(plan, &state.base);
        if restart {
            let state = super::restart::start_over(root, &state, fresh)
                .map_err(|err| (EXIT_FAILED, err))?;
            return Ok(Prepared::Run(state));
        }
        let mut changes = super::fingerprint::differences(&state, &fresh);
        if plan.base.as_ref().is_some_and(|base| *base != state.base) {
            changes.push("[plan] base: changed".into());
        }
        if !changes.is_empty() {
            return Err((EXIT_USAGE, changed(plan_file, &path, &changes)));
        }
        if matches!(state.status, PlanStatus::Completed | PlanStatus::Failed) {
            println!(
                "plan {} is {}: nothing to run (its state is {})",
                state.name,
                state.status,
                path.display()
            );
            let code = if state.status == PlanStatus::Completed {
                0
            } else {
                EXIT_FAILED
            };
            return Ok(Prepared::Settled(code));
        }
        return Ok(Prepared::Run(state));
    }
    let base = match &plan.base {
        Some(base) => base.clone(),
        None => current_branch(root).map_err(|err| (EXIT_USAGE, err))?,
    };
    let base_ref = format!("refs/heads/{base}");
    match worktree::commit_of(root, &base_ref) {
        Ok(Some(_)) => {
            let state = PlanState::new(plan, &base);
            super::status::refuse_taken_lanes(root, &state).map_err(|err| (EXIT_USAGE, err))?;
            Ok(Prepared::Run(state))
        }
        Ok(None) => Err((
            EXIT_USAGE,
            format!(
                "[plan] base = {base:?}: no such branch in {}",
                root.display()
            ),
        )),
        Err(err) => Err((EXIT_USAGE, err)),
    }
}

/// The refusal of a plan file changed since its state was made.
fn changed(plan_file: &Path, state_file: &Path, changes: &[String]) -> String {
    let file = plan_file.display();
    let mut said = format!(
        "{file} changed since its plan's state was made ({}):",
        state_file.display()
    );
    for change in changes {
        said.push_str(&format!("\n  {change}"));
    }
    said.push_str(&format!(
        "\n`clowder plan run {file} --restart` starts the plan over (steps merged into base stay merged)"
    ));
    said
}

fn current_branch(root: &Path) -> Result<String, String> {
    let top = worktree::toplevel(root)
        .map_err(|err| format!("a plan runs in a git repository: {err}"))?;
    if top.canonicalize().ok() != root.canonicalize().ok() {
        return Err(format!(
            "run the plan in the repository's top folder ({})",
            top.display()
        ));
    }
    match worktree::checked_out(root)? {
        Some(name) => Ok(crate::fleet::lanes::short_ref(&name).to_string()),
        None => Err("HEAD is detached: set [plan] base to the branch to merge into".into()),
    }
}

/// Opens the control room over the fleet host that runs a plan's driver: given
/// by the wiring layer, since the plan knows nothing of screens.
pub type OpenRoom = fn(PathBuf, Config, PathBuf, Option<RoomDriver>) -> i32;

pub(super) fn drive(
    root: PathBuf,
    config: Config,
    state: PlanState,
    headless: bool,
    open_room: OpenRoom,
) -> i32 {
    let name = state.name.clone();
    let file = state.file_in(&root);
    let _driver_lock = match super::control::lock(&super::home::Home::of(&root, &state)) {
        Ok(Some(lock)) => lock,
        Ok(None) => {
            eprintln!("clowder: error: plan {name} is already running here");
            return EXIT_FAILED;
        }
        Err(err) => {
            eprintln!("clowder: error: {err}");
            return EXIT_FAILED;
        }
    };
    let _lock = match crate::store::lock::InstanceLock::acquire(&root) {
        Ok(lock) => lock,
        Err(err) => {
            eprintln!("clowder: error: {err}");
            eprintln!(
                "clowder: the plan's lanes run in the process that runs the plan: stop the other clowder first"
            );
            return EXIT_USAGE;
        }
    };
    let queue_dir = root.join(&config.approvals.dir.0);
    let grace = config.watchdog.kill_grace_secs.0;
    let stopped_by = catch_stop_signals();
    let code = if !headless && std::io::stdout().is_terminal() {
        let driver = super::room::room_driver(root.clone(), state, queue_dir, grace);
        let config_path = PathBuf::from(DEFAULT_CONFIG_FILE);
        open_room(root.clone(), config, config_path, Some(driver))
    } else {
        let driver =
            Driver::new(root.clone(), state, queue_dir, Verbosity::Normal).kill_grace(grace);
        // The plans, for the socket's clients; the driver holds the plan's
        // lock, so a retry from there is refused while it runs.
        let plans = Some(super::room::viewer(root.clone()));
        crate::fleet::host::run_headless_with(
            root.clone(),
            config,
            Verbosity::Normal,
            Some(Box::pin(driver.run())),
            plans,
        )
    };
    // Its checks were told to stop with their drivers; none outlives `plan run`.
    super::checks::wait_for_all();
    // The fleet removed its cgroup tree as it ended, while checks could still
    // be ending in it: what is empty now goes.
    if let Some(tree) = crate::supervisor::cgroup::this_run_tree() {
        crate::supervisor::cgroup::remove_tree(&tree);
    }
    let signal = i32::try_from(stopped_by.load(Ordering::Relaxed)).unwrap_or_default();
    // The driver saved every change: the file says how the plan stands.
    let state = match PlanState::load(&file) {
        Ok(state) => state,
        Err(err) => {
            eprintln!("clowder: error: {err}");
            return EXIT_FAILED;
        }
    };
    print!(
        "{}",
        super::status::table(&super::status::row(&root, &state))
    );
    match state.status {
        PlanStatus::Completed => {
            println!("clowder: plan {name} completed");
            code
        }
        PlanStatus::Failed => {
            println!("clowder: plan {name} failed (see `clowder plan status {name}`)");
            if code == 0 { EXIT_FAILED } else { code }
        }
        other => {
            println!("clowder: plan {name} is {other}; `clowder plan run` again goes on with it");
            // Stopped by a signal, as the README's exit codes say: 130, 143, 129.
            if signal > 0 { 128 + signal } else { code }
        }
    }
}

/// Records the last of SIGINT, SIGTERM and SIGHUP received (0: none), next to
/// the fleet's own handling of them; SIGHUP only when it is not ignored (`nohup`).
fn catch_stop_signals() -> Arc<AtomicUsize> {
    let received = Arc::new(AtomicUsize::new(0));
    let mut signals = vec![libc::SIGINT, libc::SIGTERM];
    if !crate::supervisor::process::hangup_ignored() {
        signals.push(libc::SIGHUP);
    }
    for signal in signals {
        let number = usize::try_from(signal).unwrap_or_default();
        if let Err(err) = signal_hook::flag::register_usize(signal, Arc::clone(&received), number) {
            eprintln!("clowder: warning: cannot catch signal {signal}: {err}");
        }
    }
    received
}

/// `plan retry NAME [STEP…]`: the plan's failed or blocked steps (or those named)
/// start again on fresh branches, and the plan runs again as `plan run` runs it.
pub fn retry(name: &str, ids: &[String], headless: bool, open_room: OpenRoom) -> i32 {
    let config = match Config::load(Path::new(DEFAULT_CONFIG_FILE), false) {
        Ok(config) => config,
        Err(err) => {
            eprintln!("clowder: error: {err}");
            return EXIT_USAGE;
        }
    };
    let root = match std::env::current_dir() {
        Ok(root) => root,
        Err(err) => {
            eprintln!("clowder: error: cannot read the current folder: {err}");
            return EXIT_FAILED;
        }
    };
    let state = match reset_saved(&root, name, ids) {
        Ok(state) => state,
        Err(err) => {
            eprintln!("clowder: error: {err}");
            return EXIT_FAILED;
        }
    };
    drive(root, config, state, headless, open_room)
}

/// The saved plan `name` reset for a retry, under its driver lock (released
/// before the plan runs, which takes it again).
fn reset_saved(root: &Path, name: &str, ids: &[String]) -> Result<PlanState, String> {
    let reset = super::retry::reset_saved(root, name, ids)?;
    for line in &reset.said {
        println!("clowder: {line}");
    }
    println!("clowder: plan {name} runs again");
    Ok(reset.state)
}
