//! Git for the tests that make real repositories: run with no system or user
//! configuration, and with none of the variables a surrounding fleet lane sets.

use std::path::Path;
use std::process::{Command, Stdio};

use super::{clowder_bin, stderr_of, stdout_of};

/// Keeps the test's git and clowder away from the machine's git settings and
/// from the lane this test run may itself be in.
pub fn isolate(command: &mut Command) -> &mut Command {
    command
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env_remove("GIT_DIR")
        .env_remove("GIT_WORK_TREE")
        .env_remove("CLOWDER_APPROVALS_DIR")
        .env_remove("CLOWDER_LANE")
        .env_remove("CLOWDER_EVENT_LOG")
        .env_remove("CLOWDER_GATE_RULES")
        .env_remove("CLOWDER_GATE_RULES_SHA256")
}

/// `git -C dir args…`, which must succeed; its output, trimmed.
pub fn git_in(dir: &Path, args: &[&str]) -> String {
    let output = isolate(Command::new("git").arg("-C").arg(dir).args(args))
        .stdin(Stdio::null())
        .output()
        .expect("run git");
    assert!(
        output.status.success(),
        "git {args:?} failed: {}",
        stderr_of(&output)
    );
    stdout_of(&output).trim().to_string()
}

/// Makes `root` a repository on `main` with one commit (README.md), committing
/// as a tester of its own so no commit depends on the machine's identity.
pub fn init_with_one_commit(root: &Path) {
    git_in(root, &["init", "--quiet", "--initial-branch=main"]);
    git_in(root, &["config", "user.name", "Clowder Tester"]);
    git_in(root, &["config", "user.email", "tests@example.com"]);
    git_in(root, &["config", "commit.gpgsign", "false"]);
    std::fs::write(root.join("README.md"), "hello\n").expect("write README.md");
    git_in(root, &["add", "README.md"]);
    git_in(root, &["commit", "--quiet", "-m", "first"]);
}

/// `clowder args…` in `dir`, isolated like git, reading nothing, its output piped.
pub fn clowder_command(dir: &Path, args: &[&str]) -> Command {
    let mut command = Command::new(clowder_bin());
    isolate(&mut command)
        .args(args)
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    command
}

/// `clowder args…` in `dir`, isolated like git, which must succeed.
pub fn clowder_in(dir: &Path, args: &[&str]) {
    let output = clowder_command(dir, args).output().expect("run clowder");
    assert!(
        output.status.success(),
        "clowder {args:?} failed: {}",
        stderr_of(&output)
    );
}

/// A scratch repository on `main` with one commit, and the real `clowder` run
/// inside it.
pub struct Scratch {
    pub dir: tempfile::TempDir,
}

impl Scratch {
    pub fn new() -> Scratch {
        let repo = Scratch {
            dir: tempfile::tempdir().expect("tempdir"),
        };
        init_with_one_commit(repo.root());
        repo
    }

    pub fn root(&self) -> &Path {
        self.dir.path()
    }

    pub fn path(&self, rel: &str) -> std::path::PathBuf {
        self.root().join(rel)
    }

    pub fn write(&self, rel: &str, text: &str) {
        let path = self.path(rel);
        std::fs::create_dir_all(path.parent().expect("has a parent")).expect("mkdir");
        std::fs::write(path, text).expect("write");
    }

    pub fn git(&self, args: &[&str]) -> String {
        git_in(self.root(), args)
    }

    pub fn clowder(&self, args: &[&str]) -> std::process::Output {
        let child = clowder_command(self.root(), args).spawn();
        super::wait_with_deadline(child.expect("spawn clowder"), super::DEADLINE)
    }

    /// Runs clowder and checks it exited with `code`; returns stdout + stderr.
    pub fn expect(&self, args: &[&str], code: i32) -> String {
        let output = self.clowder(args);
        let text = format!("{}{}", stdout_of(&output), stderr_of(&output));
        assert_eq!(
            output.status.code(),
            Some(code),
            "clowder {args:?}:\n{text}"
        );
        text
    }
}
