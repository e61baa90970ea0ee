//! clowder: a terminal control room for autonomous coding agents.
//!
//! The library holds the engine ([`supervisor`]), what is on disk ([`store`]), the
//! reading of agent output ([`agent`]) and the configuration ([`config`]); the
//! `clowder` binary is a thin shell around [`cli::main`].

#![cfg_attr(not(test), deny(clippy::unwrap_used))]

pub mod agent;
pub mod approvals;
pub mod cli;
pub mod config;
pub mod console;
pub mod detach;
pub mod escape;
pub mod fleet;
pub mod fmt;
pub mod lane_status;
pub mod llm;
pub mod plan;
pub mod proc_stat;
pub mod protocol;
pub mod store;
pub mod supervisor;
pub mod ui;
pub mod wake;
pub mod web;
pub mod worker;
