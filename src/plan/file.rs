//! `plan.toml`: the plan file's format, read and checked; every problem is located
//! by file, line and column.

use std::collections::{HashMap, HashSet};
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Deserializer, Serialize};
use toml::Spanned;

use crate::config::{ConfigError, line_column, parse_located};
use crate::fleet::LaneName;

/// A plan, its sub-plans and theirs: at most this many plan files deep.
pub const MAX_DEPTH: usize = 3;

/// `verify_timeout` and `done_when_timeout` when the plan file sets neither.
pub const DEFAULT_CHECK_TIMEOUT: Duration = Duration::from_secs(30 * 60);

/// How a step's work relates to its dependency's.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Collaboration {
    /// Its own branch, from its dependency's tip (or from base when it has none).
    #[default]
    Parallel,
    /// Continues on its dependency's branch and worktree.
    Sequential,
}

/// What a step's lane is given to do.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Work {
    Prompt(String),
    /// Resolved against the plan file's folder.
    PromptFile(PathBuf),
    /// A sub-plan, resolved against the plan file's folder.
    Plan(PathBuf),
}

#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    pub file: PathBuf,
    pub name: String,
    pub base: Option<String>,
    pub autonomy: u8,
    pub verify: String,
    /// How long `verify` may run before it is killed and counts as failed.
    pub verify_timeout: Duration,
    /// The same for a command `done_when`.
    pub done_when_timeout: Duration,
    pub max_parallel: usize,
    pub steps: Vec<Step>,
    /// The sub-plans named by `plan = "…"` steps, checked as deeply as allowed.
    pub subplans: Vec<Plan>,
    /// Completed, the plan removes its merged steps' worktrees and branches.
    pub cleanup: bool,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Step {
    pub id: String,
    pub depends_on: Vec<String>,
    pub collaboration: Collaboration,
    pub critical: bool,
    pub work: Work,
    /// `promise`, or a shell command that exits 0 in the step's worktree.
    pub done_when: String,
    pub max_iterations: Option<u64>,
    /// The step's own `verify_timeout` (for its merge), else the plan's.
    pub verify_timeout: Option<Duration>,
    /// The step's own `done_when_timeout`, else the plan's.
    pub done_when_timeout: Option<Duration>,
}

// Unknown keys are found by [`unknown_keys`], all of them, rather than by serde,
// which stops at the first and hides every other problem of the file.
#[derive(Deserialize)]
struct RawFile {
    plan: RawPlan,
    #[serde(default)]
    step: Vec<RawStep>,
}

#[derive(Deserialize)]
struct RawPlan {
    name: Spanned<String>,
    base: Option<String>,
    #[serde(default = "default_autonomy")]
    autonomy: Autonomy,
    #[serde(default)]
    verify: String,
    #[serde(default = "default_max_parallel")]
    max_parallel: Positive,
    verify_timeout: Option<CheckTimeout>,
    done_when_timeout: Option<CheckTimeout>,
    #[serde(default = "yes")]
    cleanup: bool,
}

fn yes() -> bool {
    true
}

#[derive(Deserialize)]
struct RawStep {
    id: Spanned<String>,
    #[serde(default)]
    depends_on: Vec<Spanned<String>>,
    #[serde(default)]
    collaboration: Collaboration,
    #[serde(default)]
    critical: bool,
    prompt: Option<String>,
    prompt_file: Option<Spanned<PathBuf>>,
    plan: Option<Spanned<PathBuf>>,
    done_when: Option<Spanned<String>>,
    max_iterations: Option<Positive>,
    verify_timeout: Option<CheckTimeout>,
    done_when_timeout: Option<CheckTimeout>,
}

/// A check's time limit, written as `[plan] verify_timeout` is: `90s`, `30m`, `2h`.
#[derive(Clone, Copy)]
struct CheckTimeout(Duration);

impl<'de> Deserialize<'de> for CheckTimeout {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        let parsed = crate::config::OptionalDuration::parse(&text)
            .ok()
            .and_then(|parsed| parsed.duration);
        parsed.map(CheckTimeout).ok_or_else(|| {
            serde::de::Error::custom(format!(
                "`{text}` is not a time limit, expected a duration such as 90s, 30m or 2h"
            ))
        })
    }
}

#[derive(Clone, Copy, Deserialize)]
#[serde(try_from = "i64")]
struct Autonomy(u8);

impl TryFrom<i64> for Autonomy {
    type Error = String;
    fn try_from(value: i64) -> Result<Self, String> {
        match u8::try_from(value) {
            Ok(level @ 1..=5) => Ok(Autonomy(level)),
            _ => Err(format!(
                "expected a whole number from 1 to 5, found {value}"
            )),
        }
    }
}

#[derive(Clone, Copy, Deserialize)]
#[serde(try_from = "i64")]
struct Positive(u64);

impl TryFrom<i64> for Positive {
    type Error = String;
    fn try_from(value: i64) -> Result<Self, String> {
        match u64::try_from(value) {
            Ok(n) if n >= 1 => Ok(Positive(n)),
            _ => Err(format!(
                "expected a whole number of at least 1, found {value}"
            )),
        }
    }
}

fn default_autonomy() -> Autonomy {
    Autonomy(3)
}

fn default_max_parallel() -> Positive {
    Positive(2)
}

/// The keys of `[plan]`, of a `[[step]]` and of the file, as serde would list them.
const PLAN_KEYS: &[&str] = &[
    "name",
    "base",
    "autonomy",
    "verify",
    "max_parallel",
    "verify_timeout",
    "done_when_timeout",
    "cleanup",
];
const STEP_KEYS: &[&str] = &[
    "id",
    "depends_on",
    "collaboration",
    "critical",
    "prompt",
    "prompt_file",
    "plan",
    "done_when",
    "max_iterations",
    "verify_timeout",
    "done_when_timeout",
];
const FILE_KEYS: &[&str] = &["plan", "step"];

/// What a plan's steps may count on in the harness they run in.
#[derive(Debug, Clone, Copy)]
pub struct Harness<'a> {
    /// `[completion] promise`, when set: without it `done_when = "promise"` never holds.
    pub promise: Option<&'a str>,
}

/// Reads and checks `path` and its sub-plans. `Err` holds every problem found, in
/// file order (a file that does not parse stops at its first problem, besides
/// its unknown keys).
pub fn load(path: &Path) -> Result<Plan, Vec<ConfigError>> {
    load_nested(path, &[], None, None)
}

/// [`load`], and every step must be able to succeed in `harness`: `plan check`
/// and `plan run` refuse a `done_when = "promise"` that no promise can keep.
pub fn load_for(path: &Path, harness: Harness) -> Result<Plan, Vec<ConfigError>> {
    load_nested(path, &[], None, Some(harness))
}

/// `run`: the name a sub-plan runs under (its step's lane), which its lanes start with.
fn load_nested(
    path: &Path,
    parents: &[PathBuf],
    run: Option<&str>,
    harness: Option<Harness>,
) -> Result<Plan, Vec<ConfigError>> {
    let text = crate::store::small_file::read_to_string(path).map_err(|err| {
        vec![ConfigError {
            file: path.to_path_buf(),
            position: None,
            key: None,
            message: format!("cannot read the plan file: {err}"),
        }]
    })?;
    let unknown = unknown_keys(&text, path);
    let raw: RawFile = parse_located(&text, path).map_err(|err| {
        let mut errors = unknown.clone();
        errors.push(err);
        errors.sort_by_key(|err| err.position);
        errors
    })?;
    let mut check = Checker {
        file: path,
        text: &text,
        line_starts: line_starts(&text),
        errors: unknown,
        subplan_refs: Vec::new(),
        run: run.map(str::to_string),
        harness,
    };
    let plan = check.plan(raw);
    let mut chain = parents.to_vec();
    chain.push(path.to_path_buf());
    let subplans = check.subplans(&chain, &plan.name, harness);
    if check.errors.is_empty() {
        Ok(Plan { subplans, ..plan })
    } else {
        Err(check.errors)
    }
}

struct Checker<'a> {
    file: &'a Path,
    text: &'a str,
    /// Where each line of `text` starts, so that placing an error is a search,
    /// not a count over the text (a plan with thousands of errors stays linear).
    line_starts: Vec<usize>,
    errors: Vec<ConfigError>,
    /// Each `plan = "…"`: the step's id, the resolved path, where it stands.
    subplan_refs: Vec<(usize, String, PathBuf, Range<usize>)>,
    /// The name the plan runs under when it is a sub-plan.
    run: Option<String>,
    /// The harness its steps will run in, when it is known.
    harness: Option<Harness<'a>>,
}

impl Checker<'_> {
    fn error(&mut self, span: Range<usize>, key: Option<String>, message: String) {
        self.errors.push(ConfigError {
            file: self.file.to_path_buf(),
            position: Some(self.line_column(span.start)),
            key,
            message,
        });
    }

    /// [`line_column`] by the lines' starts: the same line and column.
    fn line_column(&self, offset: usize) -> (usize, usize) {
        let line = self.line_starts.partition_point(|&start| start <= offset);
        let start = self.line_starts[line.saturating_sub(1)];
        let (_, column) = line_column(&self.text[start..], offset - start);
        (line, column)
    }

    fn relative(&self, path: &Path) -> PathBuf {
        self.file.parent().unwrap_or(Path::new("")).join(path)
    }

    fn plan(&mut self, raw: RawFile) -> Plan {
        let name = raw.plan.name.get_ref().clone();
        if let Err(err) = LaneName::parse(&name) {
            let message = err.replacen("invalid lane name", "invalid plan name", 1);
            self.error(raw.plan.name.span(), Some("plan.name".into()), message);
        }
        // Where each id first stands, as an offset: its line is counted only for
        // a duplicate (counting it for every step made the check quadratic).
        let mut first_at: HashMap<String, usize> = HashMap::new();
        let mut steps = Vec::new();
        for (index, step) in raw.step.iter().enumerate() {
            let id = step.id.get_ref();
            if let Some(&first) = first_at.get(id) {
                let (line, _) = self.line_column(first);
                let message = format!(
                    "duplicate step id {id:?} (first at line {line}), expected each id once"
                );
                self.error(step.id.span(), Some(format!("step[{index}].id")), message);
            } else {
                first_at.insert(id.clone(), step.id.span().start);
            }
            let run = self.run.clone().unwrap_or_else(|| name.clone());
            self.step_id(&run, index, &step.id);
            self.done_when(index, step);
            if let Some(work) = self.work(index, step) {
                steps.push(Step {
                    id: id.clone(),
                    depends_on: step
                        .depends_on
                        .iter()
                        .map(|d| d.get_ref().clone())
                        .collect(),
                    collaboration: step.collaboration,
                    critical: step.critical,
                    work,
                    done_when: step
                        .done_when
                        .as_ref()
                        .map_or_else(|| PROMISE.to_string(), |d| d.get_ref().clone()),
                    max_iterations: step.max_iterations.map(|n| n.0),
                    verify_timeout: step.verify_timeout.map(|t| t.0),
                    done_when_timeout: step.done_when_timeout.map(|t| t.0),
                });
            }
        }
        self.dependencies(&raw.step);
        self.errors.sort_by_key(|err| err.position);
        Plan {
            file: self.file.to_path_buf(),
            name,
            base: raw.plan.base,
            autonomy: raw.plan.autonomy.0,
            verify: raw.plan.verify,
            verify_timeout: raw
                .plan
                .verify_timeout
                .map_or(DEFAULT_CHECK_TIMEOUT, |t| t.0),
            done_when_timeout: raw
                .plan
                .done_when_timeout
                .map_or(DEFAULT_CHECK_TIMEOUT, |t| t.0),
            max_parallel: usize::try_from(raw.plan.max_parallel.0).unwrap_or(usize::MAX),
            steps,
            subplans: Vec::new(),
            cleanup: raw.plan.cleanup,
        }
    }

    /// A step id follows the lane name rule, and so does the lane `PLAN-ID` it runs as.
    fn step_id(&mut self, plan: &str, index: usize, id: &Spanned<String>) {
        let key = Some(format!("step[{index}].id"));
        if let Err(err) = LaneName::parse(id.get_ref()) {
            let message = err.replacen("invalid lane name", "invalid step id", 1);
            self.error(id.span(), key, message);
        } else if LaneName::parse(&lane_name(plan, id.get_ref())).is_err() {
            let message = format!(
                "step id {:?} makes the lane name {:?}, longer than 40 characters: expected a shorter plan name or id",
                id.get_ref(),
                lane_name(plan, id.get_ref())
            );
            self.error(id.span(), key, message);
        }
    }

    /// A step done by the promise needs one: without `[completion] promise` its
    /// lane runs every session it may and fails.
    fn done_when(&mut self, index: usize, step: &RawStep) {
        let by_promise = step
            .done_when
            .as_ref()
            .is_none_or(|d| d.get_ref().trim() == PROMISE);
        let no_promise = self.harness.is_some_and(|h| h.promise.is_none());
        if !(no_promise && by_promise) {
            return;
        }
        let span = step
            .done_when
            .as_ref()
            .map_or_else(|| step.id.span(), Spanned::span);
        let written = if step.done_when.is_some() {
            "done_when = \"promise\""
        } else {
            "done_when (\"promise\" by default)"
        };
        let message = format!(
            "step {:?} cannot succeed: its {written} needs the completion promise, and {} sets no `[completion] promise`; expected `[completion] promise = \"…\"` there, or a command that exits 0 when the step is done",
            step.id.get_ref(),
            crate::config::DEFAULT_CONFIG_FILE
        );
        self.error(span, Some(format!("step[{index}].done_when")), message);
    }

    fn work(&mut self, index: usize, step: &RawStep) -> Option<Work> {
        let given = [
            step.prompt.is_some(),
            step.prompt_file.is_some(),
            step.plan.is_some(),
        ];
        if given.iter().filter(|&&g| g).count() != 1 {
            let message = format!(
                "step {:?}: expected exactly one of `prompt`, `prompt_file`, `plan`",
                step.id.get_ref()
            );
            self.error(step.id.span(), Some(format!("step[{index}]")), message);
            return None;
        }
        if let Some(prompt) = &step.prompt {
            return Some(Work::Prompt(prompt.clone()));
        }
        if let Some(file) = &step.prompt_file {
            let path = self.relative(file.get_ref());
            if !path.is_file() {
                let message = format!(
                    "prompt file {} does not exist: expected a file relative to the plan's folder",
                    path.display()
                );
                self.error(
                    file.span(),
                    Some(format!("step[{index}].prompt_file")),
                    message,
                );
            }
            return Some(Work::PromptFile(path));
        }
        let plan = step.plan.as_ref()?;
        if step.collaboration == Collaboration::Sequential {
            let message = format!(
                "step {:?} is a sub-plan: it runs on a branch of its own, expected collaboration = \"parallel\" (the default)",
                step.id.get_ref()
            );
            self.error(
                step.id.span(),
                Some(format!("step[{index}].collaboration")),
                message,
            );
        }
        let path = self.relative(plan.get_ref());
        let id = step.id.get_ref().clone();
        self.subplan_refs
            .push((index, id, path.clone(), plan.span()));
        Some(Work::Plan(path))
    }

    fn dependencies(&mut self, steps: &[RawStep]) {
        let ids: HashSet<&str> = steps.iter().map(|s| s.id.get_ref().as_str()).collect();
        let subplans: HashSet<&str> = steps
            .iter()
            .filter(|s| s.plan.is_some())
            .map(|s| s.id.get_ref().as_str())
            .collect();
        let mut all_known = true;
        for (index, step) in steps.iter().enumerate() {
            for dep in &step.depends_on {
                if !ids.contains(dep.get_ref().as_str()) {
                    all_known = false;
                    let message = format!(
                        "step {:?} depends on {:?}, which is not a step of this plan",
                        step.id.get_ref(),
                        dep.get_ref()
                    );
                    self.error(
                        dep.span(),
                        Some(format!("step[{index}].depends_on")),
                        message,
                    );
                }
            }
            if step.collaboration == Collaboration::Sequential
                && let Some(dep) = step.depends_on.first()
                && subplans.contains(dep.get_ref().as_str())
            {
                let message = format!(
                    "step {:?} is sequential, but its dependency {:?} is a sub-plan, which has no worktree to go on in: expected collaboration = \"parallel\"",
                    step.id.get_ref(),
                    dep.get_ref()
                );
                self.error(
                    step.id.span(),
                    Some(format!("step[{index}].collaboration")),
                    message,
                );
            }
            if step.collaboration == Collaboration::Sequential && step.depends_on.len() != 1 {
                let message = format!(
                    "step {:?} is sequential (continues on its dependency's branch): expected exactly one dependency, found {}",
                    step.id.get_ref(),
                    step.depends_on.len()
                );
                self.error(
                    step.id.span(),
                    Some(format!("step[{index}].collaboration")),
                    message,
                );
            }
        }
        if all_known && let Some(cycle) = find_cycle(steps) {
            let first = &steps[cycle[0]];
            let path: Vec<&str> = cycle
                .iter()
                .chain(std::iter::once(&cycle[0]))
                .map(|&i| steps[i].id.get_ref().as_str())
                .collect();
            let message = format!("dependency cycle: {}", path.join(" → "));
            let index = cycle[0];
            self.error(
                first.id.span(),
                Some(format!("step[{index}].depends_on")),
                message,
            );
        }
    }

    fn subplans(
        &mut self,
        chain: &[PathBuf],
        plan_name: &str,
        harness: Option<Harness>,
    ) -> Vec<Plan> {
        if !self.errors.is_empty() {
            return Vec::new();
        }
        let mut found = Vec::new();
        for (index, id, path, span) in std::mem::take(&mut self.subplan_refs) {
            let key = Some(format!("step[{index}].plan"));
            let path = &path;
            if chain.len() >= MAX_DEPTH {
                let names: Vec<String> = chain
                    .iter()
                    .chain(std::iter::once(path))
                    .map(|p| p.display().to_string())
                    .collect();
                let message = format!(
                    "plans nested deeper than {MAX_DEPTH}: {}; expected at most {MAX_DEPTH} plan files deep",
                    names.join(" → ")
                );
                self.error(span.clone(), key, message);
                continue;
            }
            if !path.is_file() {
                let message = format!(
                    "step {id:?}: sub-plan file {} does not exist",
                    path.display()
                );
                self.error(span.clone(), key, message);
                continue;
            }
            let run = lane_name(self.run.as_deref().unwrap_or(plan_name), &id);
            match load_nested(path, chain, Some(&run), harness) {
                Ok(sub) => found.push(sub),
                Err(errors) => self.errors.extend(errors),
            }
        }
        found
    }
}

/// `done_when`'s word for the completion promise (its default).
pub const PROMISE: &str = "promise";

/// Every key of the file that is not one of a plan's, each located, in file
/// order. A file that does not parse has none here: its syntax error is told.
fn unknown_keys(text: &str, file: &Path) -> Vec<ConfigError> {
    use toml::de::{DeTable, DeValue};
    let Ok(table) = DeTable::parse(text) else {
        return Vec::new();
    };
    let mut found = Vec::new();
    let mut unknown = |table: &DeTable, prefix: &str, allowed: &[&str]| {
        for key in table.keys() {
            let name = key.get_ref().as_ref();
            if !allowed.contains(&name) {
                found.push(ConfigError {
                    file: file.to_path_buf(),
                    position: Some(line_column(text, key.span().start)),
                    key: Some(format!("{prefix}{name}")),
                    message: format!("unknown field `{name}`, expected {}", one_of(allowed)),
                });
            }
        }
    };
    let top = table.get_ref();
    unknown(top, "", FILE_KEYS);
    if let Some(DeValue::Table(plan)) = top.get("plan").map(|v| v.get_ref()) {
        unknown(plan, "plan.", PLAN_KEYS);
    }
    if let Some(DeValue::Array(steps)) = top.get("step").map(|v| v.get_ref()) {
        for (index, step) in steps.iter().enumerate() {
            if let DeValue::Table(step) = step.get_ref() {
                unknown(step, &format!("step[{index}]."), STEP_KEYS);
            }
        }
    }
    found.sort_by_key(|err| err.position);
    found
}

/// serde's words for the keys expected: `` `a` or `b` ``, `` one of `a`, `b`, `c` ``.
fn one_of(keys: &[&str]) -> String {
    let quoted: Vec<String> = keys.iter().map(|k| format!("`{k}`")).collect();
    match quoted.as_slice() {
        [one] => one.clone(),
        [a, b] => format!("{a} or {b}"),
        _ => format!("one of {}", quoted.join(", ")),
    }
}

/// The lane a step of plan `plan` runs as.
pub fn lane_name(plan: &str, id: &str) -> String {
    format!("{plan}-{id}")
}

/// The first cycle found among `steps`' dependencies, as step indices in the order
/// each depends on the next.
fn find_cycle(steps: &[RawStep]) -> Option<Vec<usize>> {
    let index: HashMap<&str, usize> = steps
        .iter()
        .enumerate()
        .map(|(i, s)| (s.id.get_ref().as_str(), i))
        .collect();
    let deps: Vec<Vec<usize>> = steps
        .iter()
        .map(|step| {
            step.depends_on
                .iter()
                .filter_map(|d| index.get(d.get_ref().as_str()).copied())
                .collect()
        })
        .collect();
    // 0: unvisited, 1: on the current path, 2: finished.
    let mut color = vec![0u8; steps.len()];
    for start in 0..steps.len() {
        if color[start] == 0
            && let Some(cycle) = cycle_from(start, &deps, &mut color)
        {
            return Some(cycle);
        }
    }
    None
}

/// A depth-first walk from `start` along the dependencies, on a stack of its own
/// (a chain of many thousand steps would overflow the thread's): the first
/// cycle found, as the path around it.
fn cycle_from(start: usize, deps: &[Vec<usize>], color: &mut [u8]) -> Option<Vec<usize>> {
    // Each node on the path, with how many of its dependencies were walked.
    let mut path: Vec<(usize, usize)> = vec![(start, 0)];
    color[start] = 1;
    while let Some((node, walked)) = path.last_mut() {
        let Some(&next) = deps[*node].get(*walked) else {
            color[*node] = 2;
            path.pop();
            continue;
        };
        *walked += 1;
        match color[next] {
            0 => {
                color[next] = 1;
                path.push((next, 0));
            }
            1 => {
                let from = path.iter().position(|&(n, _)| n == next)?;
                return Some(path[from..].iter().map(|&(n, _)| n).collect());
            }
            _ => {}
        }
    }
    None
}

fn line_starts(text: &str) -> Vec<usize> {
    std::iter::once(0)
        .chain(memchr::memchr_iter(b'\n', text.as_bytes()).map(|at| at + 1))
        .collect()
}

/// The steps in waves: each wave's steps depend only on earlier waves' steps,
/// a step's wave being one after its latest dependency's. Steps are taken in
/// dependency order (Kahn's), so the whole is linear in steps and dependencies;
/// a step that depends on an unknown step or on a cycle (a plan that was not
/// checked) is in no wave.
pub fn waves(plan: &Plan) -> Vec<Vec<&str>> {
    let index: HashMap<&str, usize> = plan
        .steps
        .iter()
        .enumerate()
        .map(|(i, s)| (s.id.as_str(), i))
        .collect();
    let mut waiting_for: Vec<usize> = plan.steps.iter().map(|s| s.depends_on.len()).collect();
    let mut dependents: Vec<Vec<usize>> = vec![Vec::new(); plan.steps.len()];
    for (i, step) in plan.steps.iter().enumerate() {
        for dep in &step.depends_on {
            if let Some(&d) = index.get(dep.as_str()) {
                dependents[d].push(i);
            }
        }
    }
    let mut wave_of: Vec<Option<usize>> = vec![None; plan.steps.len()];
    let mut ready: Vec<usize> = (0..plan.steps.len())
        .filter(|&i| waiting_for[i] == 0)
        .collect();
    for &i in &ready {
        wave_of[i] = Some(0);
    }
    while let Some(i) = ready.pop() {
        let wave = wave_of[i].unwrap_or(0);
        for &next in &dependents[i] {
            wave_of[next] = Some(wave_of[next].map_or(wave + 1, |w| w.max(wave + 1)));
            waiting_for[next] -= 1;
            if waiting_for[next] == 0 {
                ready.push(next);
            }
        }
    }
    let mut waves: Vec<Vec<&str>> = Vec::new();
    for (i, step) in plan.steps.iter().enumerate() {
        // A step still waiting for a dependency was never ready: it is in no wave.
        if let (0, Some(wave)) = (waiting_for[i], wave_of[i]) {
            if waves.len() <= wave {
                waves.resize_with(wave + 1, Vec::new);
            }
            waves[wave].push(step.id.as_str());
        }
    }
    waves
}
