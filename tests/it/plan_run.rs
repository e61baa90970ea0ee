//! `clowder plan run`: steps run as lanes of the fleet, in a real temporary git
//! repository, with a fake agent whose prompt says what to write; finished steps
//! are merged into base one at a time, checked in a scratch worktree.

use crate::common;

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use common::git::{git_in, isolate};
use common::plan::PlanRepo as Repo;
use common::{DEADLINE, stderr_of, stdout_of, wait_until, wait_with_deadline};
use serde_json::Value;
use tempfile::TempDir;

fn states(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(id, state)| (id.to_string(), state.to_string()))
        .collect()
}

const DIAMOND_WITH_A_FAILURE: &str = r#"
[plan]
name = "dia"
verify = "test -e a.txt"
max_parallel = 3

[[step]]
id = "a"
prompt = "write a.txt"

[[step]]
id = "b"
depends_on = ["a"]
collaboration = "sequential"
prompt = "write b.txt"

[[step]]
id = "c"
depends_on = ["a"]
prompt = "write c.txt\nfail"

[[step]]
id = "d"
depends_on = ["b", "c"]
prompt = "write d.txt"

[[step]]
id = "e"
prompt = "write e.txt\nfail-first"
"#;

#[test]
fn a_step_that_fails_twice_blocks_its_dependents_and_the_others_are_merged() {
    let repo = Repo::new(DIAMOND_WITH_A_FAILURE);
    let output = wait_with_deadline(repo.spawn_plan(), DEADLINE);
    let stdout = stdout_of(&output);
    assert_eq!(
        output.status.code(),
        Some(1),
        "a failed plan exits 1:\n{stdout}"
    );
    assert_eq!(
        repo.step_states("dia"),
        states(&[
            ("a", "merged"),
            ("b", "merged"),
            ("c", "failed"),
            ("d", "blocked"),
            ("e", "merged"),
        ]),
        "{stdout}"
    );
    // Base holds the merged steps' work, and nothing of the failed or blocked ones.
    let files = repo.files_at("main");
    for file in ["a.txt", "b.txt", "e.txt"] {
        assert!(files.contains(&file.to_string()), "{file} in {files:?}");
    }
    assert!(!files.contains(&"c.txt".to_string()), "{files:?}");
    assert!(!files.contains(&"d.txt".to_string()), "{files:?}");
    // The sequential step went on on its dependency's branch.
    let status = repo.clowder(&["plan", "status", "dia", "--json"]);
    let rows: Value = serde_json::from_str(&stdout_of(&status)).expect("JSON");
    assert_eq!(rows[0]["steps"][1]["branch"], "clowder/dia-a");
    // The failed step was retried once, with what ended it and its last result.
    let retried = repo.prompts_of("dia-c");
    assert_eq!(retried.len(), 2, "{retried:?}");
    assert!(
        retried[1].contains(
            "failed: no completion promise in its only session; the lane ended: max_iterations"
        ) && retried[1].contains("I could not do it: the tests are red"),
        "{}",
        retried[1]
    );
    assert!(repo.has_event("dia", "step_retried", "c"));
    assert!(repo.has_event("dia", "step_failed", "c"));
    assert!(repo.has_event("dia", "step_blocked", "d"));
    // A step that fails once and passes on its retry is done.
    assert!(repo.has_event("dia", "step_retried", "e"));
    assert!(repo.has_event("dia", "merge_passed", "e"));
    assert!(
        stdout.contains("plan=dia event=plan_done failed"),
        "{stdout}"
    );
    assert!(repo.lane_processes().is_empty());
}

const CONFLICT_AND_CHECK: &str = r#"
[plan]
name = "mq"
verify = "! test -e bad.txt"
max_parallel = 3

[[step]]
id = "x"
prompt = "write shared.txt from x"

[[step]]
id = "y"
prompt = "ticks 20\nwrite shared.txt from y"

[[step]]
id = "z"
prompt = "write bad.txt"
"#;

#[test]
fn a_conflict_and_a_failed_check_need_review_and_leave_base_untouched_until_merged_by_hand() {
    let repo = Repo::new(CONFLICT_AND_CHECK);
    let plan = repo.spawn_plan();
    let reviewed = wait_until(DEADLINE, || {
        repo.state_of("mq", "y") == "needs review" && repo.state_of("mq", "z") == "needs review"
    });
    assert!(reviewed, "{:?}", repo.step_states("mq"));
    assert_eq!(repo.state_of("mq", "x"), "merged");
    assert!(repo.has_event("mq", "merge_conflict", "y"));
    assert!(repo.has_event("mq", "merge_check_failed", "z"));
    // Base has x's merge only.
    let tip = repo.git(&["rev-parse", "main"]);
    assert_eq!(repo.git(&["show", "main:shared.txt"]), "from x");
    assert!(!repo.files_at("main").contains(&"bad.txt".to_string()));
    let merges = repo.git(&["log", "--merges", "--format=%s", "main"]);
    assert_eq!(merges, "Merge step x of plan mq");
    // Both reviews are in the inbox (each is written just after its state),
    // with the conflicting file and the check's lines.
    let mut requests = Vec::new();
    assert!(wait_until(DEADLINE, || {
        requests = repo.pending_requests();
        requests.len() >= 2
    }));
    let bodies: Vec<&str> = requests.iter().filter_map(|r| r["body"].as_str()).collect();
    assert!(
        bodies
            .iter()
            .any(|b| b.contains("conflicts in: shared.txt")),
        "{bodies:?}"
    );
    assert!(
        bodies
            .iter()
            .any(|b| b.contains("the verify check failed") && b.contains("! test -e bad.txt")),
        "{bodies:?}"
    );
    // Merging by hand before the branch is fixed is refused; base stays.
    let refused = repo.clowder(&["plan", "merge", "mq", "x"]);
    assert_eq!(refused.status.code(), Some(1));
    assert!(
        stderr_of(&refused).contains("it is merged, not needs review"),
        "{}",
        stderr_of(&refused)
    );
    // A human fixes both branches; `plan merge` merges them through the running plan.
    let y = repo.path(".clowder/worktrees/mq-y");
    let _ = isolate(
        Command::new("git")
            .arg("-C")
            .arg(&y)
            .args(["merge", "main"]),
    )
    .output();
    std::fs::write(y.join("shared.txt"), "from x and y\n").expect("write");
    git_in(&y, &["add", "shared.txt"]);
    git_in(&y, &["commit", "--quiet", "-m", "resolve"]);
    let z = repo.path(".clowder/worktrees/mq-z");
    git_in(&z, &["rm", "--quiet", "bad.txt"]);
    git_in(&z, &["commit", "--quiet", "-m", "no bad file"]);
    assert_eq!(
        repo.git(&["rev-parse", "main"]),
        tip,
        "base moved by itself"
    );
    // y through `plan merge`; z by approving its review request in the inbox.
    let out = repo.clowder(&["plan", "merge", "mq", "y"]);
    assert!(out.status.success(), "{}", stderr_of(&out));
    let z_review = requests
        .iter()
        .find(|r| r["title"] == "plan mq: step z needs review")
        .and_then(|r| r["id"].as_str())
        .expect("z's review request");
    let out = repo.clowder(&["approve", z_review]);
    assert!(out.status.success(), "{}", stderr_of(&out));
    let output = wait_with_deadline(plan, DEADLINE);
    assert_eq!(output.status.code(), Some(0), "{}", stdout_of(&output));
    assert_eq!(repo.git(&["show", "main:shared.txt"]), "from x and y");
    assert!(!repo.files_at("main").contains(&"bad.txt".to_string()));
    // Merged, their review requests left the inbox.
    assert_eq!(repo.pending_requests(), Vec::<Value>::new());
    let done = repo
        .events("mq")
        .into_iter()
        .any(|e| e["event"] == "plan_done");
    assert!(done && repo.step_states("mq").iter().all(|(_, s)| s == "merged"));
    assert!(repo.lane_processes().is_empty());
}

// Its branches are looked at once it is completed: no clean-up.
const DIAMOND: &str = r#"
[plan]
name = "kill"
max_parallel = 3
cleanup = false

[[step]]
id = "a"
prompt = "write a.txt"

[[step]]
id = "b"
depends_on = ["a"]
prompt = "ticks 40\nwrite b.txt"

[[step]]
id = "c"
depends_on = ["a"]
prompt = "write c.txt"

[[step]]
id = "d"
depends_on = ["b", "c"]
prompt = "write d.txt"
"#;

#[test]
fn a_plan_killed_mid_run_resumes_where_it_stopped() {
    let repo = Repo::new(DIAMOND);
    let mut plan = repo.spawn_plan();
    let b_running = wait_until(DEADLINE, || {
        repo.state_of("kill", "b") == "running"
            && repo.state_of("kill", "c") == "merged"
            && std::fs::read_to_string(repo.path(".clowder/lanes/kill-b/harness.status"))
                .is_ok_and(|s| s.contains("\"session_running\""))
    });
    assert!(b_running, "{:?}", repo.step_states("kill"));
    plan.kill().expect("SIGKILL the plan");
    let _ = plan.wait();
    let output = wait_with_deadline(repo.spawn_plan(), DEADLINE);
    let stdout = stdout_of(&output);
    assert_eq!(
        output.status.code(),
        Some(0),
        "{stdout}\n{}",
        stderr_of(&output)
    );
    assert_eq!(
        repo.step_states("kill"),
        states(&[
            ("a", "merged"),
            ("b", "merged"),
            ("c", "merged"),
            ("d", "merged"),
        ])
    );
    // Done steps stayed done: a and c ran one session each; b's lane resumed.
    assert_eq!(repo.prompts_of("kill-a").len(), 1);
    assert_eq!(repo.prompts_of("kill-c").len(), 1);
    assert_eq!(repo.prompts_of("kill-b").len(), 2);
    assert!(!stdout.contains("step=a"), "a started again:\n{stdout}");
    // The killed run's session of b was found and ended before b went on.
    assert!(
        stdout.contains("lane=kill-b session global=1 of an earlier run"),
        "{stdout}"
    );
    // d started from b's tip with c's work merged in.
    let files = repo.files_at("clowder/kill-d");
    for file in ["a.txt", "b.txt", "c.txt", "d.txt"] {
        assert!(files.contains(&file.to_string()), "{file} in {files:?}");
    }
    assert_eq!(repo.files_at("main"), files);
    assert!(repo.lane_processes().is_empty(), "a lane's agent is left");
    // A finished plan refuses what only a running one allows, naming its state.
    for verb in ["pause", "resume", "stop"] {
        let out = repo.clowder(&["plan", verb, "kill"]);
        assert_eq!(out.status.code(), Some(1));
        let expected = format!("cannot {verb} plan kill: it is completed");
        assert!(stderr_of(&out).contains(&expected), "{}", stderr_of(&out));
    }
}

#[test]
fn a_plan_with_a_cycle_is_refused_naming_it() {
    let repo = Repo::new(
        "[plan]\nname = \"loop\"\n\n[[step]]\nid = \"a\"\ndepends_on = [\"b\"]\nprompt = \"x\"\n\n[[step]]\nid = \"b\"\ndepends_on = [\"a\"]\nprompt = \"y\"\n",
    );
    let out = repo.clowder(&["plan", "run", "plan.toml"]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = stderr_of(&out);
    assert!(stderr.contains("a → b → a"), "{stderr}");
    assert!(stderr.contains("nothing was run"), "{stderr}");
    assert!(!repo.path(".clowder/plans/loop.json").exists());
}

#[test]
fn a_step_done_by_a_promise_the_harness_lacks_is_refused_before_anything_starts() {
    let repo =
        Repo::new("[plan]\nname = \"np\"\n\n[[step]]\nid = \"a\"\nprompt = \"write a.txt\"\n");
    let config =
        common::plan_agent_config().replace("[completion]\npromise = \"TASK_COMPLETE\"\n", "");
    std::fs::write(repo.path("harness.toml"), config).expect("write");
    let out = repo.clowder(&["plan", "run", "plan.toml", "--headless"]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let stderr = stderr_of(&out);
    assert!(
        stderr.contains("key `step[0].done_when`: step \"a\" cannot succeed")
            && stderr.contains("nothing was run"),
        "{stderr}"
    );
    assert!(!repo.path(".clowder/plans/np.json").exists());
    assert!(!repo.path(".clowder/lanes").exists());
}

#[test]
fn at_autonomy_two_a_step_waits_in_the_inbox_and_a_rejection_holds_the_plan() {
    let repo = Repo::new(
        "[plan]\nname = \"ask\"\nautonomy = 2\n\n[[step]]\nid = \"one\"\nprompt = \"write one.txt\"\n\n[[step]]\nid = \"two\"\ndepends_on = [\"one\"]\nprompt = \"write two.txt\"\n",
    );
    let plan = repo.spawn_plan();
    let mut request = Value::Null;
    assert!(wait_until(DEADLINE, || {
        request = repo.pending_requests().pop().unwrap_or(Value::Null);
        !request.is_null()
    }));
    let body = request["body"].as_str().unwrap_or_default();
    assert!(
        body.contains("Depends on: nothing") && body.contains("write one.txt"),
        "{body}"
    );
    assert_eq!(repo.state_of("ask", "one"), "waiting for approval");
    let id = request["id"].as_str().expect("an id").to_string();
    let out = repo.clowder(&["approve", &id]);
    assert!(out.status.success(), "{}", stderr_of(&out));
    // The second step's request names its dependency; a rejection holds the plan.
    let mut second = Value::Null;
    assert!(wait_until(DEADLINE, || {
        second = repo
            .pending_requests()
            .into_iter()
            .find(|r| {
                r["body"]
                    .as_str()
                    .is_some_and(|b| b.contains("Depends on: one"))
            })
            .unwrap_or(Value::Null);
        !second.is_null()
    }));
    let id = second["id"].as_str().expect("an id").to_string();
    let out = repo.clowder(&["reject", &id, "--reason", "not now"]);
    assert!(out.status.success(), "{}", stderr_of(&out));
    let held = wait_until(DEADLINE, || {
        let out = repo.clowder(&["plan", "status", "ask", "--json"]);
        stdout_of(&out).contains("\"status\": \"paused\"")
    });
    assert!(held, "{:?}", repo.step_states("ask"));
    assert_eq!(repo.state_of("ask", "two"), "pending");
    // Resumed, the step is asked about again; approved, the plan completes.
    let out = repo.clowder(&["plan", "resume", "ask"]);
    assert!(out.status.success(), "{}", stderr_of(&out));
    let mut third = Value::Null;
    assert!(wait_until(DEADLINE, || {
        third = repo.pending_requests().pop().unwrap_or(Value::Null);
        !third.is_null()
    }));
    let id = third["id"].as_str().expect("an id").to_string();
    assert!(repo.clowder(&["approve", &id]).status.success());
    let output = wait_with_deadline(plan, DEADLINE);
    assert_eq!(output.status.code(), Some(0), "{}", stdout_of(&output));
    assert!(repo.files_at("main").contains(&"two.txt".to_string()));
}

#[test]
fn a_command_done_when_is_checked_after_each_session_in_the_steps_worktree() {
    let repo = Repo::new(
        "[plan]\nname = \"cmd\"\n\n[[step]]\nid = \"s\"\nprompt = \"ticks 10\\nwrite done.txt\\nfail\"\ndone_when = \"test -e done.txt\"\nmax_iterations = 5\n\n[[step]]\nid = \"t\"\nprompt = \"write t.txt\"\ndone_when = \"test -e never.txt\"\n",
    );
    let output = wait_with_deadline(repo.spawn_plan(), DEADLINE);
    let stdout = stdout_of(&output);
    assert_eq!(output.status.code(), Some(1), "{stdout}");
    // s never said the promise, but its command held: its lane was stopped early.
    assert_eq!(repo.state_of("cmd", "s"), "merged", "{stdout}");
    let sessions = repo.prompts_of("cmd-s").len();
    assert!(sessions < 5, "{sessions} sessions:\n{stdout}");
    // t kept the promise, but its command never held: failed, after one retry.
    assert_eq!(repo.state_of("cmd", "t"), "failed");
    let retry = repo.prompts_of("cmd-t").pop().unwrap_or_default();
    assert!(
        retry.contains("done_when `test -e never.txt` exited 1"),
        "{retry}"
    );
}

#[test]
fn a_paused_plan_starts_no_step_and_a_stopped_one_ends_its_lanes() {
    let repo = Repo::new(
        "[plan]\nname = \"ps\"\n\n[[step]]\nid = \"a\"\nprompt = \"ticks 10\\nwrite a.txt\"\n\n[[step]]\nid = \"b\"\ndepends_on = [\"a\"]\nprompt = \"ticks 600\\nwrite b.txt\"\n",
    );
    let plan = repo.spawn_plan();
    assert!(wait_until(DEADLINE, || repo.state_of("ps", "a") == "running"));
    let out = repo.clowder(&["plan", "pause", "ps"]);
    assert!(out.status.success(), "{}", stderr_of(&out));
    assert!(stdout_of(&out).contains("asked the running plan ps to pause"));
    // a goes on and is merged; b, ready by then, does not start.
    assert!(wait_until(DEADLINE, || repo.state_of("ps", "a") == "merged"));
    assert_eq!(repo.state_of("ps", "b"), "pending");
    assert!(!repo.path(".clowder/lanes/ps-b").exists());
    let again = repo.clowder(&["plan", "pause", "ps"]);
    assert_eq!(again.status.code(), Some(1));
    assert!(stderr_of(&again).contains("cannot pause plan ps: it is paused"));
    let out = repo.clowder(&["plan", "resume", "ps"]);
    assert!(out.status.success(), "{}", stderr_of(&out));
    assert!(wait_until(DEADLINE, || {
        std::fs::read_to_string(repo.path(".clowder/lanes/ps-b/harness.status"))
            .is_ok_and(|s| s.contains("\"session_running\""))
    }));
    let out = repo.clowder(&["plan", "stop", "ps"]);
    assert!(out.status.success(), "{}", stderr_of(&out));
    let output = wait_with_deadline(plan, DEADLINE);
    assert_eq!(output.status.code(), Some(1), "{}", stdout_of(&output));
    assert_eq!(
        repo.step_states("ps"),
        states(&[("a", "merged"), ("b", "failed")])
    );
    assert!(repo.lane_processes().is_empty(), "b's agent is left");
}

#[test]
fn base_moves_by_update_ref_when_not_checked_out_and_never_under_uncommitted_changes() {
    let repo = Repo::new(
        "[plan]\nname = \"side\"\nbase = \"trunk\"\n\n[[step]]\nid = \"t\"\nprompt = \"write t.txt\"\n",
    );
    repo.git(&["branch", "trunk"]);
    let main = repo.git(&["rev-parse", "main"]);
    let output = wait_with_deadline(repo.spawn_plan(), DEADLINE);
    assert_eq!(output.status.code(), Some(0), "{}", stdout_of(&output));
    assert!(repo.files_at("trunk").contains(&"t.txt".to_string()));
    assert_eq!(repo.git(&["rev-parse", "main"]), main);
    assert!(!repo.path("t.txt").exists());

    // main is checked out here, with a change of the user's: it is not moved.
    std::fs::write(repo.path("README.md"), "my own edit\n").expect("write");
    std::fs::write(
        repo.path("plan.toml"),
        "[plan]\nname = \"mine\"\n\n[[step]]\nid = \"u\"\nprompt = \"write u.txt\"\n",
    )
    .expect("write");
    let plan = repo.spawn_plan();
    assert!(wait_until(DEADLINE, || repo.state_of("mine", "u") == "needs review"));
    // The request is written just after the state: wait for it too.
    let request = || {
        repo.pending_requests()
            .iter()
            .filter_map(|r| r["body"].as_str().map(str::to_string))
            .find(|b| b.contains("Step u of plan mine"))
    };
    assert!(wait_until(DEADLINE, || request().is_some()));
    let said = request().unwrap_or_default();
    assert!(said.contains("uncommitted changes"), "{said}");
    assert_eq!(repo.git(&["rev-parse", "main"]), main);
    assert_eq!(
        std::fs::read_to_string(repo.path("README.md")).expect("read"),
        "my own edit\n"
    );
    // Committed, the change is out of the way: merged by hand, main moves.
    repo.git(&["commit", "--quiet", "-am", "my edit"]);
    let out = repo.clowder(&["plan", "merge", "mine", "u"]);
    assert!(out.status.success(), "{}", stderr_of(&out));
    let output = wait_with_deadline(plan, DEADLINE);
    assert_eq!(output.status.code(), Some(0), "{}", stdout_of(&output));
    assert!(repo.path("u.txt").exists());
    assert_eq!(
        std::fs::read_to_string(repo.path("README.md")).expect("read"),
        "my own edit\n"
    );
}

#[test]
fn a_step_whose_lane_cannot_be_made_fails_and_the_plan_ends() {
    let repo =
        Repo::new("[plan]\nname = \"br\"\n\n[[step]]\nid = \"a\"\nprompt = \"write a.txt\"\n");
    repo.git(&["branch", "clowder/br-a"]);
    let output = wait_with_deadline(repo.spawn_plan(), DEADLINE);
    let stdout = stdout_of(&output);
    assert_eq!(output.status.code(), Some(1), "{stdout}");
    assert_eq!(repo.state_of("br", "a"), "failed");
    assert!(
        stdout.contains("event=step_failed step=a branch clowder/br-a already exists"),
        "{stdout}"
    );
}

#[test]
fn after_a_sigkill_a_step_waiting_for_approval_is_asked_again_once() {
    let repo = Repo::new(
        "[plan]\nname = \"again\"\nautonomy = 1\n\n[[step]]\nid = \"one\"\nprompt = \"write one.txt\"\n",
    );
    let mut plan = repo.spawn_plan();
    let mut first = String::new();
    assert!(wait_until(DEADLINE, || {
        first = repo
            .pending_requests()
            .pop()
            .and_then(|r| r["id"].as_str().map(str::to_string))
            .unwrap_or_default();
        !first.is_empty()
    }));
    plan.kill().expect("SIGKILL the plan");
    let _ = plan.wait();
    let plan = repo.spawn_plan();
    let mut ids: Vec<String> = Vec::new();
    let asked_again = wait_until(DEADLINE, || {
        ids = repo
            .pending_requests()
            .iter()
            .filter_map(|r| r["id"].as_str().map(str::to_string))
            .collect();
        ids.len() == 1 && ids[0] != first
    });
    assert!(asked_again, "pending: {ids:?} (the first was {first})");
    assert!(repo.clowder(&["approve", &ids[0]]).status.success());
    let output = wait_with_deadline(plan, DEADLINE);
    assert_eq!(output.status.code(), Some(0), "{}", stdout_of(&output));
    assert!(repo.pending_requests().is_empty());
}

// Its step's branch is looked at once it is completed: no clean-up.
const WITH_A_SUBPLAN: &str = r#"
[plan]
name = "par"
cleanup = false

[[step]]
id = "a"
prompt = "write a.txt"

[[step]]
id = "sub"
depends_on = ["a"]
plan = "sub.toml"

[[step]]
id = "b"
depends_on = ["sub"]
prompt = "write b.txt"
"#;

/// `sub.toml`: x → y, checked on a's work (the sub-plan builds on its step's branch).
fn subplan(y_prompt: &str) -> String {
    format!(
        "[plan]\nname = \"inner\"\nbase = \"elsewhere\"\nverify = \"test -e a.txt\"\n\n[[step]]\nid = \"x\"\nprompt = \"write x.txt\"\n\n[[step]]\nid = \"y\"\ndepends_on = [\"x\"]\nprompt = {y_prompt:?}\n"
    )
}

#[test]
fn a_subplan_step_runs_its_plan_on_its_branch_and_is_merged_like_a_step() {
    let repo = Repo::new(WITH_A_SUBPLAN);
    std::fs::write(repo.path("sub.toml"), subplan("write y.txt")).expect("write");
    let output = wait_with_deadline(repo.spawn_plan(), DEADLINE);
    let stdout = stdout_of(&output);
    assert_eq!(
        output.status.code(),
        Some(0),
        "{stdout}\n{}",
        stderr_of(&output)
    );
    assert_eq!(
        repo.step_states("par"),
        states(&[("a", "merged"), ("sub", "merged"), ("b", "merged")]),
        "{stdout}"
    );
    // The sub-plan ran under its step's lane name, its steps merged into the
    // step's branch, made from a's.
    assert_eq!(
        repo.step_states("par-sub"),
        states(&[("x", "merged"), ("y", "merged")]),
        "{stdout}"
    );
    let branch = repo.files_at("clowder/par-sub");
    for file in ["a.txt", "x.txt", "y.txt"] {
        assert!(branch.contains(&file.to_string()), "{file} in {branch:?}");
    }
    let files = repo.files_at("main");
    for file in ["a.txt", "x.txt", "y.txt", "b.txt"] {
        assert!(files.contains(&file.to_string()), "{file} in {files:?}");
    }
    assert!(
        repo.events("par/sub")
            .iter()
            .any(|e| e["event"] == "plan_done" && e["detail"] == "completed"),
        "{:?}",
        repo.events("par/sub")
    );
    assert!(repo.has_event("par", "merge_passed", "sub"));
    let status = repo.clowder(&["plan", "status"]);
    let listed = stdout_of(&status);
    assert!(listed.contains("par-sub"), "{listed}");
    assert!(listed.contains("par-sub-y"), "{listed}");
    assert!(repo.lane_processes().is_empty(), "a lane's agent is left");
}

#[test]
fn a_failed_subplan_fails_its_step_once_and_blocks_the_parents_dependents() {
    let repo = Repo::new(WITH_A_SUBPLAN);
    std::fs::write(repo.path("sub.toml"), subplan("write y.txt\nfail")).expect("write");
    let output = wait_with_deadline(repo.spawn_plan(), DEADLINE);
    let stdout = stdout_of(&output);
    assert_eq!(output.status.code(), Some(1), "{stdout}");
    assert_eq!(
        repo.step_states("par-sub"),
        states(&[("x", "merged"), ("y", "failed")]),
        "{stdout}"
    );
    assert_eq!(
        repo.step_states("par"),
        states(&[("a", "merged"), ("sub", "failed"), ("b", "blocked")]),
        "{stdout}"
    );
    // y had its retry inside the sub-plan; the sub-plan itself is not run again.
    assert_eq!(repo.prompts_of("par-sub-y").len(), 2);
    assert!(!repo.has_event("par", "step_retried", "sub"));
    assert!(repo.has_event("par", "step_blocked", "b"));
    let files = repo.files_at("main");
    assert!(files.contains(&"a.txt".to_string()), "{files:?}");
    for file in ["x.txt", "y.txt", "b.txt"] {
        assert!(!files.contains(&file.to_string()), "{file} in {files:?}");
    }
    assert!(repo.lane_processes().is_empty(), "a lane's agent is left");
}

#[test]
fn stopping_a_plan_stops_its_running_subplan_and_its_lanes() {
    let repo = Repo::new(WITH_A_SUBPLAN);
    std::fs::write(repo.path("sub.toml"), subplan("ticks 600\nwrite y.txt")).expect("write");
    let plan = repo.spawn_plan();
    assert!(wait_until(DEADLINE, || {
        std::fs::read_to_string(repo.path(".clowder/lanes/par-sub-y/harness.status"))
            .is_ok_and(|s| s.contains("\"session_running\""))
    }));
    let out = repo.clowder(&["plan", "stop", "par"]);
    assert!(out.status.success(), "{}", stderr_of(&out));
    let output = wait_with_deadline(plan, DEADLINE);
    assert_eq!(output.status.code(), Some(1), "{}", stdout_of(&output));
    assert_eq!(repo.state_of("par", "sub"), "failed");
    assert_eq!(repo.state_of("par-sub", "y"), "failed");
    assert!(repo.lane_processes().is_empty(), "y's agent is left");
}

const PLAN_A: &str =
    "[plan]\nname = \"a\"\ncleanup = false\n\n[[step]]\nid = \"b\"\nplan = \"sub.toml\"\n";

/// `a-b.toml`: a plan named as plan `a`'s sub-plan step `b` runs.
fn plan_a_b(step: &str) -> String {
    format!(
        "[plan]\nname = \"a-b\"\nverify = \"true\"\n\n[[step]]\nid = \"{step}\"\nprompt = \"write {step}.txt\"\n"
    )
}

/// Plan `a`'s sub-plan step `b` runs as plan `a-b`, and a plan of its own may
/// bear that name: each keeps its own lock, requests, merge scratch and checks,
/// prompts and events, and `plan pause a` pauses its sub-plan, not that plan.
#[test]
fn a_plan_named_like_a_subplan_shares_none_of_its_files() {
    let repo = Repo::new(PLAN_A);
    let sub = "[plan]\nname = \"inner\"\nverify = \"true\"\n\n[[step]]\nid = \"y\"\nprompt = \"ticks 20\\nwrite y.txt\"\n";
    std::fs::write(repo.path("sub.toml"), sub).expect("write");
    std::fs::write(repo.path("a-b.toml"), plan_a_b("z")).expect("write");
    let out = repo.clowder(&["plan", "run", "a-b.toml", "--headless"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));

    let plan = repo.spawn_plan();
    assert!(wait_until(DEADLINE, || {
        std::fs::read_to_string(repo.path(".clowder/lanes/a-b-y/harness.status"))
            .is_ok_and(|s| s.contains("\"session_running\""))
    }));
    let out = repo.clowder(&["plan", "pause", "a"]);
    assert!(out.status.success(), "{}", stderr_of(&out));
    let paused = wait_until(DEADLINE, || {
        repo.status_json("a/b").1[0]["status"] == "paused"
    });
    assert!(paused, "{}", repo.status_json("a/b").1);
    assert_eq!(repo.status_json("a-b").1[0]["status"], "completed");
    let out = repo.clowder(&["plan", "resume", "a"]);
    assert!(out.status.success(), "{}", stderr_of(&out));
    let output = wait_with_deadline(plan, DEADLINE);
    assert_eq!(output.status.code(), Some(0), "{}", stdout_of(&output));
    assert_eq!(repo.step_states("a/b"), states(&[("y", "merged")]));
    assert_eq!(repo.step_states("a-b"), states(&[("z", "merged")]));

    let plans = repo.path(".clowder/plans");
    for (home, step, other) in [("a/sub/b", "y", "z"), ("a-b", "z", "y")] {
        let home = plans.join(home);
        assert!(home.join("driver.lock").is_file(), "{}", home.display());
        assert!(home.join(format!("prompts/{step}.md")).is_file());
        assert!(!home.join(format!("prompts/{other}.md")).exists());
        assert!(home.join(format!("checks/verify-{step}.log")).is_file());
        assert!(!home.join(format!("checks/verify-{other}.log")).exists());
        assert!(!home.join("merge").exists(), "{}", home.display());
        assert!(!home.join("requests/pause").exists());
    }
    for (plan, step) in [("a/b", "y"), ("a-b", "z")] {
        let events = repo.events(plan);
        let steps: Vec<&str> = events.iter().filter_map(|e| e["step"].as_str()).collect();
        assert!(steps.iter().all(|s| *s == step), "{plan}: {events:?}");
        assert!(repo.has_event(plan, "merge_passed", step), "{events:?}");
    }
}

/// A plan whose lanes would be another plan's (`a-b`'s step `y` and `a`'s
/// sub-plan step `b`'s step `y` are both lane `a-b-y`) is refused.
#[test]
fn a_plan_whose_lanes_another_plan_has_is_refused() {
    let repo = Repo::new(PLAN_A);
    let sub = "[plan]\nname = \"inner\"\n\n[[step]]\nid = \"y\"\nprompt = \"write y.txt\"\n";
    std::fs::write(repo.path("sub.toml"), sub).expect("write");
    let out = repo.run_plan();
    assert_eq!(out.status.code(), Some(0), "{}", stdout_of(&out));
    std::fs::write(repo.path("a-b.toml"), plan_a_b("y")).expect("write");
    let out = repo.clowder(&["plan", "run", "a-b.toml", "--headless"]);
    let stderr = stderr_of(&out);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("plan a-b: step y's lane a-b-y is already the lane of step y of plan a-b")
            && stderr.contains("rename the plan or the step"),
        "{stderr}"
    );
    assert!(!repo.path(".clowder/plans/a-b.json").exists());
}

#[test]
fn a_sequential_subplan_step_is_refused_by_plan_check() {
    let repo = Repo::new(&WITH_A_SUBPLAN.replace(
        "plan = \"sub.toml\"",
        "plan = \"sub.toml\"\ncollaboration = \"sequential\"",
    ));
    std::fs::write(repo.path("sub.toml"), subplan("write y.txt")).expect("write");
    let out = repo.clowder(&["plan", "check", "plan.toml"]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = stderr_of(&out);
    assert!(
        stderr.contains("plan.toml:11:6")
            && stderr.contains("step[1].collaboration")
            && stderr.contains("is a sub-plan: it runs on a branch of its own"),
        "{stderr}"
    );
    // A sequential step cannot go on in a sub-plan step's worktree: it has none.
    let after = format!(
        "{WITH_A_SUBPLAN}\n[[step]]\nid = \"c\"\ndepends_on = [\"sub\"]\ncollaboration = \"sequential\"\nprompt = \"write c.txt\"\n"
    );
    std::fs::write(repo.path("plan.toml"), after).expect("write");
    let out = repo.clowder(&["plan", "check", "plan.toml"]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = stderr_of(&out);
    assert!(
        stderr.contains("plan.toml:21:6")
            && stderr.contains("its dependency \"sub\" is a sub-plan"),
        "{stderr}"
    );
}

#[test]
fn a_plan_killed_inside_its_subplan_resumes_both() {
    let repo = Repo::new(WITH_A_SUBPLAN);
    std::fs::write(repo.path("sub.toml"), subplan("ticks 20\nwrite y.txt")).expect("write");
    let mut plan = repo.spawn_plan();
    let y_running = wait_until(DEADLINE, || {
        repo.state_of("par-sub", "x") == "merged"
            && std::fs::read_to_string(repo.path(".clowder/lanes/par-sub-y/harness.status"))
                .is_ok_and(|s| s.contains("\"session_running\""))
    });
    assert!(y_running, "{:?}", repo.step_states("par-sub"));
    plan.kill().expect("SIGKILL the plan");
    let _ = plan.wait();
    let output = wait_with_deadline(repo.spawn_plan(), DEADLINE);
    let stdout = stdout_of(&output);
    assert_eq!(
        output.status.code(),
        Some(0),
        "{stdout}\n{}",
        stderr_of(&output)
    );
    assert_eq!(
        repo.step_states("par"),
        states(&[("a", "merged"), ("sub", "merged"), ("b", "merged")])
    );
    assert_eq!(
        repo.step_states("par-sub"),
        states(&[("x", "merged"), ("y", "merged")])
    );
    // Done steps stayed done, in the plan and in its sub-plan; y's lane resumed.
    assert_eq!(repo.prompts_of("par-a").len(), 1);
    assert_eq!(repo.prompts_of("par-sub-x").len(), 1);
    assert_eq!(repo.prompts_of("par-sub-y").len(), 2);
    let files = repo.files_at("main");
    for file in ["a.txt", "x.txt", "y.txt", "b.txt"] {
        assert!(files.contains(&file.to_string()), "{file} in {files:?}");
    }
    assert!(repo.lane_processes().is_empty(), "a lane's agent is left");
}

#[test]
fn pausing_a_plan_pauses_its_running_subplan() {
    let repo = Repo::new(WITH_A_SUBPLAN);
    // x runs long enough for the pause to land while it runs.
    let slow = subplan("write y.txt").replace("write x.txt", "ticks 30\\nwrite x.txt");
    std::fs::write(repo.path("sub.toml"), slow).expect("write");
    let plan = repo.spawn_plan();
    assert!(wait_until(DEADLINE, || repo.state_of("par-sub", "x") == "running"));
    let out = repo.clowder(&["plan", "pause", "par"]);
    assert!(out.status.success(), "{}", stderr_of(&out));
    // x goes on and is merged in the sub-plan; y, ready by then, does not start.
    assert!(wait_until(DEADLINE, || repo.state_of("par-sub", "x") == "merged"));
    let paused = repo.clowder(&["plan", "status", "par-sub", "--json"]);
    let rows: Value = serde_json::from_str(&stdout_of(&paused)).expect("JSON");
    assert_eq!(rows[0]["status"], "paused");
    assert_eq!(repo.state_of("par-sub", "y"), "pending");
    let out = repo.clowder(&["plan", "resume", "par"]);
    assert!(out.status.success(), "{}", stderr_of(&out));
    let output = wait_with_deadline(plan, DEADLINE);
    assert_eq!(output.status.code(), Some(0), "{}", stdout_of(&output));
    assert_eq!(repo.state_of("par-sub", "y"), "merged");
    assert!(repo.lane_processes().is_empty(), "a lane's agent is left");
}

#[test]
fn a_subplan_step_with_two_dependencies_builds_on_both() {
    let repo = Repo::new(
        "[plan]\nname = \"two\"\nmax_parallel = 2\n\n[[step]]\nid = \"a\"\nprompt = \"write a.txt\"\n\n[[step]]\nid = \"c\"\nprompt = \"write c.txt\"\n\n[[step]]\nid = \"sub\"\ndepends_on = [\"a\", \"c\"]\nplan = \"sub.toml\"\n",
    );
    let sub = "[plan]\nname = \"inner\"\nverify = \"test -e a.txt && test -e c.txt\"\n\n[[step]]\nid = \"x\"\nprompt = \"write x.txt\"\n";
    std::fs::write(repo.path("sub.toml"), sub).expect("write");
    let output = wait_with_deadline(repo.spawn_plan(), DEADLINE);
    let stdout = stdout_of(&output);
    assert_eq!(output.status.code(), Some(0), "{stdout}");
    assert_eq!(repo.state_of("two-sub", "x"), "merged", "{stdout}");
    let files = repo.files_at("main");
    for file in ["a.txt", "c.txt", "x.txt"] {
        assert!(files.contains(&file.to_string()), "{file} in {files:?}");
    }
    assert!(repo.lane_processes().is_empty(), "a lane's agent is left");
}

#[test]
fn a_subplans_lane_names_are_checked_with_its_steps_prefix() {
    let repo = Repo::new(&WITH_A_SUBPLAN.replace(
        "name = \"par\"",
        "name = \"a-long-parent-plan-name-for-a-check\"",
    ));
    std::fs::write(repo.path("sub.toml"), subplan("write y.txt")).expect("write");
    let out = repo.clowder(&["plan", "check", "plan.toml"]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = stderr_of(&out);
    assert!(
        stderr.contains("sub.toml:")
            && stderr.contains(
                "\"a-long-parent-plan-name-for-a-check-sub-x\", longer than 40 characters"
            ),
        "{stderr}"
    );
}

/// A `verify` script that first writes to `overlap` each process recorded in
/// `pids` (by an earlier verify) that is still alive, then, unless `pass`
/// exists, records its own pid and its `sleep 987`'s there and waits for the sleep.
struct SlowVerify {
    dir: TempDir,
}

impl SlowVerify {
    fn new() -> SlowVerify {
        let verify = SlowVerify {
            dir: tempfile::tempdir().expect("tempdir"),
        };
        let [pids, pass, overlap] = ["pids", "pass", "overlap"].map(|f| verify.path(f));
        let script = format!(
            "#!/bin/sh\n\
             for p in $(cat '{pids}' 2>/dev/null); do\n\
             \x20 if [ -e /proc/$p ] && ! grep -q ') Z' /proc/$p/stat; then echo $p >> '{overlap}'; fi\n\
             done\n\
             if [ -e '{pass}' ]; then exit 0; fi\n\
             echo $$ >> '{pids}'\n\
             sleep 987 &\n\
             echo $! >> '{pids}'\n\
             wait\n",
            pass = pass.display(),
            pids = pids.display(),
            overlap = overlap.display()
        );
        let path = verify.path("verify.sh");
        std::fs::write(&path, script).expect("write the verify script");
        let chmod = Command::new("chmod").arg("+x").arg(&path).status();
        assert!(chmod.is_ok_and(|s| s.success()));
        verify
    }

    fn path(&self, file: &str) -> PathBuf {
        self.dir.path().join(file)
    }

    fn plan(&self, name: &str) -> String {
        format!(
            "[plan]\nname = \"{name}\"\nverify = \"{}\"\n\n[[step]]\nid = \"a\"\nprompt = \"write a.txt\"\n",
            self.path("verify.sh").display()
        )
    }

    /// The recorded pids, once `runs` verifies and their sleeps wrote theirs.
    fn started(&self) -> Vec<i32> {
        self.started_times(1)
    }

    fn started_times(&self, runs: usize) -> Vec<i32> {
        let mut pids = Vec::new();
        let started = wait_until(DEADLINE, || {
            pids = std::fs::read_to_string(self.path("pids"))
                .unwrap_or_default()
                .lines()
                .filter_map(|l| l.trim().parse().ok())
                .collect();
            pids.len() >= 2 * runs
        });
        assert!(started, "the verify did not start");
        pids
    }
}

/// Whether `pid` is alive and still the verify script or its sleep.
fn verify_alive(pid: i32) -> bool {
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    let cmdline = String::from_utf8_lossy(&cmdline);
    common::pid_alive(pid) && (cmdline.contains("987") || cmdline.contains("verify.sh"))
}

fn all_gone(pids: &[i32]) -> bool {
    wait_until(Duration::from_secs(20), || {
        pids.iter().all(|&pid| !verify_alive(pid))
    })
}

#[test]
fn a_verify_running_when_plan_run_is_stopped_by_a_signal_is_ended_and_the_exit_code_names_it() {
    let cases: [(&str, &[i32], i32); 4] = [
        ("sigint", &[libc::SIGINT], 130),
        ("twice", &[libc::SIGINT, libc::SIGINT], 130),
        ("sigterm", &[libc::SIGTERM], 143),
        ("sighup", &[libc::SIGHUP], 129),
    ];
    for (name, signals, code) in cases {
        let verify = SlowVerify::new();
        let repo = Repo::new(&verify.plan(name));
        let plan = repo.spawn_plan();
        let pids = verify.started();
        for &signal in signals {
            common::send_signal(plan.id(), signal);
            std::thread::sleep(Duration::from_millis(300));
        }
        let output = wait_with_deadline(plan, DEADLINE);
        assert_eq!(
            output.status.code(),
            Some(code),
            "{name}: {}\n{}",
            stdout_of(&output),
            stderr_of(&output)
        );
        assert!(
            all_gone(&pids),
            "{name}: the verify outlived plan run: {pids:?}"
        );
        // Stopped, not failed: `plan run` again goes on with the merge.
        assert_eq!(repo.state_of(name, "a"), "done", "{name}");
        let left = repo.path(&format!(".clowder/plans/{name}/running"));
        let records = std::fs::read_dir(&left).map_or(0, |d| d.count());
        assert_eq!(
            records,
            0,
            "{name}: running records left in {}",
            left.display()
        );
    }
}

#[test]
fn a_done_when_running_when_plan_run_is_stopped_is_ended_with_it() {
    let check = SlowVerify::new();
    let plan = format!(
        "[plan]\nname = \"dw\"\n\n[[step]]\nid = \"a\"\nprompt = \"write a.txt\"\ndone_when = \"{}\"\n",
        check.path("verify.sh").display()
    );
    let repo = Repo::new(&plan);
    let plan = repo.spawn_plan();
    let pids = check.started();
    common::send_signal(plan.id(), libc::SIGTERM);
    let output = wait_with_deadline(plan, DEADLINE);
    assert_eq!(output.status.code(), Some(143), "{}", stdout_of(&output));
    assert!(all_gone(&pids), "the done_when outlived plan run: {pids:?}");
    assert!(repo.check_processes().is_empty(), "a check is left");
}

/// SIGKILLs during verify, three times over: each restart ends the verify the
/// killed run left before it verifies again, and none is left at the end.
#[test]
fn after_a_sigkill_during_verify_the_restart_ends_the_old_verify_before_it_verifies_again() {
    let verify = SlowVerify::new();
    let repo = Repo::new(&verify.plan("vk"));
    let mut pids = Vec::new();
    for kill in 1..=3 {
        let mut plan = repo.spawn_plan();
        pids = verify.started_times(kill);
        plan.kill().expect("SIGKILL the plan");
        let _ = plan.wait();
    }
    std::fs::write(verify.path("pass"), "").expect("write pass");
    let output = wait_with_deadline(repo.spawn_plan(), DEADLINE);
    let stdout = stdout_of(&output);
    assert_eq!(
        output.status.code(),
        Some(0),
        "{stdout}\n{}",
        stderr_of(&output)
    );
    let overlap = std::fs::read_to_string(verify.path("overlap")).unwrap_or_default();
    assert_eq!(
        overlap, "",
        "a verify ran while an earlier one's processes lived"
    );
    assert!(all_gone(&pids), "a killed run's verify is left: {pids:?}");
    assert!(repo.check_processes().is_empty(), "a check is left running");
    assert!(stdout.contains("of an earlier run"), "{stdout}");
    assert_eq!(repo.state_of("vk", "a"), "merged");
}

const TIMEOUTS: &str = r#"
[plan]
name = "to"
verify = "echo checking; echo last words; sleep 987"
verify_timeout = "30m"
done_when_timeout = "30m"
max_parallel = 2

[[step]]
id = "a"
prompt = "write a.txt"
verify_timeout = "2s"

[[step]]
id = "b"
prompt = "write b.txt"
done_when = "echo still thinking; sleep 987"
done_when_timeout = "1s"
"#;

#[test]
fn a_hanging_verify_or_done_when_is_killed_at_its_timeout_and_counts_as_failed() {
    let repo = Repo::new(TIMEOUTS);
    let plan = repo.spawn_plan();
    let settled = wait_until(DEADLINE, || {
        repo.state_of("to", "a") == "needs review" && repo.state_of("to", "b") == "failed"
    });
    assert!(settled, "{:?}", repo.step_states("to"));
    let mut bodies = Vec::new();
    assert!(wait_until(DEADLINE, || {
        bodies = repo
            .pending_requests()
            .iter()
            .filter_map(|r| r["body"].as_str().map(str::to_string))
            .collect();
        !bodies.is_empty()
    }));
    assert!(
        bodies
            .iter()
            .any(|b| b.contains("timed out after 2s (verify_timeout)") && b.contains("last words")),
        "{bodies:?}"
    );
    let failed = repo
        .events("to")
        .into_iter()
        .find(|e| e["event"] == "step_failed" && e["step"] == "b")
        .expect("b failed");
    let detail = failed["detail"].as_str().unwrap_or_default();
    assert!(
        detail.contains("timed out after 1s (done_when_timeout)")
            && detail.contains("still thinking"),
        "{detail}"
    );
    assert!(!repo.files_at("main").contains(&"a.txt".to_string()));
    let out = repo.clowder(&["plan", "stop", "to"]);
    assert!(out.status.success(), "{}", stderr_of(&out));
    let output = wait_with_deadline(plan, DEADLINE);
    assert_eq!(output.status.code(), Some(1), "{}", stdout_of(&output));
    assert!(repo.check_processes().is_empty(), "a check is left running");
}

const VERIFY_COMMITS: &str = r#"
[plan]
name = "vc"
verify = "echo made > made.txt && git add made.txt && git -c user.name=V -c user.email=v@example.com commit --quiet -m 'verify commit' && echo stray > stray.txt"

[[step]]
id = "a"
prompt = "write a.txt"
"#;

#[test]
fn a_verify_that_commits_or_changes_the_tree_fails_and_base_never_moves_to_its_work() {
    let repo = Repo::new(VERIFY_COMMITS);
    let before = repo.git(&["rev-parse", "main"]);
    let plan = repo.spawn_plan();
    assert!(
        wait_until(DEADLINE, || repo.state_of("vc", "a") == "needs review"),
        "{:?}",
        repo.step_states("vc")
    );
    assert_eq!(repo.git(&["rev-parse", "main"]), before, "base moved");
    let mut bodies = Vec::new();
    assert!(wait_until(DEADLINE, || {
        bodies = repo
            .pending_requests()
            .iter()
            .filter_map(|r| r["body"].as_str().map(str::to_string))
            .collect();
        !bodies.is_empty()
    }));
    let body = &bodies[0];
    assert!(
        body.contains("HEAD moved from the merge commit")
            && body.contains("verify commit")
            && body.contains("stray.txt"),
        "{body}"
    );
    common::send_signal(plan.id(), libc::SIGTERM);
    let output = wait_with_deadline(plan, DEADLINE);
    assert_eq!(output.status.code(), Some(143), "{}", stdout_of(&output));
    assert!(!repo.files_at("main").contains(&"made.txt".to_string()));
}

const DIAMOND_CONFLICT: &str = r#"
[plan]
name = "dc"
max_parallel = 3

[[step]]
id = "a"
prompt = "write a.txt"

[[step]]
id = "b"
depends_on = ["a"]
prompt = "write shared.txt from b"

[[step]]
id = "c"
depends_on = ["a"]
prompt = "ticks 30\nwrite shared.txt from c"

[[step]]
id = "d"
depends_on = ["b", "c"]
prompt = "write d.txt"
"#;

#[test]
fn a_step_whose_dependencies_conflict_waits_and_is_merged_only_after_both() {
    let repo = Repo::new(DIAMOND_CONFLICT);
    let plan = repo.spawn_plan();
    let waiting = wait_until(DEADLINE, || {
        repo.state_of("dc", "c") == "needs review" && repo.has_event("dc", "step_waiting", "d")
    });
    assert!(waiting, "{:?}", repo.step_states("dc"));
    let wait = repo
        .events("dc")
        .into_iter()
        .find(|e| e["event"] == "step_waiting" && e["step"] == "d")
        .expect("d waits");
    let detail = wait["detail"].as_str().unwrap_or_default();
    assert!(
        detail.contains("waits until c is merged into main")
            && detail.contains("conflicts in: shared.txt")
            && detail.contains("CONFLICT")
            && !detail.contains("it answered no"),
        "{detail}"
    );
    // d does not run without c, and base does not get d before c.
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(repo.state_of("dc", "d"), "pending");
    assert!(!repo.files_at("main").contains(&"d.txt".to_string()));
    // A human resolves c with base, and merges it: d goes on with c's work.
    let c = repo.path(".clowder/worktrees/dc-c");
    let _ = isolate(
        Command::new("git")
            .arg("-C")
            .arg(&c)
            .args(["merge", "main"]),
    )
    .output();
    std::fs::write(c.join("shared.txt"), "from b and c\n").expect("write");
    git_in(&c, &["add", "shared.txt"]);
    git_in(&c, &["commit", "--quiet", "-m", "resolve"]);
    let out = repo.clowder(&["plan", "merge", "dc", "c"]);
    assert!(out.status.success(), "{}", stderr_of(&out));
    let output = wait_with_deadline(plan, DEADLINE);
    assert_eq!(output.status.code(), Some(0), "{}", stdout_of(&output));
    assert_eq!(repo.git(&["show", "main:shared.txt"]), "from b and c");
    assert!(repo.files_at("main").contains(&"d.txt".to_string()));
    let merges = repo.git(&["log", "--merges", "--format=%s", "--reverse", "main"]);
    let order: Vec<&str> = merges
        .lines()
        .filter(|l| l.starts_with("Merge step"))
        .collect();
    assert_eq!(
        order,
        [
            "Merge step a of plan dc",
            "Merge step b of plan dc",
            "Merge step c of plan dc",
            "Merge step d of plan dc"
        ]
    );
}
