//! Two keys of the control room over lanes, end to end in tmux: `d` leaves
//! the lanes running in the background, and `P` shows a plan that has ended
//! (or says why there is nothing to show).

use crate::common;

use std::time::Duration;

use common::git::{clowder_command, clowder_in, init_with_one_commit};
use common::tmux::Tmux;
use common::{
    DEADLINE, clowder_bin, live_group_members, pid_alive, plan_agent_config, send_signal,
    stderr_of, wait_until,
};

fn fleet_repo(prompt: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path();
    init_with_one_commit(root);
    std::fs::write(root.join("harness.toml"), plan_agent_config()).expect("write");
    std::fs::write(root.join("PROMPT.md"), prompt).expect("write");
    dir
}

fn room(root: &std::path::Path) -> Tmux {
    let command = format!(
        "{} ; echo CLOWDER_EXIT=$?; sleep 600",
        clowder_bin().display()
    );
    Tmux::start(root, &command, 120, 40)
}

#[test]
fn d_leaves_the_lanes_running_in_the_background() {
    let dir = fleet_repo("ticks 6000\n");
    let root = dir.path();
    clowder_in(root, &["lane", "add", "bg"]);
    let tmux = room(root);
    tmux.wait_for("tick 3");
    tmux.keys(&["q"]);
    tmux.wait_for("d  detach");
    tmux.keys(&["d"]);
    let screen = tmux.wait_for("CLOWDER_EXIT=0");
    assert!(
        screen.contains("clowder: detached: the lanes go on"),
        "{screen}"
    );

    // The process holding the folder is the host, alive, in a session of its
    // own; its lane's session goes on.
    let lock = std::fs::read_to_string(root.join(".clowder/lock")).expect("lock");
    let holder: i32 = lock.trim().parse().expect("pid in the lock");
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
    let pgid = common::fleet::lane_session_group(root, "bg");
    assert!(!live_group_members(pgid).is_empty());
    let size = || {
        common::fleet::lane_status(root, "bg")
            .and_then(|s| s["output_file"].as_str().map(std::path::PathBuf::from))
            .and_then(|file| std::fs::metadata(file).ok())
            .map_or(0, |m| m.len())
    };
    let before = size();
    assert!(
        wait_until(DEADLINE, || size() > before),
        "the lane stopped writing"
    );
    let again = clowder_command(root, &["--headless"])
        .output()
        .expect("clowder");
    assert_eq!(again.status.code(), Some(2), "{}", stderr_of(&again));

    // Stopped from outside like a headless fleet: nothing is left behind.
    assert!(
        wait_until(DEADLINE, || {
            if !pid_alive(holder) {
                return true;
            }
            send_signal(holder as u32, libc::SIGINT);
            std::thread::sleep(Duration::from_millis(300));
            false
        }),
        "the detached host did not stop"
    );
    assert!(wait_until(DEADLINE, || live_group_members(pgid).is_empty()));
}

#[test]
fn p_shows_a_plan_that_ended_or_says_there_is_none() {
    let dir = fleet_repo("ticks 6000\n");
    let root = dir.path();
    clowder_in(root, &["lane", "add", "side"]);
    // No plan yet: P says so.
    let tmux = room(root);
    tmux.wait_for("tick 3");
    tmux.keys(&["P"]);
    tmux.wait_for("no plan has run in this folder");
    tmux.keys(&["q"]);
    tmux.wait_for("Stop every lane?");
    tmux.keys(&["S"]);
    tmux.wait_for("CLOWDER_EXIT=");
    drop(tmux);

    std::fs::write(
        root.join("plan.toml"),
        "[plan]\nname = \"np\"\n\n[[step]]\nid = \"a\"\nprompt = \"write a.txt\"\n",
    )
    .expect("write");
    let ran = clowder_command(root, &["plan", "run", "plan.toml", "--headless"])
        .output()
        .expect("plan run");
    assert_eq!(ran.status.code(), Some(0), "{}", stderr_of(&ran));
    clowder_in(root, &["lane", "resume", "side"]);
    let tmux = room(root);
    tmux.wait_for("tick 3");
    // The plan ended: the view waits for P, then shows it.
    assert!(!tmux.screen().contains("np completed"));
    // P until the view is open: the plans are read once the host has started.
    let mut last = String::new();
    let shown = wait_until(DEADLINE, || {
        last = tmux.screen();
        if last.contains("Esc close") {
            return ["np", "completed", "merged"]
                .iter()
                .all(|w| last.contains(w));
        }
        tmux.keys(&["P"]);
        std::thread::sleep(Duration::from_millis(500));
        false
    });
    assert!(shown, "no Plan view of plan np:\n{last}");
    tmux.keys(&["Escape", "q"]);
    tmux.wait_for("Stop every lane?");
    tmux.keys(&["S"]);
    tmux.wait_for("CLOWDER_EXIT=");
}
