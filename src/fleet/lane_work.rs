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
    /// Files changed in the lane's worktree and not committed: a merge
    /// leaves them (none: git could not say).
    pub uncommitted: Option<usize>,
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
    let stat = worktree::git(
        root,
        &[
            "diff",
            "--no-color",
            "--no-ext-diff",
            "--stat",
            "--end-of-options",
            &range,
            "--",
        ],
    )?;
    let (files, lines, shown) = read_patch(root, &range)?;
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

/// `git diff RANGE` read as it comes, split by file: each block goes to
/// the file its own header names (a file whose type changed comes as two
/// blocks of one path), with its lines counted; kept up to
/// [`MAX_PATCH_LINES`] and [`MAX_PATCH_BYTES`], after which nothing more is
/// kept (so what is shown has no holes) but every line is still counted.
/// The files, the hunks' lines, and those kept.
fn read_patch(root: &Path, range: &str) -> Result<(Vec<FilePatch>, usize, usize), String> {
    use std::io::Read;
    use std::process::{Command, Stdio};
    let mut child = Command::new("git")
        .arg("-C")
        .arg(root)
        .args([
            "diff",
            "--no-color",
            "--no-ext-diff",
            "--end-of-options",
            range,
            "--",
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|err| format!("cannot run git: {err}"))?;
    let mut split = PatchSplit::default();
    if let Some(stdout) = child.stdout.take() {
        let mut reader = std::io::BufReader::new(stdout);
        let mut line = Vec::new();
        loop {
            line.clear();
            // A line longer than the whole limit is not kept whole in memory.
            let limit = (MAX_PATCH_BYTES + 1) as u64;
            match reader.by_ref().take(limit).read_until(b'\n', &mut line) {
                Ok(0) | Err(_) => break,
                Ok(_) => {}
            }
            let whole = line.ends_with(b"\n");
            split.take(&String::from_utf8_lossy(&line));
            if !whole {
                // The rest of an overlong line: read, not kept.
                let mut rest = Vec::new();
                let _ = reader.read_until(b'\n', &mut rest);
            }
        }
    }
    let mut stderr = String::new();
    if let Some(mut err) = child.stderr.take() {
        let _ = err.read_to_string(&mut stderr);
    }
    let status = child
        .wait()
        .map_err(|err| format!("git diff {range}: {err}"))?;
    if !status.success() {
        return Err(format!(
            "`git diff {range}` in {} failed: {}",
            root.display(),
            stderr.trim()
        ));
    }
    split.finish();
    Ok((split.files, split.lines, split.shown))
}

/// The patch's files as its lines come.
#[derive(Default)]
struct PatchSplit {
    files: Vec<FilePatch>,
    /// The block read now: its path is known from its header.
    header: Vec<String>,
    in_hunks: bool,
    lines: usize,
    shown: usize,
    bytes: usize,
    full: bool,
}

impl PatchSplit {
    fn take(&mut self, raw: &str) {
        let line = raw.trim_end_matches(['\n', '\r']);
        if line.starts_with("diff --git ") {
            self.finish();
            self.header = vec![line.to_string()];
            self.in_hunks = false;
            return;
        }
        if !self.in_hunks {
            if !line.starts_with("@@") && !line.starts_with("Binary files ") {
                self.header.push(line.to_string());
                return;
            }
            self.in_hunks = true;
            self.open_file(line.starts_with("Binary files "));
        }
        self.lines += 1;
        let Some(file) = self.files.last_mut() else {
            return;
        };
        if !line.starts_with("+++") && line.starts_with('+') {
            file.added += 1;
        } else if !line.starts_with("---") && line.starts_with('-') {
            file.removed += 1;
        }
        self.full |= self.shown >= MAX_PATCH_LINES || self.bytes + line.len() >= MAX_PATCH_BYTES;
        if self.full {
            file.cut = true;
            return;
        }
        self.shown += 1;
        self.bytes += line.len() + 1;
        file.patch.push_str(line);
        file.patch.push('\n');
    }

    /// A block that had no hunks (a rename as is, a mode change) still names
    /// its file.
    fn finish(&mut self) {
        if !self.in_hunks && !self.header.is_empty() {
            self.open_file(false);
        }
        self.header.clear();
    }

    /// The file the block's header names, made or (the same path again) reused.
    fn open_file(&mut self, binary: bool) {
        let path = header_path(&self.header);
        let again = self.files.last().is_some_and(|file| file.path == path);
        if !again {
            self.files.push(FilePatch {
                path,
                added: 0,
                removed: 0,
                binary,
                patch: String::new(),
                cut: false,
            });
        } else if let Some(file) = self.files.last_mut() {
            file.binary |= binary;
        }
    }
}

/// The path a block's header names: its new name (`+++ b/…`, `rename to`),
/// else its old one (a deleted file), else the `diff --git` line's.
fn header_path(header: &[String]) -> String {
    // Git ends a name that holds a space with a tab on these lines.
    let find = |prefix: &str| {
        header
            .iter()
            .find_map(|line| line.strip_prefix(prefix))
            .map(|name| unquote(name.strip_suffix('\t').unwrap_or(name)))
    };
    let side = |prefix: &str, strip: &str| {
        find(prefix)
            .filter(|path| path != "/dev/null")
            .map(|path| path.strip_prefix(strip).map(str::to_string).unwrap_or(path))
    };
    side("+++ ", "b/")
        .or_else(|| find("rename to "))
        .or_else(|| side("--- ", "a/"))
        .or_else(|| {
            let names = header.first()?.strip_prefix("diff --git ")?;
            // `a/P b/P`: the two halves are the same path, unquoted here.
            let half = names.len().checked_sub(1)? / 2;
            names
                .get(half + 1..)?
                .strip_prefix("b/")
                .map(str::to_string)
        })
        .unwrap_or_default()
}

/// A path as git writes it: in quotes with C escapes when it holds a
/// tab, a newline, a quote, a backslash or a byte past ASCII.
fn unquote(text: &str) -> String {
    let Some(inner) = text.strip_prefix('"').and_then(|t| t.strip_suffix('"')) else {
        return text.to_string();
    };
    let mut bytes = Vec::with_capacity(inner.len());
    let mut chars = inner.bytes().peekable();
    while let Some(byte) = chars.next() {
        if byte != b'\\' {
            bytes.push(byte);
            continue;
        }
        match chars.next() {
            Some(b't') => bytes.push(b'\t'),
            Some(b'n') => bytes.push(b'\n'),
            Some(digit @ b'0'..=b'7') => {
                let mut value = u32::from(digit - b'0');
                for _ in 0..2 {
                    if let Some(next @ b'0'..=b'7') = chars.peek().copied() {
                        value = value * 8 + u32::from(next - b'0');
                        chars.next();
                    }
                }
                bytes.push(u8::try_from(value).unwrap_or(b'?'));
            }
            Some(other) => bytes.push(other),
            None => {}
        }
    }
    String::from_utf8_lossy(&bytes).into_owned()
}

/// Files the lane's worktree changed and did not commit.
fn uncommitted(root: &Path, lane: &Lane) -> Option<usize> {
    let dir = if lane.dir.is_absolute() {
        lane.dir.clone()
    } else {
        root.join(&lane.dir)
    };
    worktree::git(&dir, &["status", "--porcelain", "--untracked-files=normal"])
        .map(|status| status.lines().count())
        .ok()
}

/// The sessions and rate-limit waits of an event log, the latest
/// [`MAX_SESSIONS`] of each; none when it cannot be read.
fn costs(path: &Path) -> (Vec<SessionCost>, Vec<RateLimitWait>) {
    let mut sessions = std::collections::VecDeque::new();
    let mut waits = std::collections::VecDeque::new();
    let _ = crate::store::events::for_each_line(path, |line| {
        // Cheap before parsing: most lines are neither.
        let wanted = |word: &[u8]| memchr::memmem::find(line, word).is_some();
        if !wanted(b"session_complete") && !wanted(b"rate_limited") {
            return;
        }
        let Ok(timed) = serde_json::from_slice::<TimedEvent>(line) else {
            return;
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
    });
    (sessions.into(), waits.into())
}

fn keep<T>(kept: &mut std::collections::VecDeque<T>, item: T) {
    if kept.len() == MAX_SESSIONS {
        kept.pop_front();
    }
    kept.push_back(item);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn git(dir: &Path, args: &[&str]) {
        let status = std::process::Command::new("git")
            .arg("-C")
            .arg(dir)
            .args(["-c", "user.name=T", "-c", "user.email=t@example.com"])
            .args(args)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .stdout(std::process::Stdio::null())
            .status()
            .expect("git");
        assert!(status.success(), "git {args:?}");
    }

    /// A repository whose `work` branch changes files of every awkward kind.
    fn awkward() -> tempfile::TempDir {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path();
        git(root, &["init", "-q", "-b", "main"]);
        let write = |name: &str, text: &str| std::fs::write(root.join(name), text).expect("write");
        write("tochange", "a file that becomes a link\n");
        write("old name.txt", "moved\nas is\n");
        write("gone.txt", "deleted\n");
        git(root, &["add", "-A"]);
        git(root, &["commit", "-qm", "base"]);
        git(root, &["checkout", "-q", "-b", "work"]);
        std::fs::remove_file(root.join("tochange")).expect("rm");
        std::os::unix::fs::symlink("elsewhere", root.join("tochange")).expect("symlink");
        write("with space.txt", "one\ntwo\n");
        write("tab\there.txt", "tabbed\n");
        git(root, &["mv", "old name.txt", "new name.txt"]);
        std::fs::remove_file(root.join("gone.txt")).expect("rm");
        std::fs::write(root.join("blob.bin"), [0u8, 1, 2, 0, 255]).expect("write");
        git(root, &["add", "-A"]);
        git(root, &["commit", "-qm", "awkward"]);
        dir
    }

    #[test]
    fn each_block_goes_to_the_file_its_own_header_names() {
        let repo = awkward();
        let (files, lines, shown) = read_patch(repo.path(), "main...work").expect("the patch");
        let by_path = |path: &str| {
            files
                .iter()
                .find(|file| file.path == path)
                .unwrap_or_else(|| panic!("{path} not in {files:#?}"))
        };
        let link = by_path("tochange");
        assert_eq!(
            (link.added, link.removed),
            (1, 1),
            "both blocks of a type change"
        );
        assert!(link.patch.contains("+elsewhere"), "{}", link.patch);
        let spaced = by_path("with space.txt");
        assert_eq!(
            (spaced.added, spaced.patch.as_str()),
            (2, "@@ -0,0 +1,2 @@\n+one\n+two\n")
        );
        assert_eq!(by_path("tab\there.txt").added, 1);
        assert_eq!(by_path("gone.txt").removed, 1);
        assert!(by_path("blob.bin").binary);
        assert_eq!(files.iter().filter(|f| f.path == "tochange").count(), 1);
        let moved = by_path("new name.txt");
        assert_eq!(
            (moved.added, moved.removed, moved.patch.as_str()),
            (0, 0, "")
        );
        assert_eq!(lines, shown);
    }

    #[test]
    fn past_the_limit_nothing_more_is_kept_but_every_line_counts() {
        let mut split = PatchSplit::default();
        split.take("diff --git a/x b/x\n");
        split.take("+++ b/x\n");
        split.take("@@ -0,0 +1,3 @@\n");
        split.take("+short\n");
        split.take(&format!("+{}\n", "y".repeat(MAX_PATCH_BYTES)));
        split.take("+after the long line\n");
        let file = &split.files[0];
        assert_eq!(
            file.patch, "@@ -0,0 +1,3 @@\n+short\n",
            "no hole after the cut"
        );
        assert!(file.cut);
        assert_eq!((split.lines, split.shown, file.added), (4, 2, 3));
    }

    #[test]
    fn quoted_paths_read_as_git_wrote_them() {
        assert_eq!(unquote(r#""a\tb.txt""#), "a\tb.txt");
        assert_eq!(unquote(r#""q\"uote""#), "q\"uote");
        assert_eq!(unquote(r#""caf\303\251""#), "café");
        assert_eq!(unquote("plain name"), "plain name");
    }
}
