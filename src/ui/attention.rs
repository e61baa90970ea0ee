//! How the control room signals a call for attention on its terminal
//! ([`Notifier`]: the bell and a desktop-notification escape). Which changes
//! call is [`crate::fleet::attention::detect`]'s; running `[ui] on_attention`
//! is the host's, so the screen never starts a process for it.

use std::io::{self, Write};

use crate::config::{Notify, UiConfig};
use crate::fleet::attention::AttentionEvent;

/// At most this many desktop notifications at once; past it the last one counts the rest.
const MAX_NOTIFICATIONS: usize = 3;
/// Longest text put in a notification, in characters.
const MAX_TEXT: usize = 200;

/// Signals calls for attention on the terminal as `[ui] notify` says. The
/// `on_attention` command is the host's ([`crate::fleet::attention`]).
#[derive(Debug, Clone)]
pub struct Notifier {
    notify: Notify,
}

impl Notifier {
    pub fn new(config: &UiConfig) -> Notifier {
        Notifier {
            notify: config.notify,
        }
    }

    /// Writes the escapes for `events` to `terminal` (one bell for them all).
    pub fn notify(&self, terminal: &mut impl Write, events: &[AttentionEvent]) -> io::Result<()> {
        if events.is_empty() {
            return Ok(());
        }
        terminal.write_all(escapes(self.notify, events).as_bytes())?;
        terminal.flush()
    }
}

/// The bytes that signal `events` on a terminal, as `notify` chooses.
fn escapes(notify: Notify, events: &[AttentionEvent]) -> String {
    let mut out = String::new();
    if notify.osc() {
        let shown = if events.len() > MAX_NOTIFICATIONS {
            MAX_NOTIFICATIONS - 1
        } else {
            events.len()
        };
        for event in &events[..shown] {
            let title = if event.lane.is_empty() {
                "clowder".to_string()
            } else {
                format!("clowder: {}", event.lane)
            };
            out.push_str(&notification(&title, &event.text));
        }
        if shown < events.len() {
            let more = format!("{} more lanes or requests need you", events.len() - shown);
            out.push_str(&notification("clowder", &more));
        }
    }
    if notify.bell() {
        out.push('\x07');
    }
    out
}

/// One desktop notification in both escapes terminals know: OSC 9 (iTerm2's)
/// and OSC 777 (urxvt's); a terminal that knows neither ignores them.
fn notification(title: &str, body: &str) -> String {
    let (title, body) = (safe_text(title), safe_text(body));
    format!("\x1b]9;{body}\x07\x1b]777;notify;{title};{body}\x07")
}

/// Text that cannot end or add an escape sequence: control characters are shown
/// as visible escapes, `;` (the OSC 777 field separator) becomes `,`, and long
/// text is cut.
fn safe_text(text: &str) -> String {
    let visible = crate::escape::one_line(text).replace(';', ",");
    if visible.chars().count() <= MAX_TEXT {
        return visible;
    }
    let mut cut: String = visible.chars().take(MAX_TEXT - 1).collect();
    cut.push('…');
    cut
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fleet::attention::EventKind;

    fn event(lane: &str, text: &str) -> AttentionEvent {
        AttentionEvent {
            lane: lane.into(),
            event: EventKind::LaneHeld,
            text: text.into(),
        }
    }

    #[test]
    fn escapes_follow_the_notify_setting() {
        let events = [event("a", "lane a is held")];
        let osc = "\x1b]9;lane a is held\x07\x1b]777;notify;clowder: a;lane a is held\x07";
        assert_eq!(escapes(Notify::Both, &events), format!("{osc}\x07"));
        assert_eq!(escapes(Notify::Osc, &events), osc);
        assert_eq!(escapes(Notify::Bell, &events), "\x07");
        assert_eq!(escapes(Notify::Off, &events), "");
        // One bell for many events.
        let two = [event("a", "x"), event("b", "y")];
        assert_eq!(escapes(Notify::Bell, &two), "\x07");
    }

    #[test]
    fn many_events_make_a_few_notifications() {
        let events: Vec<AttentionEvent> = (0..10).map(|i| event(&format!("l{i}"), "x")).collect();
        let out = escapes(Notify::Osc, &events);
        assert_eq!(out.matches("\x1b]9;").count(), MAX_NOTIFICATIONS, "{out:?}");
        assert!(out.contains("clowder: l1;x"), "{out:?}");
        assert!(!out.contains("clowder: l2;"), "{out:?}");
        assert!(out.ends_with("\x1b]777;notify;clowder;8 more lanes or requests need you\x07"));
    }

    #[test]
    fn agent_text_cannot_inject_escapes() {
        let hostile = "rm -rf /\x07\x1b]0;pwned\x07\x1b[2J\u{9c}\u{9b}31m; x\ny";
        let out = escapes(Notify::Osc, &[event("a", hostile)]);
        // Exactly the two sequences we wrote: two ESC, two BEL, nothing else.
        assert_eq!(out.matches('\x1b').count(), 2, "{out:?}");
        assert_eq!(out.matches('\x07').count(), 2, "{out:?}");
        assert!(
            !out.chars()
                .any(|c| c.is_control() && c != '\x1b' && c != '\x07')
        );
        assert_eq!(out.matches(';').count(), 4, "only our separators: {out:?}");
    }

    #[test]
    fn long_text_is_cut() {
        let text = safe_text(&"é".repeat(1000));
        assert_eq!(text.chars().count(), MAX_TEXT);
        assert!(text.ends_with('…'));
        assert_eq!(safe_text("short"), "short");
    }
}
