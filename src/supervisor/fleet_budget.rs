//! `[guard] max_cost_usd` of a fleet: what the lanes' sessions cost together.
//! Each lane reports its run's total; once the sum reaches the limit, no lane
//! starts another session. Pure: no clocks, no I/O.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

#[derive(Debug)]
pub struct FleetBudget {
    limit_usd: f64,
    spent_usd: BTreeMap<String, f64>,
}

/// What the lanes of a fleet hold.
pub type SharedBudget = Arc<Mutex<FleetBudget>>;

impl FleetBudget {
    pub fn new(limit_usd: f64) -> FleetBudget {
        FleetBudget {
            limit_usd,
            spent_usd: BTreeMap::new(),
        }
    }

    /// `lane`'s sessions have cost `total_usd` so far in this run.
    pub fn report(&mut self, lane: &str, total_usd: f64) {
        if total_usd.is_finite() {
            self.spent_usd.insert(lane.to_string(), total_usd);
        }
    }

    pub fn spent_usd(&self) -> f64 {
        self.spent_usd.values().sum()
    }

    pub fn limit_usd(&self) -> f64 {
        self.limit_usd
    }

    /// Whether the lanes together have spent the limit.
    pub fn reached(&self) -> bool {
        self.spent_usd() >= self.limit_usd
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_lanes_costs_add_up_and_a_report_replaces_the_lanes_last() {
        let mut budget = FleetBudget::new(1.0);
        budget.report("a", 0.4);
        budget.report("b", 0.4);
        assert!(!budget.reached());
        budget.report("a", 0.6);
        assert!(budget.reached());
        budget.report("c", f64::NAN);
        assert!((budget.spent_usd() - 1.0).abs() < 1e-9);
    }
}
