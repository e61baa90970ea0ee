//! A real terminal for the control-room tests: the command runs in a detached
//! tmux session of a chosen size on its own server; keys go in with
//! `send-keys`, the screen comes back from `capture-pane`.

use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};

use super::{DEADLINE, wait_until};

/// The shell command of a control-room test: clowder for `iterations` sessions,
/// the fake agent writing its PIDs to `pidfile`, then `then` (more shell, e.g.
/// `"echo CLOWDER_EXIT=$?; "`), then a sleep that keeps the pane readable.
pub fn room_command(pidfile: &Path, iterations: u32, then: &str) -> String {
    clowder_then(pidfile, &format!(" {iterations}"), then)
}

/// [`room_command`] for the fleet's room: `clowder` in a folder with lanes.
pub fn fleet_room_command(pidfile: &Path, then: &str) -> String {
    clowder_then(pidfile, "", then)
}

fn clowder_then(pidfile: &Path, args: &str, then: &str) -> String {
    format!(
        "FAKE_AGENT_PIDFILE={pidfile} {clowder}{args}; {then}sleep 600",
        pidfile = pidfile.display(),
        clowder = super::clowder_bin().display()
    )
}

/// One tmux server with one session, killed on drop.
pub struct Tmux {
    socket: String,
}

/// Every session is called this; each has a server (socket) of its own.
const SESSION: &str = "main";

impl Tmux {
    /// Runs `shell_command` in `dir` in a `width`×`height` terminal.
    pub fn start(dir: &Path, shell_command: &str, width: u16, height: u16) -> Tmux {
        // A server per session, so tests running at once never share one.
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let socket = format!("clowder-test-{}-{n}", std::process::id());
        let status = Command::new("tmux")
            .args(["-L", &socket, "-f", "/dev/null", "new-session", "-d"])
            .args(["-s", SESSION])
            .args(["-x", &width.to_string(), "-y", &height.to_string()])
            .args(["-c", &dir.display().to_string()])
            .arg(shell_command)
            .status()
            .expect("tmux must be installed to run this test (.ci/run installs it)");
        assert!(status.success(), "tmux new-session failed");
        Tmux { socket }
    }

    /// Keys by tmux name (`Enter`, `C-c`, `Tab`…) or plain characters.
    pub fn keys(&self, keys: &[&str]) {
        let status = Command::new("tmux")
            .args(["-L", &self.socket, "send-keys", "-t", SESSION])
            .args(keys)
            .status()
            .expect("tmux send-keys");
        assert!(status.success());
    }

    /// Text typed as is (no key names).
    pub fn type_text(&self, text: &str) {
        self.keys(&["-l", text]);
    }

    /// Pastes `text` as a terminal does: bracketed (`paste-buffer -p`, when
    /// the program asked for it) or as plain typed bytes.
    pub fn paste(&self, text: &str, bracketed: bool) {
        let set = Command::new("tmux")
            .args(["-L", &self.socket, "set-buffer", "--", text])
            .status()
            .expect("tmux set-buffer");
        assert!(set.success());
        let mut paste = Command::new("tmux");
        paste.args(["-L", &self.socket, "paste-buffer", "-t", SESSION]);
        if bracketed {
            paste.arg("-p");
        }
        assert!(paste.status().expect("tmux paste-buffer").success());
    }

    /// Copies everything the pane's program writes from now on into `file`
    /// (`pipe-pane -O`), escape sequences and all.
    pub fn record_output(&self, file: &Path) {
        let status = Command::new("tmux")
            .args(["-L", &self.socket, "pipe-pane", "-O", "-t", SESSION])
            .arg(format!("cat >> '{}'", file.display()))
            .status()
            .expect("tmux pipe-pane");
        assert!(status.success(), "tmux pipe-pane failed");
    }

    /// A tmux format about the pane, e.g. `#{alternate_on}`.
    pub fn pane_format(&self, format: &str) -> String {
        let output = Command::new("tmux")
            .args([
                "-L",
                &self.socket,
                "display-message",
                "-p",
                "-t",
                SESSION,
                format,
            ])
            .output()
            .expect("tmux display-message");
        String::from_utf8_lossy(&output.stdout).trim().to_string()
    }

    /// Closes the terminal: the server and its session go, as a closed window
    /// or a dropped SSH connection do.
    pub fn close(self) {}

    /// The visible screen, as text.
    pub fn screen(&self) -> String {
        let output = Command::new("tmux")
            .args(["-L", &self.socket, "capture-pane", "-p", "-t", SESSION])
            .output()
            .expect("tmux capture-pane");
        String::from_utf8_lossy(&output.stdout).into_owned()
    }

    /// Waits until the screen shows `what`; returns it.
    pub fn wait_for(&self, what: &str) -> String {
        self.wait_until_shows(&what, |screen| screen.contains(what))
    }

    /// Waits until the screen no longer shows `what`; returns it. A key sent
    /// right after Escape could reach the room in the same read, where the two
    /// bytes are one Alt-key: wait for Escape's effect before the next key.
    pub fn wait_gone(&self, what: &str) -> String {
        self.wait_until_shows(&format!("no {what:?}"), |screen| !screen.contains(what))
    }

    /// Waits until the screen shows every one of `what` at once; returns it.
    pub fn wait_for_all(&self, what: &[&str]) -> String {
        self.wait_until_shows(&what, |screen| what.iter().all(|w| screen.contains(w)))
    }

    fn wait_until_shows(&self, what: &dyn std::fmt::Debug, shows: impl Fn(&str) -> bool) -> String {
        let mut last = String::new();
        let found = wait_until(DEADLINE, || {
            last = self.screen();
            shows(&last)
        });
        assert!(found, "screen never showed {what:?}; last screen:\n{last}");
        last
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = Command::new("tmux")
            .args(["-L", &self.socket, "kill-server"])
            .status();
    }
}
