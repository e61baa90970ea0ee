//! What the page does to the fleet besides deciding and telling, each
//! through the host protocol as the room's keys do, and each recorded by
//! the host as asked `by web ADDRESS`: a lane's actions, a new lane, a
//! plan's retry; and what it reads on demand: a lane's work, the fleet's
//! costs.

use std::net::SocketAddr;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

use axum::extract::{ConnectInfo, Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;

use super::app::{App, answer_json, answer_response, refuse_foreign};
use super::hosts::Answer;
use crate::fleet::LaneName;
use crate::fleet::link::HostRequest;
use crate::fleet::new_lane::{NewLaneRequest, PromptSource};
use crate::protocol::Command;

#[derive(Deserialize)]
pub struct ActBody {
    lane: String,
    action: String,
}

/// An action of the page, as the room's key sends it.
enum LaneAction {
    Work(fn(LaneName) -> HostRequest),
    Command(Command),
}

impl LaneAction {
    fn named(action: &str) -> Option<LaneAction> {
        Some(match action {
            "merge" => LaneAction::Work(HostRequest::MergeLane),
            "push" => LaneAction::Work(HostRequest::PushLane),
            "restart" => LaneAction::Work(HostRequest::RestartLane),
            "remove" => LaneAction::Work(HostRequest::Remove),
            "pause" => LaneAction::Command(Command::Pause),
            "resume" => LaneAction::Command(Command::Resume),
            "stop" => LaneAction::Command(Command::StopAfterCurrent),
            "stop_now" => LaneAction::Command(Command::StopNow),
            "kill" => LaneAction::Command(Command::KillSession),
            _ => return None,
        })
    }

    fn request(self, lane: LaneName) -> HostRequest {
        match self {
            LaneAction::Work(make) => make(lane),
            LaneAction::Command(command) => HostRequest::Command { lane, command },
        }
    }
}

/// `POST /api/act {lane, action}`.
pub async fn act(
    State(app): State<Arc<App>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    body: axum::Json<ActBody>,
) -> Response {
    if let Some(refused) = refuse_foreign(&app, &headers) {
        return refused;
    }
    let action = match body.action.as_str() {
        // A task lane stops through its task's state, as the room's `s` does it.
        "stop" if app.shared.is_task(&body.lane) => Some(LaneAction::Work(HostRequest::StopTask)),
        named => LaneAction::named(named),
    };
    let Some(action) = action else {
        let text = format!(
            "action {:?}: expected merge, push, restart, pause, resume, stop, stop_now, kill or remove",
            body.action
        );
        return answer_json(StatusCode::BAD_REQUEST, false, &text);
    };
    let answer = app
        .shared
        .lane_work(
            &body.lane,
            |lane| action.request(lane),
            format!("web {peer}"),
        )
        .await;
    said(&answer);
    answer_response(answer)
}

#[derive(Deserialize)]
pub struct NewLaneBody {
    name: String,
    #[serde(default)]
    prompt: Option<String>,
    #[serde(default)]
    prompt_file: Option<String>,
    #[serde(default)]
    base: Option<String>,
    #[serde(default)]
    host: Option<String>,
}

/// `POST /api/lanes`: a lane added as the room's new-lane dialog adds it.
pub async fn new_lane(
    State(app): State<Arc<App>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    body: axum::Json<NewLaneBody>,
) -> Response {
    if let Some(refused) = refuse_foreign(&app, &headers) {
        return refused;
    }
    let request = match new_lane_request(&body) {
        Ok(request) => request,
        Err(why) => return answer_json(StatusCode::BAD_REQUEST, false, &why),
    };
    let host = body
        .host
        .as_deref()
        .map(str::trim)
        .filter(|h| !h.is_empty());
    let answer = app
        .shared
        .host_work(host, HostRequest::AddLane(request), format!("web {peer}"))
        .await;
    said(&answer);
    answer_response(answer)
}

/// The request the form makes, or its first problem, in the dialog's words.
fn new_lane_request(body: &NewLaneBody) -> Result<NewLaneRequest, String> {
    let name = LaneName::parse(body.name.trim())?;
    let typed = body.prompt.clone().unwrap_or_default();
    let file = body.prompt_file.as_deref().unwrap_or("").trim().to_string();
    let prompt = match (file.is_empty(), typed.trim().is_empty()) {
        (true, true) => PromptSource::Default,
        (false, true) => PromptSource::File(inside_repository(&file)?),
        (true, false) => PromptSource::Typed(typed),
        (false, false) => return Err("give a prompt file or a typed prompt, not both".into()),
    };
    let base = body.base.as_deref().map(str::trim).unwrap_or("");
    let base = (!base.is_empty()).then(|| base.to_string());
    Ok(NewLaneRequest { name, prompt, base })
}

/// A prompt file named from the page stays inside the fleet's folder.
fn inside_repository(file: &str) -> Result<PathBuf, String> {
    let path = Path::new(file);
    let inside = path
        .components()
        .all(|part| matches!(part, Component::Normal(_) | Component::CurDir));
    match inside {
        true => Ok(path.to_path_buf()),
        false => Err(format!(
            "prompt file {file}: expected a path inside the repository, without `..` or a leading `/`"
        )),
    }
}

#[derive(Deserialize)]
pub struct RetryBody {
    plan: String,
}

/// `POST /api/plans/retry {plan}`: `plan retry` of a failed plan.
pub async fn retry_plan(
    State(app): State<Arc<App>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    body: axum::Json<RetryBody>,
) -> Response {
    if let Some(refused) = refuse_foreign(&app, &headers) {
        return refused;
    }
    let answer = app
        .shared
        .retry_plan(body.plan.trim(), format!("web {peer}"))
        .await;
    said(&answer);
    answer_response(answer)
}

#[derive(Deserialize)]
pub struct WorkQuery {
    lane: String,
}

/// `GET /api/work?lane=`: the lane's commits, diff and costs, as its host
/// made them (`{"ok": true, "work": …}`).
pub async fn work(State(app): State<Arc<App>>, Query(query): Query<WorkQuery>) -> Response {
    let answer = app
        .shared
        .lane_work(&query.lane, HostRequest::Work, String::new())
        .await;
    match answer {
        Answer::Done(json) => {
            let body = format!(r#"{{"ok":true,"work":{json}}}"#);
            ([(header::CONTENT_TYPE, "application/json")], body).into_response()
        }
        other => answer_response(other),
    }
}

/// `GET /api/chart`: the fleet's sessions and rate-limit waits.
pub async fn chart(State(app): State<Arc<App>>) -> Response {
    axum::Json(app.shared.chart()).into_response()
}

/// What the page did goes to the server's own log too.
fn said(answer: &Answer) {
    if let Answer::Done(text) = answer {
        for line in text.lines() {
            eprintln!("clowder serve: {}", crate::escape::one_line(line));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_prompt_file_from_the_page_stays_in_the_repository() {
        assert!(inside_repository("prompts/api.md").is_ok());
        assert!(inside_repository("./PROMPT.md").is_ok());
        assert!(inside_repository("../secret.md").is_err());
        assert!(inside_repository("/etc/passwd").is_err());
        assert!(inside_repository("a/../../b").is_err());
    }

    #[test]
    fn every_action_names_the_rooms_request() {
        let lane = LaneName::parse("api").expect("name");
        let kill = LaneAction::named("kill")
            .expect("kill")
            .request(lane.clone());
        assert_eq!(
            kill,
            HostRequest::Command {
                lane: lane.clone(),
                command: Command::KillSession
            }
        );
        assert_eq!(
            LaneAction::named("merge")
                .expect("merge")
                .request(lane.clone()),
            HostRequest::MergeLane(lane)
        );
        assert!(LaneAction::named("rm -rf").is_none());
    }
}
