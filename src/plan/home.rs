//! Where a plan keeps what it has besides its state: one folder (its driver's
//! lock, the requests left for it, its merge scratch worktree, its checks, its
//! steps' prompts, its sub-plans) and its event log. Every such path is made
//! here, from where the plan's state is kept: a plan run by itself
//! (`NAME.json`) keeps `.clowder/plans/NAME/` and `NAME-events.jsonl`; a
//! sub-plan (`PARENT/sub/STEP.json`) keeps `PARENT/sub/STEP/`, its
//! `events.jsonl` inside. No plan's name leads into a `sub/` folder, so a plan
//! named `PARENT-STEP` shares nothing with the sub-plan of that name.

use std::path::{Path, PathBuf};

use super::state::{PLANS_DIR, PlanState};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Home {
    name: String,
    dir: PathBuf,
    events: PathBuf,
}

impl Home {
    /// The home of the plan `state`, under `root`.
    pub fn of(root: &Path, state: &PlanState) -> Home {
        Home::at(root, &state.rel_file(), &state.name)
    }

    /// The home of plan `name` whose state is kept at `rel` (relative to
    /// [`PLANS_DIR`]).
    pub fn at(root: &Path, rel: &str, name: &str) -> Home {
        let plans = root.join(PLANS_DIR);
        let stem = rel.strip_suffix(".json").unwrap_or(rel);
        let dir = plans.join(stem);
        let events = if is_sub(rel) {
            dir.join("events.jsonl")
        } else {
            plans.join(format!("{stem}-events.jsonl"))
        };
        Home {
            name: name.to_string(),
            dir,
            events,
        }
    }

    /// The home of plan `name` whose state file `path` was found under `root`
    /// (by [`super::status::plan_file`]).
    pub fn of_file(root: &Path, path: &Path, name: &str) -> Home {
        let rel = path
            .strip_prefix(root.join(PLANS_DIR))
            .ok()
            .and_then(Path::to_str)
            .map_or_else(|| format!("{name}.json"), str::to_string);
        Home::at(root, &rel, name)
    }

    /// The plan's name, as its lanes and events say it.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Its folder.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Its event log.
    pub fn events(&self) -> &Path {
        &self.events
    }
}

/// Whether the state kept at `rel` is a sub-plan's (in a parent's `sub/`).
pub fn is_sub(rel: &str) -> bool {
    Path::new(rel).components().count() > 1
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plan_named_like_a_subplan_has_a_home_of_its_own() {
        let root = Path::new("/p");
        let alone = Home::at(root, "a-b.json", "a-b");
        let sub = Home::at(root, "a/sub/b.json", "a-b");
        assert_eq!(alone.dir(), Path::new("/p/.clowder/plans/a-b"));
        assert_eq!(
            alone.events(),
            Path::new("/p/.clowder/plans/a-b-events.jsonl")
        );
        assert_eq!(sub.dir(), Path::new("/p/.clowder/plans/a/sub/b"));
        assert_eq!(
            sub.events(),
            Path::new("/p/.clowder/plans/a/sub/b/events.jsonl")
        );
        let found = Home::of_file(root, Path::new("/p/.clowder/plans/a/sub/b.json"), "a-b");
        assert_eq!(found, sub);
    }
}
