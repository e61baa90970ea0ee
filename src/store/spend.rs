//! What the gate's reviewer spent, left by each gate for the loop it runs under
//! to count: one small file per answer in the loop's control folder, counted
//! and removed by the loop, so that an answer is counted once whether the loop
//! is running, busy or restarted.

use std::io;
use std::path::{Path, PathBuf};

use crate::protocol::ReviewerSpend;

/// The folder of the spend files, in a loop's control folder.
pub const SPEND_DIR: &str = "reviewer-spend";
/// Most files counted in one look: a backlog is taken over several.
const MAX_TAKEN: usize = 1_000;
/// A spend file is a few numbers.
const MAX_FILE_BYTES: u64 = 4 * 1024;

fn dir(control_dir: &Path) -> PathBuf {
    control_dir.join(SPEND_DIR)
}

/// Leaves `spend` for the loop whose control folder is `control_dir`.
pub fn leave(control_dir: &Path, spend: &ReviewerSpend) -> io::Result<()> {
    let dir = dir(control_dir);
    std::fs::create_dir_all(&dir)?;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    let name = format!("{}-{}.json", now.as_nanos(), std::process::id());
    let body = serde_json::to_vec(spend).map_err(io::Error::other)?;
    super::write_atomically(&dir.join(name), &body)
}

/// Takes what was left since the last take: summed, the files removed. A
/// file that is not a spend is removed uncounted.
pub fn take(control_dir: &Path) -> ReviewerSpend {
    let mut total = ReviewerSpend::default();
    let Ok(entries) = std::fs::read_dir(dir(control_dir)) else {
        return total;
    };
    let names = entries
        .filter_map(Result::ok)
        .map(|entry| entry.path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "json"))
        .take(MAX_TAKEN);
    for path in names {
        let spend = super::small_file::read(&path)
            .ok()
            .filter(|bytes| bytes.len() as u64 <= MAX_FILE_BYTES)
            .and_then(|bytes| serde_json::from_slice::<ReviewerSpend>(&bytes).ok());
        if let Some(spend) = spend {
            total.add(&spend);
        }
        let _ = std::fs::remove_file(&path);
    }
    total
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_is_left_is_counted_once() {
        let dir = tempfile::tempdir().expect("tempdir");
        let spend = ReviewerSpend {
            calls: 1,
            input_tokens: 100,
            output_tokens: 10,
            cost_usd: 0.5,
        };
        leave(dir.path(), &spend).expect("leave");
        leave(dir.path(), &spend).expect("leave");
        std::fs::write(dir.path().join(SPEND_DIR).join("junk.json"), "{not").expect("write");
        let taken = take(dir.path());
        assert_eq!(
            (taken.calls, taken.input_tokens, taken.cost_usd),
            (2, 200, 1.0)
        );
        assert_eq!(take(dir.path()), ReviewerSpend::default());
    }
}
