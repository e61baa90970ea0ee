//! Ending what a killed clowder left running: the sessions and hooks recorded in
//! `.clowder/running/` that never saw their end. Only what is provably theirs is
//! signalled: their cgroup, their process group when its leader (or, the leader
//! gone, every member) passes the start-time check, and any process started no
//! earlier than the leader that carries their token. A reused pid never is.

use std::time::Duration;

use super::process::{self, Escaped, TOKEN_ENV};
use crate::store::running::{Record, Running};

/// What was found of one abandoned record.
#[derive(Debug)]
pub struct Ended {
    pub record: Record,
    /// Processes of its group.
    pub group_killed: u64,
    /// Processes outside its group: in its cgroup, or carrying its token.
    pub escaped: Vec<Escaped>,
}

/// Ends every recorded group and forgets the records. Called at start, before
/// this clowder has recorded anything, with the instance lock held: every
/// record is an earlier run's (even one whose clowder had this pid, before a
/// reboot), and none of them is running.
pub async fn end_abandoned(running: &Running, grace: Duration) -> Vec<Ended> {
    let mut ended = Vec::new();
    for record in running.all() {
        ended.push(end_one(record.clone(), grace).await);
        running.remove(&record.token);
    }
    ended
}

async fn end_one(record: Record, grace: Duration) -> Ended {
    let mut group_killed = 0;
    if group_is_ours(
        record.pgid,
        record.pid,
        Some(record.start_ticks),
        TOKEN_ENV,
        &record.token,
    ) {
        group_killed = process::kill_foreign_group(record.pgid, grace).await.killed;
    }
    let mut escaped = Vec::new();
    if let Some(cgroup) = record.cgroup.as_ref().filter(|c| c.exists()) {
        let found = super::cgroup::members(cgroup)
            .into_iter()
            .filter_map(process::read_proc_stat)
            .filter(|p| p.state != 'Z' && p.state != 'X')
            .collect();
        escaped = process::kill_escaped(found, grace).await;
        super::cgroup::kill_and_remove(cgroup).await;
        // The dead clowder's own tree, once its last cgroup is gone.
        if let Some(parent) = cgroup.parent() {
            let _ = std::fs::remove_dir(parent);
        }
    }
    let found = process::find_by_token(&record.token, record.start_ticks);
    escaped.extend(process::kill_escaped(found, grace).await);
    Ended {
        record,
        group_killed,
        escaped,
    }
}

/// Whether the live processes of `pgid` are the group whose leader was `pid`,
/// started at `start_ticks`, with `key=value` in its environment.
pub fn group_is_ours(
    pgid: i32,
    pid: i32,
    start_ticks: Option<u64>,
    key: &str,
    value: &str,
) -> bool {
    // Without the start time nothing can be proved: never signal on a guess.
    // Group 0 (not yet known) would be the kernel's threads.
    let Some(start_ticks) = start_ticks.filter(|_| pgid > 1) else {
        return false;
    };
    let live = process::live_members(pgid, &[]);
    if live.is_empty() {
        return false;
    }
    // While a group has members its id is not handed out again, so a live leader
    // is either the group's own (same start time) or the leader of a new group
    // that reused the number after the old group had died out.
    if let Some(leader) = process::read_proc_stat(pid).filter(|p| p.state != 'Z' && p.state != 'X')
    {
        return leader.start_ticks == start_ticks;
    }
    // Leader gone: every process of the group started after it, and inherited
    // its environment.
    live.iter().all(|p| p.start_ticks >= start_ticks)
        && live.iter().any(|p| process::environ_has(p.pid, key, value))
}
