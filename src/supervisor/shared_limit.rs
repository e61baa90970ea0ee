//! `[fleet] shared_rate_limit`: lanes that run the same agent command share one
//! account. Once one of them is rate-limited, none starts a session until the
//! limit's backoff or reset time has passed; then one lane goes first, and the
//! others follow only if its session was not rate-limited. Pure: the caller
//! passes the time.

use std::sync::{Arc, Mutex};

use chrono::{DateTime, Utc};

/// One account's limit, shared by the lanes that run the same agent command.
#[derive(Debug, Default)]
pub struct SharedLimit {
    /// No session starts before this; `Some` (even when past) until a first
    /// session after it ends without a limit.
    blocked_until: Option<DateTime<Utc>>,
    /// The lane that goes first once the block is over.
    probe: Option<String>,
}

/// What the lanes of one agent command hold.
pub type Shared = Arc<Mutex<SharedLimit>>;

impl SharedLimit {
    /// Whether `lane` may start a session at `now`.
    pub fn admit(&mut self, lane: &str, now: DateTime<Utc>) -> bool {
        match self.blocked_until {
            None => true,
            Some(until) if now < until => false,
            Some(_) => match &self.probe {
                None => {
                    self.probe = Some(lane.to_string());
                    true
                }
                Some(probe) => probe == lane,
            },
        }
    }

    /// A lane was rate-limited: nobody starts before `until`.
    pub fn limited(&mut self, until: DateTime<Utc>) {
        self.blocked_until = Some(self.blocked_until.map_or(until, |old| old.max(until)));
        self.probe = None;
    }

    /// A session of `lane` ended; when it went first and was not limited, the
    /// others may start again.
    pub fn session_ended(&mut self, lane: &str, limited: bool) {
        if !limited && self.probe.as_deref() == Some(lane) {
            self.blocked_until = None;
            self.probe = None;
        }
    }

    /// `lane` ended its loop: if it was to go first, another lane will.
    pub fn left(&mut self, lane: &str) {
        if self.probe.as_deref() == Some(lane) {
            self.probe = None;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeDelta;

    #[test]
    fn after_a_limit_one_lane_goes_first_and_the_others_follow_if_it_was_not_limited() {
        let t0 = Utc::now();
        let mut limit = SharedLimit::default();
        assert!(limit.admit("a", t0) && limit.admit("b", t0));
        limit.limited(t0 + TimeDelta::seconds(10));
        assert!(!limit.admit("a", t0 + TimeDelta::seconds(9)));
        assert!(!limit.admit("b", t0 + TimeDelta::seconds(9)));
        let after = t0 + TimeDelta::seconds(10);
        assert!(limit.admit("b", after), "the first to ask goes first");
        assert!(!limit.admit("a", after), "the others wait for its session");
        // A session that began before the block ends well: that proves nothing.
        limit.session_ended("a", false);
        assert!(!limit.admit("a", after));
        // The first one is limited again: a new block, and a new first.
        limit.session_ended("b", true);
        limit.limited(after + TimeDelta::seconds(10));
        assert!(!limit.admit("a", after + TimeDelta::seconds(5)));
        let later = after + TimeDelta::seconds(10);
        assert!(limit.admit("a", later) && !limit.admit("b", later));
        limit.left("a");
        assert!(
            limit.admit("b", later),
            "a lane that ended hands the turn on"
        );
        limit.session_ended("b", false);
        assert!(limit.admit("a", later) && limit.admit("c", later));
    }
}
