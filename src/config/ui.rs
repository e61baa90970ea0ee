//! `[ui]` in harness.toml: how a human is called when something needs them (the
//! room's terminal signals, the host's `on_attention` command and its
//! `notify_url` push).

use schemars::JsonSchema;
use serde::de::{self, Deserializer};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct UiConfig {
    /// How a new approval request, or a lane that becomes held, failed or done,
    /// is signalled on the terminal: `bell`, `osc` (a desktop notification,
    /// OSC 9 and OSC 777), `both` or `off`.
    pub notify: Notify,
    /// A shell command the host runs (with `sh -c`, in the fleet's folder) on
    /// the same occasions, whether a control room is attached or not, with
    /// `CLOWDER_LANE`, `CLOWDER_EVENT` and `CLOWDER_TEXT` set; `""`: none.
    pub on_attention: String,
    /// An http(s) URL the host POSTs a short text to on the same occasions, in
    /// ntfy's format (e.g. `https://ntfy.sh/my-topic`, for a push on a phone).
    #[serde(
        deserialize_with = "notify_url",
        skip_serializing_if = "Option::is_none"
    )]
    #[schemars(with = "String", regex(pattern = r"^[hH][tT][tT][pP][sS]?://\S+$"))]
    pub notify_url: Option<String>,
}

/// `notify_url` is an `http://` or `https://` URL with a host; anything else
/// (a typo, a bare topic, another scheme) is refused where it stands.
fn notify_url<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    let text = String::deserialize(d)?;
    if valid_http_url(&text) {
        return Ok(Some(text));
    }
    Err(de::Error::invalid_value(
        de::Unexpected::Str(&text),
        &"an http:// or https:// URL, such as \"https://ntfy.sh/my-topic\"",
    ))
}

/// Whether `text` is an http(s) URL with a host, nothing around it.
pub fn valid_http_url(text: &str) -> bool {
    if text.trim() != text || text.chars().any(char::is_whitespace) {
        return false;
    }
    url::Url::parse(text).is_ok_and(|url| {
        matches!(url.scheme(), "http" | "https") && url.host_str().is_some_and(|h| !h.is_empty())
    })
}

impl UiConfig {
    /// Whether the host calls its human by itself (`on_attention`, `notify_url`).
    pub fn calls_out(&self) -> bool {
        self.on_attention().is_some() || self.notify_url.is_some()
    }

    /// The attention command in force, if any.
    pub fn on_attention(&self) -> Option<&str> {
        (!self.on_attention.trim().is_empty()).then_some(self.on_attention.as_str())
    }
}

/// Which terminal signals call for attention.
#[derive(Debug, Clone, Copy, Default, Deserialize, Serialize, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Notify {
    /// The terminal bell (BEL).
    Bell,
    /// A desktop-notification escape (OSC 9 and OSC 777).
    Osc,
    /// The bell and the desktop notification.
    #[default]
    Both,
    /// Neither.
    Off,
}

impl Notify {
    pub fn bell(self) -> bool {
        matches!(self, Notify::Bell | Notify::Both)
    }

    pub fn osc(self) -> bool {
        matches!(self, Notify::Osc | Notify::Both)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<UiConfig, crate::config::ConfigError> {
        crate::config::located::parse_located(text, std::path::Path::new("harness.toml"))
    }

    #[test]
    fn notify_url_takes_an_http_or_https_url() {
        for url in ["https://ntfy.sh/my-topic", "http://127.0.0.1:8080/x"] {
            let ui = parse(&format!("notify_url = {url:?}\n")).expect("valid");
            assert_eq!(ui.notify_url.as_deref(), Some(url));
        }
        assert_eq!(parse("").expect("valid").notify_url, None);
    }

    #[test]
    fn a_bad_notify_url_is_refused_with_its_key_and_line() {
        for bad in [
            "ntfy.sh/my-topic",
            "ftp://host/x",
            "https://",
            "",
            " https://a/b",
        ] {
            let err = parse(&format!("notify = \"off\"\nnotify_url = {bad:?}\n")).expect_err(bad);
            assert_eq!(err.key.as_deref(), Some("notify_url"), "{bad}");
            assert_eq!(err.position.map(|p| p.0), Some(2), "{bad}");
            assert!(err.message.contains("http:// or https:// URL"), "{err:?}");
        }
    }
}
