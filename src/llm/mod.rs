//! Talking to a model's HTTP API, for whoever asks one: a JSON POST with its reply
//! sorted ([`http`]), and when to ask a busy server again ([`retry`]). Knows
//! nothing of tasks or of the gate, so that the task worker and the gate's
//! reviewer share one client.

pub mod http;
pub mod retry;
