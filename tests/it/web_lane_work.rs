//! The page's actions through the real binary and real HTTP, without a
//! browser: a lane's work (commits, diff by file, the limit that says how
//! to see it all), merge, push and remove with the host's refusals, a lane
//! made from the page that then runs, a failed plan retried on a headless
//! host, who asked said in the events, and every new action refused
//! without the token, the `Origin` or the CSRF token. The browser's side is
//! tests/it/web_actions.rs.

use crate::common;

use std::path::Path;
use std::process::{Child, Stdio};

use common::git::{clowder_command, git_in as git};
use common::host::{HostFleet, stop_host};
use common::page::{Page, agent};
use common::{DEADLINE, wait_until};
use serde_json::{Value, json};

fn commit(dir: &Path, message: &str) {
    let who = [
        "-c",
        "user.name=Tester",
        "-c",
        "user.email=tester@example.com",
    ];
    git(
        dir,
        &[&who[..], &["commit", "--quiet", "-m", message]].concat(),
    );
}

fn lane<'a>(view: &'a Value, name: &str) -> &'a Value {
    view["lanes"]
        .as_array()
        .and_then(|lanes| lanes.iter().find(|lane| lane["name"] == name))
        .unwrap_or(&Value::Null)
}

/// The host of `fleet` with sessions of `secs` seconds, staying once its
/// lanes have ended (as a server's does), so the page can act on them.
fn host(fleet: &HostFleet, secs: u32) -> Child {
    let child = fleet
        .host_command(secs, "none")
        .arg("--stay")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start the host");
    let socket = fleet.socket();
    let up = wait_until(DEADLINE, || {
        std::os::unix::net::UnixStream::connect(&socket).is_ok()
    });
    assert!(up, "the host never served {}", socket.display());
    child
}

/// The morning after: api's work is read and merged; docs is pushed to a
/// bare remote; a merge that conflicts is refused with git's reason; a
/// remove that would lose commits is refused, and allowed once merged; and
/// the host says who asked each, as the room shows it.
#[test]
fn a_lanes_work_is_read_merged_pushed_and_removed_from_the_page() {
    let fleet = HostFleet::new(&["api", "docs", "clash"], 1);
    let root = fleet.root();
    let remote = tempfile::tempdir().expect("tempdir");
    let remote_path = remote.path().display().to_string();
    git(root, &["init", "--quiet", "--bare", &remote_path]);
    git(root, &["remote", "add", "origin", &remote_path]);
    // main gets a work-clash.txt of its own: clash's merge conflicts.
    std::fs::write(root.join("work-clash.txt"), "main's own line\n").expect("write");
    git(root, &["add", "work-clash.txt"]);
    commit(root, "main: work-clash.txt");
    let host = host(&fleet, 1);
    let page = Page::start(root);
    page.wait_for("every lane done and counted", |view| {
        ["api", "docs", "clash"]
            .iter()
            .all(|name| lane(view, name)["ahead"] == 1 && lane(view, name)["running"].is_null())
    });

    let (status, work) = page.get("api/work?lane=api");
    assert_eq!(status, 200, "{work}");
    let work = &work["work"];
    assert_eq!(work["base"], "main");
    assert_eq!(work["branch"], "clowder/api");
    assert_eq!(work["commits"][0]["subject"], "api: session 1");
    assert_eq!(work["commits"][0]["author"], "Agent");
    assert_eq!(work["files"][0]["path"], "work-api.txt");
    assert_eq!(work["files"][0]["added"], 1);
    assert_eq!(work["files"][0]["patch"], "@@ -0,0 +1 @@\n+api 1\n");
    assert!(
        work["stat"]
            .as_str()
            .expect("stat")
            .contains("work-api.txt")
    );
    assert_eq!(work["cut"], Value::Null);
    assert_eq!(work["sessions"].as_array().map(Vec::len), Some(1), "{work}");

    let (status, text) = page.act("api", "remove");
    assert_eq!(
        status, 409,
        "a remove that loses a commit is refused: {text}"
    );
    assert!(text.contains("has 1 commit that neither main"), "{text}");
    let (status, text) = page.act("api", "merge");
    assert_eq!(status, 200, "{text}");
    assert!(text.contains("merged into main"), "{text}");
    assert_eq!(
        git(root, &["show", "main:work-api.txt"]).trim(),
        "api 1",
        "the merge reached main"
    );
    let (status, text) = page.act("api", "remove");
    assert_eq!(status, 200, "{text}");

    let (status, text) = page.act("clash", "merge");
    assert_eq!(status, 409, "{text}");
    assert!(text.contains("conflict"), "the host's reason: {text}");
    assert_eq!(
        git(root, &["status", "--porcelain", "--untracked-files=no"]),
        "",
        "a refused merge leaves the fleet's folder clean"
    );

    let (status, text) = page.act("docs", "push");
    assert_eq!(status, 200, "{text}");
    assert!(text.contains("pushed clowder/docs to origin"), "{text}");
    let pushed = git(remote.path(), &["rev-parse", "refs/heads/clowder/docs"]);
    assert_eq!(
        pushed.trim(),
        git(root, &["rev-parse", "clowder/docs"]).trim()
    );

    let (status, text) = page.act("docs", "pause");
    assert_eq!(status, 409, "{text}");
    assert_eq!(text, "lane docs is not running: nothing to pause");
    page.wait_for("who asked, in the events", |view| {
        let events = view["events"].to_string();
        [
            "merge asked by web 127.0.0.1:",
            "push asked by web 127.0.0.1:",
        ]
        .iter()
        .all(|said| events.contains(said))
    });
    stop_host(root, host);
}

/// A diff of 5,000 lines comes whole, file by file; past the limit it is
/// cut, and says how many lines it has and how to see them all.
#[test]
fn a_long_diff_comes_whole_and_one_past_the_limit_says_how_to_see_it_all() {
    let fleet = HostFleet::new(&["big"], 1);
    let root = fleet.root();
    let worktree = root.join(".clowder/worktrees/big");
    let lines = |count: usize, word: &str| -> String {
        (0..count).map(|n| format!("{word} {n}\n")).collect()
    };
    std::fs::write(worktree.join("five.txt"), lines(5_000, "line")).expect("write");
    git(&worktree, &["add", "five.txt"]);
    commit(&worktree, "five thousand lines");
    let host = host(&fleet, 1);
    let page = Page::start(root);
    page.wait_for("big", |view| lane(view, "big")["name"] == "big");

    let (status, work) = page.get("api/work?lane=big");
    assert_eq!(status, 200, "{work}");
    let five = work["work"]["files"]
        .as_array()
        .and_then(|files| files.iter().find(|f| f["path"] == "five.txt"))
        .cloned()
        .expect("five.txt in the diff");
    assert_eq!(five["added"], 5_000);
    assert_eq!(
        five["patch"].as_str().map(|p| p.lines().count()),
        Some(5_001)
    );
    assert_eq!(five["cut"], false);
    assert_eq!(work["work"]["cut"], Value::Null);

    std::fs::write(worktree.join("more.txt"), lines(30_000, "more")).expect("write");
    git(&worktree, &["add", "more.txt"]);
    commit(&worktree, "thirty thousand more");
    let (status, work) = page.get("api/work?lane=big");
    assert_eq!(status, 200, "{work}");
    let work = &work["work"];
    assert_eq!(work["shown"], 20_000);
    assert!(
        work["lines"].as_u64().expect("lines") > 35_000,
        "{}",
        work["lines"]
    );
    let cut = work["cut"].as_str().expect("the cut is said");
    assert!(
        cut.contains("run `git diff main...clowder/big` in"),
        "{cut}"
    );
    assert!(work["files"].to_string().contains(r#""cut":true"#));
    stop_host(root, host);
}

/// A lane made from the page is added as the room's dialog adds it, and
/// runs; a name taken is refused with the reason, and a prompt file outside
/// the repository before anything reaches the host.
#[test]
fn a_lane_made_from_the_page_runs_and_a_taken_name_is_refused() {
    let fleet = HostFleet::new(&["api"], 1);
    let root = fleet.root();
    let host = host(&fleet, 1);
    let page = Page::start(root);
    page.wait_for("api", |view| lane(view, "api")["name"] == "api");
    let prompt = "Write the changelog for 0.4, and commit.";
    let (status, answer) = page.post(
        "api/lanes",
        json!({"name": "changelog", "prompt": prompt, "base": "main"}),
    );
    assert_eq!(status, 200, "{answer}");
    assert!(
        answer["text"]
            .as_str()
            .expect("text")
            .contains("lane changelog added")
    );
    let saved = std::fs::read_to_string(root.join(".clowder/prompts/changelog.md"))
        .expect("the typed prompt is saved");
    assert_eq!(saved.trim(), prompt);
    page.wait_for("the new lane's commit", |view| {
        lane(view, "changelog")["ahead"] == 1
    });
    let (status, answer) = page.post("api/lanes", json!({"name": "changelog", "prompt": "x"}));
    assert_eq!(status, 409, "{answer}");
    assert_eq!(answer["text"], "lane changelog already exists");
    let (status, answer) = page.post(
        "api/lanes",
        json!({"name": "sneaky", "prompt_file": "../../etc/passwd"}),
    );
    assert_eq!(status, 400, "{answer}");
    assert!(!root.join(".clowder/worktrees/sneaky").exists());
    stop_host(root, host);
}

/// Every new action needs the token, the page's `Origin` and the CSRF
/// token; without any of them nothing reaches the host.
#[test]
fn every_new_action_is_refused_without_token_origin_or_csrf() {
    let fleet = HostFleet::new(&["api"], 1);
    let root = fleet.root();
    let host = host(&fleet, 1);
    let page = Page::start(root);
    page.wait_for("api", |view| lane(view, "api")["name"] == "api");
    let csrf = page.get("api/state").1["csrf"]
        .as_str()
        .expect("csrf")
        .to_string();
    let origin = page.base.trim_end_matches('/').to_string();
    let actions = [
        ("api/act", json!({"lane": "api", "action": "remove"})),
        ("api/lanes", json!({"name": "intruder"})),
        ("api/plans/retry", json!({"plan": "p"})),
    ];
    for (path, body) in &actions {
        let (status, _) = page.post_with(path, body.clone(), &[("X-Clowder-Csrf", &csrf)]);
        assert_eq!(status, 403, "{path} without Origin");
        let foreign = [("Origin", "http://127.0.0.1:1"), ("X-Clowder-Csrf", &csrf)];
        let (status, _) = page.post_with(path, body.clone(), &foreign);
        assert_eq!(status, 403, "{path} from another origin");
        let (status, _) = page.post_with(path, body.clone(), &[("Origin", &origin)]);
        assert_eq!(status, 403, "{path} without the CSRF token");
        let mut response = agent()
            .post(format!("{}{path}", page.base))
            .header("Origin", &origin)
            .header("X-Clowder-Csrf", &csrf)
            .send_json(body.clone())
            .expect("POST");
        assert_eq!(response.status().as_u16(), 401, "{path} without the token");
        let _ = response.body_mut().read_to_string();
    }
    for path in ["api/work?lane=api", "api/chart"] {
        let response = agent()
            .get(format!("{}{path}", page.base))
            .call()
            .expect("GET");
        assert_eq!(response.status().as_u16(), 401, "{path} without the token");
    }
    assert!(
        root.join(".clowder/worktrees/api").exists(),
        "nothing was removed"
    );
    assert!(!root.join(".clowder/worktrees/intruder").exists());
    stop_host(root, host);
}

/// A plan that failed while nobody looked is retried from the page, on a
/// host that stays (`--headless --stay`): its failed and blocked steps run
/// again there and the page shows it complete.
#[test]
fn a_failed_plan_is_retried_from_the_page_on_a_headless_host() {
    let flag = tempfile::tempdir().expect("tempdir");
    let plan = format!(
        "[plan]\nname = \"rt\"\n\n[[step]]\nid = \"a\"\nprompt = \"write a.txt\\nfail-unless {}\"\n\n[[step]]\nid = \"b\"\ndepends_on = [\"a\"]\nprompt = \"write b.txt\"\n",
        flag.path().join("ok").display()
    );
    let repo = common::plan::PlanRepo::new(&plan);
    let out = repo.run_plan();
    assert_eq!(out.status.code(), Some(1), "the plan fails first");
    let host = repo
        .command(&["--headless", "--stay"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start the host");
    let socket = repo.root().join(".clowder/host.sock");
    assert!(wait_until(DEADLINE, || {
        std::os::unix::net::UnixStream::connect(&socket).is_ok()
    }));
    let page = Page::start(repo.root());
    let view = page.wait_for("the failed plan", |view| {
        view["plans"][0]["status"] == "failed"
    });
    let steps = &view["plans"][0]["steps"];
    assert_eq!(steps[0]["id"], "a");
    assert_eq!(steps[0]["state"], "failed");
    assert_eq!(steps[1]["depends_on"], json!(["a"]));
    assert_eq!(steps[1]["state"], "blocked");
    std::fs::write(flag.path().join("ok"), "").expect("write the flag");
    let (status, answer) = page.post("api/plans/retry", json!({"plan": "rt"}));
    assert_eq!(status, 200, "{answer}");
    assert!(
        answer["text"]
            .as_str()
            .expect("text")
            .contains("plan rt runs again")
    );
    page.wait_for("the plan completed", |view| {
        view["plans"][0]["status"] == "completed"
    });
    let (status, answer) = page.post("api/plans/retry", json!({"plan": "rt"}));
    assert_eq!(
        status, 409,
        "a completed plan has nothing to retry: {answer}"
    );
    common::host::stop_host(repo.root(), host);
}

/// The room in a terminal shows each action of the page as it happens, and
/// the lane's event log keeps who asked.
#[test]
fn the_room_shows_the_pages_actions_as_they_happen() {
    let fleet = HostFleet::new(&["api"], 1);
    let root = fleet.root();
    let command = format!(
        "env GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null FLEET_AGENT_SECS=120 FLEET_AGENT_OUT={} FLEET_AGENT_GATE_LANE=none {}; sleep 600",
        fleet.out_dir().display(),
        common::clowder_bin().display()
    );
    let tmux = common::tmux::Tmux::start(root, &command, 160, 40);
    tmux.wait_for("Lanes 1");
    let page = Page::start(root);
    page.wait_for("api running", |view| lane(view, "api")["running"] == true);
    let (status, text) = page.act("api", "pause");
    assert_eq!(status, 200, "{text}");
    tmux.wait_for("pause asked by web 127.0.0.1:");
    page.wait_for("api paused", |view| lane(view, "api")["paused"] == true);
    let (status, text) = page.act("api", "stop_now");
    assert_eq!(status, 200, "{text}");
    tmux.wait_for("stop now asked by web 127.0.0.1:");
    let log = std::fs::read_to_string(root.join(".clowder/lanes/api/harness-events.jsonl"))
        .expect("the lane's event log");
    let asked: Vec<Value> = log
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter(|event| event["event"] == "asked")
        .collect();
    assert_eq!(asked.len(), 2, "{log}");
    assert_eq!(asked[0]["action"], "pause");
    assert!(
        asked[0]["by"]
            .as_str()
            .expect("by")
            .starts_with("web 127.0.0.1:")
    );
    tmux.keys(&["q"]);
}

/// The page over a host reached by ssh (a real sshd on 127.0.0.1): a lane's
/// work is read and merged there, as over the folder's socket.
#[test]
fn over_ssh_the_page_reads_and_merges_a_lane() {
    let Some(sshd) = common::sshd::Sshd::start() else {
        return;
    };
    let fleet = HostFleet::new(&["api"], 1);
    let root = fleet.root();
    let host = host(&fleet, 1);
    let target = format!("ssh://root@127.0.0.1:{}{}", sshd.port, root.display());
    let somewhere_else = tempfile::tempdir().expect("tempdir");
    let page = Page::spawned(
        clowder_command(
            somewhere_else.path(),
            &["serve", "--http", "127.0.0.1:0", &target],
        )
        .env("CLOWDER_SSH", sshd.ssh_command())
        .env("CLOWDER_REMOTE_COMMAND", common::clowder_bin()),
    );
    page.wait_for("api's commit", |view| lane(view, "api")["ahead"] == 1);
    let (status, work) = page.get("api/work?lane=api");
    assert_eq!(status, 200, "{work}");
    assert_eq!(work["work"]["commits"][0]["subject"], "api: session 1");
    let (status, text) = page.act("api", "merge");
    assert_eq!(status, 200, "{text}");
    assert_eq!(git(root, &["show", "main:work-api.txt"]), "api 1");
    drop(page);
    stop_host(root, host);
}

/// A lane paused between sessions (`lane pause`) is resumed from the page,
/// as `lane resume` does; a lane run again from the page no longer reads
/// as ended.
#[test]
fn resume_of_a_lane_paused_between_sessions_and_a_lane_run_again_from_the_page() {
    let fleet = HostFleet::new(&["api", "docs"], 1);
    let root = fleet.root();
    common::git::clowder_in(root, &["lane", "pause", "docs"]);
    let host = host(&fleet, 1);
    let page = Page::start(root);
    page.wait_for("api done, docs paused", |view| {
        lane(view, "api")["state"] == "done" && lane(view, "docs")["state"] == "paused"
    });
    let (status, text) = page.act("docs", "resume");
    assert_eq!(status, 200, "{text}");
    assert!(text.contains("lane docs: active (was paused)"), "{text}");
    page.wait_for("docs run and done", |view| {
        lane(view, "docs")["state"] == "done" && lane(view, "docs")["ahead"] == 1
    });
    let (status, text) = page.act("api", "restart");
    assert_eq!(status, 200, "{text}");
    page.wait_for("api run again, its second session", |view| {
        lane(view, "api")["state"] == "done" && lane(view, "api")["ahead"] == 2
    });
    stop_host(root, host);
}
