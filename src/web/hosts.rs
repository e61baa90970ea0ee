//! The web inbox's side of the host protocol: one connection per host keeps
//! the [`Model`] current, and carries the page's decisions and notes to the
//! host that holds the request or the lane. Every change makes again the
//! parts of the view it touched and bumps the version that the pages' event
//! streams wait on.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use chrono::Utc;
use tokio::sync::{mpsc, oneshot, watch};

use super::follow::Follower;
use super::model::Model;
use super::parts::Parts;
use crate::fleet::LaneName;
use crate::fleet::link::HostRequest;
use crate::fleet::remote::{RemoteEvent, Target, keep_reached_as};
use crate::fleet::wire::{ClientMsg, WireDecision};

/// How long the page waits for a host to answer a decision or a note.
const ANSWER_WAIT: Duration = Duration::from_secs(15);
/// How long it waits for git work (a merge with its verify, a push over
/// the network) to be done before it says the host is still at it.
const WORK_WAIT: Duration = Duration::from_secs(600);

/// A host to serve, and the name its lanes go by when there are several.
pub struct WebHost {
    pub name: Option<String>,
    pub target: Target,
}

/// What every request handler shares.
pub struct Shared {
    model: Mutex<Model>,
    version: watch::Sender<u64>,
    epoch: String,
    /// The view as parts, locked after `model` when both are.
    parts: Mutex<Parts>,
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
    /// The host took it and is still at it: its events will say how it went.
    Pending(String),
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
        let mut model = Model::new(labels);
        let epoch = epoch();
        let mut parts = Parts::new(epoch.clone());
        let dirty = model.take_dirty();
        parts.refresh(&model, dirty);
        let shared = Arc::new(Shared {
            model: Mutex::new(model),
            version: watch::Sender::new(parts.version()),
            parts: Mutex::new(parts),
            epoch,
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

    /// This run's name, which versions are of.
    pub fn epoch(&self) -> &str {
        &self.epoch
    }

    /// What a page at version `since` of run `epoch` lacks (the whole view
    /// for a new page), and the version it then holds.
    pub fn view_since(&self, epoch: Option<&str>, since: Option<u64>) -> (u64, Arc<str>) {
        match self.parts.lock() {
            Ok(mut parts) => parts.since(epoch, since),
            Err(_) => (0, Arc::from("{}")),
        }
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
            wait: false,
            by: String::new(),
        })
        .await
    }

    /// Asks lane `shown`'s host for `make(lane)`, as `by`, and waits until
    /// the work is done: the answer says what it did, or why not.
    pub async fn lane_work(
        &self,
        shown: &str,
        make: impl FnOnce(LaneName) -> HostRequest,
        by: String,
    ) -> Answer {
        let located = self.model.lock().ok().and_then(|m| m.locate(shown));
        let Some((host, lane)) = located else {
            return Answer::Refused(format!("no lane {shown} in this fleet"));
        };
        self.work(host, make(lane), by).await
    }

    /// Whether lane `shown` is a task lane.
    pub fn is_task(&self, shown: &str) -> bool {
        let Ok(model) = self.model.lock() else {
            return false;
        };
        model.locate(shown).is_some_and(|(host, lane)| {
            model.hosts.get(host).is_some_and(|host| {
                host.lanes
                    .iter()
                    .any(|entry| entry.name == lane && entry.kind.is_task())
            })
        })
    }

    /// Asks host `host` (by its name; none: the only one) for `request`.
    pub async fn host_work(&self, host: Option<&str>, request: HostRequest, by: String) -> Answer {
        let found = self.model.lock().ok().map(|model| match host {
            Some(name) => model
                .hosts
                .iter()
                .position(|h| super::model::host_label(h).as_deref() == Some(name))
                .ok_or_else(|| format!("no host {name} is served here")),
            None if model.hosts.len() == 1 => Ok(0),
            None => Err("this page serves several hosts: say which".to_string()),
        });
        match found {
            Some(Ok(index)) => self.work(index, request, by).await,
            Some(Err(why)) => Answer::Refused(why),
            None => Answer::Unreachable("the page's state is unreadable".to_string()),
        }
    }

    /// Retries plan `shown` (`HOST/address` when several hosts are served).
    pub async fn retry_plan(&self, shown: &str, by: String) -> Answer {
        let found = self.model.lock().ok().and_then(|model| {
            model.hosts.iter().enumerate().find_map(|(index, host)| {
                let label = super::model::host_label(host);
                let own = match (model.multi, &label) {
                    (true, Some(label)) => shown.strip_prefix(&format!("{label}/"))?,
                    _ => shown,
                };
                host.plans
                    .iter()
                    .any(|plan| plan.address == own)
                    .then(|| (index, own.to_string()))
            })
        });
        let Some((host, plan)) = found else {
            return Answer::Refused(format!("no plan {shown} here"));
        };
        self.work(host, HostRequest::RetryPlan { plan }, by).await
    }

    /// The fleet's sessions and rate-limit waits, as the page's server has
    /// heard of them, oldest first.
    pub fn chart(&self) -> serde_json::Value {
        let Ok(model) = self.model.lock() else {
            return serde_json::json!({ "sessions": [], "rate_limits": [] });
        };
        let mut sessions = Vec::new();
        let mut waits = Vec::new();
        for host in &model.hosts {
            let name = |lane: &LaneName| model.shown_name(host, lane);
            sessions.extend(host.costs.sessions(name));
            waits.extend(host.costs.waits(name));
        }
        sessions.sort_by_key(|point| point.at);
        waits.sort_by_key(|span| span.at);
        serde_json::json!({ "sessions": sessions, "rate_limits": waits })
    }

    async fn work(&self, host: usize, request: HostRequest, by: String) -> Answer {
        let message = |re| ClientMsg::Request {
            re: Some(re),
            request,
            wait: true,
            by,
        };
        self.ask_within(host, WORK_WAIT, message).await
    }

    async fn ask(&self, host: usize, message: impl FnOnce(u64) -> ClientMsg) -> Answer {
        self.ask_within(host, ANSWER_WAIT, message).await
    }

    async fn ask_within(
        &self,
        host: usize,
        wait: Duration,
        message: impl FnOnce(u64) -> ClientMsg,
    ) -> Answer {
        let re = self.next_re.fetch_add(1, Ordering::Relaxed);
        let (reply, answer) = oneshot::channel();
        if let Ok(mut replies) = self.replies.lock() {
            replies.insert(re, reply);
        }
        let sent = self
            .to_hosts
            .get(host)
            .is_some_and(|to_host| to_host.send(message(re)).is_ok());
        let (answer, timed_out) = match sent {
            true => match tokio::time::timeout(wait, answer).await {
                Ok(answer) => (answer.ok(), false),
                Err(_) => (None, true),
            },
            false => (None, false),
        };
        if let Ok(mut replies) = self.replies.lock() {
            replies.remove(&re);
        }
        match answer {
            Some((true, text)) => Answer::Done(text),
            Some((false, text)) => Answer::Refused(text),
            None if timed_out && wait > ANSWER_WAIT => Answer::Pending(format!(
                "still at it after {} minutes: the lane's events will say how it went",
                wait.as_secs() / 60
            )),
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
            Ok(mut model) => {
                model.apply(index, &event, Utc::now());
                let dirty = model.take_dirty();
                match shared.parts.lock() {
                    Ok(mut parts) => parts.refresh(&model, dirty),
                    Err(_) => return,
                }
            }
            Err(_) => return,
        };
        if changed {
            shared.version.send_modify(|version| *version += 1);
        }
    }
}

/// A name for this run of the server, which a page's version is of.
fn epoch() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |since| since.as_nanos());
    format!("{:x}-{:x}", nanos, std::process::id())
}
