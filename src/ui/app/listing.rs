//! Which lanes the Lanes pane lists, and in what order: `/` keeps the lanes
//! whose name holds what is typed, `w` the lanes that need you, `O` sorts them
//! by state, cost or idle time. The rows stay in registry order (their
//! numbers); this is only how they are listed.

use chrono::{DateTime, Utc};

use crate::lane_status::LaneStatus;

/// What the listing needs to know of a lane's row.
pub trait Listed {
    fn name(&self) -> &str;
    fn status(&self) -> LaneStatus;
    /// The run's cost so far, if known.
    fn cost(&self) -> Option<f64>;
    /// Since when its running session has been silent, and since when the
    /// clock stands still if paused; `None` when no session runs.
    fn silent_since(&self) -> Option<(DateTime<Utc>, Option<DateTime<Utc>>)>;
}

/// How the listed lanes are ordered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LaneSort {
    /// Lanes that need you first, then the rest, each in registry order.
    #[default]
    Registry,
    /// By state: waiting, held, failed, running, backing off, paused, queued…
    State,
    /// The dearest run first; lanes with no cost known last.
    Cost,
    /// The longest silent running session first; lanes not running last.
    Idle,
}

impl LaneSort {
    /// `O`'s next order.
    pub fn next(self) -> LaneSort {
        match self {
            LaneSort::Registry => LaneSort::State,
            LaneSort::State => LaneSort::Cost,
            LaneSort::Cost => LaneSort::Idle,
            LaneSort::Idle => LaneSort::Registry,
        }
    }

    /// How the pane's title says it; nothing for the usual order.
    pub fn words(self) -> Option<&'static str> {
        match self {
            LaneSort::Registry => None,
            LaneSort::State => Some("by state"),
            LaneSort::Cost => Some("by cost"),
            LaneSort::Idle => Some("by idle time"),
        }
    }
}

/// The Lanes pane's filter and order.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Listing {
    /// Lanes whose name holds this (any case) are listed; empty: every lane.
    pub filter: String,
    /// `/`'s prompt while it is open: what is typed so far, applied as typed.
    pub typing: Option<String>,
    /// `w`: only the lanes that need you.
    pub needs_you_only: bool,
    pub sort: LaneSort,
}

impl Listing {
    /// The name filter in force: the one being typed, else the one kept.
    pub fn query(&self) -> &str {
        self.typing.as_deref().unwrap_or(&self.filter)
    }

    /// Some lanes may be left out.
    pub fn narrowed(&self) -> bool {
        self.needs_you_only || !self.query().is_empty()
    }

    /// Whether `row` is listed.
    pub fn shows(&self, row: &impl Listed) -> bool {
        (!self.needs_you_only || row.status().needs_you())
            && holds_ignoring_case(row.name(), self.query())
    }

    /// The listed rows' indices, in the order shown.
    pub fn order(&self, rows: &[impl Listed], now: DateTime<Utc>) -> Vec<usize> {
        let mut order: Vec<usize> = (0..rows.len()).filter(|&i| self.shows(&rows[i])).collect();
        // Stable sorts: rows that compare equal keep their registry order.
        match self.sort {
            LaneSort::Registry => order.sort_by_key(|&i| !rows[i].status().needs_you()),
            LaneSort::State => order.sort_by_key(|&i| state_rank(rows[i].status())),
            LaneSort::Cost => order.sort_by(|&a, &b| match (rows[a].cost(), rows[b].cost()) {
                (Some(a), Some(b)) => b.total_cmp(&a),
                (a, b) => b.is_some().cmp(&a.is_some()),
            }),
            LaneSort::Idle => order.sort_by_key(|&i| std::cmp::Reverse(idle_secs(&rows[i], now))),
        }
        order
    }

    /// What in `row` decides where it is listed: when it changes, the order must
    /// be made again.
    pub fn place_of(&self, row: &impl Listed) -> Place {
        let needs_you = row.status().needs_you();
        match self.sort {
            LaneSort::Registry => Place::NeedsYou(needs_you),
            LaneSort::State => Place::Rank(state_rank(row.status())),
            LaneSort::Cost => Place::Cost(needs_you, row.cost().map(f64::to_bits)),
            LaneSort::Idle => Place::Since(
                needs_you,
                row.silent_since().map(|(since, paused)| {
                    (
                        since.timestamp_millis(),
                        paused.map(|p| p.timestamp_millis()),
                    )
                }),
            ),
        }
    }
}

/// See [`Listing::place_of`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Place {
    NeedsYou(bool),
    Rank(u8),
    Cost(bool, Option<u64>),
    Since(bool, Option<(i64, Option<i64>)>),
}

/// The order of states when sorted by state: what needs you, then what works.
fn state_rank(status: LaneStatus) -> u8 {
    match status {
        LaneStatus::WaitingForYou => 0,
        LaneStatus::Held => 1,
        LaneStatus::Failed => 2,
        LaneStatus::Running => 3,
        LaneStatus::Backoff { .. } => 4,
        LaneStatus::Paused => 5,
        LaneStatus::Queued => 6,
        LaneStatus::NotStarted => 7,
        LaneStatus::Done => 8,
        LaneStatus::Stopped => 9,
        LaneStatus::Unknown => 10,
    }
}

/// Seconds of silence as the row's idle column counts them; -1 when no session runs.
fn idle_secs(row: &impl Listed, now: DateTime<Utc>) -> i64 {
    let Some((since, paused)) = row.silent_since() else {
        return -1;
    };
    (paused.unwrap_or(now) - since).num_seconds().max(0)
}

/// `needle` in `hay`, ASCII letters of any case alike (lane names are lower
/// case; host labels may not be).
fn holds_ignoring_case(hay: &str, needle: &str) -> bool {
    let (hay, needle) = (hay.as_bytes(), needle.as_bytes());
    needle.is_empty()
        || hay
            .windows(needle.len())
            .any(|window| window.eq_ignore_ascii_case(needle))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_holds_its_parts_in_any_case() {
        assert!(holds_ignoring_case("h12/api-auth", "AUTH"));
        assert!(holds_ignoring_case("h12/api-auth", "2/a"));
        assert!(holds_ignoring_case("anything", ""));
        assert!(!holds_ignoring_case("api", "apis"));
    }

    #[test]
    fn o_cycles_through_every_order_and_back() {
        let mut sort = LaneSort::default();
        let mut words = Vec::new();
        for _ in 0..4 {
            sort = sort.next();
            words.push(sort.words());
        }
        assert_eq!(
            words,
            [
                Some("by state"),
                Some("by cost"),
                Some("by idle time"),
                None
            ]
        );
    }
}
