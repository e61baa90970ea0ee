//! The queue itself: submitting a request and waiting for its decision, deciding,
//! listing, and the file moves that make each step atomic under `pending/`,
//! `decided/` and `done/`.

use super::*;

/// An open approval queue.
pub struct Queue {
    dir: PathBuf,
    /// `None`: the event log of the loop in the current folder (see [`Queue::log`]).
    event_log: Option<Option<PathBuf>>,
    /// Bad files already reported by this process (a file left in place is not
    /// reported again on every rescan).
    reported: Mutex<HashSet<String>>,
    /// Who this process's decisions are recorded as made by.
    decider: String,
}

impl Queue {
    /// Opens the queue in `dir`, creating it and its `pending/`, `decided/` and
    /// `done/` folders (mode 0700) as needed. A folder that another user owns or
    /// that is group- or world-writable is refused: whoever can write there can
    /// approve. Events go to the event log of the loop in the current folder
    /// (`[output] event_log`).
    pub fn open(dir: &Path) -> Result<Queue, QueueError> {
        DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(|err| QueueError::Io(format!("cannot create {}: {err}", dir.display())))?;
        check_dir(dir, true)?;
        for sub in ["pending", "decided", "done", "waiting"] {
            let path = dir.join(sub);
            match DirBuilder::new().mode(0o700).create(&path) {
                Ok(()) => {}
                Err(err) if err.kind() == io::ErrorKind::AlreadyExists => {}
                Err(err) => {
                    return Err(QueueError::Io(format!(
                        "cannot create {}: {err}",
                        path.display()
                    )));
                }
            }
            check_dir(&path, false)?;
        }
        Ok(Queue {
            dir: dir.to_path_buf(),
            event_log: None,
            reported: Mutex::new(HashSet::new()),
            decider: decider("clowder"),
        })
    }

    /// Records this process's decisions as made by `program` (with the user and
    /// the pid), which a later, refused decision is told.
    pub fn deciding_as(mut self, program: &str) -> Queue {
        self.decider = decider(program);
        self
    }

    /// Sends the queue's events to `path` instead (`None`: nowhere).
    pub fn with_event_log(mut self, path: Option<PathBuf>) -> Queue {
        self.event_log = Some(path);
        self
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub(super) fn sub(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    pub(super) fn open_sub(&self, name: &str) -> Result<DirHandle, QueueError> {
        let path = self.sub(name);
        DirHandle::open(&path)
            .map_err(|err| QueueError::Io(format!("cannot open {}: {err}", path.display())))
    }

    /// Appends an event to the log; the log is best effort and never fails a caller.
    pub fn log(&self, event: &ApprovalEvent) {
        if let Some(path) = self.event_log_path() {
            let _ = events::append(&path, event);
        }
    }

    /// The event log this queue's events go to, if any. Asked only when needed:
    /// reading the config costs more than opening the queue.
    pub fn event_log_path(&self) -> Option<PathBuf> {
        match &self.event_log {
            Some(path) => path.clone(),
            None => {
                crate::config::Config::of_folder(Path::new(""))
                    .loop_files(Path::new(""))
                    .event_log
            }
        }
    }

    /// The valid pending requests, oldest first. Bad files are logged and moved
    /// aside into `done/`.
    pub fn pending(&self) -> Vec<Request> {
        self.scan_pending().0
    }

    /// [`Queue::pending`], plus each file refused in this scan (name, reason).
    pub fn scan_pending(&self) -> (Vec<Request>, Vec<(String, String)>) {
        let Ok(pending) = self.open_sub("pending") else {
            return (Vec::new(), Vec::new());
        };
        let mut requests = Vec::new();
        let mut refused = Vec::new();
        for name in scan_names(&self.sub("pending")) {
            match parse_pending(&pending, &name) {
                Ok(Some((request, _))) => requests.push(request),
                Ok(None) => {}
                Err(reason) => {
                    // A newer clowder's request stays for that clowder to decide.
                    if !crate::store::versioned::is_newer(&reason) {
                        self.reject_file("pending", &name, &reason, None);
                    }
                    refused.push((name, reason));
                }
            }
        }
        mark_abandoned(&self.dir, &mut requests);
        sort_requests(&mut requests);
        (requests, refused)
    }

    /// One pending request and the exact bytes of its file.
    pub fn get(&self, id: &str) -> Result<(Request, Vec<u8>), DecideError> {
        if !valid_id(id) {
            return Err(DecideError::BadId(id.to_string()));
        }
        let pending = self
            .open_sub("pending")
            .map_err(|e| DecideError::Io(e.to_string()))?;
        match parse_pending(&pending, &format!("{id}.json")) {
            Ok(Some(found)) => Ok(found),
            Ok(None) => Err(DecideError::UnknownId(id.to_string())),
            Err(reason) => Err(DecideError::BadRequest {
                id: id.to_string(),
                reason,
            }),
        }
    }

    /// Records a human's decision on pending request `id` (`decided/<id>.json`,
    /// created once, bound to the request by its hash) and rings its waiter. An
    /// abandoned request is refused: nobody would receive the decision. So is a
    /// decision that came second ([`DecideError::AlreadyDecided`]).
    pub fn decide(&self, id: &str, decision: Decision) -> Result<(), DecideError> {
        let (kind, reason) = match decision {
            Decision::Approve => (DecisionKind::Approve, None),
            Decision::Reject(reason) => (DecisionKind::Reject, Some(reason)),
        };
        self.decide_with(id, kind, reason)
    }

    /// [`Queue::decide`] for an approval that carries a reason.
    pub fn approve_with_reason(&self, id: &str, reason: Option<String>) -> Result<(), DecideError> {
        self.decide_with(id, DecisionKind::Approve, reason)
    }

    pub(super) fn decide_with(
        &self,
        id: &str,
        kind: DecisionKind,
        reason: Option<String>,
    ) -> Result<(), DecideError> {
        let (_, bytes) = match self.get(id) {
            Err(DecideError::UnknownId(_)) => return Err(self.gone_error(id)),
            other => other?,
        };
        let waiting = self
            .open_sub("waiting")
            .map_err(|e| DecideError::Io(e.to_string()))?;
        if waiter::liveness(&waiting, id) == Liveness::Gone {
            // A waiter that ended with a decision is not an abandoned one.
            return Err(match self.done_record(id) {
                Some(_) => self.gone_error(id),
                None => DecideError::Abandoned(id.to_string()),
            });
        }
        let record = DecisionRecord {
            id: id.to_string(),
            decision: kind,
            reason,
            decided_at: Utc::now(),
            request_hash: sha256_hex(&bytes),
            decided_by: Some(self.decider.clone()),
        };
        self.write_decision(&record)?;
        waiter::ring(&waiting, id);
        self.confirm_taken(&record)
    }

    /// Writes `decided/<id>.json` once: created under a temporary name, then
    /// renamed without replacing, so of two deciders at the same moment the first
    /// wins and the second is told who did. A decision file that is not valid
    /// for this request (garbage left behind) is moved aside first.
    pub(super) fn write_decision(&self, record: &DecisionRecord) -> Result<(), DecideError> {
        let io = |e: QueueError| DecideError::Io(e.to_string());
        let mut json = formats::DECISION
            .to_vec_pretty(record)
            .map_err(|e| DecideError::Io(e.to_string()))?;
        json.push(b'\n');
        let root = DirHandle::open(&self.dir)
            .map_err(|err| DecideError::Io(format!("cannot open {}: {err}", self.dir.display())))?;
        let decided = self.open_sub("decided").map_err(io)?;
        let name = format!("{}.json", record.id);
        for _attempt in 0..3 {
            let temp = format!(".tmp-decision-{}-{}", record.id, new_id());
            write_temp_at(&root, &temp, &json)
                .map_err(|err| DecideError::Io(format!("cannot write {temp}: {err}")))?;
            let renamed = rename_no_replace(&root, &temp, &decided, &name);
            let _ = nix::unistd::unlinkat(
                root.fd(),
                temp.as_str(),
                nix::unistd::UnlinkatFlags::NoRemoveDir,
            );
            match renamed {
                Ok(()) => {
                    let _ = nix::unistd::fsync(decided.fd());
                    return Ok(());
                }
                Err(nix::errno::Errno::EEXIST) => {}
                Err(err) => {
                    return Err(DecideError::Io(format!(
                        "cannot write {}: {err}",
                        self.sub("decided").join(&name).display()
                    )));
                }
            }
            match decided.read(&name).map(|b| b.map(|b| parse_decision(&b))) {
                Ok(Some(Ok(earlier))) if earlier.request_hash == record.request_hash => {
                    return Err(DecideError::AlreadyDecided {
                        id: record.id.clone(),
                        earlier: earlier.describe(),
                    });
                }
                // Taken by its waiter between the rename and the read.
                Ok(None) => return Err(self.gone_error(&record.id)),
                Ok(Some(Ok(_))) => self.reject_file(
                    "decided",
                    &name,
                    "request_hash does not match the request file",
                    Some(&record.id),
                ),
                Ok(Some(Err(reason))) | Err(reason) => {
                    self.reject_file("decided", &name, &reason, Some(&record.id))
                }
            }
        }
        Err(DecideError::Io(format!(
            "cannot write {}: a file keeps coming back there",
            self.sub("decided").join(&name).display()
        )))
    }

    /// After a decision was written: if its request already left `pending/`,
    /// the waiter ended before it could see this decision, unless the finished
    /// record holds it. Such a decision is taken back and the caller told why.
    pub(super) fn confirm_taken(&self, record: &DecisionRecord) -> Result<(), DecideError> {
        let pending = self
            .open_sub("pending")
            .map_err(|e| DecideError::Io(e.to_string()))?;
        let name = format!("{}.json", record.id);
        let still = matches!(pending.read(&name), Ok(Some(bytes)) if sha256_hex(&bytes) == record.request_hash);
        if still
            || self
                .done_record(&record.id)
                .and_then(|d| d.decision)
                .as_ref()
                == Some(record)
        {
            return Ok(());
        }
        if let Ok(decided) = self.open_sub("decided")
            && matches!(decided.read(&name), Ok(Some(bytes)) if parse_decision(&bytes).as_ref() == Ok(record))
        {
            let _ = nix::unistd::unlinkat(
                decided.fd(),
                name.as_str(),
                nix::unistd::UnlinkatFlags::NoRemoveDir,
            );
        }
        Err(self.gone_error(&record.id))
    }

    /// The error for a request no longer pending: how it ended, if its finished
    /// record says so.
    pub(super) fn gone_error(&self, id: &str) -> DecideError {
        match self.done_record(id) {
            Some(DoneRecord {
                decision: Some(decision),
                ..
            }) => DecideError::AlreadyDecided {
                id: id.to_string(),
                earlier: decision.describe(),
            },
            Some(done) => DecideError::AlreadyDecided {
                id: id.to_string(),
                earlier: format!("finished ({})", done.outcome.replace('_', " ")),
            },
            None => DecideError::UnknownId(id.to_string()),
        }
    }

    pub(super) fn done_record(&self, id: &str) -> Option<DoneRecord> {
        if !valid_id(id) {
            return None;
        }
        let bytes = self
            .open_sub("done")
            .ok()?
            .read(&format!("{id}.json"))
            .ok()??;
        formats::DONE.parse(std::str::from_utf8(&bytes).ok()?).ok()
    }

    /// Writes a new request into `pending/` (under a temporary name in the queue
    /// folder first, then renamed, so a reader never sees half a file), its doorbell
    /// bound before it shows. The id is chosen here; `request.id` and
    /// `request.created` are overwritten. A request too large for the queue has its
    /// longest texts shortened.
    pub fn submit(&self, mut request: Request) -> Result<Submitted, QueueError> {
        let root = DirHandle::open(&self.dir)
            .map_err(|err| QueueError::Io(format!("cannot open {}: {err}", self.dir.display())))?;
        let pending = self.open_sub("pending")?;
        for _attempt in 0..100 {
            request.id = new_id();
            request.created = Utc::now();
            let taken = ["pending", "decided", "done"]
                .iter()
                .any(|sub| self.sub(sub).join(format!("{}.json", request.id)).exists())
                || self
                    .sub("waiting")
                    .join(format!("{}.sock", request.id))
                    .exists();
            if taken {
                continue;
            }
            let bytes = encode_within_limit(&mut request)?;
            let temp_name = format!(".tmp-{}-{}", request.id, std::process::id());
            let file_id = write_temp_at(&root, &temp_name, &bytes).map_err(|err| {
                QueueError::Io(format!(
                    "cannot write {}: {err}",
                    self.dir.join(&temp_name).display()
                ))
            })?;
            // Without a doorbell the wait still works, by looking more often.
            let doorbell = self
                .open_sub("waiting")
                .ok()
                .and_then(|waiting| Doorbell::bind(waiting, &request.id).ok());
            let final_name = format!("{}.json", request.id);
            match rename_no_replace(&root, &temp_name, &pending, &final_name) {
                Ok(()) => {
                    let _ = std::fs::File::open(self.sub("pending")).and_then(|d| d.sync_all());
                    return Ok(Submitted {
                        hash: sha256_hex(&bytes),
                        request,
                        file_id,
                        doorbell,
                    });
                }
                Err(nix::errno::Errno::EEXIST) => {
                    let _ = std::fs::remove_file(self.dir.join(&temp_name));
                }
                Err(err) => {
                    let _ = std::fs::remove_file(self.dir.join(&temp_name));
                    return Err(QueueError::Io(format!(
                        "cannot move the request into {}: {err}",
                        self.sub("pending").display()
                    )));
                }
            }
        }
        Err(QueueError::Io("cannot find a free request id".into()))
    }

    /// Waits for a decision on `submitted`, up to `timeout` (`None`: forever).
    /// `cancelled` is asked at every wake (a signal to this process wakes it); a
    /// `Some(signal)` ends the wait. Whatever the outcome, the request leaves
    /// `pending/` for `done/<id>.json`. Only this request's own files are looked at:
    /// when its doorbell rings, and every [`RESCAN`].
    pub fn wait(
        &self,
        submitted: &Submitted,
        timeout: Option<Duration>,
        cancelled: &dyn Fn() -> Option<i32>,
    ) -> Result<Outcome, QueueError> {
        let started = Instant::now();
        let decided = self.open_sub("decided")?;
        let pending = self.open_sub("pending")?;
        loop {
            if let Some(signal) = cancelled() {
                return Ok(self.finish(submitted, None, Outcome::Cancelled { signal }, started));
            }
            if let Some(record) = self.check_decision(&decided, submitted) {
                let outcome = outcome_of(&record);
                return Ok(self.finish(submitted, Some(record), outcome, started));
            }
            if !still_pending(&pending, submitted) {
                // A decision written just before the request vanished still counts.
                if let Some(record) = self.check_decision(&decided, submitted) {
                    let outcome = outcome_of(&record);
                    return Ok(self.finish(submitted, Some(record), outcome, started));
                }
                return Ok(self.finish(submitted, None, Outcome::Removed, started));
            }
            let mut nap = match &submitted.doorbell {
                Some(_) => RESCAN,
                None => RESCAN_WITHOUT_BELL,
            };
            if let Some(timeout) = timeout {
                let elapsed = started.elapsed();
                if elapsed >= timeout {
                    return Ok(self.finish(submitted, None, Outcome::TimedOut, started));
                }
                nap = nap.min(timeout - elapsed);
            }
            match &submitted.doorbell {
                Some(bell) => bell.nap(nap),
                None => std::thread::sleep(nap),
            }
        }
    }

    /// The decision on `submitted` if there is a valid one; an invalid decision file
    /// is logged and moved aside.
    pub(super) fn check_decision(
        &self,
        decided: &DirHandle,
        submitted: &Submitted,
    ) -> Option<DecisionRecord> {
        let id = &submitted.request.id;
        let name = format!("{id}.json");
        let problem = match decided.read(&name) {
            Ok(None) => return None,
            Err(reason) => reason,
            Ok(Some(bytes)) => match parse_decision(&bytes) {
                Err(reason) => reason,
                Ok(record) if record.id != *id => {
                    format!("decision id `{}` does not match the file name", record.id)
                }
                Ok(record) if record.request_hash != submitted.hash => {
                    "request_hash does not match the request file".to_string()
                }
                Ok(record) if record.decided_at < submitted.request.created => {
                    "decided before the request was made".to_string()
                }
                Ok(record) => return Some(record),
            },
        };
        self.reject_file("decided", &name, &problem, Some(id));
        None
    }

    /// Moves the request (and its decision) into `done/<id>.json` and logs the end.
    pub(super) fn finish(
        &self,
        submitted: &Submitted,
        decision: Option<DecisionRecord>,
        outcome: Outcome,
        started: Instant,
    ) -> Outcome {
        let waited_secs = (started.elapsed().as_secs_f64() * 1000.0).round() / 1000.0;
        let label = match &outcome {
            Outcome::Approved { .. } => "approved",
            Outcome::Rejected { .. } => "rejected",
            Outcome::TimedOut => "timed_out",
            Outcome::Cancelled { .. } => "cancelled",
            Outcome::Removed => "removed",
        };
        let event = match &outcome {
            Outcome::Approved { .. } | Outcome::Rejected { .. } => "approval_decided",
            Outcome::TimedOut => "approval_timeout",
            Outcome::Cancelled { .. } | Outcome::Removed => "approval_cancelled",
        };
        self.move_to_done(&submitted.request, decision, label, event, waited_secs);
        outcome
    }

    /// Records a call decided without a person (by the reviewer) in `done/`,
    /// beside the person's decisions, and logs `approval_decided`.
    pub(super) fn record_done(
        &self,
        request: &Request,
        decision: Option<DecisionRecord>,
        review: Option<super::reviewer::Review>,
        label: &str,
        waited_secs: f64,
    ) {
        self.write_done(
            request,
            decision,
            review,
            label,
            "approval_decided",
            waited_secs,
        );
    }

    /// Writes `done/<id>.json` (request, decision, outcome), then removes the
    /// request and its decision, and logs `event`.
    pub(super) fn move_to_done(
        &self,
        request: &Request,
        decision: Option<DecisionRecord>,
        label: &str,
        event: &'static str,
        waited_secs: f64,
    ) {
        self.write_done(request, decision, None, label, event, waited_secs);
    }

    fn write_done(
        &self,
        request: &Request,
        decision: Option<DecisionRecord>,
        review: Option<super::reviewer::Review>,
        label: &str,
        event: &'static str,
        waited_secs: f64,
    ) {
        let id = request.id.clone();
        let record = DoneRecord {
            request: request.clone(),
            decision: decision.clone(),
            outcome: label.to_string(),
            waited_secs,
            review: review.clone(),
        };
        if let Ok(mut json) = formats::DONE.to_vec_pretty(&record) {
            json.push(b'\n');
            let done = self.sub("done").join(format!("{id}.json"));
            if crate::store::write_atomically(&done, &json).is_ok() {
                let _ = std::fs::remove_file(self.sub("pending").join(format!("{id}.json")));
                if decision.is_some() {
                    let _ = std::fs::remove_file(self.sub("decided").join(format!("{id}.json")));
                }
            }
        }
        let mut event = ApprovalEvent::new(event);
        event.id = Some(id);
        event.waited_secs = Some(waited_secs);
        event.outcome = Some(label.to_string());
        event.tool = request.tool_name.clone();
        event.lane = request.lane.clone();
        if let Some(record) = &decision {
            event.reason = record.reason.clone();
            event.decider = record.decided_by.clone();
        }
        if let Some(review) = &review {
            event.kind = Some("reviewer".into());
            event.verdict = Some(review.verdict.word().to_string());
            event.took_ms = Some(review.took_ms);
        }
        self.log(&event);
    }

    /// Logs a refused file and moves it into `done/` (`rejected-…`); if it cannot be
    /// moved it is left alone, and reported once per process.
    pub(super) fn reject_file(&self, sub: &str, name: &str, reason: &str, id: Option<&str>) {
        let key = format!("{sub}/{name}");
        let safe: String = name
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.') {
                    c
                } else {
                    '_'
                }
            })
            .take(64)
            .collect();
        let stamp = Utc::now().format("%Y%m%dT%H%M%S%.f");
        let target = format!("rejected-{sub}-{}-{stamp}", safe.trim_start_matches('.'));
        let moved = match (self.open_sub(sub), self.open_sub("done")) {
            (Ok(from), Ok(to)) => rename_no_replace(&from, name, &to, &target).is_ok(),
            _ => false,
        };
        if !moved {
            let mut reported = self.reported.lock().unwrap_or_else(|e| e.into_inner());
            if !reported.insert(key.clone()) {
                return;
            }
        }
        let mut event = ApprovalEvent::new("approval_rejected_file");
        event.id = id.map(str::to_string);
        event.file = Some(key);
        event.reason = Some(reason.to_string());
        event.outcome = Some(if moved {
            format!("moved to done/{target}")
        } else {
            "left in place".to_string()
        });
        self.log(&event);
    }
}

/// Whether `submitted`'s own request file is still in `pending/`: the same file
/// (device and inode), else the same bytes.
pub(super) fn still_pending(pending: &DirHandle, submitted: &Submitted) -> bool {
    let name = format!("{}.json", submitted.request.id);
    match nix::sys::stat::fstatat(
        pending.fd(),
        name.as_str(),
        nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW,
    ) {
        Ok(stat) if (stat.st_dev, stat.st_ino) == submitted.file_id => true,
        Ok(_) => {
            matches!(pending.read(&name), Ok(Some(bytes)) if sha256_hex(&bytes) == submitted.hash)
        }
        Err(_) => false,
    }
}

/// Refuses a queue folder that others could write to.
pub(super) fn check_dir(path: &Path, follow: bool) -> Result<(), QueueError> {
    let meta = if follow {
        std::fs::metadata(path)
    } else {
        std::fs::symlink_metadata(path)
    }
    .map_err(|err| QueueError::Io(format!("cannot inspect {}: {err}", path.display())))?;
    if meta.file_type().is_symlink() {
        return Err(QueueError::Unsafe(format!(
            "{} is a symbolic link: the approval queue folders must be real folders",
            path.display()
        )));
    }
    if !meta.is_dir() {
        return Err(QueueError::Unsafe(format!(
            "{} is not a folder",
            path.display()
        )));
    }
    let mode = meta.mode() & 0o7777;
    if mode & 0o022 != 0 {
        return Err(QueueError::Unsafe(format!(
            "{} is group- or world-writable (mode {mode:04o}): anyone who can write there can approve; run `chmod 700 {}`",
            path.display(),
            path.display()
        )));
    }
    let uid = nix::unistd::geteuid().as_raw();
    if meta.uid() != uid {
        return Err(QueueError::Unsafe(format!(
            "{} belongs to user {}, not to this user ({uid})",
            path.display(),
            meta.uid()
        )));
    }
    Ok(())
}

/// A fresh id: 10 characters from `[a-z0-9]`.
pub(super) fn new_id() -> String {
    const ALPHABET: &[u8] = b"abcdefghijkmnpqrstuvwxyz23456789";
    let mut seed = [0u8; 10];
    let random = std::fs::File::open("/dev/urandom")
        .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut seed));
    if random.is_err() {
        let fallback = Sha256::digest(format!(
            "{:?}{}{:?}",
            std::time::SystemTime::now(),
            std::process::id(),
            Instant::now()
        ));
        seed.copy_from_slice(&fallback[..10]);
    }
    seed.iter()
        .map(|b| ALPHABET[(*b as usize) % ALPHABET.len()] as char)
        .collect()
}

/// Writes `bytes` to a new file `name` in `dir` (never through a symbolic link),
/// synced; returns its device and inode. A file that cannot be written whole is
/// removed.
pub(super) fn write_temp_at(dir: &DirHandle, name: &str, bytes: &[u8]) -> io::Result<(u64, u64)> {
    use nix::fcntl::{OFlag, openat};
    let fd = openat(
        dir.fd(),
        name,
        OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
        nix::sys::stat::Mode::from_bits_truncate(0o600),
    )?;
    let mut file = std::fs::File::from(fd);
    let written = file
        .write_all(bytes)
        .and_then(|()| file.sync_all())
        .and_then(|()| file.metadata());
    match written {
        Ok(meta) => Ok((meta.dev(), meta.ino())),
        Err(err) => {
            let _ = nix::unistd::unlinkat(dir.fd(), name, nix::unistd::UnlinkatFlags::NoRemoveDir);
            Err(err)
        }
    }
}

/// `program (user NAME, pid N)`: who a decision is recorded as made by.
pub(super) fn decider(program: &str) -> String {
    let uid = nix::unistd::geteuid();
    let user = nix::unistd::User::from_uid(uid)
        .ok()
        .flatten()
        .map_or_else(|| uid.to_string(), |user| user.name);
    format!("{program} (user {user}, pid {})", std::process::id())
}

/// Renames without replacing an existing file (`RENAME_NOREPLACE`; where the file
/// system lacks it, a check then a rename).
pub(super) fn rename_no_replace(
    from: &DirHandle,
    from_name: &str,
    to: &DirHandle,
    to_name: &str,
) -> nix::Result<()> {
    use nix::fcntl::{AtFlags, RenameFlags, renameat, renameat2};
    match renameat2(
        from.fd(),
        from_name,
        to.fd(),
        to_name,
        RenameFlags::RENAME_NOREPLACE,
    ) {
        Err(nix::errno::Errno::EINVAL) | Err(nix::errno::Errno::ENOSYS) => {
            if nix::sys::stat::fstatat(to.fd(), to_name, AtFlags::AT_SYMLINK_NOFOLLOW).is_ok() {
                return Err(nix::errno::Errno::EEXIST);
            }
            renameat(from.fd(), from_name, to.fd(), to_name)
        }
        other => other,
    }
}

/// The request as file bytes. What a decision lets through (the tool call, its
/// folder, the session) is stored whole or not at all: a request still too large
/// once its title (and a question's body) are shortened is refused.
pub(super) fn encode_within_limit(request: &mut Request) -> Result<Vec<u8>, QueueError> {
    request.title = crate::fmt::head_and_tail(&request.title, MAX_TITLE_CHARS);
    loop {
        let mut bytes = formats::REQUEST
            .to_vec_pretty(&*request)
            .map_err(|err| QueueError::Io(format!("cannot encode the request: {err}")))?;
        bytes.push(b'\n');
        if bytes.len() as u64 <= MAX_REQUEST_BYTES {
            return Ok(bytes);
        }
        let body_chars = request.body.as_deref().map_or(0, |b| b.chars().count());
        if request.kind != RequestKind::Ask || body_chars < 1024 {
            return Err(QueueError::TooLarge {
                bytes: bytes.len() as u64,
                limit: MAX_REQUEST_BYTES,
            });
        }
        request.body = request
            .body
            .as_deref()
            .map(|b| crate::fmt::head_and_tail(b, body_chars / 2));
    }
}
