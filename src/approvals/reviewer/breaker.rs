//! The reviewer's circuit breaker: after too many denials in a row in one lane,
//! or in one lane's run, the reviewer has stopped helping (the agent keeps
//! trying what it may not do, or the reviewer misjudges the task), and that
//! lane's calls go to a person until its run ends. The counts live in the
//! queue's folder, shared by the gates of a lane's parallel calls under a lock.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{Read, Seek, Write};
use std::path::Path;

use nix::fcntl::{Flock, FlockArg};
use serde::{Deserialize, Serialize};

use super::Verdict;

/// The counts' file in the queue's folder.
const FILE: &str = ".reviewer-breaker.json";
/// Most lanes remembered: the oldest runs' counts go first.
const MAX_LANES: usize = 10_000;

#[derive(Debug, Default, Serialize, Deserialize)]
struct Counts {
    lanes: BTreeMap<String, LaneCounts>,
}

#[derive(Debug, Default, Clone, Serialize, Deserialize)]
struct LaneCounts {
    /// The run the counts are of: a new run starts them again.
    run: String,
    in_a_row: u64,
    denials: u64,
    /// Why the breaker tripped, once it has.
    tripped: Option<String>,
}

/// The limits, from `[approvals.reviewer]`.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub in_a_row: u64,
    pub per_run: u64,
}

/// The breaker of the lane `lane` (`""`: the single loop) in run `run`.
pub struct Breaker<'a> {
    pub dir: &'a Path,
    pub lane: &'a str,
    pub run: &'a str,
}

impl Breaker<'_> {
    /// Why the reviewer is off for this lane, if it is.
    pub fn tripped(&self) -> Option<String> {
        self.with_counts(|counts| self.lane_counts(counts).tripped.clone())
            .ok()
            .flatten()
    }

    /// Counts `verdict`; returns why the breaker trips, when this verdict trips it.
    pub fn record(&self, verdict: Verdict, limits: Limits) -> Result<Option<String>, String> {
        self.with_counts(|counts| {
            let mut lane = self.lane_counts(counts);
            match verdict {
                Verdict::Allow => lane.in_a_row = 0,
                Verdict::Deny => {
                    lane.in_a_row += 1;
                    lane.denials += 1;
                }
                Verdict::Unsure | Verdict::Failed | Verdict::Off => {}
            }
            let why = if lane.tripped.is_some() {
                None
            } else if lane.in_a_row >= limits.in_a_row {
                Some(format!("{} denials in a row", lane.in_a_row))
            } else if lane.denials >= limits.per_run {
                Some(format!("{} denials in this run", lane.denials))
            } else {
                None
            };
            if why.is_some() {
                lane.tripped = why.clone();
            }
            counts.lanes.insert(self.lane.to_string(), lane);
            while counts.lanes.len() > MAX_LANES {
                counts.lanes.pop_first();
            }
            why
        })
    }

    /// This lane's counts, fresh when they are of another run.
    fn lane_counts(&self, counts: &Counts) -> LaneCounts {
        match counts.lanes.get(self.lane) {
            Some(lane) if lane.run == self.run => lane.clone(),
            _ => LaneCounts {
                run: self.run.to_string(),
                ..LaneCounts::default()
            },
        }
    }

    /// Runs `change` on the counts under the file's lock, and writes them back.
    /// A file that cannot be read as counts starts them again.
    fn with_counts<T>(&self, change: impl FnOnce(&mut Counts) -> T) -> Result<T, String> {
        let path = self.dir.join(FILE);
        let file = File::options()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(|err| format!("cannot open {}: {err}", path.display()))?;
        let mut file = Flock::lock(file, FlockArg::LockExclusive)
            .map_err(|(_, err)| format!("cannot lock {}: {err}", path.display()))?;
        let mut text = String::new();
        let _ = Read::by_ref(&mut *file)
            .take(16 << 20)
            .read_to_string(&mut text);
        let mut counts: Counts = serde_json::from_str(&text).unwrap_or_default();
        let result = change(&mut counts);
        let body = serde_json::to_vec(&counts).map_err(|err| err.to_string())?;
        file.set_len(0)
            .and_then(|()| file.rewind())
            .and_then(|()| file.write_all(&body))
            .map_err(|err| format!("cannot write {}: {err}", path.display()))?;
        Ok(result)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMITS: Limits = Limits {
        in_a_row: 3,
        per_run: 5,
    };

    #[test]
    fn three_denials_in_a_row_trip_it_for_that_lane_and_run_only() {
        let dir = tempfile::tempdir().expect("tempdir");
        let api = Breaker {
            dir: dir.path(),
            lane: "api",
            run: "r1",
        };
        let docs = Breaker {
            dir: dir.path(),
            lane: "docs",
            run: "r1",
        };
        assert_eq!(api.record(Verdict::Deny, LIMITS), Ok(None));
        assert_eq!(api.record(Verdict::Deny, LIMITS), Ok(None));
        assert_eq!(docs.record(Verdict::Deny, LIMITS), Ok(None));
        let tripped = api.record(Verdict::Deny, LIMITS).expect("counted");
        assert_eq!(tripped.as_deref(), Some("3 denials in a row"));
        assert_eq!(api.tripped().as_deref(), Some("3 denials in a row"));
        assert_eq!(docs.tripped(), None);
        let next_run = Breaker {
            dir: dir.path(),
            lane: "api",
            run: "r2",
        };
        assert_eq!(next_run.tripped(), None);
    }

    #[test]
    fn an_allow_breaks_the_row_but_not_the_run_count() {
        let dir = tempfile::tempdir().expect("tempdir");
        let lane = Breaker {
            dir: dir.path(),
            lane: "",
            run: "r",
        };
        for _ in 0..2 {
            lane.record(Verdict::Deny, LIMITS).expect("counted");
            lane.record(Verdict::Deny, LIMITS).expect("counted");
            lane.record(Verdict::Allow, LIMITS).expect("counted");
        }
        assert_eq!(lane.tripped(), None);
        let tripped = lane.record(Verdict::Deny, LIMITS).expect("counted");
        assert_eq!(tripped.as_deref(), Some("5 denials in this run"));
    }
}
