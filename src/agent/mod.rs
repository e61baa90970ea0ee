//! Reading what an agent session left behind.
//!
//! The supervisor does not talk to the agent while it runs; it only keeps the
//! agent's interleaved stdout+stderr in a file. Once a session ends, this module
//! reads that file once to answer the two questions that steer the next
//! session: did the agent stop because it hit a rate/usage limit (and when does
//! the limit lift), and did a configured "commit pattern" appear.
//!
//! The scanner understands Claude Code `--output-format stream-json` and Codex
//! `exec --json` event streams by their parsed structure, and falls back to text
//! patterns only for lines that are not JSON objects (other agents, stderr), so
//! that source code quoted in tool results can never fake a rate limit.

mod classify;
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
