//! The pure plan scheduler.
