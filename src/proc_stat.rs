//! `/proc/PID/stat`, read once for everyone: a process's state, parent, group
//! and start time (which, with the pid, names one process even after the pid is
//! reused).

/// One process as `/proc/PID/stat` describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcInfo {
    pub pid: i32,
    pub state: char,
    pub ppid: i32,
    pub pgid: i32,
    /// When the process started, in clock ticks since boot (field 22): with the
    /// pid, it names one process even after the pid is reused.
    pub start_ticks: u64,
}

impl ProcInfo {
    /// Running, sleeping or stopped: not a zombie nor dead (they hold no files any more).
    pub fn is_live(&self) -> bool {
        self.state != 'Z' && self.state != 'X'
    }
}

pub fn read_proc_stat(pid: i32) -> Option<ProcInfo> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name may hold spaces and parentheses: split after the last ')'.
    let (_, rest) = stat.rsplit_once(')')?;
    let mut fields = rest.split_whitespace();
    let state = fields.next()?.chars().next()?;
    let ppid = fields.next()?.parse().ok()?;
    let pgid = fields.next()?.parse().ok()?;
    // Fields 6 to 21, then the start time.
    let start_ticks = fields.nth(16)?.parse().ok()?;
    Some(ProcInfo {
        pid,
        state,
        ppid,
        pgid,
        start_ticks,
    })
}
