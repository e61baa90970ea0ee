//! The gate's reviewer step, between the rules and the person: asking the
//! reviewer (unless its breaker has tripped for the lane), acting on its
//! verdict as its mode says, and recording who decided, why, how fast and at
//! what cost: in the event log, and in `done/` beside the person's decisions.

use std::path::Path;
use std::time::Instant;

use chrono::Utc;

use super::reviewer::{self, Breaker, Limits, Review, Verdict, context};
use super::{ApprovalEvent, DecisionKind, DecisionRecord, Queue, Request, presence};
use crate::config::{ApprovalsConfig, OnUnreachable, ReviewerConfig, ReviewerMode};

/// The variable that names the session a gate runs in, as the loop sets it
/// for every session (the supervisor's `TOKEN_ENV`).
const SESSION_ENV: &str = "CLOWDER_SESSION";

/// What the gate does after the reviewer.
#[derive(Debug)]
pub enum Next {
    /// Answer the agent now: allowed or not, with the reason it reads.
    Answer { allow: bool, reason: String },
    /// A person decides, the review shown beside the request.
    Person(Review),
}

/// The reviewer's step for `request` (a tool call no rule decided).
pub fn consult(
    config: &ApprovalsConfig,
    reviewer: &ReviewerConfig,
    queue: &Queue,
    request: &Request,
    event_log: Option<&Path>,
) -> Next {
    let lane = request.lane.as_deref().unwrap_or_default();
    let run = run_id();
    let breaker = Breaker {
        dir: queue.dir(),
        lane,
        run: &run,
    };
    let review = match breaker.tripped() {
        Some(why) => Review::not_asked(
            reviewer,
            Verdict::Off,
            format!("the reviewer is off for this lane after {why}; a person decides"),
        ),
        None => {
            let call = context::Call {
                tool: request.tool_name.as_deref().unwrap_or_default(),
                input: request.tool_input.as_ref(),
                cwd: request.cwd.as_deref(),
                lane: request.lane.as_deref(),
                event_log,
            };
            reviewer::review(reviewer, &context::gather(&call, config))
        }
    };
    log_review(queue, request, &review);
    leave_spend(&review);
    let decides = reviewer.mode == ReviewerMode::Decide;
    if decides && matches!(review.verdict, Verdict::Allow | Verdict::Deny) {
        trip_if_due(queue, &breaker, reviewer, &review);
        let allow = review.verdict == Verdict::Allow;
        record_decision(queue, request, &review, allow);
        let verb = if allow { "allowed" } else { "denied" };
        let reason = format!("{verb} by reviewer {}: {}", review.model, review.reason);
        return Next::Answer { allow, reason };
    }
    if review.verdict == Verdict::Failed && nobody_to_ask(reviewer, queue.dir()) {
        let reason = format!(
            "denied: the reviewer could not judge this call ({}) and nobody is there to ask",
            review.reason
        );
        log_unreachable(queue, request, &reason);
        return Next::Answer {
            allow: false,
            reason,
        };
    }
    Next::Person(review)
}

/// The loop run the gate's session belongs to: its `CLOWDER_SESSION` token
/// without the session's number (`PID-START-N` of `PID-START-Ns7`).
fn run_id() -> String {
    let token = std::env::var(SESSION_ENV).unwrap_or_default();
    match token.rsplit_once('s') {
        Some((run, number)) if number.bytes().all(|b| b.is_ascii_digit()) => run.to_string(),
        _ => token,
    }
}

fn nobody_to_ask(reviewer: &ReviewerConfig, dir: &Path) -> bool {
    match reviewer.on_unreachable {
        OnUnreachable::Deny => true,
        OnUnreachable::Ask => false,
        OnUnreachable::Auto => !presence::watched(dir),
    }
}

/// Counts a verdict against the lane's breaker; logs `reviewer_tripped` when
/// it trips.
fn trip_if_due(queue: &Queue, breaker: &Breaker, reviewer: &ReviewerConfig, review: &Review) {
    let limits = Limits {
        in_a_row: reviewer.max_denials_in_a_row.0,
        per_run: reviewer.max_denials_per_run.0,
    };
    match breaker.record(review.verdict, limits) {
        Ok(Some(why)) => {
            let mut event = ApprovalEvent::new("reviewer_tripped");
            event.lane = Some(breaker.lane.to_string()).filter(|lane| !lane.is_empty());
            event.reason = Some(format!(
                "{why}: this lane's calls go to a person until its run ends"
            ));
            queue.log(&event);
            eprintln!(
                "clowder gate: the reviewer tripped after {why}: this lane's next calls go to a person"
            );
        }
        Ok(None) => {}
        Err(err) => eprintln!("clowder gate: the reviewer's breaker: {err}"),
    }
}

/// Leaves what the answer cost for the loop to count in its totals: the
/// lane's files folder (beside the rules its host gave it), else the single
/// loop's control folder in the working folder.
fn leave_spend(review: &Review) {
    if review.stages == 0 {
        return;
    }
    let control_dir = std::env::var_os(super::host_rules::RULES_ENV)
        .and_then(|rules| Path::new(&rules).parent().map(Path::to_path_buf))
        .unwrap_or_else(|| crate::store::paths::state_dir(Path::new("")));
    let spend = crate::protocol::ReviewerSpend {
        calls: 1,
        input_tokens: review.input_tokens,
        output_tokens: review.output_tokens,
        cost_usd: review.cost_usd,
    };
    if let Err(err) = crate::store::spend::leave(&control_dir, &spend) {
        eprintln!("clowder gate: the reviewer's cost is not counted: {err}");
    }
}

/// `reviewer_reviewed`: every answer (or failure), with its cost.
fn log_review(queue: &Queue, request: &Request, review: &Review) {
    let mut event = ApprovalEvent::new("reviewer_reviewed");
    event.tool = request.tool_name.clone();
    event.lane = request.lane.clone();
    event.decider = Some(format!("reviewer {}", review.model));
    event.verdict = Some(review.verdict.word().to_string());
    event.reason = Some(review.reason.clone());
    event.took_ms = Some(review.took_ms);
    event.input_tokens = Some(review.input_tokens);
    event.output_tokens = Some(review.output_tokens);
    event.cost_usd = Some(review.cost_usd);
    queue.log(&event);
}

fn log_unreachable(queue: &Queue, request: &Request, reason: &str) {
    let mut event = ApprovalEvent::new("approval_decided");
    event.kind = Some("reviewer".into());
    event.tool = request.tool_name.clone();
    event.lane = request.lane.clone();
    event.decider = Some("gate (nobody to ask)".into());
    event.verdict = Some("deny".into());
    event.reason = Some(reason.to_string());
    queue.log(&event);
}

/// The reviewer's decision in `done/`, as a person's is, and `approval_decided`.
fn record_decision(queue: &Queue, request: &Request, review: &Review, allow: bool) {
    let started = Instant::now();
    let mut request = request.clone();
    request.id = super::queue::new_id();
    request.created = Utc::now();
    let bytes = serde_json::to_vec(&request).unwrap_or_default();
    let decision = DecisionRecord {
        id: request.id.clone(),
        decision: if allow {
            DecisionKind::Approve
        } else {
            DecisionKind::Reject
        },
        reason: Some(review.reason.clone()),
        decided_at: Utc::now(),
        request_hash: super::sha256_hex(&bytes),
        decided_by: Some(format!("reviewer {}", review.model)),
    };
    let label = if allow { "approved" } else { "rejected" };
    let waited = review.took_ms as f64 / 1000.0 + started.elapsed().as_secs_f64();
    queue.record_done(
        &request,
        Some(decision),
        Some(review.clone()),
        label,
        waited,
    );
}
