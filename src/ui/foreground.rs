//! `o` and `e` in the room: a shell or an editor in a lane's folder, run in the
//! foreground of the terminal while the screen is given back, as lazygit does;
//! the room takes the screen again and repaints once it ends.

use std::io;
use std::os::fd::{AsFd, BorrowedFd};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::Command;

use nix::sys::signal::{self, SigHandler, Signal};
use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
use nix::unistd::{Pid, getpgrp, tcsetpgrp};

use super::app::LaneProgram;
use super::terminal::{Inputs, TerminalGuard};

/// The command `o` or `e` runs, from the environment: `$SHELL` (else
/// `/bin/sh`); `$VISUAL`, else `$EDITOR`, else `vi`, on the folder, through
/// `sh -c` as git runs an editor (so `code --wait` works).
pub(super) fn command_for(program: LaneProgram, dir: &Path) -> Command {
    let var = |name: &str| std::env::var(name).ok().filter(|v| !v.trim().is_empty());
    let mut command = match program {
        LaneProgram::Shell => Command::new(var("SHELL").unwrap_or_else(|| "/bin/sh".into())),
        LaneProgram::Editor => {
            let editor = var("VISUAL")
                .or_else(|| var("EDITOR"))
                .unwrap_or_else(|| "vi".into());
            let mut command = Command::new("/bin/sh");
            command.args(["-c", &format!("{editor} \"$@\""), "sh", "."]);
            command
        }
    };
    command.current_dir(dir);
    command
}

/// Gives the screen back, runs `command` as the terminal's foreground job (a
/// process group of its own: Ctrl-C and Ctrl-Z reach it, not the room), waits
/// for it, then takes the screen and the terminal back. Returns how it ended.
pub(super) fn run(
    guard: &mut TerminalGuard,
    inputs: &mut Inputs,
    mut command: Command,
) -> io::Result<String> {
    inputs.pause_events();
    super::terminal::restore_terminal();
    let stdin = io::stdin();
    let tty = nix::unistd::isatty(stdin.as_fd()).unwrap_or(false);
    // SAFETY: setpgid, signal and tcsetpgrp are async-signal-safe. The child
    // takes the terminal itself too, so that it never reads it from the background.
    unsafe {
        command.pre_exec(move || {
            if libc::setpgid(0, 0) != 0 {
                return Err(io::Error::last_os_error());
            }
            if tty {
                libc::signal(libc::SIGTTOU, libc::SIG_IGN);
                libc::tcsetpgrp(0, libc::getpid());
                libc::signal(libc::SIGTTOU, libc::SIG_DFL);
            }
            Ok(())
        });
    }
    let owned =
        crate::supervisor::reaper::spawn_owned("room", || command.spawn(), |c| Some(c.id()));
    let ended = match owned {
        Ok((child, _registered)) => {
            let pid = Pid::from_raw(child.id() as i32);
            let _ = nix::unistd::setpgid(pid, pid);
            if tty {
                let _ = tcsetpgrp(stdin.as_fd(), pid);
            }
            let ended = wait_in_foreground(pid, tty.then(|| stdin.as_fd()));
            if tty {
                take_terminal_back(stdin.as_fd());
            }
            ended
        }
        Err(err) => Err(err),
    };
    let back = guard.take_back();
    inputs.reopen();
    back?;
    ended
}

/// Waits for `pid`; one stopped (Ctrl-Z in an editor) is continued in the
/// foreground, since the room has no job control to offer.
fn wait_in_foreground(pid: Pid, tty: Option<BorrowedFd>) -> io::Result<String> {
    loop {
        match waitpid(pid, Some(WaitPidFlag::WUNTRACED)) {
            Ok(WaitStatus::Exited(_, code)) => return Ok(format!("exit {code}")),
            Ok(WaitStatus::Signaled(_, signal, _)) => return Ok(format!("killed by {signal}")),
            Ok(WaitStatus::Stopped(..)) => {
                if let Some(tty) = tty {
                    let _ = tcsetpgrp(tty, pid);
                }
                let _ = signal::killpg(pid, Signal::SIGCONT);
            }
            Ok(_) | Err(nix::errno::Errno::EINTR) => {}
            Err(err) => return Err(err.into()),
        }
    }
}

/// Makes the room's group the terminal's foreground again. Asked from the
/// background, which the terminal answers with SIGTTOU unless it is ignored.
fn take_terminal_back(tty: BorrowedFd) {
    // SAFETY: only the disposition of SIGTTOU changes, and is put back.
    let previous = unsafe { signal::signal(Signal::SIGTTOU, SigHandler::SigIgn) };
    let _ = tcsetpgrp(tty, getpgrp());
    if let Ok(previous) = previous {
        // SAFETY: as above.
        let _ = unsafe { signal::signal(Signal::SIGTTOU, previous) };
    }
}
