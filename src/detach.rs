//! Leaving the loop running when the control room is closed (`d` in the quit
//! dialog).
//!
//! The agent is a child of the process that supervises it, so that process has
//! to stay; what must go is the process the shell waits for. Before the control
//! room starts, clowder forks: the parent only waits (the shell's job), the
//! child runs the loop and the screen. On detach the child restores the
//! terminal, tells the parent, which exits 0 and gives the shell back, and goes
//! on headless in a session of its own with no terminal, still writing the
//! status file and the event log. Without a detach, the parent exits with the
//! child's exit code once it ends, so nothing changes for scripts.
//!
//! The parent also keeps the terminal safe from the child: it saves the
//! terminal's settings before the control room starts and restores them (and
//! leaves the alternate screen) if the child dies by a signal, SIGKILL included,
//! which no handler in the child can catch. And it stops (as the shell's job)
//! only once the child, suspended by Ctrl-Z or SIGTSTP, has given the terminal
//! back.
//!
//! The other way round, the child ends with the parent: the shell knows only the
//! parent's PID, so SIGTERM, SIGHUP and SIGINT sent to it by a process are
//! passed on (those the terminal sends reach the child itself), and if the
//! parent dies, SIGKILL included, the child is sent SIGHUP by the kernel
//! (`PR_SET_PDEATHSIG`): its room leaves as when the terminal hangs up and
//! gives the terminal back, instead of drawing over the shell.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::{AtomicI32, Ordering};

use nix::fcntl::OFlag;
use nix::sys::signal::{self, SaFlags, SigAction, SigHandler, SigSet, Signal};
use nix::sys::wait::{WaitStatus, waitpid};
use nix::unistd::{ForkResult, Pid, fork, pipe2, setsid};

/// The child's end of the line to the waiting parent.
#[derive(Debug)]
pub struct Detacher {
    to_parent: OwnedFd,
}

/// What the parent waits on: a byte from the child means "detached".
const DETACHED: u8 = b'D';
/// The child has restored the terminal and stops now (Ctrl-Z, SIGTSTP): the
/// parent stops too, so the shell sees its job stopped and takes the terminal.
const SUSPENDED: u8 = b'S';

/// The signals to pass on to the child, one bit per signal number.
static TO_FORWARD: AtomicI32 = AtomicI32::new(0);

/// The signals the parent passes on.
const FORWARDED: [Signal; 3] = [Signal::SIGTERM, Signal::SIGHUP, Signal::SIGINT];

extern "C" fn note_signal(signal: libc::c_int, info: *mut libc::siginfo_t, _: *mut libc::c_void) {
    // SAFETY: the kernel hands a SA_SIGINFO handler a valid siginfo, or null.
    let code = unsafe { info.as_ref() }.map_or(0, |info| info.si_code);
    // A signal the kernel made (the terminal's Ctrl-C or hang-up: SI_KERNEL)
    // went to the child too; one a process sent (SI_USER, SI_QUEUE, SI_TKILL:
    // codes of 0 and below) named this process alone. SIGTERM only ever comes
    // from someone who named it.
    if signal == libc::SIGTERM || code <= 0 {
        TO_FORWARD.fetch_or(1 << signal, Ordering::SeqCst);
    }
}

/// Passes on to `child` what [`note_signal`] has kept.
fn forward_noted(child: Pid) {
    let noted = TO_FORWARD.swap(0, Ordering::SeqCst);
    for signal in FORWARDED {
        if noted & (1 << signal as i32) != 0 {
            let _ = signal::kill(child, signal);
        }
    }
}

/// Whether whoever started clowder set SIGHUP to be ignored (`nohup`).
pub fn hangup_ignored() -> bool {
    let mut current = std::mem::MaybeUninit::<libc::sigaction>::zeroed();
    // SAFETY: with no new action, sigaction only writes the current one into
    // `current`, which is zeroed memory of the right type.
    let read = unsafe { libc::sigaction(libc::SIGHUP, std::ptr::null(), current.as_mut_ptr()) };
    // SAFETY: zeroed is a valid `sigaction`, and a successful call filled it.
    read == 0 && unsafe { current.assume_init() }.sa_sigaction == libc::SIG_IGN
}

/// In the child: the signal that ends it when the parent dies, SIGKILL
/// included. SIGHUP, which the room takes as its terminal gone; SIGTERM under
/// `nohup`, where SIGHUP is ignored.
fn end_with(parent: Pid) {
    let signal = if hangup_ignored() {
        Signal::SIGTERM
    } else {
        Signal::SIGHUP
    };
    let set = nix::sys::prctl::set_pdeathsig(signal);
    // Died before it was set: nobody else will send it.
    if set.is_ok() && nix::unistd::getppid() != parent {
        let _ = signal::raise(signal);
    }
}

/// Forks the waiting parent. Returns in the child (which goes on) with the
/// means to detach later; `None` when the fork is not possible, and clowder then
/// runs in one process without the detach choice. Never returns in the parent.
///
/// Call it while the process has a single thread: before any runtime starts.
pub fn fork_waiter() -> Option<Detacher> {
    if !single_threaded() {
        // A fork would leave the child with locks other threads held.
        return None;
    }
    // CLOEXEC: agents and hooks must not inherit the write end, or the parent
    // would wait on them too.
    let (from_child, to_parent) = pipe2(OFlag::O_CLOEXEC).ok()?;
    // Saved before the child can touch the terminal.
    let terminal = SavedTerminal::save();
    let parent = nix::unistd::getpid();
    // SAFETY: called before any other thread exists (see above), so the child
    // holds no lock another thread owned.
    match unsafe { fork() } {
        Ok(ForkResult::Child) => {
            drop(from_child);
            end_with(parent);
            Some(Detacher { to_parent })
        }
        Ok(ForkResult::Parent { child }) => {
            drop(to_parent);
            let (code, by_signal) = wait_for_child(child, &from_child);
            if by_signal && let Some(terminal) = terminal {
                terminal.restore();
            }
            std::process::exit(code)
        }
        Err(_) => None,
    }
}

fn single_threaded() -> bool {
    std::fs::read_dir("/proc/self/task").is_ok_and(|tasks| tasks.count() == 1)
}

/// The parent's whole life: wait for "detached" or for the child's end. The
/// exit code, and whether the child died by a signal.
fn wait_for_child(child: Pid, from_child: &OwnedFd) -> (i32, bool) {
    // The terminal sends SIGINT and SIGHUP to the child as well (same process
    // group): only those a process sent to this one are passed on (see
    // `note_signal`). Under nohup SIGHUP stays ignored.
    let ignore = SigAction::new(SigHandler::SigIgn, SaFlags::empty(), SigSet::empty());
    let forward = SigAction::new(
        SigHandler::SigAction(note_signal),
        SaFlags::empty(),
        SigSet::empty(),
    );
    let hangup = if hangup_ignored() { &ignore } else { &forward };
    // SAFETY: the handlers only store to an atomic.
    unsafe {
        let _ = signal::sigaction(Signal::SIGINT, &forward);
        let _ = signal::sigaction(Signal::SIGHUP, hangup);
        let _ = signal::sigaction(Signal::SIGQUIT, &ignore);
        // The parent stops when the child says it has (see SUSPENDED), not
        // before the child has given the terminal back.
        let _ = signal::sigaction(Signal::SIGTSTP, &ignore);
        let _ = signal::sigaction(Signal::SIGTERM, &forward);
    }
    let mut byte = [0u8; 1];
    loop {
        forward_noted(child);
        match nix::unistd::read(from_child, &mut byte) {
            Ok(1) if byte[0] == DETACHED => return (0, false),
            Ok(1) if byte[0] == SUSPENDED => {
                // Continued by the shell's `fg` (SIGCONT to the whole job).
                let _ = signal::raise(Signal::SIGSTOP);
            }
            Ok(0) => break,
            Ok(_) => {}
            Err(nix::errno::Errno::EINTR) => {}
            Err(_) => break,
        }
    }
    loop {
        match waitpid(child, None) {
            Ok(WaitStatus::Exited(_, code)) => return (code, false),
            Ok(WaitStatus::Signaled(_, signal, _)) => return (128 + signal as i32, true),
            Ok(_) => {}
            Err(nix::errno::Errno::EINTR) => forward_noted(child),
            Err(_) => return (1, false),
        }
    }
}

/// The terminal as it was before the control room started.
struct SavedTerminal {
    tty: std::fs::File,
    settings: nix::sys::termios::Termios,
}

impl SavedTerminal {
    fn save() -> Option<SavedTerminal> {
        let tty = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open("/dev/tty")
            .ok()?;
        let settings = nix::sys::termios::tcgetattr(&tty).ok()?;
        Some(SavedTerminal { tty, settings })
    }

    /// What the child's own restore would have done: the settings back, mouse
    /// reports and bracketed paste off, the main screen, the cursor shown.
    fn restore(mut self) {
        use std::io::Write;
        let _ = nix::sys::termios::tcsetattr(
            &self.tty,
            nix::sys::termios::SetArg::TCSANOW,
            &self.settings,
        );
        let _ = self.tty.write_all(
            b"\x1b[?1000l\x1b[?1002l\x1b[?1003l\x1b[?1015l\x1b[?1006l\x1b[?2004l\x1b[?1049l\x1b[?25h",
        );
        let _ = self.tty.flush();
    }
}

impl Detacher {
    /// Tells the parent that the terminal is restored and this process stops
    /// now, so that it stops too and the shell takes the terminal.
    pub fn suspending(&self) {
        let _ = nix::unistd::write(&self.to_parent, &[SUSPENDED]);
    }

    /// Leaves the terminal's session (no SIGHUP when the terminal closes), points
    /// the standard streams at `/dev/null`, then lets the shell go: the parent
    /// exits 0. Call it after restoring the terminal.
    pub fn detach(self) -> io::Result<()> {
        // Leave the session and the terminal first, then let the shell go: once
        // the parent has exited, this process already is what it says it is.
        setsid().map_err(io::Error::from)?;
        // The parent exits now, and this process goes on.
        nix::sys::prctl::set_pdeathsig(None).map_err(io::Error::from)?;
        let null = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open("/dev/null")?;
        for fd in 0..=2 {
            // SAFETY: dup2 onto the standard descriptors, which this process owns.
            if unsafe { libc::dup2(null.as_raw_fd(), fd) } < 0 {
                return Err(io::Error::last_os_error());
            }
        }
        nix::unistd::write(&self.to_parent, &[DETACHED]).map_err(io::Error::from)?;
        drop(self.to_parent);
        Ok(())
    }
}
