//! When to ask a busy LLM again: a rate limit (429) or an overloaded server (503,
//! 529) is not a down model. Its `Retry-After` is honoured, else the wait doubles
//! from one second; both within a number of tries and a total wait, after which
//! the caller gives up. Pure: time is counted, never read.

use std::time::Duration;

/// The first wait when the server names none; each further one doubles.
const FIRST_WAIT: Duration = Duration::from_secs(1);

/// How long and how often a busy LLM is waited for, for one answer.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Policy {
    /// Tries after the first; 0: a busy answer is given up on at once.
    pub retries: u32,
    /// Most time spent waiting, all tries together.
    pub max_wait: Duration,
}

/// What a busy answer said: its status and the wait it asked for.
#[derive(Debug, Clone, PartialEq)]
pub struct Busy {
    /// `429 Too Many Requests`, as the server put it.
    pub status: String,
    pub retry_after: Option<Duration>,
    /// The server's own words, if any (cut short).
    pub message: String,
}

/// The next try, as the caller reports it.
#[derive(Debug, Clone, PartialEq)]
pub struct Retry {
    /// 1 for the first retry.
    pub number: u32,
    pub of: u32,
    pub wait: Duration,
    /// Whether `wait` is the server's `Retry-After`.
    pub asked: bool,
}

/// The tries of one answer so far.
#[derive(Debug, Clone)]
pub struct Backoff {
    policy: Policy,
    done: u32,
    waited: Duration,
}

impl Backoff {
    pub fn new(policy: Policy) -> Backoff {
        Backoff {
            policy,
            done: 0,
            waited: Duration::ZERO,
        }
    }

    /// The next try after `busy`, or why there is none.
    pub fn next(&mut self, busy: &Busy) -> Result<Retry, String> {
        if self.done >= self.policy.retries {
            return Err(format!(
                "gave up after {} tries ({} s waited)",
                self.done + 1,
                self.waited.as_secs()
            ));
        }
        let doubled = FIRST_WAIT.saturating_mul(1u32.checked_shl(self.done).unwrap_or(u32::MAX));
        let wait = busy.retry_after.unwrap_or(doubled);
        let left = self.policy.max_wait.saturating_sub(self.waited);
        if wait > left {
            return Err(format!(
                "it asks for a wait of {} s, more than the {} s left of llm_busy_wait",
                wait.as_secs_f64().ceil(),
                left.as_secs()
            ));
        }
        self.done += 1;
        self.waited += wait;
        Ok(Retry {
            number: self.done,
            of: self.policy.retries,
            wait,
            asked: busy.retry_after.is_some(),
        })
    }
}

/// `Retry-After` as seconds or as an HTTP date (`Wed, 21 Oct 2015 07:28:00 GMT`),
/// against `now`; a date in the past is no wait. Anything else: none.
pub fn parse_retry_after(value: &str, now: chrono::DateTime<chrono::Utc>) -> Option<Duration> {
    let value = value.trim();
    if let Ok(secs) = value.parse::<u64>() {
        return Some(Duration::from_secs(secs));
    }
    let when = chrono::DateTime::parse_from_rfc2822(value).ok()?;
    Some(
        (when.with_timezone(&chrono::Utc) - now)
            .to_std()
            .unwrap_or(Duration::ZERO),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn busy(retry_after: Option<u64>) -> Busy {
        Busy {
            status: "429 Too Many Requests".into(),
            retry_after: retry_after.map(Duration::from_secs),
            message: String::new(),
        }
    }

    #[test]
    fn waits_double_without_retry_after_and_stop_after_the_tries() {
        let mut backoff = Backoff::new(Policy {
            retries: 4,
            max_wait: Duration::from_secs(600),
        });
        let waits: Vec<u64> = (0..4)
            .map(|_| backoff.next(&busy(None)).expect("a try").wait.as_secs())
            .collect();
        assert_eq!(waits, [1, 2, 4, 8]);
        let err = backoff.next(&busy(None)).expect_err("no more");
        assert_eq!(err, "gave up after 5 tries (15 s waited)");
    }

    #[test]
    fn retry_after_is_honoured_within_the_total_wait() {
        let mut backoff = Backoff::new(Policy {
            retries: 9,
            max_wait: Duration::from_secs(60),
        });
        let retry = backoff.next(&busy(Some(40))).expect("a try");
        assert_eq!(
            (retry.number, retry.wait.as_secs(), retry.asked),
            (1, 40, true)
        );
        let err = backoff.next(&busy(Some(30))).expect_err("over the budget");
        assert!(
            err.contains("wait of 30 s") && err.contains("20 s left"),
            "{err}"
        );
        let mut none = Backoff::new(Policy {
            retries: 0,
            max_wait: Duration::from_secs(60),
        });
        assert!(none.next(&busy(Some(1))).is_err());
    }

    #[test]
    fn retry_after_reads_seconds_and_http_dates() {
        let now = chrono::DateTime::parse_from_rfc3339("2015-10-21T07:27:00Z")
            .expect("date")
            .with_timezone(&chrono::Utc);
        assert_eq!(
            parse_retry_after(" 20 ", now),
            Some(Duration::from_secs(20))
        );
        assert_eq!(
            parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT", now),
            Some(Duration::from_secs(60))
        );
        assert_eq!(
            parse_retry_after("Wed, 21 Oct 2015 07:00:00 GMT", now),
            Some(Duration::ZERO)
        );
        assert_eq!(parse_retry_after("soon", now), None);
        assert_eq!(parse_retry_after("-3", now), None);
    }
}
