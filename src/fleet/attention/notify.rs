//! `[ui] notify_url`: each call for attention POSTed as a short text in ntfy's
//! format (a plain-text body, a `Title` header), so that a phone gets a push.
//! A thread of its own sends them, fed by a bounded queue: the host never
//! waits on the network; a full queue drops the call, a failed POST is tried
//! twice more, and every failure is said.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::mpsc::{self, SyncSender, TrySendError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::{AttentionEvent, EventKind};
use crate::fleet::wire::WEB_URL_FILE;
use crate::supervisor::core::Level;

/// Where the host says how its notifications went (its console, its room).
pub type Say = Arc<dyn Fn(Level, &str) + Send + Sync>;

/// Calls waiting to be sent; more are dropped (and said).
const QUEUE: usize = 16;
/// Retries after a failed POST, each after a longer pause.
const BACKOFF: [Duration; 2] = [Duration::from_millis(500), Duration::from_millis(1500)];
/// Connecting gives up after this long; the whole POST after [`POST_TIMEOUT`].
const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);
const POST_TIMEOUT: Duration = Duration::from_secs(5);
/// Longest link read from [`WEB_URL_FILE`], in bytes.
const MAX_LINK: u64 = 512;

/// The sending thread and its queue.
pub(super) struct Notifier {
    queue: Option<SyncSender<AttentionEvent>>,
    thread: Option<JoinHandle<()>>,
    shown: String,
    say: Say,
}

impl Notifier {
    /// Starts the thread that POSTs to `url`; the link is read in `root`.
    pub(super) fn start(url: &str, root: &Path, say: Say) -> Option<Notifier> {
        let (queue, calls) = mpsc::sync_channel(QUEUE);
        let sender = Sender {
            url: url.to_string(),
            shown: shown(url),
            root: root.to_path_buf(),
            agent: agent(),
            say: Arc::clone(&say),
        };
        let spawned = std::thread::Builder::new()
            .name("notify_url".into())
            .spawn(move || sender.run(&calls));
        match spawned {
            Ok(thread) => Some(Notifier {
                queue: Some(queue),
                thread: Some(thread),
                shown: shown(url),
                say,
            }),
            Err(err) => {
                warn(&say, &format!("notify_url: cannot start a thread: {err}"));
                None
            }
        }
    }

    /// Queues `event`; never waits.
    pub(super) fn send(&self, event: &AttentionEvent) {
        let Some(queue) = &self.queue else {
            return;
        };
        if let Err(TrySendError::Full(event)) = queue.try_send(event.clone()) {
            let message = format!(
                "notify_url: {} not sent to {}: {QUEUE} calls still waiting",
                event.event.as_str(),
                self.shown
            );
            warn(&self.say, &message);
        }
    }

    /// Sends no more: what is queued still goes.
    pub(super) fn close(&mut self) {
        self.queue = None;
    }

    /// Waits until what was queued has been sent, or until `deadline` (a host
    /// that ends lets its last calls go, but not for ever).
    pub(super) fn wait(&mut self, deadline: Instant) {
        self.close();
        let Some(thread) = self.thread.take() else {
            return;
        };
        while !thread.is_finished() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        if thread.is_finished() {
            let _ = thread.join();
        }
    }
}

/// A warning said to the host's human and written to the diagnostics.
fn warn(say: &Say, message: &str) {
    tracing::warn!("{message}");
    say(Level::Warn, message);
}

fn agent() -> ureq::Agent {
    ureq::Agent::config_builder()
        .timeout_connect(Some(CONNECT_TIMEOUT))
        .timeout_global(Some(POST_TIMEOUT))
        .build()
        .into()
}

/// The URL as said in a log line or sent as the page's link: no user,
/// password, query or fragment (where a token would be).
fn shown(url: &str) -> String {
    let Ok(mut parsed) = url::Url::parse(url) else {
        return url.to_string();
    };
    let _ = parsed.set_username("");
    let _ = parsed.set_password(None);
    parsed.set_query(None);
    parsed.set_fragment(None);
    parsed.to_string()
}

/// The thread's side.
struct Sender {
    url: String,
    shown: String,
    root: PathBuf,
    agent: ureq::Agent,
    say: Say,
}

impl Sender {
    fn run(self, calls: &mpsc::Receiver<AttentionEvent>) {
        for event in calls.iter() {
            self.notify(&event);
        }
    }

    /// POSTs `event`, retrying at most [`BACKOFF`]`.len()` times.
    fn notify(&self, event: &AttentionEvent) {
        let message = Message::of(event, web_link(&self.root).as_deref());
        let attempts = BACKOFF.len() + 1;
        for attempt in 1..=attempts {
            let Err(why) = self.post(&message) else {
                return;
            };
            let said = format!("notify_url: POST {} failed: {why}", self.shown);
            match BACKOFF.get(attempt - 1) {
                Some(pause) => {
                    warn(&self.say, &format!("{said}; retrying"));
                    std::thread::sleep(*pause);
                }
                None => warn(
                    &self.say,
                    &format!("{said}; gave up after {attempts} attempts"),
                ),
            }
        }
    }

    fn post(&self, message: &Message) -> Result<(), String> {
        let mut request = self
            .agent
            .post(&self.url)
            .header("Title", &message.title)
            .header("Tags", message.tag);
        if let Some(priority) = message.priority {
            request = request.header("Priority", priority);
        }
        let sent = request
            .content_type("text/plain; charset=utf-8")
            .send(message.body.as_str());
        match sent {
            Ok(_) => Ok(()),
            Err(ureq::Error::StatusCode(code)) => Err(format!("it answered {code}")),
            Err(err) => Err(err.to_string()),
        }
    }
}

/// What is POSTed for one call.
#[derive(Debug, PartialEq, Eq)]
struct Message {
    /// `clowder: LANE`, in ASCII (a header holds nothing else).
    title: String,
    /// The event's name, which ntfy shows as a tag.
    tag: &'static str,
    /// `high` for what waits on a human; none (ntfy's default) otherwise.
    priority: Option<&'static str>,
    /// The call's text on one line, then ` — open LINK` when the page is served.
    body: String,
}

impl Message {
    fn of(event: &AttentionEvent, link: Option<&str>) -> Message {
        let title = if event.lane.is_empty() {
            "clowder".to_string()
        } else {
            format!("clowder: {}", ascii(&event.lane))
        };
        let priority = match event.event {
            EventKind::ApprovalRequested | EventKind::LaneHeld | EventKind::LaneFailed => {
                Some("high")
            }
            EventKind::LaneDone => None,
        };
        let mut body = super::command::one_line(&event.text);
        if let Some(link) = link {
            body.push_str(" — open ");
            body.push_str(link);
        }
        Message {
            title,
            tag: event.event.as_str(),
            priority,
            body,
        }
    }
}

/// `text` with what a header cannot hold (beyond printable ASCII) as `?`.
fn ascii(text: &str) -> String {
    text.chars()
        .map(|c| {
            if c.is_ascii_graphic() || c == ' ' {
                c
            } else {
                '?'
            }
        })
        .collect()
}

/// The page's base URL, as `clowder serve --http` leaves it in
/// `.clowder/web-url` while it runs; read each time, since it comes and goes.
/// Only an http(s) URL is taken, and never its query or fragment, so that no
/// token is sent.
fn web_link(root: &Path) -> Option<String> {
    let path = root.join(crate::store::lock::STATE_DIR).join(WEB_URL_FILE);
    let mut text = String::new();
    std::fs::File::open(path)
        .ok()?
        .take(MAX_LINK)
        .read_to_string(&mut text)
        .ok()?;
    let text = text.trim();
    crate::config::valid_http_url(text).then(|| shown(text))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(lane: &str, kind: EventKind, text: &str) -> AttentionEvent {
        AttentionEvent {
            lane: lane.into(),
            event: kind,
            text: text.into(),
        }
    }

    #[test]
    fn a_call_is_a_title_a_tag_and_one_line_of_text() {
        let asked = event(
            "release",
            EventKind::ApprovalRequested,
            "release: approval requested: Bash ./release.sh\n--publish",
        );
        let message = Message::of(&asked, None);
        assert_eq!(message.title, "clowder: release");
        assert_eq!(message.tag, "approval_requested");
        assert_eq!(message.priority, Some("high"));
        assert!(!message.body.contains('\n'), "{message:?}");
        assert!(
            message
                .body
                .starts_with("release: approval requested: Bash")
        );
        let done = Message::of(
            &event("", EventKind::LaneDone, "x is done"),
            Some("http://h/"),
        );
        assert_eq!(done.title, "clowder");
        assert_eq!(done.priority, None);
        assert_eq!(done.body, "x is done — open http://h/");
        let odd = Message::of(&event("dossier-été", EventKind::LaneDone, "x"), None);
        assert_eq!(odd.title, "clowder: dossier-?t?");
    }

    #[test]
    fn the_link_is_an_http_url_without_a_token_or_nothing() {
        let dir = tempfile::tempdir().expect("tempdir");
        assert_eq!(web_link(dir.path()), None);
        let state = dir.path().join(".clowder");
        std::fs::create_dir_all(&state).expect("mkdir");
        let file = state.join(WEB_URL_FILE);
        for (text, link) in [
            ("http://127.0.0.1:7700/\n", Some("http://127.0.0.1:7700/")),
            (
                "https://box.tail.ts.net:7700/?token=s3cret#t\n",
                Some("https://box.tail.ts.net:7700/"),
            ),
            ("http://u:pw@host/\n", Some("http://host/")),
            ("javascript:alert(1)\n", None),
            ("", None),
        ] {
            std::fs::write(&file, text).expect("write");
            assert_eq!(web_link(dir.path()).as_deref(), link, "{text:?}");
        }
    }

    /// With a server that never answers, the queue fills and what does not
    /// fit is dropped and said; sending never waits.
    #[test]
    fn a_full_queue_drops_the_call_and_says_so() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let url = format!("http://{}/t", listener.local_addr().expect("address"));
        let said = Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
        let heard = Arc::clone(&said);
        let say: Say = Arc::new(move |_, text: &str| {
            heard.lock().expect("lock").push(text.to_string());
        });
        let dir = tempfile::tempdir().expect("tempdir");
        let notifier = Notifier::start(&url, dir.path(), say).expect("started");
        for _ in 0..QUEUE + 4 {
            notifier.send(&event("a", EventKind::LaneDone, "lane a is done"));
        }
        drop(listener);
        let said = said.lock().expect("lock").clone();
        let dropped =
            format!("notify_url: lane_done not sent to {url}: {QUEUE} calls still waiting");
        assert!(said.contains(&dropped), "{said:?}");
    }

    /// An `https://` URL is spoken to in TLS: the server is sent a handshake
    /// record (0x16), not plain HTTP (nor refused for want of TLS).
    #[test]
    fn an_https_url_is_spoken_to_in_tls() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = listener.local_addr().expect("address").port();
        let first = std::thread::spawn(move || {
            let (mut stream, _) = listener.accept().expect("accept");
            let mut byte = [0u8; 1];
            stream.read_exact(&mut byte).expect("read");
            byte[0]
        });
        let posted = agent()
            .post(&format!("https://127.0.0.1:{port}/topic"))
            .send("x");
        assert!(posted.is_err(), "no TLS server there");
        assert_eq!(first.join().expect("the server"), 0x16);
    }

    #[test]
    fn the_url_said_in_a_log_line_has_no_secret() {
        assert_eq!(
            shown("https://u:pw@ntfy.sh/topic?auth=tk"),
            "https://ntfy.sh/topic"
        );
    }
}
