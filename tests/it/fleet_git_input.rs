//! A revision taken from the user or from a file never reaches git as an
//! option: `lane add --base` and the bases in `.clowder/fleet.json` are refused
//! with a clear error when they start with '-', and every git call puts
//! `--end-of-options` before them. Through the binary, in a real repository.

use crate::common;

use common::git::{clowder_command, init_with_one_commit};
use common::{DEADLINE, stderr_of, wait_with_deadline};

#[test]
fn a_base_that_is_an_option_is_refused_by_lane_add_and_writes_no_file() {
    let root = tempfile::tempdir().expect("tempdir");
    init_with_one_commit(root.path());
    let out = tempfile::tempdir().expect("tempdir");
    let target = out.path().join("written");
    for base in [
        format!("--output={}", target.display()),
        format!("-o{}", target.display()),
    ] {
        let arg = format!("--base={base}");
        let child = clowder_command(root.path(), &["lane", "add", "x", &arg])
            .spawn()
            .expect("spawn");
        let output = wait_with_deadline(child, DEADLINE);
        let said = stderr_of(&output);
        assert!(!output.status.success(), "{said}");
        assert!(said.contains("is not a revision"), "{said}");
        assert!(!target.exists(), "git wrote {}", target.display());
    }
    assert!(
        !root.path().join(".clowder/worktrees/x").exists(),
        "no worktree is made"
    );
}

#[test]
fn a_hand_edited_base_in_fleet_json_that_is_an_option_is_refused_and_writes_no_file() {
    let root = tempfile::tempdir().expect("tempdir");
    init_with_one_commit(root.path());
    let child = clowder_command(root.path(), &["lane", "add", "a"])
        .spawn()
        .expect("spawn");
    assert!(wait_with_deadline(child, DEADLINE).status.success());
    // `git rev-list --count BASE..refs/heads/clowder/a` with BASE `--output=P`
    // would write P..refs/heads/clowder/a.
    let out = tempfile::tempdir().expect("tempdir");
    let prefix = out.path().join("p");
    let written = out.path().join("p..refs/heads/clowder/a");
    std::fs::create_dir_all(written.parent().expect("a parent")).expect("mkdir");
    let registry = root.path().join(".clowder/fleet.json");
    let text = std::fs::read_to_string(&registry).expect("fleet.json");
    let hostile = format!("--output={}", prefix.display());
    let edited = text.replace("\"refs/heads/main\"", &format!("{hostile:?}"));
    assert_ne!(edited, text, "the base was replaced");
    std::fs::write(&registry, edited).expect("write");
    for args in [&["lanes"][..], &["lanes", "--json"][..]] {
        let child = clowder_command(root.path(), args).spawn().expect("spawn");
        let output = wait_with_deadline(child, DEADLINE);
        let said = stderr_of(&output);
        assert!(!output.status.success(), "{said}");
        assert!(
            said.contains("fleet.json")
                && said.contains("lane a: base")
                && said.contains("is not a revision"),
            "{said}"
        );
        assert!(!written.exists(), "git wrote {}", written.display());
    }
}
