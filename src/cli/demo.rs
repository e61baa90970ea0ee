//! `clowder demo`: the fleet demo. Makes a scratch git repository under
//! `target/demo/fleet` with three lanes of the bundled demo agent (one of which
//! asks for approval through `clowder gate`), then runs clowder there. No network,
//! no real agent.

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};

use clap::Args;

use crate::fleet::lanes::{self, AddOptions};
use crate::fleet::{LaneName, worktree};

/// Where the demo lives, relative to the current folder.
const DEMO_DIR: &str = "target/demo/fleet";
/// The file that marks a folder as the demo's own, so that it may be made again.
const MARK: &str = ".clowder-demo";
const AGENT: &str = include_str!("../../assets/demo/demo-agent.sh");

/// The lanes: name, prompt. The last one asks before its release command.
const LANES: [(&str, &str); 3] = [
    (
        "api",
        "Add retries with backoff to the HTTP client in src/api.rs, with tests, and commit.\n",
    ),
    (
        "docs",
        "Bring the configuration section of README.md up to date, and commit.\n",
    ),
    (
        "release",
        "Prepare the 0.3.0 release: update CHANGELOG.md, then publish with ./release.sh --publish.\n\n\
         <!-- demo-agent: ask before publishing (the request waits in clowder's inbox) -->\n",
    ),
];

#[derive(Debug, Args)]
pub struct DemoArgs {
    /// Print log lines instead of opening the control room
    #[arg(long = "headless")]
    pub headless: bool,
}

/// Makes the demo repository afresh and runs clowder in it; returns only on failure.
pub fn run(args: DemoArgs) -> i32 {
    let made = std::env::current_dir()
        .map_err(|err| format!("cannot read the current folder: {err}"))
        .and_then(|cwd| make(&cwd.join(DEMO_DIR)));
    let (root, exe) = match made {
        Ok(made) => made,
        Err(err) => {
            eprintln!("clowder demo: error: {err}");
            return 1;
        }
    };
    let clowder = command_name(&exe);
    eprintln!(
        "clowder demo: a fleet of {} lanes in {}; lane release asks for approval: \
         press a in the control room, or run `{clowder} queue` and `{clowder} approve ID` there \
         (or `{clowder} serve --http` there, for the web inbox)",
        LANES.len(),
        root.display()
    );
    let mut command = std::process::Command::new(&exe);
    command
        .current_dir(&root)
        .env("CLOWDER_BIN", &exe)
        .env("DEMO_COMMIT", "1")
        .env(
            "DEMO_STATE_DIR",
            crate::store::paths::state_dir(&root).join("demo-agent"),
        );
    if args.headless {
        command.arg("--headless");
    }
    let err = command.exec();
    eprintln!("clowder demo: error: cannot run {}: {err}", exe.display());
    1
}

/// How to run this clowder from another terminal: `clowder` when that is
/// what PATH finds, else the path of this binary (`cargo run` built it, nothing
/// installed it).
fn command_name(exe: &Path) -> String {
    let same = |found: PathBuf| {
        let canonical = |path: &Path| std::fs::canonicalize(path).ok();
        canonical(&found).is_some_and(|found| Some(found) == canonical(exe))
    };
    if super::project::on_path("clowder").is_some_and(same) {
        "clowder".to_string()
    } else {
        crate::escape::one_line(&exe.display().to_string())
    }
}

/// Makes the demo in `root`: the repository, its first commit and the lanes.
/// Returns the folder and the clowder program the agents call.
fn make(root: &Path) -> Result<(PathBuf, PathBuf), String> {
    clear(root)?;
    std::fs::create_dir_all(root)
        .map_err(|err| format!("cannot create {}: {err}", root.display()))?;
    let root = root
        .canonicalize()
        .map_err(|err| format!("cannot resolve {}: {err}", root.display()))?;
    let exe = std::env::current_exe()
        .map_err(|err| format!("cannot find the clowder program itself: {err}"))?;
    write_files(&root)?;
    commit_all(&root)?;
    add_origin(&root)?;
    for (name, _) in LANES {
        let name = LaneName::parse(name)?;
        let options = AddOptions {
            prompt_file: Some(PathBuf::from(format!("prompts/{name}.md"))),
            ..AddOptions::default()
        };
        lanes::add(&root, &name, options)
            .map_err(|failure| format!("lane {name}: {}", failure.message()))?;
    }
    Ok((root, exe))
}

/// Removes an earlier demo; refuses anything else (or a demo still running).
fn clear(root: &Path) -> Result<(), String> {
    let Ok(meta) = root.symlink_metadata() else {
        return Ok(());
    };
    if !meta.is_dir() || !root.join(MARK).is_file() {
        return Err(format!(
            "{} exists and is not a clowder demo (it has no {MARK} file): move it away first",
            root.display()
        ));
    }
    if let Some(pid) = lanes::fleet_running(root) {
        let pid = pid.map_or_else(String::new, |pid| format!(" (PID {pid})"));
        return Err(format!(
            "the demo in {} is still running{pid}: stop it first",
            root.display()
        ));
    }
    let origin = origin_of(root);
    if origin.join(MARK).is_file() {
        std::fs::remove_dir_all(&origin)
            .map_err(|err| format!("cannot remove {}: {err}", origin.display()))?;
    }
    std::fs::remove_dir_all(root).map_err(|err| format!("cannot remove {}: {err}", root.display()))
}

/// The demo's remote, a bare repository beside it: `lane push` has somewhere
/// to push, and no network is used.
fn origin_of(root: &Path) -> PathBuf {
    let mut name = root.file_name().unwrap_or_default().to_os_string();
    name.push("-origin.git");
    root.with_file_name(name)
}

fn add_origin(root: &Path) -> Result<(), String> {
    let origin = origin_of(root);
    if origin.exists() {
        if !origin.join(MARK).is_file() {
            return Err(format!(
                "{} exists and is not the demo's remote (it has no {MARK} file): move it away first",
                origin.display()
            ));
        }
        std::fs::remove_dir_all(&origin)
            .map_err(|err| format!("cannot remove {}: {err}", origin.display()))?;
    }
    let path = origin.to_string_lossy().into_owned();
    worktree::git(
        root,
        &["init", "--quiet", "--bare", "--end-of-options", &path],
    )?;
    std::fs::write(origin.join(MARK), "the remote of `clowder demo`\n")
        .map_err(|err| format!("cannot write in {path}: {err}"))?;
    worktree::git(root, &["remote", "add", "origin", &path])?;
    worktree::git(root, &["push", "--quiet", "origin", "HEAD"])?;
    Ok(())
}

fn write_files(root: &Path) -> Result<(), String> {
    let agent = root.join("demo-agent.sh");
    let agent_text = toml::Value::String(agent.to_string_lossy().into_owned()).to_string();
    let mut files = vec![
        (
            MARK.to_string(),
            "made by `clowder demo`: the next run replaces this folder\n".to_string(),
        ),
        ("harness.toml".into(), harness_toml(&agent_text)),
        ("demo-agent.sh".into(), AGENT.to_string()),
        (
            "PROMPT.md".into(),
            "Pick the next unchecked item in TODO.md, implement it with tests, and commit.\n"
                .into(),
        ),
        (
            "TODO.md".into(),
            "- [x] parse config\n- [ ] retry on empty output\n- [ ] rate-limit backoff\n".into(),
        ),
        (
            "release.sh".into(),
            "#!/bin/sh\necho \"a demo: nothing is published\"\n".into(),
        ),
    ];
    files.extend(LANES.map(|(name, prompt)| (format!("prompts/{name}.md"), prompt.to_string())));
    for (rel, text) in files {
        let path = root.join(&rel);
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)
                .map_err(|err| format!("cannot create {}: {err}", dir.display()))?;
        }
        std::fs::write(&path, text)
            .map_err(|err| format!("cannot write {}: {err}", path.display()))?;
    }
    use std::os::unix::fs::PermissionsExt;
    for script in ["demo-agent.sh", "release.sh"] {
        let path = root.join(script);
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755))
            .map_err(|err| format!("cannot make {} executable: {err}", path.display()))?;
    }
    Ok(())
}

fn harness_toml(agent: &str) -> String {
    format!(
        "# clowder's fleet demo, made by `clowder demo`: three lanes of the demo agent\n\
         # (see `clowder lanes`). The next `clowder demo` makes this folder again.\n\
         \n\
         [session]\n\
         max_iterations = 3\n\
         \n\
         [agent]\n\
         command = {agent}\n\
         args = [\"{{prompt}}\"]\n\
         \n\
         [watchdog]\n\
         check_interval_secs = 1\n\
         stale_timeout_mins = 10                 # time enough to answer the release lane's request\n\
         \n\
         [backoff]\n\
         initial_delay_secs = 1\n\
         max_delay_secs = 30\n\
         \n\
         [approvals]\n\
         timeout = \"9m\"\n"
    )
}

/// `git init` and a first commit of everything, with the demo's own identity
/// (the agents commit too).
fn commit_all(root: &Path) -> Result<(), String> {
    let steps: [&[&str]; 6] = [
        &["init", "--quiet", "--initial-branch=main"],
        &["config", "user.name", "clowder demo"],
        &["config", "user.email", "demo@clowder.invalid"],
        &["config", "commit.gpgsign", "false"],
        &["add", "--all"],
        &["commit", "--quiet", "--no-verify", "-m", "The demo project"],
    ];
    for args in steps {
        worktree::git(root, args)?;
    }
    Ok(())
}
