//! The web inbox's HTTP side: the embedded page and its manifest, icon and
//! service worker (which hold nothing secret and need no token), and behind
//! the token check its state, its event stream and what it may change
//! (decide a request, tell a lane, and the actions of `actions`), these
//! also behind `Origin` and CSRF.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::{ConnectInfo, Query, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::sse::{KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use futures_util::stream;
use serde::Deserialize;

use super::app::{App, answer_json, answer_response, refuse_foreign};
use super::auth;
use super::hosts::Answer;
use super::listen::Door;
use crate::fleet::wire::WireDecision;

const INDEX_HTML: &str = include_str!("../../assets/web/index.html");
const APP_JS: &str = include_str!("../../assets/web/app.js");
const APP_CSS: &str = include_str!("../../assets/web/app.css");
const MANIFEST: &str = include_str!("../../assets/web/manifest.webmanifest");
const ICON: &str = include_str!("../../assets/web/icon.svg");
/// The icon drawn at the sizes a phone's home screen asks for (made from icon.svg).
const ICON_192: &[u8] = include_bytes!("../../assets/web/icon-192.png");
const ICON_512: &[u8] = include_bytes!("../../assets/web/icon-512.png");
const SERVICE_WORKER: &str = include_str!("../../assets/web/sw.js");

/// Headers on every answer: the page runs only its own script, is never
/// framed, and never leaks its address (with a token in it) as a referrer.
const SECURITY_HEADERS: [(&str, &str); 5] = [
    (
        "content-security-policy",
        "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; manifest-src 'self'; worker-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
    ),
    ("x-content-type-options", "nosniff"),
    ("referrer-policy", "no-referrer"),
    ("x-frame-options", "DENY"),
    ("cache-control", "no-store"),
];

pub fn router(app: Arc<App>) -> Router {
    let api = Router::new()
        .route("/api/state", get(state))
        .route("/api/events", get(events))
        .route("/api/decide", post(decide))
        .route("/api/tell", post(tell))
        .route("/api/act", post(super::actions::act))
        .route("/api/lanes", post(super::actions::new_lane))
        .route("/api/plans/retry", post(super::actions::retry_plan))
        .route("/api/work", get(super::actions::work))
        .route("/api/chart", get(super::actions::chart))
        .layer(middleware::from_fn_with_state(Arc::clone(&app), guard))
        .with_state(app);
    Router::new()
        .route("/", get(index))
        .route(
            "/app.js",
            get(|| async { asset("text/javascript", APP_JS) }),
        )
        .route("/app.css", get(|| async { asset("text/css", APP_CSS) }))
        .route(
            "/manifest.webmanifest",
            get(|| async { asset("application/manifest+json", MANIFEST) }),
        )
        .route("/icon.svg", get(|| async { asset("image/svg+xml", ICON) }))
        .route("/icon-192.png", get(|| async { png(ICON_192) }))
        .route("/icon-512.png", get(|| async { png(ICON_512) }))
        .route(
            "/sw.js",
            get(|| async { asset("text/javascript", SERVICE_WORKER) }),
        )
        .merge(api)
        .layer(middleware::map_response(|response| async {
            secured(response)
        }))
}

/// Lets through a request with the right token in its `Authorization`
/// header, always; a wrong one is answered 401, and past the first few its
/// answer is held back, longer each time.
async fn guard(
    State(app): State<Arc<App>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    request: Request,
    next: Next,
) -> Response {
    let given = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|value| value.to_str().ok())
        .and_then(auth::bearer);
    let Some(given) = given else {
        return unauthorized();
    };
    if auth::same_secret(given, &app.token) {
        if let Some(door) = request.extensions().get::<Arc<Door>>() {
            door.trust();
        }
        return next.run(request).await;
    }
    match app.brake.failed(peer.ip(), Instant::now()) {
        Some(wait) => {
            tokio::time::sleep(wait).await;
            too_many(wait)
        }
        None => unauthorized(),
    }
}

fn secured(mut response: Response) -> Response {
    let headers = response.headers_mut();
    for (name, value) in SECURITY_HEADERS {
        headers.insert(name, HeaderValue::from_static(value));
    }
    response
}

fn unauthorized() -> Response {
    (
        StatusCode::UNAUTHORIZED,
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        "401: a missing or wrong token: open the address `clowder serve --http` printed\n",
    )
        .into_response()
}

fn too_many(wait: Duration) -> Response {
    let secs = wait.as_secs().max(1).to_string();
    (
        StatusCode::TOO_MANY_REQUESTS,
        [(header::RETRY_AFTER, secs)],
        "429: too many wrong tokens from this address: each answer now waits longer\n",
    )
        .into_response()
}

fn asset(content_type: &'static str, body: &'static str) -> Response {
    ([(header::CONTENT_TYPE, content_type)], body).into_response()
}

fn png(body: &'static [u8]) -> Response {
    ([(header::CONTENT_TYPE, "image/png")], body).into_response()
}

async fn index() -> Response {
    asset("text/html; charset=utf-8", INDEX_HTML)
}

/// The whole view, with the CSRF token for the page's actions.
async fn state(State(app): State<Arc<App>>) -> Response {
    let (_, view) = app.shared.view_since(None, None);
    let body = format!(
        r#"{{"csrf":"{}","now":"{}","view":{view}}}"#,
        app.csrf,
        chrono::Utc::now().to_rfc3339(),
    );
    ([(header::CONTENT_TYPE, "application/json")], body).into_response()
}

#[derive(Deserialize)]
struct EventsQuery {
    lane: Option<String>,
    /// The run of the server and the version of the view the page holds.
    epoch: Option<String>,
    since: Option<u64>,
}

/// The page's live feed: `state` at once (what changed since `?since=`,
/// or the whole view) and what changed after every change (at most ten a
/// second), and, with `?lane=`, that lane's `output`.
async fn events(State(app): State<Arc<App>>, Query(query): Query<EventsQuery>) -> Response {
    let Some(seat) = Seat::take(&app.feeds) else {
        let text = format!("503: {MAX_FEEDS} pages are open already; close one");
        return (StatusCode::SERVICE_UNAVAILABLE, text).into_response();
    };
    let follower = query
        .lane
        .as_deref()
        .and_then(|lane| app.shared.follow(lane));
    let feed = super::feed::Feed::new(Arc::clone(&app.shared), follower, query.epoch, query.since);
    let stream = stream::unfold((feed, seat), |(mut feed, seat)| async move {
        let event = feed.next().await?;
        Some((Ok::<_, Infallible>(event), (feed, seat)))
    });
    Sse::new(stream)
        .keep_alive(KeepAlive::new().interval(Duration::from_secs(15)))
        .into_response()
}

/// Open event streams at most: each holds a connection and a little memory.
const MAX_FEEDS: usize = 256;

/// One open event stream, counted until it closes.
struct Seat(Arc<AtomicUsize>);

impl Seat {
    fn take(open: &Arc<AtomicUsize>) -> Option<Seat> {
        let taken = open.fetch_update(Ordering::AcqRel, Ordering::Acquire, |count| {
            (count < MAX_FEEDS).then_some(count + 1)
        });
        taken.ok().map(|_| Seat(Arc::clone(open)))
    }
}

impl Drop for Seat {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

#[derive(Deserialize)]
struct DecideBody {
    id: String,
    decision: String,
    #[serde(default)]
    reason: String,
}

async fn decide(
    State(app): State<Arc<App>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    body: axum::Json<DecideBody>,
) -> Response {
    if let Some(refused) = refuse_foreign(&app, &headers) {
        return refused;
    }
    let reason = body.reason.trim().to_string();
    let decision = match body.decision.as_str() {
        "approve" => WireDecision::Approve {
            reason: (!reason.is_empty()).then_some(reason),
        },
        "reject" if reason.is_empty() => {
            return answer_json(
                StatusCode::BAD_REQUEST,
                false,
                "a rejection needs a reason: the agent is told it",
            );
        }
        "reject" => WireDecision::Reject { reason },
        other => {
            let text = format!("decision {other:?}: expected \"approve\" or \"reject\"");
            return answer_json(StatusCode::BAD_REQUEST, false, &text);
        }
    };
    let by = format!("web {peer}");
    let answer = app.shared.decide(&body.id, decision, by).await;
    if let Answer::Done(text) = &answer {
        eprintln!("clowder serve: {text}");
    }
    answer_response(answer)
}

#[derive(Deserialize)]
struct TellBody {
    lane: String,
    text: String,
}

async fn tell(
    State(app): State<Arc<App>>,
    headers: HeaderMap,
    body: axum::Json<TellBody>,
) -> Response {
    if let Some(refused) = refuse_foreign(&app, &headers) {
        return refused;
    }
    let text = body.text.trim().to_string();
    if text.is_empty() {
        return answer_json(StatusCode::BAD_REQUEST, false, "the note is empty");
    }
    // The host's answer says whether the running session took the note now.
    answer_response(app.shared.tell(&body.lane, text).await)
}
