//! What a plan's state was made from, and how a plan file has changed since:
//! `plan run` refuses a changed plan file rather than run the old plan silently.

use serde::Serialize;
use sha2::{Digest, Sha256};

use super::file::{Collaboration, Work};
use super::state::{PlanState, StepState};

/// A step as the plan file defines it: everything its fingerprint covers.
#[derive(Debug, PartialEq, Serialize)]
pub struct Definition<'a> {
    pub id: &'a str,
    pub depends_on: &'a [String],
    pub collaboration: Collaboration,
    pub critical: bool,
    pub work: &'a Work,
    pub done_when: &'a str,
    pub max_iterations: Option<u64>,
    pub verify_timeout_secs: f64,
    pub done_when_timeout_secs: f64,
}

impl Definition<'_> {
    /// sha256 of the definition as JSON, its first 16 hex digits.
    pub fn fingerprint(&self) -> String {
        let json = serde_json::to_vec(self).unwrap_or_default();
        let digest = Sha256::digest(&json);
        digest.iter().take(8).map(|b| format!("{b:02x}")).collect()
    }

    /// The keys whose values differ from `other`'s, as the plan file names them.
    fn changed_keys(&self, other: &Definition<'_>) -> Vec<&'static str> {
        let prompt = |work: &Work| match work {
            Work::Prompt(_) => "prompt",
            Work::PromptFile(_) => "prompt_file",
            Work::Plan(_) => "plan",
        };
        let mut keys = Vec::new();
        if self.work != other.work {
            keys.push(prompt(other.work));
        }
        let pairs = [
            ("depends_on", self.depends_on != other.depends_on),
            ("collaboration", self.collaboration != other.collaboration),
            ("critical", self.critical != other.critical),
            ("done_when", self.done_when != other.done_when),
            (
                "max_iterations",
                self.max_iterations != other.max_iterations,
            ),
            (
                "verify_timeout",
                self.verify_timeout_secs != other.verify_timeout_secs,
            ),
            (
                "done_when_timeout",
                self.done_when_timeout_secs != other.done_when_timeout_secs,
            ),
        ];
        keys.extend(pairs.iter().filter(|(_, differ)| *differ).map(|(k, _)| *k));
        keys
    }
}

impl StepState {
    pub fn definition(&self) -> Definition<'_> {
        Definition {
            id: &self.id,
            depends_on: &self.depends_on,
            collaboration: self.collaboration,
            critical: self.critical,
            work: &self.work,
            done_when: &self.done_when,
            max_iterations: self.max_iterations,
            verify_timeout_secs: self.verify_timeout_secs,
            done_when_timeout_secs: self.done_when_timeout_secs,
        }
    }
}

/// How the plan file (`new`, a state made from it now) differs from what
/// `saved` was made from, a line each: empty when it does not.
pub fn differences(saved: &PlanState, new: &PlanState) -> Vec<String> {
    let mut said = Vec::new();
    for step in &new.steps {
        match saved.step(&step.id) {
            None => said.push(format!("step {}: added", step.id)),
            Some(old) if old.fingerprint != step.fingerprint => {
                let keys = old.definition().changed_keys(&step.definition());
                let keys = if keys.is_empty() {
                    "its definition".to_string()
                } else {
                    keys.join(", ")
                };
                said.push(format!("step {}: changed ({keys})", step.id));
            }
            Some(_) => {}
        }
    }
    for step in &saved.steps {
        if new.step(&step.id).is_none() {
            said.push(format!("step {}: removed", step.id));
        }
    }
    let plan_keys = [
        ("verify", saved.verify != new.verify),
        ("autonomy", saved.autonomy != new.autonomy),
        ("max_parallel", saved.max_parallel != new.max_parallel),
        ("cleanup", saved.cleanup != new.cleanup),
    ];
    for (key, _) in plan_keys.iter().filter(|(_, differ)| *differ) {
        said.push(format!("[plan] {key}: changed"));
    }
    said
}
