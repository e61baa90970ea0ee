//! The web inbox's side of the host protocol: one connection per host keeps
//! the [`Model`] current, and carries the page's decisions and notes to the
//! host that holds the request or the lane. Every change bumps a version
//! that the pages' event streams wait on.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use chrono::Utc;
use tokio::sync::{mpsc, oneshot, watch};

use super::follow::Follower;
use super::model::Model;
use crate::fleet::LaneName;
use crate::fleet::link::HostRequest;
use crate::fleet::remote::{RemoteEvent, Target, keep_reached_as};
use crate::fleet::wire::{ClientMsg, WireDecision};

/// How long the page waits for a host to answer a decision or a note.
const ANSWER_WAIT: Duration = Duration::from_secs(15);

/// A host to serve, and the name its lanes go by when there are several.
pub struct WebHost {
    pub name: Option<String>,
    pub target: Target,
}

/// What every request handler shares.
pub struct Shared {
    model: Mutex<Model>,
    version: watch::Sender<u64>,
    /// The view's JSON at a version: one serialization serves every page.
    cached: Mutex<(u64, Arc<str>)>,
    targets: Vec<Target>,
    to_hosts: Vec<mpsc::UnboundedSender<ClientMsg>>,
    replies: Mutex<HashMap<u64, oneshot::Sender<(bool, String)>>>,
    next_re: AtomicU64,
    followers: Mutex<HashMap<(usize, LaneName), Weak<Follower>>>,
}

/// How a decision or a note went.
pub enum Answer {
    Done(String),
    /// The host said no (decided elsewhere first, an unknown lane).
    Refused(String),
    /// No host holds it, or none answered.
    Unreachable(String),
}

impl Shared {
    /// Reaches every host and keeps the model current, for as long as the
    /// runtime runs.
    pub fn start(hosts: Vec<WebHost>) -> Arc<Shared> {
        let (tagged_tx, tagged) = mpsc::unbounded_channel();
        let mut targets = Vec::new();
        let mut to_hosts = Vec::new();
        let mut labels = Vec::new();
        for (index, WebHost { name, target }) in hosts.into_iter().enumerate() {
            to_hosts.push(keep_reached_as(index, target.clone(), tagged_tx.clone()));
            targets.push(target);
            labels.push(name);
        }
        let shared = Arc::new(Shared {
            model: Mutex::new(Model::new(labels)),
            version: watch::Sender::new(0),
            cached: Mutex::new((u64::MAX, Arc::from(""))),
            targets,
            to_hosts,
            replies: Mutex::new(HashMap::new()),
            next_re: AtomicU64::new(1),
            followers: Mutex::new(HashMap::new()),
        });
        tokio::spawn(carry(Arc::clone(&shared), tagged));
        shared
    }

    /// Wakes when the view changes.
    pub fn changes(&self) -> watch::Receiver<u64> {
        self.version.subscribe()
    }

    /// The view as JSON, made once per change.
    pub fn view_json(&self) -> Arc<str> {
        let version = *self.version.borrow();
        let Ok(mut cached) = self.cached.lock() else {
            return Arc::from("{}");
        };
        if cached.0 != version {
            let json = match self.model.lock() {
                Ok(model) => serde_json::to_string(&super::view::view(&model)),
                Err(_) => Ok("{}".to_string()),
            };
            *cached = (version, Arc::from(json.unwrap_or_else(|_| "{}".into())));
        }
        Arc::clone(&cached.1)
    }

    /// Decides request `id` on the host that holds it.
    pub async fn decide(&self, id: &str, decision: WireDecision, by: String) -> Answer {
        let host = self.model.lock().ok().and_then(|m| m.host_of_request(id));
        let Some(host) = host else {
            return Answer::Refused(format!(
                "request {id} is not waiting: it was decided, or its agent gave up"
            ));
        };
        let id = id.to_string();
        self.ask(host, |re| ClientMsg::Decide {
            re: Some(re),
            id,
            decision,
            by,
        })
        .await
    }

    /// Tells a lane a note, as `t` does in the room: the answer says whether
    /// its running session took it now or the next session will.
    pub async fn tell(&self, shown: &str, text: String) -> Answer {
        let located = self.model.lock().ok().and_then(|m| m.locate(shown));
        let Some((host, lane)) = located else {
            return Answer::Refused(format!("no lane {shown} in this fleet"));
        };
        self.ask(host, |re| ClientMsg::Request {
            re: Some(re),
            request: HostRequest::Tell { lane, text },
        })
        .await
    }

    async fn ask(&self, host: usize, message: impl FnOnce(u64) -> ClientMsg) -> Answer {
        let re = self.next_re.fetch_add(1, Ordering::Relaxed);
        let (reply, answer) = oneshot::channel();
        if let Ok(mut replies) = self.replies.lock() {
            replies.insert(re, reply);
        }
        let sent = self
            .to_hosts
            .get(host)
            .is_some_and(|to_host| to_host.send(message(re)).is_ok());
        let answer = match sent {
            true => tokio::time::timeout(ANSWER_WAIT, answer)
                .await
                .ok()
                .and_then(Result::ok),
            false => None,
        };
        if let Ok(mut replies) = self.replies.lock() {
            replies.remove(&re);
        }
        match answer {
            Some((true, text)) => Answer::Done(text),
            Some((false, text)) => Answer::Refused(text),
            None => Answer::Unreachable("the host did not answer; try again".to_string()),
        }
    }

    /// The output of lane `shown`, followed while anyone looks at it.
    pub fn follow(&self, shown: &str) -> Option<Arc<Follower>> {
        let (host, lane) = self.model.lock().ok()?.locate(shown)?;
        let mut followers = self.followers.lock().ok()?;
        followers.retain(|_, follower| follower.strong_count() > 0);
        let key = (host, lane.clone());
        if let Some(follower) = followers.get(&key).and_then(Weak::upgrade) {
            return Some(follower);
        }
        let target = self.targets.get(host)?.clone();
        let follower = Follower::start(target, lane, shown.to_string());
        followers.insert(key, Arc::downgrade(&follower));
        Some(follower)
    }
}

/// Carries every host's events into the model, and answers into the
/// handlers that wait for them.
async fn carry(shared: Arc<Shared>, mut tagged: mpsc::UnboundedReceiver<(usize, RemoteEvent)>) {
    while let Some((index, event)) = tagged.recv().await {
        if let RemoteEvent::Reply { re, ok, text } = event {
            let waiting = shared.replies.lock().ok().and_then(|mut r| r.remove(&re));
            if let Some(waiting) = waiting {
                let _ = waiting.send((ok, text));
            }
            continue;
        }
        let changed = match shared.model.lock() {
            Ok(mut model) => model.apply(index, &event, Utc::now()),
            Err(_) => return,
        };
        if changed {
            shared.version.send_modify(|version| *version += 1);
        }
    }
}
