//! The fleet's sessions and rate-limit waits as the page's server hears of
//! them (live, and in each host's recent lines), for the fleet's cost chart:
//! the latest [`KEPT`], each once however often a host replays it.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::Serialize;

use crate::fleet::LaneName;
use crate::protocol::Event;

/// Sessions, and waits, kept at most over every lane of a host.
pub const KEPT: usize = 2_000;

/// One host's sessions and waits, oldest first.
#[derive(Default)]
pub struct Costs {
    sessions: BTreeMap<(DateTime<Utc>, LaneName, u64), Session>,
    waits: BTreeMap<(DateTime<Utc>, LaneName, u64), f64>,
}

#[derive(Clone, Copy)]
struct Session {
    iteration: u64,
    cost_usd: Option<f64>,
    duration_secs: f64,
}

#[derive(Serialize)]
pub struct SessionPoint {
    pub lane: String,
    /// The lane's session number.
    pub iteration: u64,
    pub at: DateTime<Utc>,
    #[serde(serialize_with = "crate::fmt::usd_json")]
    pub cost_usd: Option<f64>,
    pub duration_secs: f64,
}

#[derive(Serialize)]
pub struct WaitSpan {
    pub lane: String,
    pub at: DateTime<Utc>,
    pub secs: f64,
}

impl Costs {
    /// Takes an event of `lane` said at `at`, if it is a session's end or a
    /// rate-limit wait.
    pub fn take(&mut self, lane: &LaneName, at: DateTime<Utc>, event: &Event) {
        match event {
            Event::SessionComplete {
                iteration,
                global,
                cost_usd,
                duration_secs,
                ..
            } => {
                let session = Session {
                    iteration: *iteration,
                    cost_usd: *cost_usd,
                    duration_secs: *duration_secs,
                };
                bounded(&mut self.sessions, (at, lane.clone(), *global), session);
            }
            Event::RateLimited {
                global,
                backoff_secs,
                ..
            } => bounded(&mut self.waits, (at, lane.clone(), *global), *backoff_secs),
            _ => {}
        }
    }

    /// The sessions, each lane named as `name` names it.
    pub fn sessions(&self, name: impl Fn(&LaneName) -> String) -> Vec<SessionPoint> {
        self.sessions
            .iter()
            .map(|((at, lane, _), session)| SessionPoint {
                lane: name(lane),
                iteration: session.iteration,
                at: *at,
                cost_usd: session.cost_usd,
                duration_secs: session.duration_secs,
            })
            .collect()
    }

    pub fn waits(&self, name: impl Fn(&LaneName) -> String) -> Vec<WaitSpan> {
        self.waits
            .iter()
            .map(|((at, lane, _), secs)| WaitSpan {
                lane: name(lane),
                at: *at,
                secs: *secs,
            })
            .collect()
    }
}

fn bounded<K: Ord, V>(kept: &mut BTreeMap<K, V>, key: K, value: V) {
    kept.insert(key, value);
    if kept.len() > KEPT {
        kept.pop_first();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn session(global: u64, cost: f64) -> Event {
        serde_json::from_value(serde_json::json!({
            "event": "session_complete", "iteration": global, "global": global,
            "output_bytes": 10, "exit_code": 0, "duration_secs": 3.0, "committed": true,
            "retries": 0, "rate_limited": false, "productive": true, "cost_usd": cost
        }))
        .expect("a session_complete event")
    }

    #[test]
    fn a_replayed_session_counts_once_and_the_oldest_go_first() {
        let mut costs = Costs::default();
        let lane = LaneName::parse("api").expect("name");
        let at = Utc::now();
        costs.take(&lane, at, &session(1, 0.5));
        costs.take(&lane, at, &session(1, 0.5));
        assert_eq!(costs.sessions(|l| l.to_string()).len(), 1);
        for global in 2..(KEPT as u64 + 10) {
            let later = at + chrono::Duration::seconds(global as i64);
            costs.take(&lane, later, &session(global, 0.1));
        }
        let sessions = costs.sessions(|l| l.to_string());
        assert_eq!(sessions.len(), KEPT);
        assert!(sessions[0].at > at, "the first session went");
    }
}
