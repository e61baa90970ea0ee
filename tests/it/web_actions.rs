//! The web page does what the room does, in a real headless Chromium through
//! the binary: a lane's actions (merge, push, run again, pause, resume, stop
//! after this session, stop now, kill, remove) with the host's answer or
//! refusal shown, its work (commits, a 5,000-line diff on a phone, a cost
//! chart), a new lane made from the page, a failed plan retried, and the
//! fleet's cost. Fleets of the web fake agent (`tests/agents/web-agent.sh`).

use crate::common;
use crate::web_browser::browser::{Browser, DESKTOP, PHONE};
use crate::web_browser::{WebFleet, pick_lane, screenshot};

use std::path::Path;

use common::git::git_in;
use serde_json::Value;

/// Presses the action `action` of the shown lane; a risky one is pressed a
/// second time once it asks `confirm`. Returns what the host answered, once
/// the page shows it (`ok`: its answer, else its refusal).
fn act(browser: &Browser, action: &str, confirm: Option<&str>, ok: bool) -> String {
    browser.execute("document.querySelector('#act-result').textContent = '';");
    let button = format!("#lane-actions button[data-action='{action}']");
    browser.click(&button);
    if let Some(question) = confirm {
        let asked = browser.wait_text(&format!("{button}.confirm"), |t| t == question);
        assert_eq!(asked, question);
        browser.click(&format!("{button}.confirm"));
    }
    let class = if ok { "said-ok" } else { "said-error" };
    let said = browser.wait_text(&format!("#act-result.{class}"), |t| !t.is_empty());
    let other = if ok { "said-error" } else { "said-ok" };
    assert_eq!(
        browser.count(&format!("#act-result.{other}")),
        0,
        "{action}: {said}"
    );
    said
}

/// Waits until the shown lane offers `action` (its state allows it).
fn offers(browser: &Browser, action: &str) {
    browser.wait_for(&format!("#lane-actions button[data-action='{action}']"));
}

/// Whether the page is no wider than its viewport.
fn fits(browser: &Browser) -> bool {
    browser.execute("return document.documentElement.scrollWidth <= window.innerWidth;")
        == Value::Bool(true)
}

/// The Work pane of `lane`, once its answer is drawn.
fn open_work(browser: &Browser, lane: &str) {
    pick_lane(browser, lane);
    browser.click("#tab-work");
    browser.wait_for(&format!("#pane-work[data-lane='{lane}']"));
}

/// On a phone: lane `big`'s 5,000-line commit reads one file at a time,
/// folded, coloured, never wider than the screen, with its cost chart; lane
/// `api` cannot be removed before it is merged, then is merged and removed;
/// `big` is pushed to a bare remote; `bad`'s merge is refused by the verify
/// check, the host's reason shown.
#[test]
fn a_phone_reads_a_long_diff_merges_pushes_and_is_told_what_is_refused() {
    let fleet = WebFleet::start_with(
        &["big", "api", "bad"],
        &[],
        "",
        "big:5000 api:3 bad:2",
        "[fleet]\nverify = \"test ! -e bad.txt\"\n",
    );
    let root = fleet.base.root();
    let remote = fleet.base.out_dir().join("remote.git");
    git_in(
        fleet.base.out_dir(),
        &["init", "--quiet", "--bare", "remote.git"],
    );
    git_in(
        root,
        &["remote", "add", "origin", &remote.to_string_lossy()],
    );
    let browser = fleet.open(PHONE);
    for lane in ["big", "api", "bad"] {
        browser.wait_text(&format!("#lanes .lane[data-lane='{lane}'] .ahead"), |t| {
            t == "1 ahead"
        });
    }

    open_work(&browser, "big");
    browser.wait_text("#file-head", |t| t.starts_with("big.txt · +5000 −0"));
    assert_eq!(browser.count("#diff .dl"), 200, "folded at 200 lines");
    assert!(browser.count("#diff .dl.d-add") >= 199);
    assert_eq!(
        browser.text("#diff-more"),
        "Show 1,000 more lines (4,801 not shown)"
    );
    let commits = browser.texts("#work-commits .commit-subject");
    assert_eq!(commits, ["big: 5000 lines"]);
    let chart = browser.text("#work-chart .chart-summary");
    assert!(
        chart.starts_with("1 session, $0.42 in all, most $0.42 (session 1)"),
        "{chart}"
    );
    assert_eq!(browser.count("#work-chart svg .bar"), 1);
    let label = browser
        .execute("return document.querySelector('#work-chart svg').getAttribute('aria-label');");
    assert!(
        label.as_str().is_some_and(|l| l.contains("$0.42 in all")),
        "{label}"
    );
    let rendered =
        browser.execute("return Number(document.querySelector('#pane-work').dataset.renderMs);");
    eprintln!("5,000-line diff drawn at 390x844 in {rendered} ms");
    assert!(fits(&browser), "the diff widens the page");
    browser.execute("document.querySelector('#work-files').scrollIntoView();");
    screenshot(&browser, PHONE, "web-phone-diff.png");
    browser.click("#diff-more");
    browser.wait_js(
        "1,200 lines",
        "return document.querySelectorAll('#diff .dl').length === 1200;",
    );
    assert!(fits(&browser), "more lines widen the page");

    pick_lane(&browser, "api");
    let refused = act(&browser, "remove", Some("Remove lane api?"), false);
    assert!(!refused.is_empty());
    assert!(
        browser.count("#lanes .lane[data-lane='api']") == 1,
        "api is still there"
    );
    let merged = act(&browser, "merge", Some("Merge api into main?"), true);
    assert!(merged.contains("merged into main"), "{merged}");
    assert_eq!(
        git_in(root, &["log", "-1", "--format=%s", "clowder/api"]),
        "api: 3 lines"
    );
    git_in(
        root,
        &["merge-base", "--is-ancestor", "clowder/api", "main"],
    );
    act(&browser, "remove", Some("Remove lane api?"), true);
    browser.wait_js(
        "api's row gone",
        "return document.querySelector(\"#lanes .lane[data-lane='api']\") === null;",
    );

    pick_lane(&browser, "big");
    act(
        &browser,
        "push",
        Some("Push big's branch to its remote?"),
        true,
    );
    let pushed = git_in(&remote, &["log", "-1", "--format=%s", "clowder/big"]);
    assert_eq!(pushed, "big: 5000 lines");

    pick_lane(&browser, "bad");
    let refused = act(&browser, "merge", Some("Merge bad into main?"), false);
    assert!(refused.contains("not merged"), "{refused}");
    assert!(fits(&browser));
}

/// On a desktop: a running lane is paused and resumed, told to stop after
/// this session and then not, its session killed and the lane run again;
/// another is stopped now; a committed lane's Work pane and the fleet's cost
/// show their charts with the same figures in words.
#[test]
fn a_desktop_pauses_resumes_stops_kills_and_runs_a_lane_again() {
    let fleet = WebFleet::start_with(&["alpha", "beta", "gamma"], &[], "", "gamma:40", "");
    let browser = fleet.open(DESKTOP);
    pick_lane(&browser, "alpha");
    offers(&browser, "pause");
    act(&browser, "pause", None, true);
    browser.wait_text("#lanes .lane[data-lane='alpha'] .state", |t| t == "paused");
    offers(&browser, "resume");
    act(&browser, "resume", None, true);
    offers(&browser, "pause");
    browser.wait_text("#lane-actions button[data-action='stop']", |t| {
        t == "Stop after this session"
    });
    act(&browser, "stop", None, true);
    browser.wait_text("#lane-actions button[data-action='stop']", |t| {
        t == "Cancel stop"
    });
    act(&browser, "stop", None, true);
    browser.wait_text("#lane-actions button[data-action='stop']", |t| {
        t == "Stop after this session"
    });
    act(&browser, "kill", Some("Kill session 1 of alpha?"), true);
    offers(&browser, "restart");
    act(&browser, "restart", None, true);
    offers(&browser, "kill");

    pick_lane(&browser, "beta");
    offers(&browser, "stop_now");
    act(
        &browser,
        "stop_now",
        Some("Stop beta now, ending its session?"),
        true,
    );
    offers(&browser, "restart");

    browser.wait_text("#lanes .lane[data-lane='gamma'] .ahead", |t| t == "1 ahead");
    open_work(&browser, "gamma");
    browser.wait_text("#file-head", |t| t.starts_with("gamma.txt · +40 −0"));
    let chart = browser.text("#work-chart .chart-summary");
    assert!(chart.starts_with("1 session, $0.42 in all"), "{chart}");
    browser.click("#cost summary");
    let fleet_chart = browser.wait_text("#fleet-chart .chart-summary", |t| {
        t.contains("$0.42 in all")
    });
    assert!(fleet_chart.contains("session"), "{fleet_chart}");
    assert_eq!(browser.count("#fleet-chart svg[role='img']"), 1);
    let table = browser.texts("#fleet-chart table td");
    assert!(table.contains(&"gamma".to_string()), "{table:?}");
    browser.execute("window.scrollTo(0, 0);");
    screenshot(&browser, DESKTOP, "web-desktop-lane.png");
}

/// The lane's name in the registry, once `lane add` from the page has made it.
fn registered(root: &Path, lane: &str) -> bool {
    std::fs::read_to_string(root.join(".clowder/fleet.json"))
        .is_ok_and(|text| text.contains(&format!("\"{lane}\"")))
}

/// A lane made from the page's form runs; a name already taken is refused
/// with the host's reason and what was typed is kept. With the server gone
/// the page says it cannot reach it, and keeps what it shows.
#[test]
fn a_new_lane_is_made_from_the_page_and_runs() {
    let mut fleet = WebFleet::start(&["alpha"], &[], "");
    let browser = fleet.open(PHONE);
    browser.click("#new-lane-open");
    browser.send_keys("#new-name", "alpha");
    browser.send_keys("#new-prompt", "Write the docs.");
    browser.click("#new-lane-add");
    let refused = browser.wait_text("#new-lane-error", |t| !t.is_empty());
    assert!(refused.contains("alpha"), "{refused}");
    let kept = browser.execute(
        "return [document.querySelector('#new-name').value, document.querySelector('#new-prompt').value];",
    );
    assert_eq!(kept, serde_json::json!(["alpha", "Write the docs."]));

    browser.execute("document.querySelector('#new-name').value = '';");
    browser.send_keys("#new-name", "fresh");
    browser.click("#new-lane-add");
    browser.wait_for("#new-lane[hidden]");
    browser.wait_for("#lanes .lane[data-lane='fresh']");
    assert!(registered(fleet.base.root(), "fresh"));
    browser.wait_text("#output-title", |t| t.contains("fresh"));
    browser.wait_texts("#output .out-line", |t| t.contains("lane=fresh"));

    let served = fleet.served.take().expect("served");
    assert!(served.stop().success());
    browser.wait_text("#conn", |t| t == "offline: cannot reach clowder serve");
    assert_eq!(browser.count("#lanes .lane[data-lane='fresh']"), 1);
}
