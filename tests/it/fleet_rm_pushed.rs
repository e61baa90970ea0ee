//! `lane rm` and a lane whose commits were pushed: a remote-tracking branch
//! keeps them, so removing the lane loses nothing and is not refused; until
//! pushed, the refusal says that no branch, local or remote-tracking, has them.

use crate::common;

use common::git::{Scratch as Repo, git_in};

#[test]
fn rm_of_a_lane_whose_commits_a_remote_tracking_branch_holds_goes_through() {
    let repo = Repo::new();
    let remote = tempfile::tempdir().expect("tempdir");
    git_in(remote.path(), &["init", "--quiet", "--bare"]);
    let url = remote.path().display().to_string();
    repo.git(&["remote", "add", "origin", &url]);
    repo.expect(&["lane", "add", "auth"], 0);
    let worktree = repo.path(".clowder/worktrees/auth");
    std::fs::write(worktree.join("work.txt"), "work\n").expect("write");
    git_in(&worktree, &["add", "work.txt"]);
    git_in(&worktree, &["commit", "--quiet", "-m", "work"]);

    let out = repo.expect(&["lane", "rm", "auth"], 1);
    assert!(
        out.contains(
            "clowder/auth has 1 commit that neither main nor any other branch, local or remote-tracking, has: merge or push it"
        ),
        "{out}"
    );

    git_in(&worktree, &["push", "--quiet", "origin", "clowder/auth"]);
    let tip = repo.git(&["rev-parse", "refs/remotes/origin/clowder/auth"]);
    let out = repo.expect(&["lane", "rm", "auth"], 0);
    assert!(out.contains("deleted branch clowder/auth"), "{out}");
    // The work is still in the repository, under the remote-tracking branch.
    let kept = repo.git(&["rev-parse", "refs/remotes/origin/clowder/auth"]);
    assert_eq!(kept.trim(), tip.trim());
}
