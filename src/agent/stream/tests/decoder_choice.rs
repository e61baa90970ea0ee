//! The same typed Claude event read with serde_json (`&RawValue` payloads) and
//! with sonic-rs (`LazyValue` payloads): the measurement behind the choice of
//! JSON crate (see `throughput_report`).

use std::borrow::Cow;

use serde::Deserialize;
use serde_json::value::RawValue;
use sonic_rs::LazyValue;

#[derive(Deserialize)]
struct JLine<'a> {
    #[serde(rename = "type", borrow)]
    _kind: Cow<'a, str>,
    #[serde(borrow, default)]
    _session_id: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    message: Option<JMessage<'a>>,
    #[serde(borrow, default)]
    _usage: Option<&'a RawValue>,
}

#[derive(Deserialize)]
struct JMessage<'a> {
    #[serde(borrow, default)]
    _id: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    _usage: Option<&'a RawValue>,
    #[serde(borrow, default)]
    content: Option<&'a RawValue>,
}

#[derive(Deserialize)]
struct JBlock<'a> {
    #[serde(rename = "type", borrow)]
    kind: Cow<'a, str>,
    #[serde(borrow, default)]
    _name: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    _input: Option<&'a RawValue>,
    #[serde(borrow, default)]
    _content: Option<&'a RawValue>,
    #[serde(borrow, default)]
    _text: Option<&'a RawValue>,
    #[serde(default)]
    _is_error: Option<bool>,
}

#[derive(Deserialize)]
struct SLine<'a> {
    #[serde(rename = "type", borrow)]
    _kind: Cow<'a, str>,
    #[serde(borrow, default)]
    _session_id: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    message: Option<SMessage<'a>>,
    #[serde(borrow, default)]
    _usage: Option<LazyValue<'a>>,
}

#[derive(Deserialize)]
struct SMessage<'a> {
    #[serde(borrow, default)]
    _id: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    _usage: Option<LazyValue<'a>>,
    #[serde(borrow, default)]
    content: Option<LazyValue<'a>>,
}

#[derive(Deserialize)]
struct SBlock<'a> {
    #[serde(rename = "type", borrow)]
    kind: Cow<'a, str>,
    #[serde(borrow, default)]
    _name: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    _input: Option<LazyValue<'a>>,
    #[serde(borrow, default)]
    _content: Option<LazyValue<'a>>,
    #[serde(borrow, default)]
    _text: Option<LazyValue<'a>>,
    #[serde(default)]
    _is_error: Option<bool>,
}

/// Tool-use blocks in the corpus, read with serde_json.
pub(super) fn serde_json_typed(data: &[u8]) -> usize {
    let mut calls = 0;
    for line in data.split(|b| *b == b'\n').filter(|l| !l.is_empty()) {
        let Ok(text) = std::str::from_utf8(line) else {
            continue;
        };
        let Ok(event) = serde_json::from_str::<JLine<'_>>(text) else {
            continue;
        };
        let content = event.message.and_then(|m| m.content);
        if let Some(content) = content.filter(|c| c.get().starts_with('[')) {
            let blocks: Vec<JBlock<'_>> = serde_json::from_str(content.get()).unwrap_or_default();
            calls += blocks.iter().filter(|b| b.kind == "tool_use").count();
        }
    }
    calls
}

/// Tool-use blocks in the corpus, read with sonic-rs.
pub(super) fn sonic_typed(data: &[u8]) -> usize {
    let mut calls = 0;
    for line in data.split(|b| *b == b'\n').filter(|l| !l.is_empty()) {
        let Ok(text) = std::str::from_utf8(line) else {
            continue;
        };
        let Ok(event) = sonic_rs::from_str::<SLine<'_>>(text) else {
            continue;
        };
        let content = event.message.and_then(|m| m.content);
        if let Some(content) = content.filter(|c| c.as_raw_str().starts_with('[')) {
            let blocks: Vec<SBlock<'_>> =
                sonic_rs::from_str(content.as_raw_str()).unwrap_or_default();
            calls += blocks.iter().filter(|b| b.kind == "tool_use").count();
        }
    }
    calls
}

/// A whole value per line, each crate's own.
pub(super) fn sonic_value(data: &[u8]) -> usize {
    data.split(|b| *b == b'\n')
        .filter(|l| !l.is_empty())
        .map(|l| sonic_rs::from_slice::<sonic_rs::Value>(l).map_or(0, |_| 1))
        .sum()
}

#[test]
fn both_crates_read_the_same_calls() {
    let data = super::more::bench_stream(1 << 18);
    assert_eq!(serde_json_typed(&data), sonic_typed(&data));
    assert!(serde_json_typed(&data) > 0);
}
