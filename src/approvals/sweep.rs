//! Clearing what nobody will come back for: requests whose waiter is gone,
//! decisions whose request is gone, and doorbells left by killed producers.

use std::path::Path;
use std::time::{Duration, SystemTime};

use chrono::{DateTime, Utc};

use super::safe_read::DirHandle;
use super::{
    ABANDONED_KEEP, DECISION_KEEP, Liveness, Queue, Request, SWEEP_EVERY, scan_names, valid_id,
    waiter,
};

/// What a sweep cleared.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Swept {
    /// The abandoned requests moved to `done/` (outcome `abandoned`).
    pub abandoned: Vec<String>,
    /// Decisions for requests that no longer exist, moved aside into `done/`.
    pub stale_decisions: usize,
}

impl Queue {
    /// Moves abandoned requests older than [`ABANDONED_KEEP`] (all of them with
    /// `prune`) to `done/`, moves aside decisions whose request has been gone for
    /// [`DECISION_KEEP`], and removes doorbells nobody holds. `now` is the clock
    /// the ages are taken against.
    pub fn sweep(&self, prune: bool, now: SystemTime) -> Swept {
        self.sweep_listed(&self.pending(), prune, now)
    }

    /// [`Queue::sweep`] with the pending requests already listed.
    pub fn sweep_listed(&self, pending: &[Request], prune: bool, now: SystemTime) -> Swept {
        let mut swept = Swept::default();
        let now_utc = DateTime::<Utc>::from(now);
        let Ok(waiting) = self.open_sub("waiting") else {
            return swept;
        };
        for request in pending {
            let age = (now_utc - request.created).to_std().unwrap_or_default();
            if request.abandoned && (prune || age >= ABANDONED_KEEP) {
                let waited = (age.as_secs_f64() * 1000.0).round() / 1000.0;
                self.move_to_done(request, None, "abandoned", "approval_cancelled", waited);
                remove(&waiting, &format!("{}.sock", request.id));
                swept.abandoned.push(request.id.clone());
            }
        }
        swept.stale_decisions = self.sweep_decisions(now);
        for id in waiter::socket_ids(scan_names(&self.sub("waiting"))) {
            if !self.has_request(&id) && waiter::liveness(&waiting, &id) == Liveness::Gone {
                remove(&waiting, &format!("{id}.sock"));
            }
        }
        swept
    }

    fn sweep_decisions(&self, now: SystemTime) -> usize {
        let mut count = 0;
        for name in scan_names(&self.sub("decided")) {
            let Some(id) = name.strip_suffix(".json").filter(|id| valid_id(id)) else {
                continue;
            };
            if self.has_request(id) {
                continue;
            }
            let modified = std::fs::symlink_metadata(self.sub("decided").join(&name))
                .and_then(|m| m.modified());
            let old = modified
                .is_ok_and(|at| now.duration_since(at).unwrap_or(Duration::ZERO) >= DECISION_KEEP);
            if old {
                self.reject_file(
                    "decided",
                    &name,
                    "a decision for a request that no longer exists, kept a day",
                    Some(id),
                );
                count += 1;
            }
        }
        count
    }

    fn has_request(&self, id: &str) -> bool {
        std::fs::symlink_metadata(self.sub("pending").join(format!("{id}.json"))).is_ok()
    }
}

/// [`Queue::sweep`] (without prune) of the queue in `dir`, if there is one and the
/// last sweep was [`SWEEP_EVERY`] ago. Whether it swept.
pub fn sweep_if_due(dir: &Path) -> bool {
    if !dir.join("pending").is_dir() {
        return false;
    }
    let marker = dir.join(".swept");
    let now = SystemTime::now();
    let due = std::fs::symlink_metadata(&marker)
        .and_then(|m| m.modified())
        .map_or(true, |at| {
            now.duration_since(at).unwrap_or(Duration::ZERO) >= SWEEP_EVERY
        });
    if !due {
        return false;
    }
    let Ok(queue) = Queue::open(dir) else {
        return false;
    };
    // Recorded first: two control rooms on one queue sweep once.
    let touched = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&marker)
        .and_then(|file| file.set_modified(now));
    if touched.is_ok() {
        queue.sweep(false, now);
    }
    touched.is_ok()
}

fn remove(dir: &DirHandle, name: &str) {
    let _ = nix::unistd::unlinkat(dir.fd(), name, nix::unistd::UnlinkatFlags::NoRemoveDir);
}
