//! The control room and what reaches it from outside, end to end in tmux: the
//! terminal closing in every state of the room, signals once the loop has
//! ended (to the room and to the parent the shell waits for), Ctrl-Z and `fg`,
//! a SIGKILL of the room or of its parent, and pastes. Processes are
//! checked in `/proc`.

use crate::common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use common::git::{clowder_in, init_with_one_commit};
use common::tmux::{Tmux, fleet_room_command, room_command};
use common::*;

/// A closed room and everything it ran are gone within this.
const GONE_WITHIN: Duration = Duration::from_secs(5);

/// After the room: its exit code, then whether the terminal is back in
/// canonical mode with echo (`icanon`, `echo`; raw mode shows `-icanon`).
const THEN_PRINT_TERMINAL_MODES: &str =
    "echo CLOWDER_EXIT=$?; stty -a | tr ' ;' '\\n\\n' | grep -x -- '-\\?icanon\\|-\\?echo'; ";

/// A session that runs until it is ended.
fn long_sessions() -> Project {
    Project::new(&fast_config(
        &["slow", "600"],
        "[watchdog]\nstale_timeout_mins = 10\n",
    ))
}

/// The groups of the agents started, from the fake agent's pidfile.
fn agent_groups(pidfile: &Path) -> Vec<i32> {
    std::fs::read_to_string(pidfile)
        .unwrap_or_default()
        .lines()
        .filter_map(|line| line.split_whitespace().nth(1)?.parse().ok())
        .collect()
}

fn first_group(pidfile: &Path) -> i32 {
    assert!(
        wait_until(DEADLINE, || !agent_groups(pidfile).is_empty()),
        "no agent started"
    );
    agent_groups(pidfile)[0]
}

/// Live processes of the project in `root`: clowder itself (the binary, in that
/// folder), whatever runs in its `.clowder/` (lanes' worktrees), and `groups`.
fn leftovers(root: &Path, groups: &[i32]) -> Vec<i32> {
    let root = root.canonicalize().expect("canonical path");
    let clowder = clowder_bin().canonicalize().expect("the binary");
    let mut left: Vec<i32> = std::fs::read_dir("/proc")
        .expect("read /proc")
        .filter_map(Result::ok)
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            let Ok(cwd) = std::fs::read_link(format!("/proc/{pid}/cwd")) else {
                return false;
            };
            let exe = std::fs::read_link(format!("/proc/{pid}/exe")).ok();
            let ours = (exe.as_ref() == Some(&clowder) && cwd.starts_with(&root))
                || cwd.starts_with(root.join(".clowder"));
            ours && pid_alive(*pid)
        })
        .collect();
    for group in groups {
        left.extend(live_group_members(*group));
    }
    left.sort_unstable();
    left.dedup();
    left
}

/// Clock ticks of CPU `pid` has used (user + system).
fn cpu_ticks(pid: i32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|stat| {
            let fields: Vec<u64> = stat
                .rsplit_once(')')?
                .1
                .split_whitespace()
                .skip(11)
                .take(2)
                .filter_map(|f| f.parse().ok())
                .collect();
            Some(fields.iter().sum())
        })
        .unwrap_or(0)
}

/// Closes the terminal, then checks that nothing of the project is left.
fn close_and_expect_nothing_left(tmux: Tmux, root: &Path, pidfile: &Path) {
    tmux.close();
    let groups = agent_groups(pidfile);
    let gone = wait_until(GONE_WITHIN, || leftovers(root, &groups).is_empty());
    if !gone {
        let left = leftovers(root, &groups);
        let before: Vec<u64> = left.iter().map(|pid| cpu_ticks(*pid)).collect();
        std::thread::sleep(Duration::from_secs(1));
        let used: Vec<(i32, u64)> = left
            .iter()
            .zip(before)
            .map(|(pid, ticks)| (*pid, cpu_ticks(*pid).saturating_sub(ticks)))
            .collect();
        for pid in &left {
            // SAFETY: kill(2) with a pid and a signal number touches no memory.
            unsafe {
                libc::kill(*pid, libc::SIGKILL);
            }
        }
        panic!("left {GONE_WITHIN:?} after the terminal closed (pid, CPU ticks in 1 s): {used:?}");
    }
}

/// The room over `project`'s loop of `iterations` sessions, once it shows `ready`.
fn room(project: &Project, iterations: u32, ready: &str) -> (Tmux, PathBuf) {
    let pidfile = project.path("pids.txt");
    let command = room_command(&pidfile, iterations, "echo CLOWDER_EXIT=$?; ");
    let tmux = Tmux::start(project.root(), &command, 120, 40);
    tmux.wait_for(ready);
    (tmux, pidfile)
}

/// A room whose session runs, then `keys`, then the screen shows `shown`.
fn closed_while_running(keys: &[&str], shown: &str) -> Project {
    let project = long_sessions();
    let (tmux, pidfile) = room(&project, 3, "global 1");
    first_group(&pidfile);
    if !keys.is_empty() {
        tmux.keys(keys);
        tmux.wait_for(shown);
    }
    close_and_expect_nothing_left(tmux, project.root(), &pidfile);
    project
}

#[test]
fn closing_the_terminal_while_a_session_runs_ends_it_as_terminal_closed() {
    let project = closed_while_running(&[], "");
    let ends = project.events_named("loop_end");
    assert_eq!(ends.len(), 1, "{:#?}", project.events());
    // Not `user_stop`: nobody asked, the terminal went.
    assert_eq!(ends[0]["reason"], "terminal_closed", "{}", ends[0]);
}

#[test]
fn closing_the_terminal_of_a_paused_session_leaves_nothing() {
    closed_while_running(&["p"], "‖ paused");
}

#[test]
fn closing_the_terminal_with_the_quit_dialog_open_leaves_nothing() {
    closed_while_running(&["q"], "Quit clowder?");
}

#[test]
fn closing_the_terminal_with_the_help_open_leaves_nothing() {
    closed_while_running(&["?"], "Everywhere");
}

#[test]
fn closing_the_terminal_of_an_ended_loop_leaves_nothing() {
    // The room stays open on the final state; before, it then spun at 80-160 %
    // CPU when its terminal went, and ignored SIGTERM and SIGHUP.
    let project = Project::new(&fast_config(&["normal"], ""));
    let (tmux, pidfile) = room(&project, 2, "✓ done: max_iterations");
    close_and_expect_nothing_left(tmux, project.root(), &pidfile);
}

#[test]
fn closing_the_terminal_of_an_ended_loop_with_the_help_open_leaves_nothing() {
    let project = Project::new(&fast_config(&["normal"], ""));
    let (tmux, pidfile) = room(&project, 1, "✓ done: max_iterations");
    tmux.keys(&["?"]);
    tmux.wait_for("Everywhere");
    close_and_expect_nothing_left(tmux, project.root(), &pidfile);
}

#[test]
fn closing_the_terminal_of_a_held_loop_leaves_nothing() {
    let project = Project::new(&fast_config(&["normal"], "[approvals]\nautonomy = 2\n"));
    let (tmux, pidfile) = room(&project, 2, "global");
    let mut id = None;
    assert!(wait_until(DEADLINE, || {
        let listed = project.run(&["queue", "--json"]);
        let listed: serde_json::Value = serde_json::from_slice(&listed.stdout).unwrap_or_default();
        id = listed
            .as_array()
            .and_then(|all| all.iter().find(|r| r["kind"] == "session"))
            .and_then(|r| r["id"].as_str().map(str::to_string));
        id.is_some()
    }));
    let id = id.expect("a session request");
    let rejected = project.run(&["reject", &id, "--reason", "not yet"]);
    assert_eq!(rejected.status.code(), Some(0), "{}", stderr_of(&rejected));
    assert!(wait_until(DEADLINE, || project.status()["state"] == "held"));
    close_and_expect_nothing_left(tmux, project.root(), &pidfile);
}

/// A git repository with one lane whose sessions run until ended.
fn fleet_repo() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path();
    init_with_one_commit(root);
    std::fs::write(root.join("PROMPT.md"), "Do the work.\n").expect("write");
    let config = fast_config(&["slow", "600"], "[watchdog]\nstale_timeout_mins = 10\n");
    std::fs::write(root.join("harness.toml"), config).expect("write");
    clowder_in(root, &["lane", "add", "one"]);
    dir
}

#[test]
fn closing_the_terminal_of_the_fleet_leaves_nothing() {
    let dir = fleet_repo();
    let root = dir.path();
    let pidfile = root.join("pids.txt");
    let command = fleet_room_command(&pidfile, "echo CLOWDER_EXIT=$?; ");
    let tmux = Tmux::start(root, &command, 120, 40);
    tmux.wait_for_all(&["Lanes", "running"]);
    first_group(&pidfile);
    close_and_expect_nothing_left(tmux, root, &pidfile);
}

#[test]
fn closing_the_terminal_of_the_plan_view_leaves_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path();
    init_with_one_commit(root);
    std::fs::write(root.join("harness.toml"), plan_agent_config()).expect("write");
    let plan = "[plan]\nname = \"tp\"\n\n[[step]]\nid = \"x\"\nprompt = \"ticks 6000\"\n";
    std::fs::write(root.join("plan.toml"), plan).expect("write");
    let command = format!(
        "env GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null {} plan run plan.toml; echo CLOWDER_EXIT=$?; sleep 600",
        clowder_bin().display()
    );
    let tmux = Tmux::start(root, &command, 120, 40);
    // The Plan view opens by itself; the step's session runs.
    tmux.wait_for_all(&["plan tp", "running"]);
    close_and_expect_nothing_left(tmux, root, &root.join("no-pidfile"));
}

/// The room's own PID, once its header shows it (a fleet's shows 0 until its
/// first lane reports).
fn room_pid(tmux: &Tmux) -> i32 {
    let parse = |screen: &str| -> Option<i32> {
        screen
            .split("clowder PID ")
            .nth(1)?
            .split_whitespace()
            .next()?
            .parse()
            .ok()
            .filter(|pid| *pid > 1)
    };
    let mut pid = None;
    let shown = wait_until(DEADLINE, || {
        pid = parse(&tmux.screen());
        pid.is_some()
    });
    assert!(shown, "no clowder PID on the screen:\n{}", tmux.screen());
    pid.expect("shown")
}

#[test]
fn a_room_whose_loop_has_ended_leaves_on_sigterm_sighup_and_sigint() {
    for signal in [libc::SIGTERM, libc::SIGHUP, libc::SIGINT] {
        let project = Project::new(&fast_config(&["normal"], ""));
        let (tmux, _) = room(&project, 1, "✓ done: max_iterations");
        let pid = room_pid(&tmux);
        send_signal(pid as u32, signal);
        let left = wait_until(GONE_WITHIN, || tmux.screen().contains("CLOWDER_EXIT="));
        if !left {
            send_signal(pid as u32, libc::SIGKILL);
        }
        assert!(left, "signal {signal} ignored:\n{}", tmux.screen());
        assert!(!pid_alive(pid));
    }
}

/// The process the shell waits for: the room's waiting parent.
fn waiting_parent(room: i32) -> i32 {
    let parent = crate::procs_common::ppid(room).expect("the room has a parent");
    let name = std::fs::read_to_string(format!("/proc/{parent}/comm")).unwrap_or_default();
    assert_eq!(name.trim(), "clowder", "the room's parent is not clowder's");
    parent
}

#[test]
fn the_waiting_parent_passes_on_sighup_and_sigint_once_the_loop_has_ended() {
    for signal in [libc::SIGHUP, libc::SIGINT] {
        let project = Project::new(&fast_config(&["normal"], ""));
        let (tmux, _) = room(&project, 1, "✓ done: max_iterations");
        let pid = room_pid(&tmux);
        let parent = waiting_parent(pid);
        send_signal(parent as u32, signal);
        let left = wait_until(GONE_WITHIN, || tmux.screen().contains("CLOWDER_EXIT="));
        if !left {
            send_signal(pid as u32, libc::SIGKILL);
        }
        assert!(
            left,
            "signal {signal} to the parent ignored:\n{}",
            tmux.screen()
        );
        assert!(!pid_alive(pid) && !pid_alive(parent));
    }
}

#[test]
fn a_sigkilled_waiting_parent_ends_the_room_and_gives_the_terminal_back() {
    let project = long_sessions();
    let pidfile = project.path("pids.txt");
    // The shell reads the terminal's modes once the test says the room is gone.
    let then = format!(
        "echo CLOWDER_EXIT=$?; while [ ! -e room-gone ]; do sleep 0.1; done; {}",
        THEN_PRINT_TERMINAL_MODES.trim_start_matches("echo CLOWDER_EXIT=$?; ")
    );
    let command = room_command(&pidfile, 3, &then);
    let tmux = Tmux::start(project.root(), &command, 120, 40);
    tmux.wait_for("global 1");
    let group = first_group(&pidfile);
    let pid = room_pid(&tmux);
    send_signal(waiting_parent(pid) as u32, libc::SIGKILL);
    let gone = wait_until(DEADLINE, || !pid_alive(pid));
    if !gone {
        send_signal(pid as u32, libc::SIGKILL);
    }
    assert!(gone, "the room outlived its parent:\n{}", tmux.screen());
    assert!(wait_until(DEADLINE, || live_group_members(group).is_empty()));
    std::fs::write(project.path("room-gone"), "").expect("write");
    let settings = wait_until(DEADLINE, || {
        let screen = tmux.screen();
        ["icanon", "echo"]
            .iter()
            .all(|flag| screen.lines().any(|line| line.trim() == *flag))
    });
    assert!(settings, "raw mode left on:\n{}", tmux.screen());
    assert_eq!(tmux.pane_format("#{alternate_on}"), "0");
    assert_eq!(tmux.pane_format("#{cursor_flag}"), "1");
    let ends = project.events_named("loop_end");
    assert_eq!(ends.len(), 1, "{:#?}", project.events());
    assert_eq!(ends[0]["reason"], "terminal_closed", "{}", ends[0]);
}

#[test]
fn a_sigkilled_room_leaves_a_usable_terminal() {
    let project = long_sessions();
    let pidfile = project.path("pids.txt");
    let command = room_command(&pidfile, 3, THEN_PRINT_TERMINAL_MODES);
    let tmux = Tmux::start(project.root(), &command, 120, 40);
    let screen = tmux.wait_for("global 1");
    assert_eq!(tmux.pane_format("#{alternate_on}"), "1", "{screen}");
    send_signal(room_pid(&tmux) as u32, libc::SIGKILL);
    let screen = tmux.wait_for("CLOWDER_EXIT=137");
    let settings = wait_until(DEADLINE, || {
        let screen = tmux.screen();
        ["icanon", "echo"]
            .iter()
            .all(|flag| screen.lines().any(|line| line.trim() == *flag))
    });
    assert!(settings, "raw mode left on:\n{}", tmux.screen());
    assert_eq!(tmux.pane_format("#{alternate_on}"), "0", "{screen}");
    assert_eq!(tmux.pane_format("#{cursor_flag}"), "1", "{screen}");
}

#[test]
fn a_sigkilled_fleet_room_leaves_a_usable_terminal_and_no_lane_running() {
    let dir = fleet_repo();
    let root = dir.path();
    let pidfile = root.join("pids.txt");
    let command = fleet_room_command(&pidfile, THEN_PRINT_TERMINAL_MODES);
    let tmux = Tmux::start(root, &command, 120, 40);
    tmux.wait_for_all(&["Lanes", "running"]);
    let pgid = first_group(&pidfile);
    send_signal(room_pid(&tmux) as u32, libc::SIGKILL);
    tmux.wait_for("CLOWDER_EXIT=137");
    let settings = wait_until(DEADLINE, || {
        let screen = tmux.screen();
        ["icanon", "echo"]
            .iter()
            .all(|flag| screen.lines().any(|line| line.trim() == *flag))
    });
    assert!(settings, "raw mode left on:\n{}", tmux.screen());
    assert_eq!(tmux.pane_format("#{alternate_on}"), "0");
    assert!(wait_until(DEADLINE, || live_group_members(pgid).is_empty()));
}

#[test]
fn ctrl_z_stops_the_room_and_its_session_and_fg_brings_both_back() {
    let project = long_sessions();
    let pidfile = project.path("pids.txt");
    // An interactive shell, with job control, as a user has.
    let tmux = Tmux::start(
        project.root(),
        "env PS1='SHELL$ ' bash --norc --noprofile -i",
        120,
        40,
    );
    tmux.wait_for("SHELL$");
    tmux.type_text(&format!(
        "FAKE_AGENT_PIDFILE={} {} 3",
        pidfile.display(),
        clowder_bin().display()
    ));
    tmux.keys(&["Enter"]);
    tmux.wait_for("global 1");
    let pgid = first_group(&pidfile);
    let written = project.path("written.bin");
    tmux.record_output(&written);

    tmux.keys(&["C-z"]);
    let screen = tmux.wait_for("Stopped");
    assert!(screen.contains("SHELL$"), "{screen}");
    assert_eq!(tmux.pane_format("#{alternate_on}"), "0", "{screen}");
    let stopped = wait_until(DEADLINE, || {
        let states = group_states(pgid);
        !states.is_empty() && states.iter().all(|s| *s == 'T')
    });
    assert!(stopped, "the session runs on: {:?}", group_states(pgid));

    tmux.type_text("fg");
    tmux.keys(&["Enter"]);
    // Repainted whole, over the shell's lines.
    let screen = tmux.wait_for_all(&["global 1", "running"]);
    assert!(!screen.contains("SHELL$"), "{screen}");
    let running = wait_until(DEADLINE, || {
        let states = group_states(pgid);
        !states.is_empty() && states.iter().all(|s| *s != 'T')
    });
    assert!(
        running,
        "the session stays stopped: {:?}",
        group_states(pgid)
    );
    assert!(!project.events_named("paused").is_empty());
    assert!(!project.events_named("resumed").is_empty());
    // Taking the screen back never asks where the cursor is: a busy terminal
    // answers late, into the shell, and a room that waited took it for gone.
    let written = std::fs::read(&written).unwrap_or_default();
    assert!(
        !written.windows(4).any(|w| w == b"\x1b[6n"),
        "the room asked for the cursor position"
    );
    // Raw mode is back: a key acts without Enter.
    tmux.keys(&["q"]);
    tmux.wait_for("Quit clowder?");
    tmux.keys(&["S"]);
    tmux.wait_for("clowder: stopped");
    assert!(wait_until(DEADLINE, || live_group_members(pgid).is_empty()));
}

#[test]
fn a_paste_is_never_read_as_keys() {
    let project = long_sessions();
    let (tmux, pidfile) = room(&project, 3, "global 1");
    let pgid = first_group(&pidfile);
    // `q` would open the quit dialog, and `S` in it stop the loop now.
    tmux.paste("hello qS world", true);
    tmux.paste("hello qS world", false);
    let both_noted = wait_until(DEADLINE, || {
        tmux.screen().matches("ignored a paste").count() >= 2
    });
    assert!(both_noted, "{}", tmux.screen());
    let screen = tmux.screen();
    assert!(!screen.contains("Quit clowder?"), "{screen}");
    assert!(project.events_named("stop_requested").is_empty());
    assert_eq!(project.status()["state"], "session_running");
    assert!(group_states(pgid).iter().all(|s| *s != 'T'));

    // With a text prompt open, the paste is its text.
    tmux.keys(&["/"]);
    tmux.wait_for("Enter search");
    tmux.paste("qS world", true);
    tmux.wait_for("qS world");
    tmux.keys(&["Escape"]);
    // Closed first: Esc and text in one read would be Alt and a letter.
    assert!(wait_until(DEADLINE, || !tmux
        .screen()
        .contains("Enter search")));
    tmux.paste("a qS b", false);
    assert!(wait_until(DEADLINE, || {
        tmux.screen().matches("ignored a paste").count() >= 3
    }));
    assert!(!tmux.screen().contains("Quit clowder?"));
    assert!(project.events_named("stop_requested").is_empty());
}
