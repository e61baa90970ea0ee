//! Understanding what an agent printed: its interleaved stdout+stderr, kept in a
//! file per session and read as it grows.
//!
//! - `lines`: the one bounded line splitter every reader uses;
//! - `classify`: rate limits, transient API errors, authentication or billing
//!   failures and commit patterns, judged from the events' parsed structure (free
//!   text only on lines that are not JSON objects, never on a line cut mid-object),
//!   so nothing an agent merely quotes can fake a limit;
//! - `stream`: display lines and session statistics, one file per format
//!   (`stream/claude.rs`, `stream/codex.rs`; plain text in `stream/mod.rs`),
//!   rendering helpers in `stream/render.rs`;
//! - `text`: text safety, the one function that makes agent text harmless for a
//!   terminal (controls, escape sequences, bidi overrides), used by the screen and
//!   the console;
//! - `follow`: the control room's follower, on its own thread, woken by notify.

mod classify;
mod decode;
pub mod follow;
mod lines;
pub mod stream;
mod text;

pub(crate) use text::terminal_safe;

pub use classify::{
    Detectors, OutputScan, OutputScanner, RateLimit, scan_output, scan_output_file,
    scan_output_with,
};
pub use stream::{AgentFormat, LineKind, Rendered, SessionStats, StreamParser, ToolCallSig};
