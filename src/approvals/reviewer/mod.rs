//! The reviewer: a model of the user's choosing (`[approvals.reviewer]`) that
//! judges a tool call no rule decided, before a person is asked. Deny rules,
//! then allow rules, then the reviewer, then the person: it never sees what a
//! rule decided. It fails closed: a call it could not judge goes to a person
//! (or, with nobody there, is denied), never to allow.

mod breaker;
mod client;
pub mod context;
mod prompt;

use std::time::Instant;

use serde::{Deserialize, Serialize};

pub use breaker::{Breaker, Limits};
pub use prompt::Context;

use crate::config::ReviewerConfig;

/// Most tokens of the answer that gives a verdict and its reason; room for a
/// model that thinks aloud first.
const VERDICT_TOKENS: u32 = 1024;
/// Most tokens of a first-stage answer: one word.
const FIRST_STAGE_TOKENS: u32 = 8;

/// What the reviewer made of a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    Allow,
    Deny,
    /// It cannot tell: a person decides.
    Unsure,
    /// No verdict came (down, slow, busy, or an answer that holds none).
    Failed,
    /// Not asked: its circuit breaker has tripped for the lane.
    Off,
}

impl Verdict {
    pub fn word(self) -> &'static str {
        match self {
            Verdict::Allow => "allow",
            Verdict::Deny => "deny",
            Verdict::Unsure => "unsure",
            Verdict::Failed => "failed",
            Verdict::Off => "off",
        }
    }
}

/// The reviewer's verdict on one call, with its reason and what it cost; kept
/// in the request a person decides, and in the decision's record.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Review {
    pub verdict: Verdict,
    pub reason: String,
    pub model: String,
    pub took_ms: u64,
    #[serde(default)]
    pub input_tokens: u64,
    #[serde(default)]
    pub output_tokens: u64,
    #[serde(default)]
    pub cost_usd: f64,
    /// How many questions it took (two with `two_stage`, when the first was
    /// not a clear allow).
    #[serde(default)]
    pub stages: u8,
}

impl Review {
    /// `reviewer qwen2.5: deny (1.2 s): deletes the build folder`.
    pub fn describe(&self) -> String {
        format!(
            "reviewer {}: {} ({:.1} s): {}",
            self.model,
            self.verdict.word(),
            self.took_ms as f64 / 1000.0,
            self.reason
        )
    }

    /// `reviewer: unsure`, `reviewer off: 3 denials in a row`, for a title.
    pub fn headline(&self) -> String {
        match self.verdict {
            Verdict::Off => {
                let why = self.reason.split(" after ").nth(1).unwrap_or(&self.reason);
                format!(
                    "reviewer off: {}",
                    why.trim_end_matches("; a person decides")
                )
            }
            verdict => format!("reviewer: {}", verdict.word()),
        }
    }

    /// A review that did not ask the model: the breaker is off, or the call
    /// could not be judged.
    pub fn not_asked(config: &ReviewerConfig, verdict: Verdict, reason: String) -> Review {
        Review {
            verdict,
            reason,
            model: config.model.0.clone(),
            took_ms: 0,
            input_tokens: 0,
            output_tokens: 0,
            cost_usd: 0.0,
            stages: 0,
        }
    }
}

/// Asks the reviewer about the call in `context`. Never fails: a failure is
/// the verdict [`Verdict::Failed`], with why.
pub fn review(config: &ReviewerConfig, context: &Context) -> Review {
    let started = Instant::now();
    let message = prompt::message(context);
    let mut review = Review::not_asked(config, Verdict::Failed, String::new());
    let mut ask = |system: &str, max_tokens: u32| {
        review.stages += 1;
        let answer = client::ask(config, system, &message, max_tokens)?;
        review.input_tokens += answer.input_tokens;
        review.output_tokens += answer.output_tokens;
        Ok::<String, String>(answer.text)
    };
    let first = if config.two_stage {
        ask(prompt::FIRST_STAGE, FIRST_STAGE_TOKENS).map(|text| prompt::first_stage_allows(&text))
    } else {
        Ok(false)
    };
    let judged = match first {
        Ok(true) => Ok((Verdict::Allow, "plainly safe at a first look".to_string())),
        Ok(false) => {
            ask(prompt::SYSTEM, VERDICT_TOKENS).and_then(|text| prompt::read_verdict(&text))
        }
        Err(why) => Err(why),
    };
    let (verdict, reason) = judged.unwrap_or_else(|why| (Verdict::Failed, why));
    review.verdict = verdict;
    review.reason = reason;
    review.took_ms = started.elapsed().as_millis() as u64;
    review.cost_usd = config.cost_usd(review.input_tokens, review.output_tokens);
    review
}
