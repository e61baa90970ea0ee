//! A plan's saved state.
