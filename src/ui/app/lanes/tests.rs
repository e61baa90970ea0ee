use super::*;
use crate::approvals::{Request, RequestKind};
use crate::ui::app::Pane;
use crate::ui::app::listing::Listing;
use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

fn name(text: &str) -> LaneName {
    LaneName::parse(text).expect("a valid lane name")
}

fn t0() -> DateTime<Utc> {
    DateTime::from_timestamp(1_800_000_000, 0).expect("valid time")
}

fn entry(text: &str) -> LaneEntry {
    LaneEntry {
        name: name(text),
        requested: LaneState::Active,
        max_iterations: Some(5),
        kind: LaneKind::Worktree,
        base: Some("main".into()),
    }
}

fn running(lane: &str) -> Arc<Snapshot> {
    let mut snapshot = placeholder(lane, Some(5));
    snapshot.state = LoopState::SessionRunning;
    snapshot.pgid = Some(100);
    snapshot.agent_pid = Some(100);
    Arc::new(snapshot)
}

fn row(text: &str, status: LaneStatus) -> LaneRow {
    let mut row = LaneRow::new(&entry(text));
    row.status = status;
    row
}

fn key(c: char) -> Msg {
    Msg::Key(KeyEvent::new(KeyCode::Char(c), KeyModifiers::NONE))
}

/// A fleet of lanes `names`, each with a running session.
fn fleet(names: &[&str]) -> AppState {
    let mut state = AppState::for_fleet(true);
    let entries = names.iter().map(|n| entry(n)).collect();
    update(&mut state, Msg::Host(HostMsg::Lanes(entries)), t0());
    for lane in names {
        let report = LaneReport::Snapshot {
            snapshot: running(lane),
            queued: false,
        };
        let message = HostMsg::Lane {
            lane: name(lane),
            report,
        };
        update(&mut state, Msg::Host(message), t0());
    }
    state
}

fn request(id: &str, lane: &str) -> Request {
    Request {
        id: id.into(),
        kind: RequestKind::Ask,
        title: "may I?".into(),
        body: None,
        tool_name: None,
        tool_input: None,
        session_id: None,
        cwd: None,
        lane: Some(lane.into()),
        created: t0(),
        abandoned: false,
    }
}

#[test]
fn lanes_that_need_you_come_first_the_rest_in_registry_order() {
    let rows = vec![
        row("a", LaneStatus::Running),
        row("b", LaneStatus::Done),
        row("c", LaneStatus::Failed),
        row("d", LaneStatus::Queued),
        row("e", LaneStatus::WaitingForYou),
        row("f", LaneStatus::Held),
        row("g", LaneStatus::Backoff { until: None }),
    ];
    let names: Vec<&str> = Listing::default()
        .order(&rows, t0())
        .into_iter()
        .map(|i| rows[i].name.as_str())
        .collect();
    assert_eq!(names, ["c", "e", "f", "a", "b", "d", "g"]);
}

#[test]
fn the_status_is_the_loops_own_state() {
    let mut row = LaneRow::new(&entry("a"));
    assert_eq!(status_of(&row), LaneStatus::Queued);
    let mut snapshot = placeholder("a", None);
    snapshot.state = LoopState::RateLimitedBackoff;
    snapshot.rate_limit_resets_at = Some(t0());
    row.snapshot = Some(Arc::new(snapshot.clone()));
    assert_eq!(status_of(&row), LaneStatus::Backoff { until: Some(t0()) });
    assert_eq!(status_of(&row).label(None), "◔ backing off 08:00");
    snapshot.state = LoopState::SessionRunning;
    snapshot.paused = true;
    row.snapshot = Some(Arc::new(snapshot.clone()));
    assert_eq!(status_of(&row), LaneStatus::Paused);
    snapshot.paused = false;
    row.queued = true;
    row.snapshot = Some(Arc::new(snapshot.clone()));
    assert_eq!(status_of(&row), LaneStatus::Queued);
    row.queued = false;
    snapshot.state = LoopState::Held;
    row.snapshot = Some(Arc::new(snapshot));
    assert_eq!(status_of(&row), LaneStatus::Held);
    row.pending = 1;
    assert_eq!(status_of(&row), LaneStatus::WaitingForYou);
    row.pending = 0;
    row.ended = Some(Ok(ExitReason::MaxIterations));
    assert_eq!(status_of(&row), LaneStatus::Done);
    // Its agent exited non-zero in every session: the sessions ran out, but it failed.
    let mut failing = placeholder("a", Some(2));
    failing.counters.sessions = 2;
    failing.counters.failed_exits = 2;
    failing.last_exit_code = Some(1);
    let kept = row.snapshot.replace(Arc::new(failing));
    assert_eq!(status_of(&row), LaneStatus::Failed);
    row.snapshot = kept;
    row.ended = Some(Ok(ExitReason::UserStop));
    assert_eq!(status_of(&row), LaneStatus::Stopped);
    row.ended = Some(Err("the lane's folder is missing".into()));
    assert_eq!(status_of(&row), LaneStatus::Failed);
}

#[test]
fn pause_kill_and_stop_go_to_the_selected_lane_only() {
    let mut state = fleet(&["a", "b", "c"]);
    assert_eq!(
        state.fleet.as_ref().and_then(|f| f.selected.clone()),
        Some(name("a"))
    );
    update(&mut state, key('2'), t0());
    let to_b = |command| {
        vec![UiCommand::Host(HostRequest::Command {
            lane: name("b"),
            command,
        })]
    };
    assert_eq!(update(&mut state, key('p'), t0()), to_b(Command::Pause));
    assert!(
        update(&mut state, key('K'), t0()).is_empty(),
        "K asks first"
    );
    assert_eq!(
        update(&mut state, key('y'), t0()),
        to_b(Command::KillSession)
    );
    assert_eq!(
        update(&mut state, key('s'), t0()),
        to_b(Command::StopAfterCurrent)
    );
    // j/k in the Lanes pane (focused at start) move the selection.
    update(&mut state, key('j'), t0());
    assert_eq!(
        update(&mut state, key('p'), t0()),
        vec![UiCommand::Host(HostRequest::Command {
            lane: name("c"),
            command: Command::Pause,
        })]
    );
}

#[test]
fn quitting_stops_every_running_lane_and_waits_for_them() {
    let mut state = fleet(&["a", "b"]);
    assert!(
        update(&mut state, key('q'), t0()).is_empty(),
        "q asks first"
    );
    let commands = update(&mut state, key('S'), t0());
    let lanes: Vec<_> = commands
        .iter()
        .map(|c| match c {
            UiCommand::Host(HostRequest::Command { lane, command }) => {
                (lane.to_string(), command.clone())
            }
            other => panic!("unexpected {other:?}"),
        })
        .collect();
    assert_eq!(
        lanes,
        [
            ("a".to_string(), Command::StopNow),
            ("b".to_string(), Command::StopNow)
        ]
    );
    assert!(!state.should_quit);
    let idle = HostMsg::Idle {
        idle: true,
        signalled: false,
    };
    assert_eq!(update(&mut state, Msg::Host(idle), t0()), [UiCommand::Quit]);
    assert!(state.should_quit);
}

#[test]
fn each_lane_keeps_its_own_events_and_snapshot() {
    let mut state = fleet(&["a", "b"]);
    for lane in ["a", "b"] {
        let report = LaneReport::Log {
            at: t0(),
            level: Level::Info,
            text: format!("news of {lane}"),
        };
        update(
            &mut state,
            Msg::Host(HostMsg::Lane {
                lane: name(lane),
                report,
            }),
            t0(),
        );
    }
    let texts = |state: &AppState| -> Vec<String> {
        state.events.iter().map(|e| e.detail.clone()).collect()
    };
    assert_eq!(texts(&state), ["news of a"]);
    assert_eq!(state.snapshot.agent_command, "lane a");
    update(&mut state, key('2'), t0());
    assert_eq!(texts(&state), ["news of b"]);
    assert_eq!(state.snapshot.agent_command, "lane b");
    update(&mut state, key('1'), t0());
    assert_eq!(texts(&state), ["news of a"]);
}

#[test]
fn a_lane_with_a_request_waits_for_you_and_comes_first() {
    let mut state = fleet(&["a", "b"]);
    let pending = vec![request("r1", "b")];
    update(
        &mut state,
        Msg::Approvals {
            dir_exists: true,
            pending,
        },
        t0(),
    );
    let fleet = state.fleet.as_ref().expect("a fleet");
    let first = &fleet.rows[fleet.order(t0())[0]];
    assert_eq!(first.name.as_str(), "b");
    assert_eq!(first.status, LaneStatus::WaitingForYou);
    assert_eq!(first.pending, 1);
}

#[test]
fn x_asks_then_asks_the_host_to_remove_the_selected_lane() {
    let mut state = fleet(&["a", "b"]);
    update(&mut state, key('2'), t0());
    assert!(update(&mut state, key('X'), t0()).is_empty());
    assert_eq!(
        update(&mut state, key('y'), t0()),
        [UiCommand::Host(HostRequest::Remove(name("b")))]
    );
    let report = LaneReport::Removed(Err("clowder/b has 1 commit not in main".into()));
    update(
        &mut state,
        Msg::Host(HostMsg::Lane {
            lane: name("b"),
            report,
        }),
        t0(),
    );
    let last = state.events.back().expect("the refusal is shown");
    assert!(last.detail.starts_with("refused: lane rm b:"), "{last:?}");
}

#[test]
fn a_removed_lane_hands_the_panes_to_another() {
    let mut state = fleet(&["a", "b"]);
    update(&mut state, key('2'), t0());
    let commands = update(
        &mut state,
        Msg::Host(HostMsg::Lanes(vec![entry("a")])),
        t0(),
    );
    let fleet = state.fleet.as_ref().expect("a fleet");
    assert_eq!(fleet.selected, Some(name("a")));
    assert_eq!(fleet.rows.len(), 1);
    assert_eq!(state.snapshot.agent_command, "lane a");
    assert!(commands.is_empty(), "{commands:?}");
}

#[test]
fn news_of_a_lane_not_shown_follows_no_file() {
    let mut state = fleet(&["a", "b"]);
    let mut snapshot = (*running("b")).clone();
    snapshot.output_file = Some("/x/.clowder/lanes/b/claude-iteration-1.jsonl".into());
    let report = LaneReport::Snapshot {
        snapshot: Arc::new(snapshot),
        queued: false,
    };
    let message = HostMsg::Lane {
        lane: name("b"),
        report,
    };
    assert!(update(&mut state, Msg::Host(message), t0()).is_empty());
    // Shown, it is followed.
    let commands = update(&mut state, key('2'), t0());
    assert_eq!(
        commands,
        [UiCommand::Follow(
            "/x/.clowder/lanes/b/claude-iteration-1.jsonl".into()
        )]
    );
}

/// `n` opens the new-lane dialog, which then owns the keys; in the output pane
/// with a search active it stays the next match.
#[test]
fn n_opens_the_new_lane_dialog_unless_an_output_search_is_active() {
    let mut state = fleet(&["a"]);
    state.focus = Pane::Output;
    state.output.search = Some("tick".into());
    update(&mut state, key('n'), t0());
    assert!(state.fleet.as_ref().is_some_and(|f| f.new_lane.is_none()));
    state.output.search = None;
    update(&mut state, key('n'), t0());
    assert!(state.fleet.as_ref().is_some_and(|f| f.new_lane.is_some()));
    // Typed into the dialog, not a quit.
    assert!(update(&mut state, key('q'), t0()).is_empty());
    assert_eq!(state.dialog, None);
    let esc = Msg::Key(KeyEvent::new(KeyCode::Esc, KeyModifiers::NONE));
    update(&mut state, esc, t0());
    assert!(state.fleet.as_ref().is_some_and(|f| f.new_lane.is_none()));

    let mut single = AppState::new(running("loop"), true);
    assert!(update(&mut single, key('n'), t0()).is_empty());
}

/// A submitted lane keeps the dialog open until the host answers: a refusal
/// stays in it, with what was typed; an added lane closes it.
#[test]
fn the_new_lane_dialog_stays_open_on_a_refusal() {
    let mut state = fleet(&["a"]);
    update(&mut state, key('n'), t0());
    for c in "b".chars() {
        update(&mut state, key(c), t0());
    }
    let submit = Msg::Key(KeyEvent::new(KeyCode::Char('s'), KeyModifiers::CONTROL));
    let commands = update(&mut state, submit, t0());
    assert!(
        matches!(&commands[..], [UiCommand::Host(HostRequest::AddLane(r))] if r.name == name("b")),
        "{commands:?}"
    );
    let dialog = |state: &AppState| state.fleet.as_ref().and_then(|f| f.new_lane.clone());
    assert!(dialog(&state).is_some(), "open while the host works");

    let refused = HostMsg::LaneAdded {
        lane: name("b"),
        result: Err("--base x: no such commit".into()),
    };
    update(&mut state, Msg::Host(refused), t0());
    let open = dialog(&state).expect("still open");
    assert_eq!(open.adding(), None);
    assert!(
        state
            .events
            .iter()
            .any(|e| e.detail.contains("refused: new lane b"))
    );

    let commands = update(
        &mut state,
        Msg::Key(KeyEvent::new(KeyCode::Char('s'), KeyModifiers::CONTROL)),
        t0(),
    );
    assert_eq!(commands.len(), 1, "the same text goes again");
    let added = HostMsg::LaneAdded {
        lane: name("b"),
        result: Ok("lane b added".into()),
    };
    update(&mut state, Msg::Host(added), t0());
    assert!(dialog(&state).is_none());
}

/// `s` on a task lane asks the host to stop its task through state.json; `K`
/// on a watch-task lane says it does not apply.
#[test]
fn s_stops_a_task_lane_and_k_does_not_apply_to_a_watched_one() {
    let mut state = AppState::for_fleet(true);
    let mut task = entry("t");
    task.kind = LaneKind::Task;
    let mut watched = entry("w");
    watched.kind = LaneKind::WatchTask;
    update(
        &mut state,
        Msg::Host(HostMsg::Lanes(vec![task, watched])),
        t0(),
    );
    for lane in ["t", "w"] {
        let report = LaneReport::Snapshot {
            snapshot: running(lane),
            queued: false,
        };
        let message = HostMsg::Lane {
            lane: name(lane),
            report,
        };
        update(&mut state, Msg::Host(message), t0());
    }
    update(&mut state, key('1'), t0());
    assert_eq!(
        update(&mut state, key('s'), t0()),
        vec![UiCommand::Host(HostRequest::StopTask(name("t")))]
    );
    update(&mut state, key('2'), t0());
    assert!(update(&mut state, key('K'), t0()).is_empty());
    assert_eq!(state.dialog, None);
    let last = state.events.back().expect("a line");
    assert!(last.detail.contains("K (kill) does not apply"), "{last:?}");
}

fn press(state: &mut AppState, code: KeyCode) -> Vec<UiCommand> {
    update(
        state,
        Msg::Key(KeyEvent::new(code, KeyModifiers::NONE)),
        t0(),
    )
}

/// The names the Lanes pane lists, in its order.
fn listed(state: &AppState) -> Vec<String> {
    let fleet = state.fleet.as_ref().expect("a fleet");
    let order = fleet.order(t0());
    order
        .iter()
        .map(|&i| fleet.rows[i].name.to_string())
        .collect()
}

fn shown(state: &AppState) -> Option<String> {
    let fleet = state.fleet.as_ref()?;
    fleet.selected.as_ref().map(ToString::to_string)
}

fn report(state: &mut AppState, lane: &str, report: LaneReport) {
    let message = HostMsg::Lane {
        lane: name(lane),
        report,
    };
    update(state, Msg::Host(message), t0());
}

fn snapshot_of(state: &mut AppState, lane: &str, snapshot: Snapshot) {
    let snapshot = Arc::new(snapshot);
    let queued = false;
    report(state, lane, LaneReport::Snapshot { snapshot, queued });
}

/// `/` in the Lanes pane lists the lanes whose name holds what is typed, as
/// it is typed; the panes move to a listed lane; Enter keeps the filter and
/// Esc (from `/` again) lists every lane.
#[test]
fn slash_in_the_lanes_pane_filters_lanes_by_name_as_typed() {
    let mut state = fleet(&["api", "auth", "docs"]);
    assert_eq!(state.focus, Pane::Lanes);
    assert_eq!(shown(&state).as_deref(), Some("api"));
    update(&mut state, key('/'), t0());
    assert!(state.typing(), "the prompt takes the keys");
    update(&mut state, key('a'), t0());
    assert_eq!(listed(&state), ["api", "auth"]);
    // `u` is typed, not a command; the lane shown is no longer listed: the first listed is.
    update(&mut state, key('u'), t0());
    assert_eq!(listed(&state), ["auth"]);
    assert_eq!(shown(&state).as_deref(), Some("auth"));
    press(&mut state, KeyCode::Enter);
    assert!(!state.typing());
    let fleet = state.fleet.as_ref().expect("a fleet");
    assert_eq!(fleet.listing.filter, "au");
    // Keys act again, on the listed lanes: `j` stays on the one lane listed.
    update(&mut state, key('j'), t0());
    assert_eq!(shown(&state).as_deref(), Some("auth"));
    update(&mut state, key('/'), t0());
    press(&mut state, KeyCode::Backspace);
    assert_eq!(listed(&state), ["api", "auth"]);
    press(&mut state, KeyCode::Esc);
    assert_eq!(listed(&state), ["api", "auth", "docs"]);
    assert_eq!(
        state.fleet.as_ref().map(|f| f.listing.filter.as_str()),
        Some("")
    );
}

/// In the output pane `/` still searches the output.
#[test]
fn slash_in_the_output_pane_still_searches_the_output() {
    let mut state = fleet(&["api", "docs"]);
    state.focus = Pane::Output;
    update(&mut state, key('/'), t0());
    assert_eq!(state.output.search_input.as_deref(), Some(""));
    let fleet = state.fleet.as_ref().expect("a fleet");
    assert_eq!(fleet.listing.typing, None);
}

/// A paste goes into the open filter, and is never read as keys.
#[test]
fn a_paste_goes_into_the_lane_filter() {
    let mut state = fleet(&["api", "docs"]);
    update(&mut state, key('/'), t0());
    update(&mut state, Msg::Paste("do\n".into()), t0());
    assert_eq!(
        state
            .fleet
            .as_ref()
            .and_then(|f| f.listing.typing.as_deref()),
        Some("do")
    );
    assert_eq!(listed(&state), ["docs"]);
    assert_eq!(shown(&state).as_deref(), Some("docs"));
}

/// `w` lists only the lanes that need you, from any pane; again, every lane.
#[test]
fn w_lists_only_the_lanes_that_need_you() {
    let mut state = fleet(&["a", "b", "c"]);
    let mut held = (*running("c")).clone();
    held.state = LoopState::Held;
    snapshot_of(&mut state, "c", held);
    let pending = vec![request("r1", "b")];
    let inbox = Msg::Approvals {
        dir_exists: true,
        pending,
    };
    update(&mut state, inbox, t0());
    state.focus = Pane::Output;
    update(&mut state, key('w'), t0());
    assert_eq!(listed(&state), ["b", "c"]);
    assert_eq!(shown(&state).as_deref(), Some("b"));
    // A lane that stops needing you leaves the list as it does.
    update(
        &mut state,
        Msg::Approvals {
            dir_exists: true,
            pending: Vec::new(),
        },
        t0(),
    );
    assert_eq!(listed(&state), ["c"]);
    update(&mut state, key('w'), t0());
    assert_eq!(listed(&state), ["c", "a", "b"]);
}

/// `O` orders the lanes by state, then cost (dearest first), then idle time
/// (longest silent first), then as usual again.
#[test]
fn o_orders_the_lanes_by_state_cost_and_idle_time() {
    let mut state = fleet(&["a", "b", "c", "d"]);
    let at = |secs| t0() - chrono::Duration::seconds(secs);
    let lanes = [
        ("a", LoopState::SessionRunning, Some(1.0), 30),
        ("b", LoopState::Stopped, Some(3.0), 0),
        ("c", LoopState::SessionRunning, None, 300),
        ("d", LoopState::Held, Some(2.0), 0),
    ];
    for (lane, loop_state, cost, silent) in lanes {
        let mut snapshot = (*running(lane)).clone();
        snapshot.state = loop_state;
        if loop_state == LoopState::Stopped {
            snapshot.exit_reason = Some(ExitReason::MaxIterations);
        }
        snapshot.totals.cost_usd = cost;
        snapshot.session_start = Some(at(silent));
        snapshot.last_output_growth = Some(at(silent));
        snapshot_of(&mut state, lane, snapshot);
    }
    assert_eq!(listed(&state), ["d", "a", "b", "c"]);
    update(&mut state, key('O'), t0());
    assert_eq!(listed(&state), ["d", "a", "c", "b"]);
    update(&mut state, key('O'), t0());
    assert_eq!(listed(&state), ["b", "d", "a", "c"]);
    update(&mut state, key('O'), t0());
    assert_eq!(listed(&state), ["c", "a", "b", "d"]);
    update(&mut state, key('O'), t0());
    assert_eq!(listed(&state), ["d", "a", "b", "c"]);
}

/// The listing is made again only when a row moves in it: a busy lane that
/// stays busy, or a lane whose cost moves while sorted as usual, leaves it be.
#[test]
fn a_lane_that_stays_in_its_place_leaves_the_listing_as_made() {
    let mut state = fleet(&["a", "b"]);
    let made = |state: &AppState| {
        state
            .fleet
            .as_ref()
            .is_some_and(|f| f.shown.borrow().is_some())
    };
    listed(&state);
    let mut busy = (*running("b")).clone();
    busy.output_bytes += 100;
    busy.totals.cost_usd = Some(0.5);
    snapshot_of(&mut state, "b", busy.clone());
    assert!(made(&state));
    // Sorted by cost, the same change moves it.
    update(&mut state, key('O'), t0());
    update(&mut state, key('O'), t0());
    assert_eq!(listed(&state), ["b", "a"]);
    busy.totals.cost_usd = Some(0.75);
    snapshot_of(&mut state, "b", busy);
    assert!(!made(&state));
    assert_eq!(listed(&state), ["b", "a"]);
}

fn event_texts(state: &AppState) -> Vec<String> {
    state
        .events
        .iter()
        .map(|line| line.detail.clone())
        .collect()
}

/// A line said to every lane is kept once: a lane not shown has it, in the
/// order it came among its own lines, when it is shown; a lane added after
/// it does not.
#[test]
fn a_line_for_every_lane_reaches_each_in_order_and_not_lanes_added_after() {
    let mut state = fleet(&["a", "b"]);
    let log = |text: &str| {
        Msg::Host(HostMsg::Log {
            level: Level::Info,
            text: text.to_string(),
        })
    };
    let own = |text: &str| LaneReport::Log {
        at: t0(),
        level: Level::Info,
        text: text.to_string(),
    };
    update(&mut state, log("fleet one"), t0());
    report(&mut state, "b", own("b's own"));
    update(&mut state, log("fleet two"), t0());
    let entries = ["a", "b", "c"].iter().map(|n| entry(n)).collect();
    update(&mut state, Msg::Host(HostMsg::Lanes(entries)), t0());
    update(&mut state, log("fleet three"), t0());
    assert_eq!(
        event_texts(&state),
        ["fleet one", "fleet two", "fleet three"]
    );
    assert!(
        state.fleet.as_ref().is_some_and(|f| f.views.len() == 1),
        "only b has a view"
    );
    update(&mut state, key('2'), t0());
    assert_eq!(
        event_texts(&state),
        ["fleet one", "b's own", "fleet two", "fleet three"]
    );
    update(&mut state, key('3'), t0());
    assert_eq!(event_texts(&state), ["fleet three"]);
    // Back to a: nothing twice.
    update(&mut state, key('1'), t0());
    update(&mut state, log("fleet four"), t0());
    update(&mut state, key('2'), t0());
    update(&mut state, key('1'), t0());
    assert_eq!(
        event_texts(&state),
        ["fleet one", "fleet two", "fleet three", "fleet four"]
    );
}
