//! The headless printer: the loop's log lines on stdout, in the format of the shell
//! loops clowder replaces, e.g.
//! `[2026-02-14T23:15:00Z] [INFO]  iteration=14 global=362 status=session_running pid=54321`.

use std::io::Write;

use chrono::{DateTime, SecondsFormat, Utc};

use crate::protocol::{ExitReason, Snapshot};
use crate::supervisor::core::Level;
use crate::supervisor::runtime::Reporter;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verbosity {
    /// Errors and the summary only.
    Quiet,
    Normal,
    /// Normal, plus the agent's own output.
    Verbose,
}

pub struct Console {
    verbosity: Verbosity,
    /// The start of a character cut off at the end of the agent's output so
    /// far, completed by what it writes next.
    cut: Vec<u8>,
}

impl Console {
    pub fn new(verbosity: Verbosity) -> Console {
        Console {
            verbosity,
            cut: Vec::new(),
        }
    }

    /// The whole characters of `cut` + `bytes` (a byte that is not UTF-8 as
    /// U+FFFD), keeping a character cut at the end for next time.
    fn whole_chars(&mut self, bytes: &[u8]) -> String {
        self.cut.extend_from_slice(bytes);
        let keep = match std::str::from_utf8(&self.cut) {
            Err(err) if err.error_len().is_none() => self.cut.len() - err.valid_up_to(),
            _ => 0,
        };
        let tail = self.cut.split_off(self.cut.len() - keep);
        let text = String::from_utf8_lossy(&self.cut).into_owned();
        self.cut = tail;
        text
    }
}

/// One log line, without the newline.
pub fn format_line(wall: DateTime<Utc>, level: Level, message: &str) -> String {
    let tag = format!("[{}]", level.as_str());
    format!(
        "[{}] {tag:<7} {message}",
        wall.to_rfc3339_opts(SecondsFormat::Secs, true)
    )
}

/// Prints `line` on stdout, every invisible character in it escaped (log
/// lines quote the agent: a limit's reason, a failure's words); a closed
/// stdout (a pipe to `head`, a terminal gone while the loop ended its
/// sessions) is no reason to fail.
pub fn say(line: &str) {
    let mut stdout = std::io::stdout().lock();
    let _ = writeln!(stdout, "{}", crate::escape::visible(line));
    let _ = stdout.flush();
}

impl Reporter for Console {
    fn log(&mut self, wall: DateTime<Utc>, level: Level, message: &str) {
        if self.verbosity == Verbosity::Quiet && level != Level::Error {
            return;
        }
        say(&format_line(wall, level, message));
    }

    fn agent_output(&mut self, bytes: &[u8]) {
        if self.verbosity != Verbosity::Verbose {
            return;
        }
        let text = self.whole_chars(bytes);
        let mut stdout = std::io::stdout().lock();
        let _ = stdout.write_all(crate::escape::visible_lines(&text).as_bytes());
        let _ = stdout.flush();
    }
}

/// The last line clowder prints.
pub fn summary_line(reason: &ExitReason, snapshot: &Snapshot, duration_secs: i64) -> String {
    let c = &snapshot.counters;
    let completed = snapshot
        .last_completed_iteration
        .map_or(0, |_| c.productive);
    let errors = match c.transient_errors {
        0 => String::new(),
        n => format!(", {n} server errors"),
    };
    format!(
        "clowder: stopped ({}) after {} — {} productive of {} max, {} sessions, {} empty retries, {} rate limits{errors}, {} watchdog kills, {} commits; last exit {}; exit code {}",
        reason.label(),
        crate::fmt::duration(duration_secs),
        completed,
        snapshot.max_iterations,
        c.sessions,
        c.empty_retries,
        c.rate_limits,
        c.watchdog_kills,
        c.commits,
        snapshot
            .last_exit_code
            .map_or_else(|| "-".to_string(), |code| code.to_string()),
        reason.exit_code()
    )
}

/// A `println!` that fails (standard output on a full disk, or a pipe closed
/// early) ends clowder with one line and exit 1, not a panic's backtrace and
/// exit 101. Any other panic goes on to the hook that was there.
pub fn exit_on_failed_stdout() {
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let payload = info.payload();
        let message = payload
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| payload.downcast_ref::<&str>().copied())
            .unwrap_or_default();
        if let Some(reason) = message.strip_prefix("failed printing to stdout: ") {
            eprintln!("clowder: error: cannot write to standard output: {reason}");
            std::process::exit(1);
        }
        previous(info);
    }));
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    #[test]
    fn line_format_matches_the_shell_loop() {
        let wall = Utc
            .with_ymd_and_hms(2026, 2, 14, 23, 15, 0)
            .single()
            .expect("valid time");
        assert_eq!(
            format_line(
                wall,
                Level::Info,
                "iteration=14 global=362 status=session_running pid=54321"
            ),
            "[2026-02-14T23:15:00Z] [INFO]  iteration=14 global=362 status=session_running pid=54321"
        );
        assert!(
            format_line(wall, Level::Error, "x").starts_with("[2026-02-14T23:15:00Z] [ERROR] x")
        );
    }

    #[test]
    fn a_character_cut_between_two_reads_is_shown_whole() {
        let mut console = Console::new(Verbosity::Verbose);
        let text = "é\u{202e}x";
        let bytes = text.as_bytes();
        assert_eq!(console.whole_chars(&bytes[..1]), "");
        assert_eq!(console.whole_chars(&bytes[1..3]), "é");
        assert_eq!(console.whole_chars(&bytes[3..]), "\u{202e}x");
        assert_eq!(console.whole_chars(b"\xffok"), "\u{fffd}ok");
    }
}
