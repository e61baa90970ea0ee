//! Server-sent events: the framing both APIs stream in, and the HTTP answers
//! (a whole stream, a stream that stalls, an error, silence) built from it.

use std::convert::Infallible;

use axum::body::{Body, Bytes};
use axum::http::{HeaderName, HeaderValue, Response, StatusCode};
use futures_util::StreamExt;
use serde_json::Value;

use super::Failure;

/// One event as it goes on the wire.
pub fn event(name: &str, data: &Value) -> String {
    format!("event: {name}\ndata: {data}\n\n")
}

/// A complete stream of `events`, or, with `stall`, one that sends them and then
/// keeps the connection open without another byte.
pub fn stream(events: Vec<String>, stall: bool) -> Response<Body> {
    let chunks = futures_util::stream::iter(
        events
            .into_iter()
            .map(|e| Ok::<Bytes, Infallible>(Bytes::from(e))),
    );
    let body = if stall {
        Body::from_stream(chunks.chain(futures_util::stream::pending()))
    } else {
        Body::from_stream(chunks)
    };
    Response::builder()
        .status(StatusCode::OK)
        .header("content-type", "text/event-stream")
        .header("cache-control", "no-cache")
        .body(body)
        .unwrap_or_default()
}

pub fn json(value: &Value) -> Response<Body> {
    Response::builder()
        .status(StatusCode::OK)
        .header("content-type", "application/json")
        .body(Body::from(value.to_string()))
        .unwrap_or_default()
}

pub fn failure(failure: &Failure) -> Response<Body> {
    let mut response = Response::new(Body::from(failure.body.to_string()));
    *response.status_mut() =
        StatusCode::from_u16(failure.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let headers = response.headers_mut();
    headers.insert("content-type", HeaderValue::from_static("application/json"));
    for (name, value) in &failure.headers {
        if let (Ok(name), Ok(value)) = (
            HeaderName::try_from(name.as_str()),
            HeaderValue::try_from(value.as_str()),
        ) {
            headers.insert(name, value);
        }
    }
    response
}

/// Never answers: the connection stays open until the server stops.
pub async fn silence() -> Response<Body> {
    std::future::pending::<()>().await;
    Response::default()
}
