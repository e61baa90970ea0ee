//! The agent's process group end to end: the watchdog's TERM/KILL, lingering
//! children, SIGINT/SIGTERM to clowder, the STOP file. Every test checks in `/proc`
//! that no process of the agent's groups survives.

use crate::common;

use std::path::PathBuf;
use std::process::{Child, Output};

use chrono::{DateTime, Utc};
use clowder::supervisor::core;
use common::*;

/// Fast polling and a 1.2 s stale timeout.
const FAST_WATCHDOG: &str = "[watchdog]\nstale_timeout_mins = 0.02\ncheck_interval_secs = 0.1\n";
/// Fast polling, but the watchdog never fires within a test.
const SLOW_WATCHDOG: &str = "[watchdog]\nstale_timeout_mins = 10\ncheck_interval_secs = 0.1\n";

/// A project whose fake agent records "pid pgid" in a pidfile. On drop, SIGKILLs
/// whatever is left of the agent's groups and of clowder, so a failing test leaks
/// no `sleep 600`.
struct Harness {
    project: Project,
    pidfile: PathBuf,
    clowder: Option<Child>,
}

impl Harness {
    fn new(mode_args: &[&str], extra: &str) -> Harness {
        let project = Project::new(&fast_config(mode_args, extra));
        let pidfile = project.path("fake-agent.pids");
        Harness {
            project,
            pidfile,
            clowder: None,
        }
    }

    fn start(&mut self, args: &[&str]) {
        let child = self
            .project
            .command(args)
            .env("FAKE_AGENT_PIDFILE", &self.pidfile)
            .spawn()
            .expect("spawn clowder");
        self.clowder = Some(child);
    }

    fn clowder_pid(&self) -> u32 {
        self.clowder.as_ref().expect("clowder started").id()
    }

    /// Waits for clowder to exit (panicking at the deadline) and returns its output.
    fn finish(&mut self) -> Output {
        let child = self.clowder.take().expect("clowder started");
        wait_with_deadline(child, DEADLINE)
    }

    fn run(&mut self, args: &[&str]) -> Output {
        self.start(args);
        self.finish()
    }

    /// `(pid, pgid)` of every fake agent started, from the pidfile.
    fn agent_pids(&self) -> Vec<(i32, i32)> {
        std::fs::read_to_string(&self.pidfile)
            .unwrap_or_default()
            .lines()
            .filter_map(|line| {
                let mut fields = line.split_whitespace();
                let pid: i32 = fields.next()?.parse().ok()?;
                let pgid = fields.next().and_then(|f| f.parse().ok()).unwrap_or(pid);
                Some((pid, pgid))
            })
            .collect()
    }

    /// Every process group an agent of this test ran in: the pidfile's and the
    /// event log's (the latter even if the agent died before writing the pidfile).
    fn agent_groups(&self) -> Vec<i32> {
        let mut groups: Vec<i32> = self
            .agent_pids()
            .into_iter()
            .map(|(_, pgid)| pgid)
            .collect();
        for event in self.project.events_named("session_start") {
            if let Some(pgid) = event["pgid"].as_i64() {
                groups.push(pgid as i32);
            }
        }
        groups.sort_unstable();
        groups.dedup();
        groups
    }

    /// Waits until the event log holds an event named `name`.
    fn wait_for_event(&self, name: &str) {
        assert!(
            wait_until(DEADLINE, || !self.project.events_named(name).is_empty()),
            "no `{name}` event within {DEADLINE:?}; events: {:#?}",
            self.project.events()
        );
    }

    /// Asserts that agents ran and that no process of theirs is alive. Called once
    /// clowder has exited: it must have reaped every group before ending a session.
    fn assert_no_agent_left(&self, sessions: usize) {
        let pids = self.agent_pids();
        assert_eq!(
            pids.len(),
            sessions,
            "the pidfile should list one agent per session: {pids:?}"
        );
        let groups = self.agent_groups();
        assert!(!groups.is_empty(), "no agent process group recorded");
        for (pid, pgid) in &pids {
            assert_eq!(pid, pgid, "the agent must lead its own process group");
            assert!(!pid_alive(*pid), "agent leader {pid} is still alive");
        }
        for pgid in groups {
            let live = live_group_members(pgid);
            assert!(
                live.is_empty(),
                "processes {live:?} of agent group {pgid} survive clowder: {}",
                describe(&live)
            );
        }
    }
}

impl Drop for Harness {
    fn drop(&mut self) {
        if let Some(mut child) = self.clowder.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        for pgid in self.agent_groups() {
            if pgid > 1 && !live_group_members(pgid).is_empty() {
                // SAFETY: kill(2) with a negative pid and a signal number touches no memory.
                unsafe {
                    libc::kill(-pgid, libc::SIGKILL);
                }
            }
        }
    }
}

/// The command lines of `pids`, for failure messages.
fn describe(pids: &[i32]) -> String {
    pids.iter()
        .map(|pid| {
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
            format!("{pid}: {}", cmdline.trim())
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// The position of the first event named `name`, panicking if there is none.
fn index_of(events: &[serde_json::Value], name: &str) -> usize {
    events
        .iter()
        .position(|e| e["event"] == name)
        .unwrap_or_else(|| panic!("no `{name}` event in {events:#?}"))
}

fn timestamp(event: &serde_json::Value) -> DateTime<Utc> {
    event["ts"]
        .as_str()
        .and_then(|ts| DateTime::parse_from_rfc3339(ts).ok())
        .map(|ts| ts.with_timezone(&Utc))
        .unwrap_or_else(|| panic!("event without an RFC 3339 ts: {event}"))
}

fn last_line(stdout: &str) -> &str {
    stdout.lines().last().unwrap_or_default()
}

/// Output of a finished clowder, for assertion messages.
fn dump(output: &Output) -> String {
    format!(
        "exit: {:?}\nstdout:\n{}\nstderr:\n{}",
        output.status,
        stdout_of(output),
        stderr_of(output)
    )
}

#[test]
fn stale_session_is_terminated_recorded_as_124_and_its_group_reaped() {
    // An agent that hangs after its init line did nothing: no retry of the
    // empty session here, one session is what is looked at.
    let mut h = Harness::new(&["hang"], FAST_WATCHDOG);
    let output = h.run(&["--headless", "1", "--retries", "0"]);
    let stdout = stdout_of(&output);
    assert_eq!(output.status.code(), Some(0), "{}", dump(&output));

    let events = h.project.events();
    let stale = index_of(&events, "watchdog_stale");
    let kill = index_of(&events, "watchdog_kill");
    let complete = index_of(&events, "session_complete");
    assert!(stale < kill && kill < complete, "{events:#?}");

    let stale = &events[stale];
    assert_eq!(stale["iteration"], 1);
    assert_eq!(stale["global"], 1);
    assert!(stale["idle_secs"].as_f64().unwrap_or(0.0) >= 1.2, "{stale}");
    assert!(stale["output_bytes"].as_u64().unwrap_or(0) > 0, "{stale}");

    let kill = &events[kill];
    assert_eq!(kill["iteration"], 1);
    assert_eq!(kill["global"], 1);
    // `hang` execs `sleep`, which dies on SIGTERM: no SIGKILL needed.
    assert_eq!(kill["needed_sigkill"], false, "{kill}");

    let complete = &events[complete];
    assert_eq!(complete["iteration"], 1);
    assert_eq!(complete["exit_code"], 124);
    // Its init line is over `min_output_bytes`, yet the agent did nothing.
    assert_eq!(complete["productive"], false, "{complete}");
    assert!(
        complete["output_bytes"].as_u64().unwrap_or(0) >= 100,
        "{complete}"
    );
    assert_eq!(h.project.events_named("session_start").len(), 1);

    let last = last_line(&stdout);
    assert!(
        last.starts_with("clowder: stopped (max_iterations)"),
        "{last}"
    );
    assert!(last.contains("1 watchdog kills"), "{last}");
    assert!(last.contains("last exit 124"), "{last}");
    let status = h.project.status();
    assert_eq!(status["state"], "stopped");
    assert_eq!(status["counters"]["watchdog_kills"], 1);
    assert_eq!(status["last_exit_code"], 124);

    // The pidfile and the event log agree on who the agent was.
    let start = &h.project.events_named("session_start")[0];
    let pids = h.agent_pids();
    assert_eq!(start["pid"], pids[0].0);
    assert_eq!(start["pgid"], pids[0].1);
    h.assert_no_agent_left(1);
}

#[test]
fn agent_ignoring_sigterm_is_sigkilled_after_the_grace() {
    let mut h = Harness::new(&["ignore-term"], FAST_WATCHDOG);
    let output = h.run(&["--headless", "1", "--retries", "0"]);
    assert_eq!(output.status.code(), Some(0), "{}", dump(&output));

    let events = h.project.events();
    let stale = index_of(&events, "watchdog_stale");
    let kill = index_of(&events, "watchdog_kill");
    let complete = index_of(&events, "session_complete");
    assert!(stale < kill && kill < complete, "{events:#?}");
    assert_eq!(events[kill]["needed_sigkill"], true, "{}", events[kill]);
    assert_eq!(events[kill]["iteration"], 1);
    assert_eq!(events[kill]["global"], 1);
    assert_eq!(events[complete]["exit_code"], 124);
    // TERM at the stale event, KILL 5 s later.
    let waited = timestamp(&events[kill]) - timestamp(&events[stale]);
    assert!(
        waited >= chrono::Duration::milliseconds(4900),
        "SIGKILL came {waited} after the stale event, before the 5 s grace"
    );
    assert!(
        events[complete]["duration_secs"].as_f64().unwrap_or(0.0) >= 6.0,
        "{}",
        events[complete]
    );
    h.assert_no_agent_left(1);
}

#[test]
fn background_child_outliving_its_leader_is_killed() {
    let mut h = Harness::new(&["background", "600"], SLOW_WATCHDOG);
    let output = h.run(&["--headless", "1"]);
    let stdout = stdout_of(&output);
    assert_eq!(output.status.code(), Some(0), "{}", dump(&output));

    let lingering = h.project.events_named("lingering_killed");
    assert_eq!(lingering.len(), 1, "{:#?}", h.project.events());
    assert!(
        lingering[0]["processes"].as_u64().unwrap_or(0) >= 1,
        "{}",
        lingering[0]
    );
    assert_eq!(lingering[0]["iteration"], 1);
    assert_eq!(lingering[0]["global"], 1);

    let completes = h.project.events_named("session_complete");
    assert_eq!(completes.len(), 1);
    // The leader's own exit code, not a kill's.
    assert_eq!(completes[0]["exit_code"], 0);
    assert_eq!(completes[0]["productive"], true);
    assert!(h.project.events_named("watchdog_kill").is_empty());
    assert!(h.project.events_named("watchdog_stale").is_empty());
    assert!(
        last_line(&stdout).starts_with("clowder: stopped (max_iterations)"),
        "{stdout}"
    );
    h.assert_no_agent_left(1);
}

#[test]
fn stale_session_with_forked_children_loses_the_whole_group() {
    // 3 s stale timeout: long enough to see the children while the leader waits.
    let mut h = Harness::new(
        &["fork", "3"],
        "[watchdog]\nstale_timeout_mins = 0.05\ncheck_interval_secs = 0.1\n",
    );
    h.start(&["--headless", "1"]);
    h.wait_for_event("session_start");
    let pgid = h.project.events_named("session_start")[0]["pgid"]
        .as_i64()
        .expect("pgid") as i32;
    let mut most = 0;
    let seen = wait_until(DEADLINE, || {
        most = most.max(live_group_members(pgid).len());
        most >= 4 || !h.project.events_named("session_complete").is_empty()
    });
    assert!(seen, "the session never ended");
    assert!(
        most >= 4,
        "expected the leader and 3 children in group {pgid}, saw at most {most}"
    );

    let output = h.finish();
    assert_eq!(output.status.code(), Some(0), "{}", dump(&output));
    let events = h.project.events();
    let kill = index_of(&events, "watchdog_kill");
    assert!(index_of(&events, "watchdog_stale") < kill, "{events:#?}");
    assert_eq!(
        h.project.events_named("session_complete")[0]["exit_code"],
        124
    );
    h.assert_no_agent_left(1);
}

/// Sends `signal` once while a session runs; clowder lets the session finish and
/// stops. Returns clowder's output and the harness for further checks.
fn one_signal_during_a_session(signal: i32) -> (Harness, Output) {
    // `slow 3` lasts 2 to 3 s (whole-second clock): time to signal mid-session.
    let mut h = Harness::new(&["slow", "3"], SLOW_WATCHDOG);
    h.start(&["--headless", "5"]);
    h.wait_for_event("session_start");
    send_signal(h.clowder_pid(), signal);
    let output = h.finish();
    (h, output)
}

fn assert_finished_current_session_then_stopped(
    h: &Harness,
    output: &Output,
    name: &str,
    code: i32,
) {
    let stdout = stdout_of(output);
    assert_eq!(output.status.code(), Some(code), "{}", dump(output));
    assert!(
        stdout.contains(&format!("Caught {name}, finishing current session...")),
        "{stdout}"
    );
    let events = h.project.events();
    assert_eq!(
        h.project.events_named("session_start").len(),
        1,
        "{events:#?}"
    );
    let requested = index_of(&events, "stop_requested");
    assert_eq!(events[requested]["source"], name);
    // The signal came while the session ran, and the session ran to its end.
    let complete = index_of(&events, "session_complete");
    assert!(requested < complete, "{events:#?}");
    assert_eq!(events[complete]["exit_code"], 0, "{}", events[complete]);
    assert!(
        h.project.events_named("session_killed").is_empty(),
        "{events:#?}"
    );
    assert!(
        h.project.events_named("watchdog_kill").is_empty(),
        "{events:#?}"
    );
    let loop_end = index_of(&events, "loop_end");
    assert_eq!(
        events[loop_end]["reason"]["signal"]["signal"], name,
        "{}",
        events[loop_end]
    );
    assert_eq!(
        events[loop_end]["reason"]["signal"]["forced"], false,
        "{}",
        events[loop_end]
    );

    let last = last_line(&stdout);
    assert!(
        last.starts_with(&format!("clowder: stopped ({name})")),
        "{last}"
    );
    assert!(last.contains(&format!("exit code {code}")), "{last}");
    assert_eq!(h.project.status()["state"], "stopped");
    h.assert_no_agent_left(1);
}

#[test]
fn sigint_once_finishes_the_session_then_exits_130() {
    let (h, output) = one_signal_during_a_session(libc::SIGINT);
    assert_finished_current_session_then_stopped(&h, &output, "SIGINT", 130);
}

#[test]
fn sigterm_once_finishes_the_session_then_exits_143() {
    let (h, output) = one_signal_during_a_session(libc::SIGTERM);
    assert_finished_current_session_then_stopped(&h, &output, "SIGTERM", 143);
}

#[test]
fn sighup_once_finishes_the_session_then_exits_129() {
    // The terminal closing: before, clowder died at once and left its session
    // running unwatched.
    let (h, output) = one_signal_during_a_session(libc::SIGHUP);
    assert_finished_current_session_then_stopped(&h, &output, "SIGHUP", 129);
}

#[test]
fn sighup_is_left_ignored_under_nohup() {
    use std::os::unix::process::CommandExt;
    // What `nohup` does for what it starts: SIGHUP ignored, so the loop runs on.
    let mut h = Harness::new(&["slow", "2"], SLOW_WATCHDOG);
    let mut command = h.project.command(&["--headless", "2"]);
    command.env("FAKE_AGENT_PIDFILE", &h.pidfile);
    // SAFETY: only async-signal-safe calls between fork and exec.
    unsafe {
        command.pre_exec(|| {
            libc::signal(libc::SIGHUP, libc::SIG_IGN);
            Ok(())
        });
    }
    h.clowder = Some(command.spawn().expect("spawn clowder"));
    h.wait_for_event("session_start");
    send_signal(h.clowder_pid(), libc::SIGHUP);
    let output = h.finish();
    assert_eq!(output.status.code(), Some(0), "{}", dump(&output));
    assert_eq!(h.project.events_named("session_start").len(), 2);
    assert!(
        h.project.events_named("stop_requested").is_empty(),
        "{:#?}",
        h.project.events()
    );
    h.assert_no_agent_left(2);
}

#[test]
fn sigint_twice_kills_the_session_now_and_exits_130() {
    let mut h = Harness::new(&["hang"], SLOW_WATCHDOG);
    h.start(&["--headless", "5"]);
    h.wait_for_event("session_start");
    // Let the agent get going (pidfile written, init line out, `sleep` exec'd soon).
    let output_file = h.project.events_named("session_start")[0]["output_file"]
        .as_str()
        .map(PathBuf::from)
        .expect("output_file");
    assert!(
        wait_until(DEADLINE, || {
            h.agent_pids().len() == 1 && std::fs::metadata(&output_file).is_ok_and(|m| m.len() > 0)
        }),
        "the agent never started"
    );
    send_signal(h.clowder_pid(), libc::SIGINT);
    // The first one was handled (not merged with the second), well within 3 s.
    h.wait_for_event("stop_requested");
    send_signal(h.clowder_pid(), libc::SIGINT);
    let output = h.finish();
    let stdout = stdout_of(&output);
    assert_eq!(output.status.code(), Some(130), "{}", dump(&output));

    let events = h.project.events();
    assert_eq!(
        h.project.events_named("session_start").len(),
        1,
        "{events:#?}"
    );
    assert!(
        h.project.events_named("watchdog_stale").is_empty(),
        "{events:#?}"
    );
    let killed = h.project.events_named("session_killed");
    assert_eq!(killed.len(), 1, "{events:#?}");
    assert_eq!(killed[0]["reason"], "stop_now");
    // `hang` execs `sleep`: SIGTERM is enough.
    assert_eq!(killed[0]["needed_sigkill"], false, "{}", killed[0]);
    for complete in h.project.events_named("session_complete") {
        assert_eq!(complete["exit_code"], 128 + libc::SIGTERM, "{complete}");
    }
    let loop_end = &events[index_of(&events, "loop_end")];
    assert_eq!(loop_end["reason"]["signal"]["forced"], true, "{loop_end}");

    let last = last_line(&stdout);
    assert!(
        last.starts_with("clowder: stopped (SIGINT (forced))"),
        "{last}"
    );
    assert!(last.contains("exit code 130"), "{last}");
    assert_eq!(h.project.status()["state"], "stopped");
    h.assert_no_agent_left(1);
}

/// The agent ignores SIGTERM, and the grace before KILL is short.
const IGNORES_TERM_WATCHDOG: &str =
    "[watchdog]\nstale_timeout_mins = 10\ncheck_interval_secs = 0.1\nkill_grace_secs = 1\n";

/// Starts `ignore-term` headless and waits until its agent runs.
fn agent_ignoring_term(extra: &str) -> Harness {
    let mut h = Harness::new(&["ignore-term"], &format!("{IGNORES_TERM_WATCHDOG}{extra}"));
    h.start(&["--headless", "5"]);
    h.wait_for_event("session_start");
    assert!(
        wait_until(DEADLINE, || h.agent_pids().len() == 1),
        "the agent never started"
    );
    h
}

/// Ended at once: TERM, the grace, KILL; exit 143, the stop marked forced.
fn assert_stopped_now_by_sigterm(h: &Harness, output: &Output, waited: std::time::Duration) {
    assert_eq!(output.status.code(), Some(143), "{}", dump(output));
    // The grace is 1 s; a finish would wait for an agent that never ends.
    assert!(
        waited < std::time::Duration::from_secs(20),
        "took {waited:?}"
    );
    let events = h.project.events();
    let killed = h.project.events_named("session_killed");
    assert_eq!(killed.len(), 1, "{events:#?}");
    assert_eq!(killed[0]["reason"], "stop_now");
    assert_eq!(killed[0]["needed_sigkill"], true, "{}", killed[0]);
    let loop_end = &events[index_of(&events, "loop_end")];
    assert_eq!(
        loop_end["reason"]["signal"]["signal"], "SIGTERM",
        "{loop_end}"
    );
    assert_eq!(loop_end["reason"]["signal"]["forced"], true, "{loop_end}");
    assert_eq!(h.project.status()["state"], "stopped");
    h.assert_no_agent_left(1);
}

#[test]
fn a_second_sigterm_at_any_time_ends_the_session_now_and_exits_143() {
    // What systemd, Docker and Kubernetes do: SIGTERM, and again before SIGKILL.
    let mut h = agent_ignoring_term("");
    send_signal(h.clowder_pid(), libc::SIGTERM);
    h.wait_for_event("stop_requested");
    // Past the window in which any second signal stops now.
    std::thread::sleep(core::DOUBLE_INTERRUPT_WINDOW + std::time::Duration::from_millis(500));
    assert!(
        h.project.events_named("session_killed").is_empty(),
        "one SIGTERM must let the session finish"
    );
    send_signal(h.clowder_pid(), libc::SIGTERM);
    let sent = std::time::Instant::now();
    let output = h.finish();
    assert_stopped_now_by_sigterm(&h, &output, sent.elapsed());
}

#[test]
fn sigterm_stop_now_ends_the_session_on_the_first_sigterm() {
    let mut h = agent_ignoring_term("[signals]\nsigterm = \"stop_now\"\n");
    send_signal(h.clowder_pid(), libc::SIGTERM);
    let sent = std::time::Instant::now();
    let output = h.finish();
    assert_stopped_now_by_sigterm(&h, &output, sent.elapsed());
}

#[test]
fn stop_file_during_a_session_stops_after_it() {
    // `slow 3` lasts 2 to 3 s: STOP appears while it runs.
    let mut h = Harness::new(&["slow", "3"], SLOW_WATCHDOG);
    h.start(&["--headless", "5"]);
    h.wait_for_event("session_start");
    h.project.write("STOP", "");
    let output = h.finish();
    let stdout = stdout_of(&output);
    assert_eq!(output.status.code(), Some(0), "{}", dump(&output));

    assert!(stdout.contains("STOP file found"), "{stdout}");
    assert!(!h.project.path("STOP").exists(), "STOP was not deleted");
    let events = h.project.events();
    assert_eq!(
        h.project.events_named("session_start").len(),
        1,
        "{events:#?}"
    );
    let completes = h.project.events_named("session_complete");
    assert_eq!(completes.len(), 1);
    assert_eq!(completes[0]["exit_code"], 0, "the session ran to its end");
    assert!(
        h.project.events_named("session_killed").is_empty(),
        "{events:#?}"
    );
    assert_eq!(events[index_of(&events, "loop_end")]["reason"], "stop_file");

    let last = last_line(&stdout);
    assert!(last.starts_with("clowder: stopped (stop_file)"), "{last}");
    assert!(last.contains("exit code 0"), "{last}");
    assert_eq!(h.project.status()["state"], "stopped");
    h.assert_no_agent_left(1);
}

#[test]
fn stop_file_present_at_start_runs_no_session() {
    let mut h = Harness::new(&["normal"], SLOW_WATCHDOG);
    h.project.write("STOP", "");
    let output = h.run(&["--headless", "5"]);
    let stdout = stdout_of(&output);
    assert_eq!(output.status.code(), Some(0), "{}", dump(&output));
    assert!(!h.project.path("STOP").exists(), "STOP was not deleted");
    assert!(h.project.events_named("session_start").is_empty());
    assert!(h.agent_pids().is_empty(), "an agent ran");
    assert!(h.project.output_files().is_empty());
    let last = last_line(&stdout);
    assert!(last.starts_with("clowder: stopped (stop_file)"), "{last}");
    assert!(last.contains("0 sessions"), "{last}");
    assert_eq!(h.project.status()["state"], "stopped");
}

#[test]
fn nonzero_agent_exit_is_recorded_and_the_loop_goes_on() {
    let mut h = Harness::new(&["exit", "7"], SLOW_WATCHDOG);
    let output = h.run(&["--headless", "2"]);
    let stdout = stdout_of(&output);
    assert_eq!(output.status.code(), Some(0), "{}", dump(&output));
    let completes = h.project.events_named("session_complete");
    assert_eq!(completes.len(), 2, "{:#?}", h.project.events());
    for (i, complete) in completes.iter().enumerate() {
        assert_eq!(complete["iteration"], i as u64 + 1);
        assert_eq!(complete["exit_code"], 7);
        assert_eq!(complete["productive"], true);
        assert_eq!(complete["retries"], 0);
    }
    assert!(h.project.events_named("empty_retry").is_empty());
    let last = last_line(&stdout);
    assert!(
        last.starts_with("clowder: stopped (max_iterations)"),
        "{last}"
    );
    assert!(last.contains("2 productive of 2 max"), "{last}");
    assert!(last.contains("last exit 7"), "{last}");
    assert_eq!(h.project.status()["last_exit_code"], 7);
    h.assert_no_agent_left(2);
}
