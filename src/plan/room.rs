//! `plan run` in the control room: the driver's lines go to the events pane, the
//! plans' state files are read every second (on the host's thread, never the
//! screen's) for the Plan view, and `M` there merges a step that needs review.

use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::time::Duration;

use chrono::{DateTime, Utc};
use tokio::sync::mpsc;

use super::driver::Driver;
use super::state::PlanState;
use crate::console::Verbosity;
use crate::fleet::link::{HostMsg, HostRequest};
use crate::fleet::plans::{PlanAsk, PlanLink, PlanSummary, RoomDriver, StepSummary};
use crate::fleet::serve::{WorkDone, settle};
use crate::supervisor::core::Level;
use crate::supervisor::runtime::Reporter;

/// How often the plans' state files are read again.
const PLANS_EVERY: Duration = Duration::from_secs(1);

/// The driver of plan `state`, for the control room's host to run. Once the
/// plan has ended, the view still merges, and `R` starts a failed plan again
/// with a new driver.
pub(super) fn room_driver(
    root: PathBuf,
    state: PlanState,
    queue_dir: PathBuf,
    grace: Duration,
) -> RoomDriver {
    Box::new(move |link: PlanLink| {
        let PlanLink {
            to_ui,
            mut requests,
            ..
        } = link;
        Box::pin(async move {
            let mut known = None;
            let mut state = state;
            loop {
                let name = state.name.clone();
                let log = RoomLog {
                    to_ui: to_ui.clone(),
                };
                let driver = Driver::new(root.clone(), state, queue_dir.clone(), Verbosity::Normal)
                    .kill_grace(grace)
                    .report_to(Box::new(log));
                tokio::select! {
                    () = driver.run() => {}
                    () = serve(&root, &to_ui, &mut requests, &mut known, None) => {}
                }
                // How the plans stand now that the driver is done.
                send_plans(&root, &to_ui, &mut known).await;
                let mut retried = None;
                serve(
                    &root,
                    &to_ui,
                    &mut requests,
                    &mut known,
                    Some((&name, &mut retried)),
                )
                .await;
                match retried {
                    Some(next) => state = next,
                    None => return,
                }
            }
        })
    })
}

/// For a fleet that runs no plan (its room, or its host headless): the
/// plans run here before, as their state files say, for the Plan view and
/// the web page, where `M` still merges a step that needs review and a retry
/// starts a failed plan's failed steps again, its driver run here.
pub fn viewer(root: PathBuf) -> RoomDriver {
    Box::new(move |link: PlanLink| {
        let PlanLink {
            to_ui,
            mut requests,
            busy,
        } = link;
        Box::pin(async move {
            let mut known = None;
            let mut ticker = tokio::time::interval(PLANS_EVERY);
            let mut again: Option<Retried> = None;
            loop {
                let driving = async {
                    match again.as_mut() {
                        Some(retried) => retried.driver.as_mut().await,
                        None => std::future::pending().await,
                    }
                };
                tokio::select! {
                    _ = ticker.tick() => send_plans(&root, &to_ui, &mut known).await,
                    () = driving => {
                        again = None;
                        busy.store(false, Ordering::Relaxed);
                        send_plans(&root, &to_ui, &mut known).await;
                    }
                    request = requests.recv() => match request {
                        Some(PlanAsk { request: HostRequest::MergeStep { plan, step }, done }) => {
                            merge(&root, &to_ui, (plan, step), done);
                        }
                        Some(PlanAsk { request: HostRequest::RetryPlan { plan }, done }) => {
                            let said = match &again {
                                Some(retried) => Err(format!(
                                    "plan {} runs again here already: retry {plan} once it has ended",
                                    retried.name
                                )),
                                None => retry_here(&root, &to_ui, &plan).await.map(|(retried, said)| {
                                    again = Some(retried);
                                    busy.store(true, Ordering::Relaxed);
                                    said
                                }),
                            };
                            if let Err(why) = &said {
                                let _ = to_ui.send(HostMsg::Log { level: Level::Warn, text: why.clone() });
                            }
                            settle(done, said);
                        }
                        Some(PlanAsk { done, .. }) => settle(done, Err("not a plan request".into())),
                        // The room has gone (detached): nobody looks at plans,
                        // but a plan started again runs to its end.
                        None => {
                            if let Some(retried) = again.take() {
                                retried.driver.await;
                            }
                            busy.store(false, Ordering::Relaxed);
                            return;
                        }
                    },
                }
            }
        })
    })
}

/// A failed plan started again by the viewer: its driver, run next to the
/// lanes, and the lock that says it runs.
struct Retried {
    name: String,
    driver: super::super::fleet::plans::Driver,
    _lock: nix::fcntl::Flock<std::fs::File>,
}

/// `plan retry ASKED` in the fleet's own host: the plan (the one `asked`
/// is, or is a sub-plan of) is reset as `plan retry` resets it, and its
/// driver made; what it said.
async fn retry_here(
    root: &Path,
    to_ui: &mpsc::UnboundedSender<HostMsg>,
    asked: &str,
) -> Result<(Retried, String), String> {
    let name = asked.split('/').next().unwrap_or(asked).to_string();
    let (dir, top) = (root.to_path_buf(), name.clone());
    let reset = tokio::task::spawn_blocking(move || super::retry::reset_saved(&dir, &top, &[]))
        .await
        .unwrap_or_else(|err| Err(format!("the retry failed: {err}")))?;
    let super::retry::Reset {
        state,
        lock,
        mut said,
    } = reset;
    said.push(format!("plan {name} runs again"));
    for line in &said {
        let text = format!("plan={name} {line}");
        let _ = to_ui.send(HostMsg::Log {
            level: Level::Info,
            text,
        });
    }
    let config = crate::config::Config::of_folder(root);
    let queue_dir = root.join(&config.approvals.dir.0);
    let log = RoomLog {
        to_ui: to_ui.clone(),
    };
    let driver = Driver::new(root.to_path_buf(), state, queue_dir, Verbosity::Normal)
        .kill_grace(config.watchdog.kill_grace_secs.0)
        .report_to(Box::new(log));
    let retried = Retried {
        name,
        driver: Box::pin(driver.run()),
        _lock: lock,
    };
    Ok((retried, said.join("\n")))
}

/// The driver's lines, as the fleet's own lines in the events pane.
struct RoomLog {
    to_ui: mpsc::UnboundedSender<HostMsg>,
}

impl Reporter for RoomLog {
    fn log(&mut self, _wall: DateTime<Utc>, level: Level, message: &str) {
        let text = message.to_string();
        let _ = self.to_ui.send(HostMsg::Log { level, text });
    }
}

/// Sends the plans when they change, and carries out the Plan view's merges.
/// `ended`: the plan `NAME` has ended, and a retry of it, once made, ends the
/// serving with its new state; else (the plan runs) a retry is refused.
async fn serve(
    root: &Path,
    to_ui: &mpsc::UnboundedSender<HostMsg>,
    requests: &mut mpsc::UnboundedReceiver<PlanAsk>,
    known: &mut Option<Vec<PlanSummary>>,
    mut ended: Option<(&str, &mut Option<PlanState>)>,
) {
    let mut ticker = tokio::time::interval(PLANS_EVERY);
    let mut open = true;
    loop {
        tokio::select! {
            _ = ticker.tick() => send_plans(root, to_ui, known).await,
            request = requests.recv(), if open => match request {
                Some(PlanAsk { request: HostRequest::MergeStep { plan, step }, done }) => {
                    merge(root, to_ui, (plan, step), done);
                }
                Some(PlanAsk { request: HostRequest::RetryPlan { plan }, done }) => match ended.as_mut() {
                    Some((name, retried)) => {
                        let (state, said) = retry(root, to_ui, name, &plan).await;
                        settle(done, said);
                        if let Some(state) = state {
                            **retried = Some(state);
                            return;
                        }
                    }
                    None => {
                        let text = format!("cannot retry plan {plan}: it is running");
                        let _ = to_ui.send(HostMsg::Log { level: Level::Warn, text: text.clone() });
                        settle(done, Err(text));
                    }
                },
                Some(PlanAsk { done, .. }) => settle(done, Err("not a plan request".into())),
                // The room has gone (detached): an ended plan has nothing to wait for.
                None if ended.is_some() => return,
                None => open = false,
            },
        }
    }
}

/// `plan retry` of the room's plan `name` (`asked`: the plan whose row was
/// selected, one of its sub-plans perhaps); the plan's new state when it was
/// reset, and what was said.
async fn retry(
    root: &Path,
    to_ui: &mpsc::UnboundedSender<HostMsg>,
    name: &str,
    asked: &str,
) -> (Option<PlanState>, Result<String, String>) {
    let say = |level, text: String| {
        let _ = to_ui.send(HostMsg::Log { level, text });
    };
    let inside = |sep: &str| asked.starts_with(&format!("{name}{sep}"));
    if asked != name && !inside("-") && !inside("/") {
        let why = format!("cannot retry plan {asked}: this room runs plan {name}");
        say(Level::Warn, why.clone());
        return (None, Err(why));
    }
    let (root, name) = (root.to_path_buf(), name.to_string());
    let reset = tokio::task::spawn_blocking(move || {
        let mut state = PlanState::load(&super::status::plan_file(&root, &name)?)?;
        let said = super::retry::reset(&root, &mut state, &[])?;
        Ok::<_, String>((state, said))
    })
    .await
    .unwrap_or_else(|err| Err(format!("the retry failed: {err}")));
    match reset {
        Ok((state, mut said)) => {
            said.push(format!("plan {} runs again", state.name));
            for line in &said {
                say(Level::Info, format!("plan={} {line}", state.name));
            }
            (Some(state), Ok(said.join("\n")))
        }
        Err(err) => {
            say(Level::Warn, err.clone());
            (None, Err(err))
        }
    }
}

/// `plan::merge_step` on a blocking thread; what it said goes to the events
/// pane, and to `done`.
fn merge(
    root: &Path,
    to_ui: &mpsc::UnboundedSender<HostMsg>,
    (plan, step): (String, String),
    done: Option<WorkDone>,
) {
    let (root, to_ui) = (root.to_path_buf(), to_ui.clone());
    tokio::task::spawn_local(async move {
        let said = tokio::task::spawn_blocking(move || super::merge_step(&root, &plan, &step))
            .await
            .unwrap_or_else(|err| Err(format!("the merge failed: {err}")));
        let level = match &said {
            Ok(_) => Level::Info,
            Err(_) => Level::Warn,
        };
        let text = said.clone().unwrap_or_else(|why| why);
        let _ = to_ui.send(HostMsg::Log { level, text });
        settle(done, said);
    });
}

async fn send_plans(
    root: &Path,
    to_ui: &mpsc::UnboundedSender<HostMsg>,
    known: &mut Option<Vec<PlanSummary>>,
) {
    let dir = root.to_path_buf();
    let Ok(plans) = tokio::task::spawn_blocking(move || read_plans(&dir)).await else {
        return;
    };
    if known.as_ref() != Some(&plans) {
        *known = Some(plans.clone());
        let _ = to_ui.send(HostMsg::Plans(plans));
    }
}

/// Every readable plan state under `root`, by name.
fn read_plans(root: &Path) -> Vec<PlanSummary> {
    let files = super::status::plan_files(root, None).unwrap_or_default();
    files
        .iter()
        .filter_map(|path| PlanState::load(path).ok())
        .map(|state| summary(&state))
        .collect()
}

fn summary(state: &PlanState) -> PlanSummary {
    PlanSummary {
        name: state.name.clone(),
        address: address(state),
        status: state.status.to_string(),
        base: state.base.clone(),
        steps: state
            .steps
            .iter()
            .map(|step| StepSummary {
                id: step.id.clone(),
                state: step.status.to_string(),
                depends_on: step.depends_on.clone(),
                lane: step.lane.clone(),
            })
            .collect(),
    }
}

/// `NAME`, or `PARENT/STEP` for a sub-plan (see [`super::status::plan_file`]).
fn address(state: &PlanState) -> String {
    let rel = state.rel_file();
    let stem = rel.strip_suffix(".json").unwrap_or(&rel);
    stem.replace("/sub/", "/")
}
