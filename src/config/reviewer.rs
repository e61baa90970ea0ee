//! `[approvals.reviewer]` in harness.toml: the model that reviews a tool call no
//! rule decided, before a person is asked.

use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Deserializer, Serialize, de};

use super::{NonEmptyString, PositiveCount, PositiveSeconds, Usd, valid_http_url};

/// The API a reviewer model is reached through.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum ReviewerApi {
    /// Anthropic's Messages API (`POST {base_url}/v1/messages`).
    Anthropic,
    /// OpenAI's Chat Completions (`POST {base_url}/chat/completions`): Ollama,
    /// vLLM, llama.cpp's server and LiteLLM speak it too.
    Openai,
    /// OpenAI's Responses API (`POST {base_url}/responses`).
    OpenaiResponses,
}

/// What the reviewer's verdict does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ReviewerMode {
    /// Allows and denies by itself; what it is unsure of goes to a person.
    Decide,
    /// Only shows its verdict beside the request; a person decides.
    Advise,
}

/// What happens to a call the reviewer could not judge (down, slow, busy, or an
/// answer that is not a verdict): never an allow.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum OnUnreachable {
    /// Denied when nobody is there to ask (no room, web page or notifier), else
    /// a person is asked.
    Auto,
    /// A person is asked, even when nobody is there (the call waits).
    Ask,
    /// Denied, with the reviewer's failure as the reason.
    Deny,
}

#[derive(Debug, Clone, Deserialize, Serialize, PartialEq, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct ReviewerConfig {
    pub api: ReviewerApi,
    /// Where the API is: `https://api.anthropic.com`, `https://api.openai.com/v1`,
    /// `http://127.0.0.1:11434/v1` (Ollama); `""`: the API's own address.
    #[serde(deserialize_with = "base_url")]
    pub base_url: String,
    pub model: NonEmptyString,
    /// The variable that holds the API key; `""`: the API's usual one
    /// (`ANTHROPIC_API_KEY`, `OPENAI_API_KEY`) when it is set, else no key (a
    /// local server).
    pub api_key_env: String,
    /// An answer not back after this long goes to a person.
    pub timeout: PositiveSeconds,
    pub mode: ReviewerMode,
    /// A cheap first answer (allow, or look closer), then reasoning only when
    /// it is not a clear allow.
    pub two_stage: bool,
    pub on_unreachable: OnUnreachable,
    /// After this many denials in a row in one lane, its calls go to a person.
    pub max_denials_in_a_row: PositiveCount,
    /// After this many denials in one lane's run, its calls go to a person.
    pub max_denials_per_run: PositiveCount,
    /// USD per million input tokens, to count the reviewer's cost (0: not counted).
    pub input_usd_per_mtok: Usd,
    /// USD per million output tokens.
    pub output_usd_per_mtok: Usd,
}

impl Default for ReviewerConfig {
    fn default() -> Self {
        Self {
            api: ReviewerApi::Anthropic,
            base_url: String::new(),
            model: NonEmptyString("claude-haiku-4-5".into()),
            api_key_env: String::new(),
            timeout: PositiveSeconds(Duration::from_secs(30)),
            mode: ReviewerMode::Decide,
            two_stage: false,
            on_unreachable: OnUnreachable::Auto,
            max_denials_in_a_row: PositiveCount(3),
            max_denials_per_run: PositiveCount(20),
            input_usd_per_mtok: Usd(0.0),
            output_usd_per_mtok: Usd(0.0),
        }
    }
}

impl ReviewerConfig {
    /// The address requests go to, the API's own when `base_url` is empty.
    pub fn endpoint(&self) -> String {
        let base = match (self.base_url.trim(), self.api) {
            ("", ReviewerApi::Anthropic) => "https://api.anthropic.com",
            ("", _) => "https://api.openai.com/v1",
            (base, _) => base,
        };
        let base = base.trim_end_matches('/');
        match self.api {
            ReviewerApi::Anthropic if base.ends_with("/v1") => format!("{base}/messages"),
            ReviewerApi::Anthropic => format!("{base}/v1/messages"),
            ReviewerApi::Openai => format!("{base}/chat/completions"),
            ReviewerApi::OpenaiResponses => format!("{base}/responses"),
        }
    }

    /// USD for `input` and `output` tokens at the configured prices.
    pub fn cost_usd(&self, input: u64, output: u64) -> f64 {
        (input as f64 * self.input_usd_per_mtok.0 + output as f64 * self.output_usd_per_mtok.0)
            / 1_000_000.0
    }
}

/// `base_url` is empty or an `http://` or `https://` address, refused where it
/// stands otherwise.
fn base_url<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    let text = String::deserialize(d)?;
    if text.is_empty() || valid_http_url(&text) {
        return Ok(text);
    }
    Err(de::Error::invalid_value(
        de::Unexpected::Str(&text),
        &"an http:// or https:// address, such as \"http://127.0.0.1:11434/v1\", or \"\"",
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<ReviewerConfig, String> {
        toml::from_str(text).map_err(|err| err.to_string())
    }

    #[test]
    fn endpoints_follow_the_api() {
        let mut config = parse("model = \"m\"").expect("valid");
        assert_eq!(config.endpoint(), "https://api.anthropic.com/v1/messages");
        config.base_url = "http://127.0.0.1:9/v1/".into();
        assert_eq!(config.endpoint(), "http://127.0.0.1:9/v1/messages");
        config.api = ReviewerApi::Openai;
        assert_eq!(config.endpoint(), "http://127.0.0.1:9/v1/chat/completions");
        config.api = ReviewerApi::OpenaiResponses;
        assert_eq!(config.endpoint(), "http://127.0.0.1:9/v1/responses");
    }

    #[test]
    fn bad_values_say_what_was_expected() {
        let err = parse("mode = \"yolo\"").expect_err("bad mode");
        assert!(err.contains("decide") && err.contains("advise"), "{err}");
        let err = parse("api = \"gemini\"").expect_err("bad api");
        assert!(err.contains("openai-responses"), "{err}");
        let err = parse("base_url = \"ftp://x\"").expect_err("bad url");
        assert!(err.contains("http://"), "{err}");
        let err = parse("max_denials_in_a_row = 0").expect_err("zero");
        assert!(err.contains("at least 1"), "{err}");
        assert!(parse("input_usd_per_mtok = -1").is_err());
    }
}
