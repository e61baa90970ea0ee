//! The rules a lane's gate judges by. The agent of a lane can edit everything in
//! its worktree, `harness.toml` included, so a lane's gate never reads that file:
//! the host writes its own `[approvals]` for the lane into the lane's files and
//! hands the file's path and sha256 to the lane's agent in its environment, which
//! the gate, run as the agent's hook, inherits. A file whose hash differs is
//! refused, not read.

use std::io::Read;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::config::{ApprovalsConfig, DEFAULT_CONFIG_FILE};

/// The host's rules file for the lane, as given to the lane's agent.
pub const RULES_ENV: &str = "CLOWDER_GATE_RULES";
/// The sha256 (hex) of that file when the host wrote it.
pub const RULES_SHA256_ENV: &str = "CLOWDER_GATE_RULES_SHA256";
/// Its name in the lane's files folder (`.clowder/lanes/NAME/`).
pub const RULES_FILE: &str = "gate-rules.toml";

/// A rules file is a few rules; anything larger is not one the host wrote.
const MAX_RULES_BYTES: u64 = 1024 * 1024;

/// What the host gives a lane's gate: the lane's name and the fleet's rules.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HostRules {
    pub lane: String,
    pub approvals: ApprovalsConfig,
}

/// Writes `rules` into `files_dir`; returns the variables that name the file
/// and its hash, for the environment of the lane's agent.
pub fn write(files_dir: &Path, rules: &HostRules) -> Result<Vec<(String, String)>, String> {
    let path = files_dir.join(RULES_FILE);
    let body = toml::to_string(rules)
        .map_err(|err| format!("cannot encode the rules of lane {}: {err}", rules.lane))?;
    let text = format!(
        "# The rules of lane {}'s gate, written by its host when the lane started.\n# An edit here is refused by the gate (its sha256 no longer matches).\n{body}",
        rules.lane
    );
    crate::store::write_atomically(&path, text.as_bytes())
        .map_err(|err| format!("cannot write {}: {err}", path.display()))?;
    Ok(vec![
        (RULES_ENV.to_string(), path.display().to_string()),
        (
            RULES_SHA256_ENV.to_string(),
            super::sha256_hex(text.as_bytes()),
        ),
    ])
}

/// The rules this process's host gave it; `Ok(None)` outside a lane (neither
/// variable set). A file that is missing, too large, or whose hash is not the
/// one the host gave is an error: a gate must not guess its rules.
pub fn from_env() -> Result<Option<HostRules>, String> {
    let path = std::env::var_os(RULES_ENV).filter(|path| !path.is_empty());
    let sha256 = std::env::var_os(RULES_SHA256_ENV).filter(|sha| !sha.is_empty());
    match (path, sha256) {
        (None, None) => Ok(None),
        (Some(path), Some(sha256)) => {
            read_verified(Path::new(&path), &sha256.to_string_lossy()).map(Some)
        }
        _ => Err(format!(
            "{RULES_ENV} and {RULES_SHA256_ENV} go together, and only one of them is set"
        )),
    }
}

fn read_verified(path: &Path, expected: &str) -> Result<HostRules, String> {
    let cannot =
        |err: std::io::Error| format!("cannot read the lane's rules {}: {err}", path.display());
    let mut bytes = Vec::new();
    std::fs::File::open(path)
        .map_err(cannot)?
        .take(MAX_RULES_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(cannot)?;
    let found = super::sha256_hex(&bytes);
    if bytes.len() as u64 > MAX_RULES_BYTES || !found.eq_ignore_ascii_case(expected.trim()) {
        return Err(format!(
            "the lane's rules {} are not the ones its host wrote (sha256 {found}, the host gave {expected}): they were changed after the lane started, and are not used; `clowder lane stop` then `clowder lane resume` writes them again",
            path.display()
        ));
    }
    let text = String::from_utf8(bytes)
        .map_err(|_| format!("the lane's rules {} are not UTF-8", path.display()))?;
    crate::config::parse_located(&text, path).map_err(|err| err.to_string())
}

/// The lane named by the rules the host gave this process, if any: the lane a
/// request is recorded as coming from (never `CLOWDER_LANE`, which an agent sets
/// as it likes for its own commands).
pub fn lane() -> Result<Option<String>, String> {
    Ok(from_env()?.map(|rules| rules.lane))
}

/// Why the `harness.toml` in a lane's folder `dir` is worth a warning: its
/// `[approvals]` rules are not `fleet`'s (the lane's gate does not use them).
/// `None` when it has none of its own, or the same rules.
pub fn differs_in(dir: &Path, fleet: &ApprovalsConfig) -> Option<String> {
    let path: PathBuf = dir.join(DEFAULT_CONFIG_FILE);
    if !path.exists() {
        return None;
    }
    let note = |what: String| {
        format!(
            "{}: {what}; the lane's gate does not use it, it judges by the fleet's rules",
            path.display()
        )
    };
    match crate::config::Config::load(&path, true) {
        Err(err) => Some(note(format!("cannot be read ({err})"))),
        Ok(config) => {
            let own = &config.approvals;
            let same =
                own.allow == fleet.allow && own.deny == fleet.deny && own.timeout == fleet.timeout;
            (!same).then(|| note("its [approvals] rules differ from the fleet's".into()))
        }
    }
}
