//! One inotify instance for every loop of the process: a loop names the files it
//! looks at (STOP, its requests, its output) and is woken when one of them changes,
//! instead of looking at each of them every second. A user has few inotify
//! instances (128 by default) but many watches, so the whole process shares one
//! instance and one watch per folder. Where a folder cannot be watched the loop is
//! told so and keeps polling.

use std::collections::HashMap;
use std::ffi::OsString;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError};

use notify::Watcher;

type WakeFn = Arc<dyn Fn() + Send + Sync>;

struct Subscriber {
    id: u64,
    /// The names, in this folder, of the files it looks at.
    names: Vec<OsString>,
    wake: WakeFn,
    /// Set when the folder's watch is gone (the folder was removed or moved).
    lost: Arc<AtomicBool>,
}

/// The watched folders and who looks at what in each.
type Folders = HashMap<PathBuf, Vec<Subscriber>>;

struct Hub {
    /// Held while folders are added to or removed from the watch, which
    /// serialises those; never taken on notify's thread, which `watch` waits for.
    watcher: Mutex<notify::RecommendedWatcher>,
    folders: Arc<Mutex<Folders>>,
    next_id: AtomicU64,
}

/// `None` when no inotify instance could be had: every loop polls.
static HUB: OnceLock<Option<Hub>> = OnceLock::new();

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

fn hub() -> Option<&'static Hub> {
    HUB.get_or_init(|| {
        let folders: Arc<Mutex<Folders>> = Arc::default();
        let seen = Arc::clone(&folders);
        let watcher = notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
            dispatch(&mut lock(&seen), &event);
        })
        .ok()?;
        Some(Hub {
            watcher: Mutex::new(watcher),
            folders,
            next_id: AtomicU64::new(0),
        })
    })
    .as_ref()
}

/// Wakes whoever looks at a file the event names. Runs on notify's thread, so
/// it only sends wake-ups. An event that may stand for lost ones (an error, a
/// queue overflow) wakes everyone: a wake-up costs one look.
fn dispatch(folders: &mut Folders, event: &notify::Result<notify::Event>) {
    let event = match event {
        Ok(event) if !event.need_rescan() => event,
        _ => {
            folders.values().flatten().for_each(|s| (s.wake)());
            return;
        }
    };
    if matches!(event.kind, notify::EventKind::Access(_)) {
        return;
    }
    for path in &event.paths {
        // The folder itself was removed or moved: its watch is gone, and a
        // folder made again in its place is watched anew.
        let gone = matches!(
            event.kind,
            notify::EventKind::Remove(_)
                | notify::EventKind::Modify(notify::event::ModifyKind::Name(_))
        );
        if gone && let Some(subscribers) = folders.remove(path.as_path()) {
            for subscriber in subscribers {
                subscriber.lost.store(true, Ordering::Release);
                (subscriber.wake)();
            }
            continue;
        }
        let (Some(folder), Some(name)) = (path.parent(), path.file_name()) else {
            continue;
        };
        for subscriber in folders.get(folder).into_iter().flatten() {
            if subscriber.names.iter().any(|n| n == name) {
                (subscriber.wake)();
            }
        }
    }
}

/// A loop's look-out on some files; dropping it stops the watch.
pub struct Watch {
    id: u64,
    folders: Vec<PathBuf>,
    lost: Arc<AtomicBool>,
}

impl std::fmt::Debug for Watch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Watch")
            .field("folders", &self.folders)
            .finish_non_exhaustive()
    }
}

impl Watch {
    /// Calls `wake` (on the watcher's thread: it must not block) whenever one of
    /// `files` is created, written, touched, renamed or removed. `None` when one
    /// of their folders cannot be watched: the caller then polls.
    pub fn start(files: &[PathBuf], wake: impl Fn() + Send + Sync + 'static) -> Option<Watch> {
        let hub = hub()?;
        let mut wanted: Vec<(PathBuf, Vec<OsString>)> = Vec::new();
        for file in files {
            let folder = file.parent().filter(|f| !f.as_os_str().is_empty())?;
            let name = file.file_name()?.to_os_string();
            match wanted.iter_mut().find(|(f, _)| f == folder) {
                Some((_, names)) => names.push(name),
                None => wanted.push((folder.to_path_buf(), vec![name])),
            }
        }
        let watch = Watch {
            id: hub.next_id.fetch_add(1, Ordering::Relaxed),
            folders: wanted.iter().map(|(f, _)| f.clone()).collect(),
            lost: Arc::new(AtomicBool::new(false)),
        };
        let wake: WakeFn = Arc::new(wake);
        let mut watcher = lock(&hub.watcher);
        for (folder, names) in wanted {
            let first = {
                let mut folders = lock(&hub.folders);
                let subscribers = folders.entry(folder.clone()).or_default();
                subscribers.push(Subscriber {
                    id: watch.id,
                    names,
                    wake: Arc::clone(&wake),
                    lost: Arc::clone(&watch.lost),
                });
                subscribers.len() == 1
            };
            if first
                && watcher
                    .watch(&folder, notify::RecursiveMode::NonRecursive)
                    .is_err()
            {
                drop(watcher);
                // Unsubscribes from the folders taken so far, this one included.
                drop(watch);
                return None;
            }
        }
        Some(watch)
    }

    /// Whether every folder is still watched; when not, the owner polls.
    pub fn working(&self) -> bool {
        !self.lost.load(Ordering::Acquire)
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        let Some(hub) = hub() else {
            return;
        };
        let mut watcher = lock(&hub.watcher);
        for folder in &self.folders {
            let last = {
                let mut folders = lock(&hub.folders);
                let Some(subscribers) = folders.get_mut(folder) else {
                    continue;
                };
                subscribers.retain(|s| s.id != self.id);
                let last = subscribers.is_empty();
                if last {
                    folders.remove(folder);
                }
                last
            };
            if last {
                // Gone already if the folder was removed; nothing to undo then.
                let _ = watcher.unwatch(folder);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;
    use std::time::Duration;

    /// False, and says so, when the user has no inotify instance left.
    fn can_watch() -> bool {
        let can = hub().is_some();
        if !can {
            eprintln!("no inotify instance left for this user: nothing to test");
        }
        can
    }

    fn woken(rx: &mpsc::Receiver<()>) -> bool {
        rx.recv_timeout(Duration::from_secs(10)).is_ok()
    }

    #[test]
    fn wakes_on_the_named_files_only_and_shares_a_folder() {
        if !can_watch() {
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let stop = dir.path().join("STOP");
        let out = dir.path().join("out.jsonl");
        let (stop_tx, stop_rx) = mpsc::channel();
        let (out_tx, out_rx) = mpsc::channel();
        let stop_tx = Mutex::new(stop_tx);
        let out_tx = Mutex::new(out_tx);
        let control = Watch::start(std::slice::from_ref(&stop), move || {
            let _ = lock(&stop_tx).send(());
        })
        .expect("a temp folder can be watched");
        let output = Watch::start(std::slice::from_ref(&out), move || {
            let _ = lock(&out_tx).send(());
        })
        .expect("a temp folder can be watched");
        std::fs::write(dir.path().join("harness.status"), b"{}").unwrap();
        std::fs::write(&stop, b"").unwrap();
        assert!(woken(&stop_rx));
        std::fs::write(&out, b"line\n").unwrap();
        assert!(woken(&out_rx));
        // Only the status file and the output were written besides STOP.
        while stop_rx.recv_timeout(Duration::from_millis(200)).is_ok() {}
        assert!(control.working());
        // One watch left on the folder: the other subscriber still hears.
        drop(output);
        std::fs::remove_file(&stop).unwrap();
        assert!(woken(&stop_rx));
        drop(control);
        assert!(!lock(&hub().unwrap().folders).contains_key(dir.path()));
    }

    #[test]
    fn a_folder_that_cannot_be_watched_is_none() {
        if !can_watch() {
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("no-such-folder").join("STOP");
        assert!(Watch::start(&[dir.path().join("STOP"), missing], || {}).is_none());
        assert!(!lock(&hub().unwrap().folders).contains_key(dir.path()));
    }

    #[test]
    fn a_removed_folder_is_no_longer_working() {
        if !can_watch() {
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let folder = dir.path().join("lane");
        std::fs::create_dir(&folder).unwrap();
        let (tx, rx) = mpsc::channel();
        let tx = Mutex::new(tx);
        let watch = Watch::start(&[folder.join("STOP")], move || {
            let _ = lock(&tx).send(());
        })
        .expect("a temp folder can be watched");
        std::fs::remove_dir(&folder).unwrap();
        assert!(woken(&rx));
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while watch.working() && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(!watch.working());
    }
}
