//! The control room end to end: the real binary in a real terminal (tmux), keys
//! sent with `send-keys`, the screen read with `capture-pane`, processes checked
//! in `/proc`. `.ci/run` installs tmux where it is missing.

use crate::common;

use std::path::Path;
use std::time::Duration;

use common::tmux::{Tmux, room_command};
use common::*;

fn first_pgid(pidfile: &Path) -> Option<i32> {
    let text = std::fs::read_to_string(pidfile).ok()?;
    text.lines().next()?.split_whitespace().nth(1)?.parse().ok()
}

/// A project whose agent runs `fake-agent.sh FIRST` as the run's first session
/// and `fake-agent.sh REST` as every later one.
fn first_then_rest(first: &str, rest: &str) -> Project {
    let project = Project::new(
        "[agent]\ncommand = \"./agent.sh\"\nargs = []\n\n[backoff]\ninitial_delay_secs = 0.2\n\n[watchdog]\nstale_timeout_mins = 10\n",
    );
    project.write(
        "agent.sh",
        &format!(
            "#!/usr/bin/env bash\nif [ \"$HARNESS_GLOBAL_ITERATION\" = 1 ]; then exec {agent} {first}; else exec {agent} {rest}; fi\n",
            agent = fake_agent().display()
        ),
    );
    make_executable(&project.path("agent.sh"));
    project
}

#[test]
fn pause_kill_and_stop_from_the_keyboard() {
    // The first session runs until killed; later ones finish in a few seconds.
    let project = first_then_rest("slow 600", "slow 3");
    let pidfile = project.path("pids.txt");
    let command = room_command(
        &pidfile,
        10,
        "echo CLOWDER_EXIT=$?; stty -a | tr ' ;' '\\n\\n' | grep -x -- '-\\?icanon'; ",
    );
    let tmux = Tmux::start(project.root(), &command, 120, 40);

    let screen = tmux.wait_for("global 1");
    assert!(screen.contains("running"), "{screen}");
    assert!(wait_until(DEADLINE, || first_pgid(&pidfile).is_some()));
    let pgid = first_pgid(&pidfile).expect("agent pgid");

    // p: the whole group is stopped (state T), then continued.
    tmux.keys(&["p"]);
    assert!(
        wait_until(DEADLINE, || {
            let states = group_states(pgid);
            !states.is_empty() && states.iter().all(|s| *s == 'T')
        }),
        "group not stopped: {:?}",
        group_states(pgid)
    );
    tmux.wait_for("‖ paused");
    tmux.keys(&["p"]);
    assert!(
        wait_until(DEADLINE, || {
            let states = group_states(pgid);
            !states.is_empty() && states.iter().all(|s| *s != 'T')
        }),
        "group not resumed: {:?}",
        group_states(pgid)
    );

    // K asks first; y kills; the loop goes on with the next session.
    tmux.keys(&["K"]);
    tmux.wait_for("Kill the session?");
    tmux.keys(&["y"]);
    tmux.wait_for("1 by you");
    assert!(wait_until(DEADLINE, || live_group_members(pgid).is_empty()));
    tmux.wait_for("global 2");

    // s: stop after the current session; the loop ends and the screen says so.
    tmux.keys(&["s"]);
    tmux.wait_for("stopped: user_stop");
    tmux.keys(&["q"]);
    let screen = tmux.wait_for("CLOWDER_EXIT=");
    assert!(screen.contains("CLOWDER_EXIT=0"), "{screen}");
    assert!(screen.contains("clowder: stopped (user_stop)"), "{screen}");
    // The terminal is back in cooked mode: `stty -a` lists `icanon`, not `-icanon`.
    let restored = wait_until(DEADLINE, || {
        tmux.screen().lines().any(|line| line.trim() == "icanon")
    });
    assert!(restored, "terminal left in raw mode:\n{}", tmux.screen());

    let killed = project.events_named("session_killed");
    assert_eq!(killed.len(), 1);
    assert_eq!(killed[0]["reason"], "user");
    assert!(!project.events_named("paused").is_empty());
    assert!(!project.events_named("resumed").is_empty());
}

#[test]
fn quit_asks_and_stop_now_leaves_nothing_running() {
    let project = Project::new(&fast_config(
        &["slow", "600"],
        "[watchdog]\nstale_timeout_mins = 10\n",
    ));
    let pidfile = project.path("pids.txt");
    let command = room_command(&pidfile, 5, "echo CLOWDER_EXIT=$?; ");
    let tmux = Tmux::start(project.root(), &command, 80, 24);
    tmux.wait_for("global 1");
    assert!(wait_until(DEADLINE, || first_pgid(&pidfile).is_some()));
    let pgid = first_pgid(&pidfile).expect("agent pgid");
    tmux.keys(&["C-c"]);
    tmux.wait_for("Quit clowder?");
    // `S` stops now, in the quit dialog as in the main view.
    tmux.keys(&["S"]);
    let screen = tmux.wait_for("CLOWDER_EXIT=");
    assert!(screen.contains("clowder: stopped (user_stop)"), "{screen}");
    assert!(live_group_members(pgid).is_empty());
}

fn make_executable(path: &Path) {
    use std::os::unix::fs::PermissionsExt;
    let mut permissions = std::fs::metadata(path).expect("metadata").permissions();
    permissions.set_mode(0o755);
    std::fs::set_permissions(path, permissions).expect("chmod");
}

#[test]
fn the_bundled_demo_opens_the_control_room() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let state = tempfile::tempdir().expect("tempdir");
    let command = format!(
        "DEMO_PACE=0.05 DEMO_STATE_DIR={state} {clowder} -c assets/demo/harness.toml; echo CLOWDER_EXIT=$?; sleep 600",
        state = state.path().display(),
        clowder = clowder_bin().display()
    );
    let tmux = Tmux::start(root, &command, 120, 40);
    // Readable stream-json: tool calls on one line, the final result with its cost.
    tmux.wait_for("▶ Read  TODO.md");
    tmux.wait_for("■ result: success");
    let screen = tmux.wait_for("✓ done: max_iterations");
    assert!(
        screen.contains("rate limits 0 in a row · 1 total"),
        "{screen}"
    );
    tmux.keys(&["q"]);
    let screen = tmux.wait_for("CLOWDER_EXIT=");
    assert!(screen.contains("CLOWDER_EXIT=0"), "{screen}");
}

#[test]
fn an_agent_asking_through_the_gate_is_answered_from_the_keyboard() {
    let project = Project::new(
        "[agent]\ncommand = \"./agent.sh\"\nargs = []\n\n[backoff]\ninitial_delay_secs = 0.2\n\n[watchdog]\nstale_timeout_mins = 10\n",
    );
    // A fake agent that asks before two tool calls, the way Claude Code's
    // PreToolUse hook runs `clowder gate`, and records the answers.
    let hook_input = |command: &str| {
        format!(
            "{{\"session_id\":\"s-1\",\"transcript_path\":\"/tmp/t.jsonl\",\"cwd\":\"$PWD\",\"permission_mode\":\"default\",\"hook_event_name\":\"PreToolUse\",\"tool_name\":\"Bash\",\"tool_input\":{{\"command\":\"{command}\"}},\"tool_use_id\":\"toolu_1\"}}"
        )
    };
    project.write(
        "agent.sh",
        &format!(
            "#!/usr/bin/env bash\n\
             {agent} normal 2\n\
             echo \"{first}\" | {clowder} gate --timeout 60s > answer-1.json 2>/dev/null\n\
             echo \"{second}\" | {clowder} gate --timeout 60s > answer-2.json 2>/dev/null\n\
             echo \"{third}\" | {clowder} gate --timeout 60s > answer-3.json 2>/dev/null\n\
             echo \"{fourth}\" | {clowder} gate --timeout 60s > answer-4.json 2>/dev/null\n\
             {agent} normal 1\n",
            agent = fake_agent().display(),
            clowder = clowder_bin().display(),
            first = hook_input("make deploy").replace('"', "\\\""),
            second = hook_input("git push --force").replace('"', "\\\""),
            third = hook_input("cargo test --all").replace('"', "\\\""),
            fourth = hook_input("cargo test --all --release").replace('"', "\\\""),
        ),
    );
    make_executable(&project.path("agent.sh"));
    let command = format!(
        "{clowder} 1; echo CLOWDER_EXIT=$?; sleep 600",
        clowder = clowder_bin().display()
    );
    let tmux = Tmux::start(project.root(), &command, 120, 40);

    tmux.wait_for("▶ Bash  make deploy");
    tmux.keys(&["a"]);
    assert!(wait_until(DEADLINE, || {
        std::fs::read_to_string(project.path("answer-1.json")).is_ok_and(|t| t.contains("allow"))
    }));
    let answer: serde_json::Value =
        serde_json::from_str(&project.read("answer-1.json")).expect("allow JSON");
    assert_eq!(answer["hookSpecificOutput"]["permissionDecision"], "allow");

    tmux.wait_for("▶ Bash  git push --force");
    tmux.keys(&["r"]);
    tmux.wait_for("Reject");
    // Keys typed as the reason never act: `q`, `s`, `p` and `K` are just text here.
    tmux.keys(&["-l", "no force pushes, ask Kim"]);
    tmux.keys(&["Enter"]);
    assert!(wait_until(DEADLINE, || {
        std::fs::read_to_string(project.path("answer-2.json")).is_ok_and(|t| t.contains("deny"))
    }));
    let answer: serde_json::Value =
        serde_json::from_str(&project.read("answer-2.json")).expect("deny JSON");
    assert_eq!(answer["hookSpecificOutput"]["permissionDecision"], "deny");
    assert_eq!(
        answer["hookSpecificOutput"]["permissionDecisionReason"],
        "no force pushes, ask Kim"
    );
    // A: approve and always allow; the next call with that prefix needs nobody.
    tmux.wait_for("▶ Bash  cargo test --all");
    tmux.keys(&["A"]);
    for answer_file in ["answer-3.json", "answer-4.json"] {
        assert!(
            wait_until(DEADLINE, || {
                std::fs::read_to_string(project.path(answer_file))
                    .is_ok_and(|t| t.contains("allow"))
            }),
            "{answer_file} never allowed; screen:\n{}",
            tmux.screen()
        );
    }
    let answer: serde_json::Value =
        serde_json::from_str(&project.read("answer-4.json")).expect("allow JSON");
    assert!(
        answer["hookSpecificOutput"]["permissionDecisionReason"]
            .as_str()
            .is_some_and(|r| r.starts_with("allowed by the rule")),
        "{answer}"
    );
    assert!(
        project
            .read("harness.toml")
            .contains("prefix = \"cargo test --all\"")
    );
    let screen = tmux.wait_for("✓ done: max_iterations");
    assert!(!screen.contains("Quit clowder?"), "{screen}");
    tmux.keys(&["q"]);
    tmux.wait_for("CLOWDER_EXIT=0");
}

#[test]
fn killing_a_paused_session_lets_its_term_handler_run() {
    let project = Project::new(&fast_config(
        &["term-marker", "terminated.txt"],
        "[watchdog]\nstale_timeout_mins = 10\n",
    ));
    let pidfile = project.path("pids.txt");
    let command = room_command(&pidfile, 1, "echo CLOWDER_EXIT=$?; ");
    let tmux = Tmux::start(project.root(), &command, 120, 40);
    tmux.wait_for("global 1");
    assert!(wait_until(DEADLINE, || first_pgid(&pidfile).is_some()));
    let pgid = first_pgid(&pidfile).expect("agent pgid");
    tmux.keys(&["p"]);
    assert!(wait_until(DEADLINE, || {
        let states = group_states(pgid);
        !states.is_empty() && states.iter().all(|s| *s == 'T')
    }));
    // A stopped process runs no handler: the kill must continue it after TERM.
    tmux.keys(&["K"]);
    tmux.wait_for("Kill the session?");
    tmux.keys(&["y"]);
    assert!(
        wait_until(DEADLINE, || project.path("terminated.txt").exists()),
        "the agent's TERM handler never ran"
    );
    assert!(wait_until(DEADLINE, || live_group_members(pgid).is_empty()));
    // The event follows the group's end: wait for it rather than race it.
    assert!(wait_until(DEADLINE, || !project
        .events_named("session_killed")
        .is_empty()));
    let killed = project.events_named("session_killed");
    assert_eq!(killed.len(), 1);
    assert_eq!(killed[0]["needed_sigkill"], false);
    // The agent had done nothing when it was killed: the one iteration ran, and
    // nothing came of it.
    tmux.wait_for("✗ failed: max_iterations");
    tmux.keys(&["q"]);
    tmux.wait_for("CLOWDER_EXIT=0");
}

#[test]
fn detach_leaves_the_loop_running_in_the_background() {
    let project = Project::new(&fast_config(&["slow", "600"], ""));
    let command = format!(
        "{clowder} 5; echo CLOWDER_EXIT=$?; sleep 600",
        clowder = clowder_bin().display()
    );
    let tmux = Tmux::start(project.root(), &command, 120, 40);
    tmux.wait_for("global 1");
    tmux.keys(&["q"]);
    tmux.wait_for("d  detach");
    tmux.keys(&["d"]);
    // The shell has its prompt back at once, with exit code 0.
    let screen = tmux.wait_for("CLOWDER_EXIT=0");
    assert!(screen.contains("clowder: detached"), "{screen}");

    // The process that holds the folder's lock is the loop, alive, on its own
    // session, with no terminal.
    let holder: i32 = project
        .read(".clowder/lock")
        .trim()
        .parse()
        .expect("pid in the lock");
    assert!(pid_alive(holder));
    assert!(screen.contains(&format!("PID {holder}")), "{screen}");
    let stat = std::fs::read_to_string(format!("/proc/{holder}/stat")).expect("stat");
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .expect("stat")
        .1
        .split_whitespace()
        .collect();
    assert_eq!(fields[3], holder.to_string(), "session id: {stat}");
    for fd in 0..=2 {
        let target = std::fs::read_link(format!("/proc/{holder}/fd/{fd}")).expect("fd");
        assert_eq!(target, Path::new("/dev/null"));
    }
    // It goes on writing the status file: the session still runs.
    let status = project.status();
    assert_eq!(status["pid"], holder);
    assert_eq!(status["state"], "session_running");
    let pgid = status["pgid"].as_i64().expect("pgid") as i32;
    assert!(!live_group_members(pgid).is_empty());
    // A second loop in the folder is refused, naming the detached one.
    let second = project.run(&["--headless", "1"]);
    assert_eq!(second.status.code(), Some(2));
    assert!(stderr_of(&second).contains(&holder.to_string()));

    // Stopped from outside like any headless loop: nothing is left behind.
    // SIGINT, and again while it lives: two within 3 s kill the session now,
    // however slow the machine is between them.
    assert!(
        wait_until(DEADLINE, || {
            if !pid_alive(holder) {
                return true;
            }
            send_signal(holder as u32, libc::SIGINT);
            std::thread::sleep(Duration::from_millis(300));
            false
        }),
        "the detached loop did not stop"
    );
    assert!(wait_until(DEADLINE, || live_group_members(pgid).is_empty()));
    assert!(wait_until(DEADLINE, || project.status()["state"] == "stopped"));
}

#[test]
fn an_abandoned_request_is_marked_and_its_approval_refused() {
    let project = Project::new(&fast_config(&["normal"], ""));
    let command = format!(
        "{clowder} 1; echo CLOWDER_EXIT=$?; sleep 600",
        clowder = clowder_bin().display()
    );
    let tmux = Tmux::start(project.root(), &command, 80, 24);
    tmux.wait_for("✓ done: max_iterations");
    // A gate that is killed while it waits: nobody will read an answer.
    let mut gate = project
        .command(&["gate"])
        .stdin(std::process::Stdio::piped())
        .spawn()
        .expect("spawn clowder gate");
    {
        use std::io::Write;
        let mut stdin = gate.stdin.take().expect("stdin");
        stdin
            .write_all(
                br#"{"hook_event_name":"PreToolUse","tool_name":"Bash","tool_input":{"command":"make deploy"}}"#,
            )
            .expect("write stdin");
    }
    tmux.wait_for("▶ Bash  make deploy");
    gate.kill().expect("SIGKILL the gate");
    gate.wait().expect("reap");
    tmux.wait_for("⊘ Bash  make");
    tmux.keys(&["a"]);
    tmux.wait_for("refused: request");
    let decided = std::fs::read_dir(project.path(".clowder/approvals/decided"))
        .expect("decided/")
        .count();
    assert_eq!(decided, 0, "no decision was written");
    tmux.keys(&["q"]);
    tmux.wait_for("CLOWDER_EXIT=0");
}

#[test]
fn closing_the_terminal_stops_the_loop_and_leaves_no_session_behind() {
    let project = Project::new(&fast_config(&["slow", "600"], ""));
    let pidfile = project.path("pids.txt");
    let command = room_command(&pidfile, 10, "");
    let tmux = Tmux::start(project.root(), &command, 120, 40);
    tmux.wait_for("global 1");
    assert!(wait_until(Duration::from_secs(30), || first_pgid(&pidfile).is_some()));
    let agent = first_pgid(&pidfile).expect("the agent's group");
    let clowder = project.events_named("loop_start")[0]["pid"]
        .as_i64()
        .expect("clowder's pid") as i32;
    assert!(!live_group_members(agent).is_empty());

    // The terminal goes away (an ssh connection dropped, a window closed).
    drop(tmux);
    assert!(
        wait_until(Duration::from_secs(30), || !pid_alive(clowder)),
        "clowder outlived its terminal"
    );
    assert!(
        wait_until(Duration::from_secs(30), || live_group_members(agent)
            .is_empty()),
        "the session was left running: {:?}",
        live_group_members(agent)
    );
    let ends = project.events_named("loop_end");
    assert_eq!(ends.len(), 1, "{:#?}", project.events());
}

#[test]
fn the_live_session_is_shown_by_its_reader_and_an_older_one_by_a_follower() {
    // The first session ends at once; the second writes a line every 0.1 s.
    let project = first_then_rest("normal 3", "slow 600");
    let pidfile = project.path("pids.txt");
    let command = room_command(&pidfile, 3, "echo CLOWDER_EXIT=$?; ");
    let tmux = Tmux::start(project.root(), &command, 120, 40);
    tmux.wait_for("global 2 · live");
    tmux.wait_for("Step 20: working");
    let clowder: u32 = project
        .read(".clowder/lock")
        .trim()
        .parse()
        .expect("pid in the lock");
    // The live session is read once, by its reader: no follower reads it again.
    assert_eq!(threads_named(clowder, "clowder-reader"), 1);
    assert_eq!(threads_named(clowder, "output-follower"), 0);

    // An older session is followed from its file.
    tmux.keys(&["["]);
    // The header changes with the key; the follower's first lines come after.
    tmux.wait_for_all(&["global 1 · earlier session", "■ result: success"]);
    assert_eq!(threads_named(clowder, "output-follower"), 1);

    // Back to the live one: its lines so far, and new ones after them. The pane is
    // refilled from the file in batches, so a screen taken right after the key may
    // show only its first lines: wait for the refill, then for growth.
    tmux.keys(&["]"]);
    tmux.wait_for("global 2 · live");
    let last_step = |screen: &str| {
        screen
            .lines()
            .filter_map(|l| {
                l.split("Step ")
                    .nth(1)?
                    .split(':')
                    .next()?
                    .parse::<u32>()
                    .ok()
            })
            .max()
            .unwrap_or(0)
    };
    let mut before = 0;
    assert!(
        wait_until(DEADLINE, || {
            before = last_step(&tmux.screen());
            before >= 20
        }),
        "{}",
        tmux.screen()
    );
    assert!(
        wait_until(DEADLINE, || last_step(&tmux.screen()) > before + 5),
        "{}",
        tmux.screen()
    );
    assert!(wait_until(DEADLINE, || threads_named(
        clowder,
        "output-follower"
    ) == 0));

    tmux.keys(&["S"]);
    tmux.wait_for("Stop now?");
    tmux.keys(&["y"]);
    tmux.wait_for("stopped: user_stop");
    tmux.keys(&["q"]);
    let screen = tmux.wait_for("CLOWDER_EXIT=");
    assert!(screen.contains("CLOWDER_EXIT=0"), "{screen}");
}
