//! Going on with an iteration whose actions were under way when its worker was
//! killed: the journal says which actions ran (their results are kept), which one
//! was under way (not run again: it may have done all, part or none of its work),
//! and which had not started (they run now). The iteration is then logged once,
//! saying what was found.

use super::answer;
use super::journal::{self, Journal};
use super::run::{End, Worker, count, fatal};
use super::task::ActionRecord;
use super::tools::ActionResult;

/// Which actions (numbered from 1) a resume found in each state.
#[derive(Default)]
struct Found {
    ran: Vec<usize>,
    under_way: Vec<usize>,
    run_now: Vec<usize>,
}

impl Worker<'_> {
    /// Finishes the iteration a killed worker left in the journal, if any.
    pub(super) fn finish_interrupted(&mut self) -> Result<(), End> {
        let Some(left) = journal::read(&self.dir).map_err(fatal)? else {
            return Ok(());
        };
        let answer = match answer::parse(&left.llm_response) {
            // Killed after the iteration was logged: nothing is left to do.
            Ok(answer) if left.iteration > self.state.iteration => answer,
            _ => return journal::remove(&self.dir).map_err(fatal),
        };
        let iteration = left.iteration;
        self.heartbeat(iteration, "executing_action", None)?;
        let mut journal = Journal::reopen(&self.dir).map_err(fatal)?;
        let mut found = Found::default();
        let mut results = Vec::with_capacity(answer.actions.len());
        for (number, action) in answer.actions.iter().enumerate() {
            let result = if let Some(done) = left.done.get(&number) {
                found.ran.push(number + 1);
                let mut result = done.clone();
                result.args = action.args.clone();
                count(&mut self.state.counters, &result);
                result
            } else if left.started.contains(&number) {
                found.under_way.push(number + 1);
                let result = ActionResult::interrupted(action);
                count(&mut self.state.counters, &result);
                result
            } else {
                found.run_now.push(number + 1);
                self.run_action(&mut journal, number, action)?
            };
            results.push(result);
        }
        let note = found.say(iteration);
        println!("clowder: {note}");
        self.record(ActionRecord {
            iteration,
            timestamp: left.timestamp,
            llm_response: left.llm_response,
            error: None,
            results,
            resumed: Some(note),
        })
    }
}

impl Found {
    fn say(&self, iteration: u64) -> String {
        let list = |numbers: &[usize]| {
            let words: Vec<String> = numbers.iter().map(ToString::to_string).collect();
            let noun = if numbers.len() == 1 {
                "action"
            } else {
                "actions"
            };
            format!("{noun} {}", words.join(", "))
        };
        let mut parts = Vec::new();
        if !self.ran.is_empty() {
            parts.push(format!("{} had run (not run again)", list(&self.ran)));
        }
        if !self.under_way.is_empty() {
            parts.push(format!(
                "{} was under way (not run again; what it did stays)",
                list(&self.under_way)
            ));
        }
        if !self.run_now.is_empty() {
            parts.push(format!("{} had not started (run now)", list(&self.run_now)));
        }
        if parts.is_empty() {
            parts.push("it had no actions".to_string());
        }
        format!(
            "iteration {iteration} resumed after its worker was killed while its actions ran: {}",
            parts.join("; ")
        )
    }
}
