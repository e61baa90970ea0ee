//! Understanding what an agent printed: its interleaved stdout+stderr, kept in a
//! file per session and read as it grows.
//!
//! One reader: each line is split off once (`lines`), decoded once by its
//! format's decoder into a typed event, and that event feeds everything that
//! needs it: the statistics, the guards' tool-call log, the completion promise,
//! the display lines and the classification.
//!
//! - `lines`: the one bounded line splitter every reader uses;
//! - `decode`: what the decoders share over serde_json: lenient scalars and
//!   objects, raw values (`&RawValue`) kept undecoded until shown, the closing
//!   of a line cut at the length cap;
//! - `stream`: the reader ([`StreamParser`]) and one file per format:
//!   `stream/claude.rs` (Claude Code stream-json), `stream/codex.rs` (Codex
//!   `--json`), plain text needing none; `stream/render.rs` builds display lines;
//! - `classify`: rate limits, transient API errors, authentication or billing
//!   failures and commit patterns, judged from the event's fields (`Signals`;
//!   free text only on lines that are not JSON objects, never on a line cut
//!   mid-object), so nothing an agent merely quotes can fake a limit;
//! - `text`: display lines for the screen: escape sequences removed (colour
//!   kept on plain lines), a terminal's carriage returns, tabs, caps; every
//!   other invisible character shown by [`crate::escape`];
//! - `follow`: the control room's follower, on its own thread, woken by notify;
//! - `live_input`: agents that take a message on stdin while a session runs.
//!
//! A new agent format is one new file in `stream/` (its event type with serde,
//! `owns` to recognise its event types, `decode` to read a line into
//! statistics, display lines and `Signals`) plus one entry in
//! `stream::DECODERS`, the table from [`AgentFormat`] to decoder.

mod classify;
mod decode;
pub mod follow;
mod lines;
pub mod live_input;
pub mod stream;
mod text;

pub use classify::{
    Detectors, OutputScan, OutputScanner, RateLimit, Retrying, StopKind, scan_output,
    scan_output_file, scan_output_with,
};
pub use stream::{AgentFormat, LineKind, Rendered, SessionStats, StreamParser, ToolCallSig};
