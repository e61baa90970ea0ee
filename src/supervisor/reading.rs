//! Each session's output read on a thread of its own while the agent writes it,
//! so that little is left to read when the agent exits and none of the reading
//! runs on the loop's thread (which the control room draws the screen on).
//!
//! The thread sleeps until woken (by the output file's watch, or by the loop's
//! poll where the watch does not work), then reads everything written so far,
//! rests for [`READ_GAP`] and sleeps again. What the guards need goes back to
//! the loop as [`Progress`], only when it changed, and that the file grew at
//! most once per [`GREW_GAP`]; at the session's end [`ReaderThread::finish`]
//! reads the rest and returns the [`Analysis`].

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::analysis::{Analysis, Progress, SessionReader};
use crate::agent::{Rendered, SessionStats};
use crate::protocol::AgentRetrying;

/// The reader threads' name, as `/proc/PID/task/TID/comm` shows it.
pub const THREAD_NAME: &str = "clowder-reader";

/// How much is read between two looks at what the guards need: a flood is
/// judged as it is read, not once all of it is.
const STEP_BYTES: usize = 256 * 1024;

/// After a read that found something (less than [`FLOOD_BYTES`]), the thread
/// rests this long before the next: an agent writing all the time costs four
/// reads a second, not one per write (and one thread switch per write): at
/// 1 MB/s it woke 4.5 times a second instead of about 50. The guards still see
/// every event, at most this much later.
pub const READ_GAP: Duration = Duration::from_millis(250);

/// A read of this much or more is a flood, not a trickle: no rest after it.
const FLOOD_BYTES: usize = 4 * 1024 * 1024;

/// The loop hears that the output grew at most this often: it only needs the
/// size for the watchdog and the status, and a fast writer would otherwise wake
/// it at every write.
pub const GREW_GAP: Duration = Duration::from_millis(250);

/// What the thread tells the loop.
#[derive(Debug)]
pub enum Report {
    /// The output grew since the last report.
    Grew,
    /// What the guards need changed.
    Progress(Progress),
    /// The agent started or stopped retrying a failed request on its own.
    Retrying(Option<AgentRetrying>),
    /// The agent cannot work (it cannot authenticate or pay), said once.
    AgentError(String),
    /// The session's result was read (said once): it has finished its work.
    ResultRead,
    /// Display lines read since the last report, and the statistics so far
    /// (only from a reader told to [`SessionReader::show`]; the first comes
    /// at once, even without lines, to say the session's output is shown).
    Shown {
        lines: Vec<Rendered>,
        stats: Box<SessionStats>,
    },
}

/// Where the reports go; called on the reader thread.
pub type Sink = Box<dyn FnMut(Report) + Send>;

/// What the loop and the thread tell each other.
#[derive(Default)]
struct Signals {
    /// Something was written: read it.
    wake: AtomicBool,
    /// The session ended: read the rest and return the analysis.
    finish: AtomicBool,
    /// Nobody waits for the analysis any more: end now.
    stop: AtomicBool,
    /// The thread sleeps until woken. At other times (reading, or resting
    /// between two reads) a write needs no wake-up: the next read finds it.
    listening: AtomicBool,
    /// Held only to sleep and to wake the sleeper without losing a wake-up.
    lock: Mutex<()>,
    bell: Condvar,
}

impl Signals {
    /// The session ended (`finish` or `stop`): the thread wakes whatever it does.
    fn raise(&self, flag: &AtomicBool) {
        // Already raised: the thread has yet to see it, one wake-up is enough.
        if !flag.swap(true, Ordering::SeqCst) {
            self.ring();
        }
    }

    /// Something was written: the thread wakes only if it sleeps waiting for
    /// that; reading or resting, it finds the write at its next read.
    fn written(&self) {
        // Sequentially consistent with the sleeper's store and load: either it
        // sees the flag, or this sees it listening.
        if !self.wake.swap(true, Ordering::SeqCst) && self.listening.load(Ordering::SeqCst) {
            self.ring();
        }
    }

    fn ring(&self) {
        let _held = self.lock.lock().unwrap_or_else(PoisonError::into_inner);
        self.bell.notify_one();
    }

    fn ended(&self) -> bool {
        self.finish.load(Ordering::SeqCst) || self.stop.load(Ordering::SeqCst)
    }

    /// Sleeps until a flag is raised or `until` passes; false if it passed.
    fn wait(&self, until: Option<Instant>) -> bool {
        self.listening.store(true, Ordering::SeqCst);
        let woken = self.sleep(until, || self.wake.load(Ordering::SeqCst) || self.ended());
        self.listening.store(false, Ordering::SeqCst);
        woken
    }

    /// Sleeps until `until` passes, or less if the session ends; writes meanwhile
    /// do not wake it.
    fn rest(&self, until: Instant) {
        self.sleep(Some(until), || self.ended());
    }

    /// Sleeps until `done` or until `until` passes; false if it passed.
    fn sleep(&self, until: Option<Instant>, done: impl Fn() -> bool) -> bool {
        let mut held = self.lock.lock().unwrap_or_else(PoisonError::into_inner);
        while !done() {
            held = match until {
                None => self.bell.wait(held).unwrap_or_else(PoisonError::into_inner),
                Some(until) => {
                    let left = until.saturating_duration_since(Instant::now());
                    if left.is_zero() {
                        return false;
                    }
                    let waited = self.bell.wait_timeout(held, left);
                    waited.unwrap_or_else(PoisonError::into_inner).0
                }
            };
        }
        true
    }
}

/// Wakes a session's reader thread; cheap, never blocks for long, callable from
/// any thread (notify's included).
#[derive(Clone)]
pub struct Waker(Arc<Signals>);

impl Waker {
    pub fn wake(&self) {
        self.0.written();
    }
}

enum Worker {
    Thread(JoinHandle<Option<Analysis>>),
    /// No thread could be started: everything is read when the session ends.
    Inline(Option<Box<SessionReader>>),
}

/// A session's reader, running on its own thread for the session's life.
pub struct ReaderThread {
    signals: Arc<Signals>,
    worker: Option<Worker>,
    path: PathBuf,
}

impl std::fmt::Debug for ReaderThread {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReaderThread")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

impl ReaderThread {
    /// Starts reading `path` with `reader`, reporting to `sink` (progress only
    /// if `progress`). If no thread can be started, the error is returned with a
    /// reader that reads everything at the end.
    pub fn start(
        reader: SessionReader,
        path: &Path,
        sink: Sink,
        progress: bool,
    ) -> Result<ReaderThread, (ReaderThread, std::io::Error)> {
        let signals = Arc::new(Signals::default());
        // Whatever was written before the file's watch began.
        signals.wake.store(true, Ordering::Release);
        let shared = Arc::clone(&signals);
        // Handed over through a slot, so that a thread that cannot start leaves
        // the reader behind instead of dropping it.
        let slot = Arc::new(Mutex::new(Some(reader)));
        let taken = Arc::clone(&slot);
        let spawned = std::thread::Builder::new()
            .name(THREAD_NAME.into())
            .spawn(move || run(take(&taken)?, &shared, sink, progress));
        let (worker, failed) = match spawned {
            Ok(handle) => (Worker::Thread(handle), None),
            Err(err) => (Worker::Inline(take(&slot).map(Box::new)), Some(err)),
        };
        let thread = ReaderThread {
            signals,
            worker: Some(worker),
            path: path.to_path_buf(),
        };
        match failed {
            None => Ok(thread),
            Some(err) => Err((thread, err)),
        }
    }

    /// Whether a thread reads the output as it grows.
    pub fn threaded(&self) -> bool {
        matches!(self.worker, Some(Worker::Thread(_)))
    }

    pub fn waker(&self) -> Waker {
        Waker(Arc::clone(&self.signals))
    }

    pub fn wake(&self) {
        self.signals.written();
    }

    /// Reads the rest of the output (up to the file's size now, as
    /// [`SessionReader::finish`] does) and returns the analysis. Blocking: call
    /// it off the loop's thread. A thread that panicked gives the analysis of a
    /// file that could not be read.
    pub fn finish(mut self) -> Analysis {
        self.signals.raise(&self.signals.finish);
        match self.worker.take() {
            Some(Worker::Thread(handle)) => match handle.join() {
                Ok(Some(analysis)) => analysis,
                Ok(None) | Err(_) => Analysis::unread(&self.path),
            },
            Some(Worker::Inline(Some(reader))) => reader.finish(),
            Some(Worker::Inline(None)) | None => Analysis::unread(&self.path),
        }
    }
}

impl Drop for ReaderThread {
    /// A session dropped without its analysis (the program stops): the thread
    /// ends after the read it is in.
    fn drop(&mut self) {
        self.signals.raise(&self.signals.stop);
    }
}

fn take(reader: &Mutex<Option<SessionReader>>) -> Option<SessionReader> {
    reader.lock().unwrap_or_else(PoisonError::into_inner).take()
}

/// The thread: reads what is written whenever woken, until told to finish
/// (returns the analysis) or to stop (returns nothing).
fn run(reader: SessionReader, signals: &Signals, sink: Sink, progress: bool) -> Option<Analysis> {
    let mut reading = Reading {
        showing: reader.showing(),
        reader,
        sink,
        progress,
        last: (0, None),
        grew_sent: None,
        grew_owed: false,
        announced: false,
        retrying: None,
        agent_error_said: false,
        result_said: false,
    };
    loop {
        let due = reading
            .grew_sent
            .filter(|_| reading.grew_owed)
            .map(|at| at + GREW_GAP);
        if !signals.wait(due) {
            reading.grew();
            continue;
        }
        if signals.stop.load(Ordering::Acquire) {
            return None;
        }
        if signals.finish.load(Ordering::Acquire) {
            return Some(reading.finish());
        }
        // Cleared before reading: a write during the read wakes it again.
        signals.wake.store(false, Ordering::Release);
        let read = reading.read_written(signals);
        reading.report();
        // A flood is read as it comes, so that little is left for the end.
        if read > 0 && read < FLOOD_BYTES {
            signals.rest(Instant::now() + READ_GAP);
        }
    }
}

/// The reader thread's state between wake-ups: what it last told the loop.
struct Reading {
    reader: SessionReader,
    sink: Sink,
    progress: bool,
    showing: bool,
    /// The tool calls and cost last reported.
    last: (u64, Option<f64>),
    grew_sent: Option<Instant>,
    /// The file grew since the last report, which waits until `GREW_GAP` passed.
    grew_owed: bool,
    announced: bool,
    retrying: Option<AgentRetrying>,
    agent_error_said: bool,
    result_said: bool,
}

impl Reading {
    fn grew(&mut self) {
        (self.sink)(Report::Grew);
        (self.grew_sent, self.grew_owed) = (Some(Instant::now()), false);
    }

    fn finish(mut self) -> Analysis {
        let mut analysis = self.reader.finish();
        if self.showing {
            (self.sink)(Report::Shown {
                lines: std::mem::take(&mut analysis.shown),
                stats: Box::new(analysis.stats.clone()),
            });
        }
        analysis
    }

    /// Reads what was written, a step at a time, reporting the guards'
    /// progress as it goes; how much it read.
    fn read_written(&mut self, signals: &Signals) -> usize {
        // Told to finish, it stops chasing the end: a process outside the
        // session still writing must not keep the analysis waiting.
        let mut read = 0;
        while !signals.ended() {
            let step = self.reader.feed(STEP_BYTES);
            if step == 0 {
                break;
            }
            self.grew_owed = true;
            read += step;
            if self.progress {
                let now = self.reader.progress();
                let totals = (now.tool_calls, now.cost_usd);
                if totals != self.last || !now.new_calls.is_empty() {
                    self.last = totals;
                    (self.sink)(Report::Progress(now));
                }
            }
            if step < STEP_BYTES {
                break;
            }
        }
        read
    }

    /// Tells the loop what changed: the agent's retrying, the lines to show,
    /// and that the file grew (no more often than `GREW_GAP`).
    fn report(&mut self) {
        let now_retrying = self.reader.agent_retrying();
        if now_retrying != self.retrying {
            self.retrying = now_retrying;
            (self.sink)(Report::Retrying(self.retrying.clone()));
        }
        if !self.agent_error_said
            && let Some(reason) = self.reader.agent_error()
        {
            self.agent_error_said = true;
            (self.sink)(Report::AgentError(reason.to_owned()));
        }
        if !self.result_said && self.reader.stats().ended {
            self.result_said = true;
            (self.sink)(Report::ResultRead);
        }
        if self.showing {
            let lines = self.reader.take_shown();
            if !lines.is_empty() || !self.announced {
                self.announced = true;
                let stats = Box::new(self.reader.stats().clone());
                (self.sink)(Report::Shown { lines, stats });
            }
        }
        if self.grew_owed && self.grew_sent.is_none_or(|at| at.elapsed() >= GREW_GAP) {
            self.grew();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::sync::mpsc;
    use std::time::Duration;

    use crate::agent::{AgentFormat, Detectors};

    fn call(i: usize) -> String {
        format!(
            r#"{{"type":"assistant","message":{{"id":"m{i}","content":[{{"type":"tool_use","id":"t{i}","name":"Read","input":{{"file_path":"/f{i}"}}}}]}}}}"#
        ) + "\n"
    }

    fn reader(path: &Path) -> SessionReader {
        let det = Arc::new(Detectors::new(&[], &[]).expect("no patterns"));
        let mut reader = SessionReader::new(path, det, AgentFormat::Auto, None);
        reader.record_tool_calls();
        reader
    }

    /// A sink handing on the progress reports only.
    fn progress_to(tx: mpsc::Sender<Progress>) -> Sink {
        Box::new(move |report| {
            if let Report::Progress(progress) = report {
                let _ = tx.send(progress);
            }
        })
    }

    #[test]
    fn reads_as_woken_sends_each_call_once_and_finishes() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out.jsonl");
        let mut file = std::fs::File::create(&path).unwrap();
        file.write_all(call(1).as_bytes()).unwrap();
        let (tx, rx) = mpsc::channel();
        let thread = ReaderThread::start(reader(&path), &path, progress_to(tx), true).unwrap();
        // Read without any wake: what was written before it started.
        let first = rx.recv_timeout(Duration::from_secs(30)).unwrap();
        assert_eq!(first.tool_calls, 1);
        assert_eq!(first.new_calls.len(), 1);
        file.write_all(call(2).as_bytes()).unwrap();
        thread.waker().wake();
        let second = rx.recv_timeout(Duration::from_secs(30)).unwrap();
        assert_eq!(second.tool_calls, 2);
        assert_eq!(second.new_calls.len(), 1);
        // Written and maybe never woken for: the finish reads it.
        file.write_all(call(3).as_bytes()).unwrap();
        let analysis = thread.finish();
        assert_eq!(analysis.stats.tool_calls, 3);
        // Each call once: in a progress message or, not yet sent, in the analysis.
        let sent: usize = rx.try_iter().map(|p| p.new_calls.len()).sum();
        assert_eq!(sent + analysis.new_calls.len(), 1);
        assert_eq!(
            analysis.output_bytes,
            std::fs::metadata(&path).unwrap().len()
        );
    }

    #[test]
    fn a_showing_reader_announces_itself_then_sends_every_line_once() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out.jsonl");
        let mut file = std::fs::File::create(&path).unwrap();
        let (tx, rx) = mpsc::channel();
        let sink: Sink = Box::new(move |report| {
            if let Report::Shown { lines, stats } = report {
                let _ = tx.send((lines, stats.tool_calls));
            }
        });
        let mut showing = reader(&path);
        showing.show();
        let thread = ReaderThread::start(showing, &path, sink, false).unwrap();
        // Nothing written yet: the first report says the output is shown.
        let (first, _) = rx.recv_timeout(Duration::from_secs(30)).unwrap();
        assert!(first.is_empty());
        file.write_all(call(1).as_bytes()).unwrap();
        thread.wake();
        let (lines, calls) = rx.recv_timeout(Duration::from_secs(30)).unwrap();
        assert_eq!(lines.len(), 1);
        assert!(lines[0].text.contains("/f1"), "{lines:?}");
        assert_eq!(calls, 1);
        // Written and maybe never woken for: the finish sends it.
        file.write_all(call(2).as_bytes()).unwrap();
        let analysis = thread.finish();
        let rest: Vec<_> = rx.try_iter().flat_map(|(lines, _)| lines).collect();
        assert_eq!(rest.len(), 1, "{rest:?}");
        assert!(rest[0].text.contains("/f2"));
        assert!(analysis.shown.is_empty(), "sent, not kept");
        assert_eq!(analysis.stats.tool_calls, 2);
    }

    #[test]
    fn a_dropped_reader_thread_ends() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out.jsonl");
        std::fs::write(&path, call(1)).unwrap();
        let (tx, rx) = mpsc::channel();
        let thread = ReaderThread::start(reader(&path), &path, progress_to(tx), true).unwrap();
        rx.recv_timeout(Duration::from_secs(30)).unwrap();
        drop(thread);
        // The thread owned the only sender: it is dropped when the thread ends.
        assert_eq!(
            rx.recv_timeout(Duration::from_secs(30)),
            Err(mpsc::RecvTimeoutError::Disconnected)
        );
    }

    #[test]
    fn a_panicking_reader_gives_the_unread_analysis() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out.jsonl");
        std::fs::write(&path, call(1)).unwrap();
        let (tx, rx) = mpsc::channel();
        let thread = ReaderThread::start(
            reader(&path),
            &path,
            Box::new(move |_| {
                tx.send(()).unwrap();
                panic!("the thread fails after reading a call");
            }),
            true,
        )
        .unwrap();
        rx.recv_timeout(Duration::from_secs(30)).unwrap();
        let analysis = thread.finish();
        assert_eq!(analysis.stats.tool_calls, 0);
        assert_eq!(
            analysis.output_bytes,
            std::fs::metadata(&path).unwrap().len()
        );
    }

    #[test]
    fn every_growth_is_reported_even_within_the_gap() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out.jsonl");
        let mut file = std::fs::File::create(&path).unwrap();
        let (tx, rx) = mpsc::channel();
        let sink: Sink = Box::new(move |report| {
            if matches!(report, Report::Grew) {
                let _ = tx.send(());
            }
        });
        let thread = ReaderThread::start(reader(&path), &path, sink, false).unwrap();
        for i in 0..3 {
            // Written and woken for at once: the report may wait out the gap,
            // but it comes.
            file.write_all(call(i).as_bytes()).unwrap();
            thread.wake();
            rx.recv_timeout(Duration::from_secs(30)).unwrap();
        }
        drop(thread);
    }

    #[test]
    fn a_rest_ends_when_the_session_does() {
        let signals = Arc::new(Signals::default());
        let resting = Arc::clone(&signals);
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            resting.rest(Instant::now() + Duration::from_secs(3600));
            let _ = tx.send(());
        });
        // A write does not end the rest; the session's end does.
        signals.written();
        signals.raise(&signals.finish);
        assert_eq!(rx.recv_timeout(Duration::from_secs(30)), Ok(()));
    }

    #[test]
    fn a_write_during_a_rest_is_read_after_it() {
        let signals = Signals::default();
        // Not listening (reading or resting): the flag is raised, nobody woken.
        signals.written();
        // The next sleep sees it at once instead of waiting for another write.
        assert!(signals.wait(Some(Instant::now() + Duration::from_secs(3600))));
    }

    #[test]
    fn finish_does_not_chase_a_file_that_never_ends() {
        // Reads of /dev/zero never reach an end, as a file something keeps
        // writing to faster than it is read; its size (0) is where finish stops.
        let path = Path::new("/dev/zero");
        let thread = ReaderThread::start(reader(path), path, Box::new(|_| {}), true).unwrap();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(thread.finish().output_bytes);
        });
        assert_eq!(rx.recv_timeout(Duration::from_secs(30)), Ok(0));
    }
}
