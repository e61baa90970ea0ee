//! What a lane did, for a reader who decides whether to merge it: the
//! commits its branch has that its base lacks, `git diff --stat`, the patch
//! file by file (cut past a limit that says how to see it all), and its
//! sessions' cost and rate-limit waits from its event log.

use std::io::BufRead;
use std::path::Path;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::LaneName;
use super::registry::Lane;
use super::worktree;
use crate::protocol::{Event, TimedEvent};

/// Patch lines sent at most: a phone reads 20,000 lines no more than it
/// reads 200,000, and the rest is one `git diff` away.
pub const MAX_PATCH_LINES: usize = 20_000;
/// Patch bytes sent at most (long lines count too).
pub const MAX_PATCH_BYTES: usize = 4 << 20;
/// Commits listed at most, newest first.
const MAX_COMMITS: usize = 100;
/// Sessions and rate-limit waits kept at most, the latest.
const MAX_SESSIONS: usize = 500;

/// A lane's work, as the web page shows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct LaneWork {
    pub lane: LaneName,
    pub base: String,
    pub branch: String,
    /// Newest first.
    pub commits: Vec<CommitLine>,
    /// Commits past those listed.
    pub commits_more: usize,
    pub stat: String,
    pub files: Vec<FilePatch>,
    /// Lines of the whole patch.
    pub lines: usize,
    /// Lines sent.
    pub shown: usize,
    /// Why the patch was cut, and how to see it all.
    pub cut: Option<String>,
    /// Files changed in the lane's worktree and not committed: a merge leaves them.
    pub uncommitted: usize,
    pub sessions: Vec<SessionCost>,
    pub rate_limits: Vec<RateLimitWait>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct CommitLine {
    pub sha: String,
    pub subject: String,
    pub author: String,
    pub at: DateTime<Utc>,
}

/// One file of the patch: its hunks only (no `diff --git`, `index`, `---`
/// or `+++` lines).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct FilePatch {
    pub path: String,
    pub added: u64,
    pub removed: u64,
    pub binary: bool,
    pub patch: String,
    /// The limit cut this file's patch.
    pub cut: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SessionCost {
    pub iteration: u64,
    /// When it ended.
    pub at: DateTime<Utc>,
    pub cost_usd: Option<f64>,
    pub duration_secs: f64,
    pub productive: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RateLimitWait {
    /// When the wait began.
    pub at: DateTime<Utc>,
    pub secs: f64,
}

/// The work of lane `name` of the fleet in `root`.
pub fn work(root: &Path, name: &LaneName) -> Result<LaneWork, String> {
    let registry = super::registry::load(root)?;
    let lane = registry
        .lane(name)
        .ok_or_else(|| format!("no lane named {name}"))?;
    let (Some(base), Some(branch)) = (lane.base.as_deref(), lane.branch.as_deref()) else {
        return Err(format!(
            "lane {name} has no branch of its own: nothing to compare"
        ));
    };
    let branch_ref = format!("refs/heads/{branch}");
    let range = format!(
        "{}...{}",
        worktree::revision(base)?,
        worktree::revision(&branch_ref)?
    );
    let (commits, commits_more) = commits(root, base, &branch_ref)?;
    let diff = |extra: &[&str]| {
        let options = ["diff", "--no-color", "--no-ext-diff"];
        let args = [&options[..], extra, &["--end-of-options", &range, "--"]].concat();
        worktree::git(root, &args)
    };
    let stat = diff(&["--stat"])?;
    let numstat = diff(&["--numstat"])?;
    let patch = diff(&[])?;
    let (files, lines, shown) = split_patch(&numstat, &patch);
    let short_base = super::lanes::short_ref(base);
    let cut = (shown < lines).then(|| {
        format!(
            "the diff has {lines} lines; the first {shown} are shown: run `git diff {short_base}...{branch}` in {} to see it all",
            root.display()
        )
    });
    let config = crate::config::Config::of_folder(root);
    let event_log = config.lane_files(root, name.as_str()).event_log;
    let (sessions, rate_limits) = event_log.as_deref().map(costs).unwrap_or_default();
    Ok(LaneWork {
        lane: name.clone(),
        base: short_base.to_string(),
        branch: branch.to_string(),
        commits,
        commits_more,
        stat,
        files,
        lines,
        shown,
        cut,
        uncommitted: uncommitted(root, lane),
        sessions,
        rate_limits,
    })
}

/// The commits `branch` has that `base` lacks, newest first, and how many
/// more there are.
fn commits(root: &Path, base: &str, branch: &str) -> Result<(Vec<CommitLine>, usize), String> {
    let range = format!("{base}..{branch}");
    let count = worktree::git(root, &["rev-list", "--count", "--end-of-options", &range])?;
    let count: usize = count.trim().parse().unwrap_or(0);
    let limit = format!("--max-count={MAX_COMMITS}");
    let log = worktree::git(
        root,
        &[
            "log",
            "--no-color",
            &limit,
            "--format=%h%x1f%an%x1f%aI%x1f%s",
            "--end-of-options",
            &range,
        ],
    )?;
    let commits: Vec<CommitLine> = log
        .lines()
        .filter_map(|line| {
            let mut fields = line.splitn(4, '\u{1f}');
            let sha = fields.next()?.to_string();
            let author = fields.next()?.to_string();
            let at = DateTime::parse_from_rfc3339(fields.next()?).ok()?;
            let subject = fields.next().unwrap_or_default().to_string();
            Some(CommitLine {
                sha,
                subject,
                author,
                at: at.with_timezone(&Utc),
            })
        })
        .collect();
    let more = count.saturating_sub(commits.len());
    Ok((commits, more))
}

/// The patch split by file, each with its `--numstat` counts (both list the
/// files in one order), cut at [`MAX_PATCH_LINES`] or [`MAX_PATCH_BYTES`];
/// the hunks' lines, and those kept (a file's header lines count in neither).
fn split_patch(numstat: &str, patch: &str) -> (Vec<FilePatch>, usize, usize) {
    let mut files: Vec<FilePatch> = numstat
        .lines()
        .filter_map(|line| {
            let mut fields = line.splitn(3, '\t');
            let (added, removed, path) = (fields.next()?, fields.next()?, fields.next()?);
            Some(FilePatch {
                path: path.to_string(),
                added: added.parse().unwrap_or(0),
                removed: removed.parse().unwrap_or(0),
                binary: added == "-" && removed == "-",
                patch: String::new(),
                cut: false,
            })
        })
        .collect();
    let (mut lines, mut shown, mut bytes) = (0usize, 0usize, 0usize);
    let mut index: Option<usize> = None;
    let mut in_hunks = false;
    for line in patch.lines() {
        if line.starts_with("diff --git ") {
            index = Some(index.map_or(0, |i| i + 1));
            in_hunks = false;
            continue;
        }
        let Some(file) = index.and_then(|i| files.get_mut(i)) else {
            continue;
        };
        in_hunks |= line.starts_with("@@") || line.starts_with("Binary files ");
        if !in_hunks {
            continue;
        }
        lines += 1;
        if shown >= MAX_PATCH_LINES || bytes + line.len() > MAX_PATCH_BYTES {
            file.cut = true;
            continue;
        }
        shown += 1;
        bytes += line.len() + 1;
        file.patch.push_str(line);
        file.patch.push('\n');
    }
    (files, lines, shown)
}

/// Files the lane's worktree changed and did not commit.
fn uncommitted(root: &Path, lane: &Lane) -> usize {
    let dir = if lane.dir.is_absolute() {
        lane.dir.clone()
    } else {
        root.join(&lane.dir)
    };
    worktree::git(&dir, &["status", "--porcelain", "--untracked-files=normal"])
        .map(|status| status.lines().count())
        .unwrap_or(0)
}

/// The sessions and rate-limit waits of an event log, the latest
/// [`MAX_SESSIONS`] of each; none when it cannot be read.
fn costs(path: &Path) -> (Vec<SessionCost>, Vec<RateLimitWait>) {
    let Ok(file) = std::fs::File::open(path) else {
        return (Vec::new(), Vec::new());
    };
    let mut sessions = std::collections::VecDeque::new();
    let mut waits = std::collections::VecDeque::new();
    for line in std::io::BufReader::new(file).lines().map_while(Result::ok) {
        // Cheap before parsing: most lines are neither.
        if !line.contains("session_complete") && !line.contains("rate_limited") {
            continue;
        }
        let Ok(timed) = serde_json::from_str::<TimedEvent>(&line) else {
            continue;
        };
        match timed.event {
            Event::SessionComplete {
                iteration,
                duration_secs,
                productive,
                cost_usd,
                ..
            } => keep(
                &mut sessions,
                SessionCost {
                    iteration,
                    at: timed.ts,
                    cost_usd,
                    duration_secs,
                    productive,
                },
            ),
            Event::RateLimited { backoff_secs, .. } => keep(
                &mut waits,
                RateLimitWait {
                    at: timed.ts,
                    secs: backoff_secs,
                },
            ),
            _ => {}
        }
    }
    (sessions.into(), waits.into())
}

fn keep<T>(kept: &mut std::collections::VecDeque<T>, item: T) {
    if kept.len() == MAX_SESSIONS {
        kept.pop_front();
    }
    kept.push_back(item);
}
