//! The web page does what the room does, in a real headless Chromium through
//! the binary: a lane's actions (merge, push, run again, pause, resume, stop
//! after this session, stop now, kill, remove) with the host's answer or
//! refusal shown, its work (commits, a 5,000-line diff on a phone, a cost
//! chart), a new lane made from the page, a failed plan retried, and the
//! fleet's cost. Fleets of the web fake agent (`tests/agents/web-agent.sh`).

use crate::common;
use crate::web_browser::browser::{Browser, DESKTOP, PHONE};
use crate::web_browser::{Served, WebFleet, pick_lane, screenshot};

use std::path::Path;

use common::git::git_in;
use common::host::stop_host;
use common::plan::PlanRepo;
use common::{DEADLINE, stdout_of, wait_until};
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
/// folded, coloured, never wider than the screen, with its cost chart;
/// `huge`'s 25,000 lines say first that they are cut; lane `api` cannot be removed before it is merged, then is merged and removed;
/// `big` is pushed to a bare remote; `bad`'s merge is refused by the verify
/// check, the host's reason shown.
#[test]
fn a_phone_reads_a_long_diff_merges_pushes_and_is_told_what_is_refused() {
    // `keep` runs on: a headless host ends once every lane has ended.
    let fleet = WebFleet::start_with(
        &["big", "huge", "api", "bad", "keep"],
        &[],
        "",
        "big:5000 huge:25000 api:3 bad:2",
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
    for lane in ["big", "huge", "api", "bad"] {
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
    browser.execute("document.querySelector('#output-title').scrollIntoView();");
    screenshot(&browser, PHONE, "web-phone-diff.png");
    let more = browser.execute(
        "const t = performance.now(); document.querySelector('#diff-more').click();
         void document.querySelector('#diff').offsetHeight; return performance.now() - t;",
    );
    eprintln!("1,000 more lines of it drawn in {more} ms");
    browser.wait_js(
        "1,200 lines",
        "return document.querySelectorAll('#diff .dl').length === 1200;",
    );
    assert!(fits(&browser), "more lines widen the page");

    // Past the server's 20,000 lines the diff is cut: said first, with how
    // to see it all.
    pick_lane(&browser, "huge");
    browser.wait_for("#pane-work[data-lane='huge']");
    let cut = browser.text("#work-cut");
    assert!(
        cut.starts_with("⚠ Not all of it is shown:") && cut.contains("git diff"),
        "{cut}"
    );
    assert!(browser.text("#file-head").contains("its patch is cut"));
    let times = browser.execute(
        "const d = document.querySelector('#pane-work').dataset; return [Number(d.fetchMs), Number(d.renderMs)];",
    );
    eprintln!(
        "the 20,000 lines sent of a 25,000-line diff: fetched in {} ms, drawn in {} ms",
        times[0], times[1]
    );
    assert!(fits(&browser), "the cut diff widens the page");

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

/// On a desktop: a committed lane's Work pane and the fleet's cost show
/// their charts with the same figures in words, and that lane is run again;
/// a running lane is paused and resumed, told to stop after this session
/// and then not, and its session killed; the last one is stopped now.
#[test]
fn a_desktop_pauses_resumes_stops_kills_and_runs_a_lane_again() {
    let fleet = WebFleet::start_with(&["alpha", "beta", "gamma"], &[], "", "gamma:40", "");
    let browser = fleet.open(DESKTOP);
    browser.wait_text("#lanes .lane[data-lane='gamma'] .ahead", |t| t == "1 ahead");
    open_work(&browser, "gamma");
    browser.wait_text("#file-head", |t| t.starts_with("gamma.txt · +40 −0"));
    let chart = browser.text("#work-chart .chart-summary");
    assert!(chart.starts_with("1 session, $0.42 in all"), "{chart}");
    browser.click("#cost summary");
    let fleet_chart = browser.wait_text("#fleet-chart .chart-summary", |t| {
        t.contains("$0.42 in all")
    });
    assert!(fleet_chart.starts_with("1 session"), "{fleet_chart}");
    assert_eq!(browser.count("#fleet-chart svg[role='img']"), 1);
    let table = browser.texts("#fleet-chart table td");
    assert!(table.contains(&"gamma".to_string()), "{table:?}");
    browser.execute("window.scrollTo(0, 0);");
    screenshot(&browser, DESKTOP, "web-desktop-lane.png");
    // Keys: o shows the output, w the work again.
    browser.keys("o");
    browser.wait_for("#pane-work[hidden]");
    browser.keys("w");
    browser.wait_for("#pane-output[hidden]");

    offers(&browser, "restart");
    act(&browser, "restart", None, true);
    let ran_again = wait_until(DEADLINE, || {
        let log = fleet.base.out("host.out") + &fleet.base.out("host.err");
        log.contains("lane=gamma iteration=1 global=2 status=session_complete")
    });
    assert!(ran_again, "gamma did not run again");

    pick_lane(&browser, "alpha");
    offers(&browser, "pause");
    act(&browser, "pause", None, true);
    // The host says who asked, in the events the room shows too.
    browser.wait_texts("#events .ev-text", |t| {
        t.lines()
            .any(|line| line.contains("pause asked by web 127.0.0.1:"))
    });
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
    browser.wait_text("#lanes .lane[data-lane='alpha'] .stopping", |t| {
        t == "stops after this session"
    });
    act(&browser, "stop", None, true);
    browser.wait_text("#lane-actions button[data-action='stop']", |t| {
        t == "Stop after this session"
    });
    act(&browser, "kill", Some("Kill session 1 of alpha?"), true);
    offers(&browser, "restart");

    // The last lane that runs: once it stops, the headless host ends.
    pick_lane(&browser, "beta");
    offers(&browser, "stop_now");
    act(
        &browser,
        "stop_now",
        Some("Stop beta now, ending its session?"),
        true,
    );
}

/// A plan whose step `a` fails until the file `ok` exists in `dir`; `b`
/// waits for `a`, `c` for nothing.
fn failing_until(dir: &Path) -> String {
    format!(
        "[plan]\nname = \"rt\"\n\n[[step]]\nid = \"a\"\nprompt = \"write a.txt\\nfail-unless {}\"\n\n[[step]]\nid = \"b\"\ndepends_on = [\"a\"]\nprompt = \"write b.txt\"\n\n[[step]]\nid = \"c\"\nprompt = \"write c.txt\"\n",
        dir.join("ok").display()
    )
}

/// The lane's name in the registry, once `lane add` from the page has made it.
fn registered(root: &Path, lane: &str) -> bool {
    std::fs::read_to_string(root.join(".clowder/fleet.json"))
        .is_ok_and(|text| text.contains(&format!("\"{lane}\"")))
}

/// On a phone, over a host where a plan failed: the plan's steps show in
/// order with their states and what each waits for, and Retry runs it again
/// to the end. A lane made from the page's form runs; a name already taken
/// is refused with the host's reason and what was typed is kept. With the
/// server gone the page says it cannot reach it, and keeps what it shows.
#[test]
fn a_failed_plan_is_retried_and_a_new_lane_is_made_from_the_page() {
    let flag = tempfile::tempdir().expect("tempdir");
    let repo = PlanRepo::new(&failing_until(flag.path()));
    let out = repo.run_plan();
    assert_eq!(out.status.code(), Some(1), "{}", stdout_of(&out));
    // A lane that runs on: a headless host ends once every lane has ended.
    std::fs::write(repo.path("keep.md"), "ticks 1200\n").expect("write");
    std::fs::write(repo.path(".git/info/exclude"), "keep.md\n").expect("write");
    common::git::clowder_in(repo.root(), &["lane", "add", "keep", "--prompt", "keep.md"]);
    let logs = tempfile::tempdir().expect("tempdir");
    let log = |name: &str| std::fs::File::create(logs.path().join(name)).expect("log");
    let host = repo
        .command(&["--headless"])
        .stdout(log("host.out"))
        .stderr(log("host.err"))
        .spawn()
        .expect("start the host");
    let host = Host {
        root: repo.root().to_path_buf(),
        child: Some(host),
    };
    let socket = repo.path(".clowder/host.sock");
    assert!(
        wait_until(DEADLINE, || std::os::unix::net::UnixStream::connect(
            &socket
        )
        .is_ok()),
        "the host never served"
    );
    let mut served = Some(Served::start(repo.root(), logs.path().join("serve.err")));
    let browser = Browser::start(PHONE);
    browser.goto(&served.as_ref().expect("served").url);
    browser.wait_for("body[data-ready='1']");

    let plan = ".plan[data-plan='rt']";
    browser.wait_text(&format!("{plan} .plan-status"), |t| t == "failed");
    let steps = browser.texts(&format!("{plan} .step"));
    assert_eq!(steps.len(), 3, "{steps:?}");
    assert!(steps[0].starts_with("✗1.afailed"), "{steps:?}");
    assert!(
        steps[1].contains("2.bblocked") && steps[1].contains("after a"),
        "{steps:?}"
    );
    assert_eq!(browser.count(&format!("{plan} .step.depth-1")), 1);
    std::fs::write(flag.path().join("ok"), "").expect("write");
    browser.click(&format!("{plan} .plan-retry"));
    browser.wait_text(&format!("{plan} .plan-status"), |t| t == "completed");
    assert_eq!(browser.count(&format!("{plan} .plan-retry")), 0);
    let files = repo.files_at("main");
    assert!(files.iter().any(|f| f == "b.txt"), "{files:?}");

    browser.click("#new-lane-open");
    browser.send_keys("#new-name", "keep");
    browser.send_keys("#new-prompt", "write docs.txt");
    browser.click("#new-lane-add");
    let refused = browser.wait_text("#new-lane-error", |t| !t.is_empty());
    assert!(refused.contains("keep"), "{refused}");
    let kept = browser.execute(
        "return [document.querySelector('#new-name').value, document.querySelector('#new-prompt').value];",
    );
    assert_eq!(kept, serde_json::json!(["keep", "write docs.txt"]));
    browser.execute("document.querySelector('#new-name').value = '';");
    browser.send_keys("#new-name", "docs");
    browser.click("#new-lane-add");
    browser.wait_for("#new-lane[hidden]");
    browser.wait_for("#lanes .lane[data-lane='docs']");
    assert!(registered(repo.root(), "docs"));
    browser.wait_text("#output-title", |t| t.contains("docs"));
    let ran = wait_until(DEADLINE, || {
        repo.git(&["log", "--format=%s", "clowder/docs", "--"])
            .contains("docs: docs.txt")
    });
    assert!(ran, "the new lane's agent committed nothing");
    browser.wait_text("#lanes .lane[data-lane='docs'] .ahead", |t| t == "1 ahead");

    // The page's service worker keeps its shell, for a page opened while
    // the server is gone.
    browser.wait_js(
        "the service worker in charge of the page",
        "return navigator.serviceWorker.controller !== null;",
    );
    let served = served.take().expect("served");
    let page = served.url.split('#').next().unwrap_or_default().to_string();
    assert!(served.stop().success());
    browser.wait_text("#conn", |t| t == "offline: cannot reach clowder serve");
    assert_eq!(
        browser.count("#lanes .lane[data-lane='docs']"),
        1,
        "what was shown stays"
    );
    browser.goto(&page);
    browser.wait_text("#conn", |t| t == "offline: cannot reach clowder serve");
    drop(host);
}

/// A host in a plan's repository, ended as a service manager would end it.
struct Host {
    root: std::path::PathBuf,
    child: Option<std::process::Child>,
}

impl Drop for Host {
    fn drop(&mut self) {
        if let Some(child) = self.child.take() {
            stop_host(&self.root, child);
        }
    }
}
