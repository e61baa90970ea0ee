//! What the web inbox's handlers share: the server's state, the check that
//! a state-changing request comes from the page itself, and how an answer
//! of a host is said to the page.

use std::sync::Arc;
use std::sync::atomic::AtomicUsize;

use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

use super::auth::{self, Brake};
use super::hosts::{Answer, Shared};

/// What the handlers share.
pub struct App {
    pub shared: Arc<Shared>,
    pub token: String,
    pub csrf: String,
    pub brake: Brake,
    /// Event streams open now.
    pub feeds: Arc<AtomicUsize>,
}

/// A state-changing request from anywhere but the page itself.
pub(super) fn refuse_foreign(app: &App, headers: &HeaderMap) -> Option<Response> {
    let text = |name| {
        headers
            .get(name)
            .and_then(|value: &HeaderValue| value.to_str().ok())
    };
    if !auth::same_origin(text(header::ORIGIN.as_str()), text(header::HOST.as_str())) {
        return Some(answer_json(
            StatusCode::FORBIDDEN,
            false,
            "refused: the request did not come from this page (Origin)",
        ));
    }
    let csrf = text(auth::CSRF_HEADER).unwrap_or("");
    if !auth::same_secret(csrf, &app.csrf) {
        return Some(answer_json(
            StatusCode::FORBIDDEN,
            false,
            "refused: a missing or stale CSRF token; reload the page",
        ));
    }
    None
}

pub(super) fn answer_response(answer: Answer) -> Response {
    match answer {
        Answer::Done(text) => answer_json(StatusCode::OK, true, &text),
        Answer::Refused(text) => answer_json(StatusCode::CONFLICT, false, &text),
        Answer::Unreachable(text) => answer_json(StatusCode::BAD_GATEWAY, false, &text),
        Answer::Pending(text) => answer_json(StatusCode::ACCEPTED, true, &text),
    }
}

pub(super) fn answer_json(status: StatusCode, ok: bool, text: &str) -> Response {
    let body = serde_json::json!({ "ok": ok, "text": text });
    (status, axum::Json(body)).into_response()
}
