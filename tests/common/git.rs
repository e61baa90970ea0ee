//! Git for the tests that make real repositories: run with no system or user
//! configuration, and with none of the variables a surrounding fleet lane sets.

use std::path::Path;
use std::process::Command;

use super::{stderr_of, stdout_of};

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
}

/// `git -C dir args…`, which must succeed; its output, trimmed.
pub fn git_in(dir: &Path, args: &[&str]) -> String {
    let output = isolate(Command::new("git").arg("-C").arg(dir).args(args))
        .output()
        .expect("run git");
    assert!(
        output.status.success(),
        "git {args:?} failed: {}",
        stderr_of(&output)
    );
    stdout_of(&output).trim().to_string()
}
