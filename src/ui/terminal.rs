//! The control room's terminal: the full screen entered and left (on every exit
//! path, and around a suspend), and what reaches the room from outside — keys,
//! pastes, the terminal's end, and the signals that concern the screen.

use std::io::{self, Stdout};
use std::task::Poll;

use crossterm::event::{
    DisableBracketedPaste, DisableMouseCapture, EnableBracketedPaste, EnableMouseCapture, Event,
    EventStream, KeyCode, KeyEvent, KeyEventKind, KeyModifiers,
};
use crossterm::execute;
use crossterm::terminal::{
    EnterAlternateScreen, LeaveAlternateScreen, disable_raw_mode, enable_raw_mode,
};
use futures_util::StreamExt;
use ratatui::Terminal;
use ratatui::backend::CrosstermBackend;
use tokio::signal::unix::{Signal, SignalKind, signal};

/// Raw mode, the alternate screen, mouse capture and bracketed paste, undone on
/// drop.
pub(super) struct TerminalGuard {
    pub(super) terminal: Terminal<CrosstermBackend<Stdout>>,
}

pub(super) fn restore_terminal() {
    let _ = disable_raw_mode();
    let _ = execute!(
        io::stdout(),
        DisableBracketedPaste,
        DisableMouseCapture,
        LeaveAlternateScreen,
        crossterm::cursor::Show
    );
}

fn enter_screen() -> io::Result<()> {
    enable_raw_mode()?;
    if let Err(err) = execute!(
        io::stdout(),
        EnterAlternateScreen,
        EnableMouseCapture,
        EnableBracketedPaste
    ) {
        restore_terminal();
        return Err(err);
    }
    Ok(())
}

impl TerminalGuard {
    pub(super) fn enter() -> io::Result<TerminalGuard> {
        // Restore before the panic message is printed, so it is readable and the
        // user's shell is usable.
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            restore_terminal();
            previous(info);
        }));
        enter_screen()?;
        match Terminal::new(CrosstermBackend::new(io::stdout())) {
            Ok(terminal) => Ok(TerminalGuard { terminal }),
            Err(err) => {
                restore_terminal();
                Err(err)
            }
        }
    }

    /// Gives the terminal back to the shell, stops this process until it is
    /// continued (`fg`), then takes the screen again and repaints all of it.
    /// `on_stop` runs with the terminal restored, just before the stop (the
    /// waiting parent is told then, see [`crate::detach`]).
    pub(super) fn suspend(&mut self, on_stop: impl FnOnce()) -> io::Result<()> {
        restore_terminal();
        on_stop();
        // SIGSTOP, not SIGTSTP: this process handles SIGTSTP (that is how it got
        // here), and must stop whatever its handler would do.
        nix::sys::signal::raise(nix::sys::signal::Signal::SIGSTOP).map_err(io::Error::from)?;
        self.take_back()
    }

    /// Takes the screen again after the shell or another program had it, and
    /// has the next frame paint all of it. Not [`Terminal::clear`]: that asks
    /// the terminal where its cursor is and waits up to two seconds for the
    /// answer, which a busy terminal may not give in time (the room then took
    /// the terminal for gone) and which reaches the shell when it comes late.
    pub(super) fn take_back(&mut self) -> io::Result<()> {
        enter_screen()?;
        let area = self.terminal.size()?;
        self.terminal.resize(area.into())
    }
}

impl Drop for TerminalGuard {
    fn drop(&mut self) {
        restore_terminal();
    }
}

/// What the room is told from outside the loop it shows.
#[derive(Debug)]
pub(super) enum Input {
    Event(Event),
    /// Keys that came one read at a time, as a person types them.
    Keys(Vec<KeyEvent>),
    /// Keys that came in one read: a paste the terminal did not bracket
    /// ([`is_burst`]).
    Burst(Vec<KeyEvent>),
    /// Text pasted, bracketed by the terminal.
    Paste(String),
    /// The terminal is gone: its input ended or failed, or SIGHUP came.
    Closed,
    /// SIGTERM or SIGINT from someone outside.
    Stop,
    /// Ctrl-Z, or SIGTSTP: suspend as a full-screen program does.
    Suspend,
}

/// The terminal's events and the room's signals. Once the terminal is gone its
/// events are no longer read (a hung-up terminal answers every read at once).
pub(super) struct Inputs {
    events: Option<EventStream>,
    /// An event read with a burst of keys, given out next.
    held_back: Option<io::Result<Event>>,
    terminate: Option<Signal>,
    interrupt: Option<Signal>,
    hangup: Option<Signal>,
    suspend: Option<Signal>,
}

impl Inputs {
    pub(super) fn new() -> Inputs {
        Inputs {
            events: Some(EventStream::new()),
            held_back: None,
            terminate: signal(SignalKind::terminate()).ok(),
            interrupt: signal(SignalKind::interrupt()).ok(),
            // Under nohup a closing terminal is not meant to stop anything.
            hangup: crate::supervisor::process::hangup_signal(),
            suspend: signal(SignalKind::from_raw(libc::SIGTSTP)).ok(),
        }
    }

    /// Stops reading the terminal until [`Inputs::reopen`]: a stopped or
    /// background process must not read it.
    pub(super) fn pause_events(&mut self) {
        self.events = None;
        self.held_back = None;
    }

    pub(super) fn reopen(&mut self) {
        self.events = Some(EventStream::new());
    }

    pub(super) async fn next(&mut self) -> Input {
        if let Some(event) = self.held_back.take() {
            return self.on_event(Some(event)).await;
        }
        tokio::select! {
            event = next_event(&mut self.events) => {
                let input = self.on_event(event).await;
                if matches!(input, Input::Closed) {
                    self.events = None;
                }
                input
            }
            Some(()) = recv(&mut self.terminate) => Input::Stop,
            Some(()) = recv(&mut self.interrupt) => Input::Stop,
            Some(()) = recv(&mut self.hangup) => {
                self.events = None;
                Input::Closed
            }
            Some(()) = recv(&mut self.suspend) => Input::Suspend,
        }
    }

    async fn on_event(&mut self, event: Option<io::Result<Event>>) -> Input {
        match event {
            Some(Ok(Event::Key(key))) if is_suspend_key(&key) => Input::Suspend,
            Some(Ok(Event::Key(key))) => {
                let mut keys = vec![key];
                self.take_ready_keys(&mut keys).await;
                if is_burst(&keys) {
                    Input::Burst(keys)
                } else {
                    Input::Keys(keys)
                }
            }
            Some(Ok(Event::Paste(text))) => Input::Paste(text),
            Some(Ok(event)) => Input::Event(event),
            Some(Err(_)) | None => Input::Closed,
        }
    }

    /// The keys that arrived with the first, in the same read of the terminal.
    /// Polled with the room's own waker: crossterm's reader thread keeps the
    /// waker of the poll that found nothing, and with a no-op one
    /// (`now_or_never`) the next key woke nobody until a tick did, up to a
    /// second later.
    async fn take_ready_keys(&mut self, keys: &mut Vec<KeyEvent>) {
        let Some(events) = self.events.as_mut() else {
            return;
        };
        let held_back = &mut self.held_back;
        std::future::poll_fn(|cx| {
            while let Poll::Ready(Some(event)) = events.poll_next_unpin(cx) {
                match event {
                    Ok(Event::Key(key)) => keys.push(key),
                    other => {
                        *held_back = Some(other);
                        break;
                    }
                }
            }
            Poll::Ready(())
        })
        .await;
    }
}

async fn next_event(events: &mut Option<EventStream>) -> Option<io::Result<Event>> {
    match events {
        Some(events) => events.next().await,
        None => std::future::pending().await,
    }
}

async fn recv(stream: &mut Option<Signal>) -> Option<()> {
    match stream {
        Some(stream) => stream.recv().await,
        None => std::future::pending().await,
    }
}

/// Ctrl-Z: in raw mode the terminal sends it as a key, not as SIGTSTP.
fn is_suspend_key(key: &KeyEvent) -> bool {
    use crate::ui::keymap::{Action, Context, lookup};
    key.kind != KeyEventKind::Release
        && lookup(Context::Main, key).is_some_and(|binding| binding.action == Action::Suspend)
}

/// Whether keys that came in one read are a paste the terminal did not
/// bracket: a person's keys come one read each. The rule: two or more
/// printable keys in one read are a paste, unless they are all the same key (a
/// held key repeating, e.g. `j` to scroll). What the room does with it:
/// [`crate::ui::app::Msg::Burst`].
pub(super) fn is_burst(keys: &[KeyEvent]) -> bool {
    let printable: Vec<char> = keys.iter().filter_map(printable_char).collect();
    let repeat = printable.windows(2).all(|pair| pair[0] == pair[1]);
    printable.len() >= 2 && !(repeat && printable.len() == keys.len())
}

/// The character a key types, if it types one (no Ctrl, no Alt).
pub fn printable_char(key: &KeyEvent) -> Option<char> {
    let plain = !key
        .modifiers
        .intersects(KeyModifiers::CONTROL | KeyModifiers::ALT);
    match key.code {
        KeyCode::Char(c) if plain && key.kind != KeyEventKind::Release => Some(c),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(text: &str) -> Vec<KeyEvent> {
        text.chars()
            .map(|c| KeyEvent::new(KeyCode::Char(c), KeyModifiers::NONE))
            .collect()
    }

    #[test]
    fn printable_keys_in_one_read_are_a_paste() {
        assert!(is_burst(&keys("hello qS world")));
        assert!(is_burst(&keys("qS")));
        let mut line = keys("jj");
        line.push(KeyEvent::new(KeyCode::Enter, KeyModifiers::NONE));
        assert!(is_burst(&line));
    }

    #[test]
    fn one_key_or_a_held_key_is_typed() {
        assert!(!is_burst(&keys("q")));
        assert!(!is_burst(&keys("jjjj")));
        let arrows = vec![
            KeyEvent::new(KeyCode::Down, KeyModifiers::NONE),
            KeyEvent::new(KeyCode::Down, KeyModifiers::NONE),
        ];
        assert!(!is_burst(&arrows));
    }
}
