//! `[ui]` in harness.toml: how a human is called when something needs them (the
//! room's terminal signals, and the host's `on_attention` command).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct UiConfig {
    /// How a new approval request, or a lane that becomes held, failed or done,
    /// is signalled on the terminal: `bell`, `osc` (a desktop notification,
    /// OSC 9 and OSC 777), `both` or `off`.
    pub notify: Notify,
    /// A shell command the host runs (with `sh -c`, in the fleet's folder) on
    /// the same occasions, whether a control room is attached or not, with
    /// `CLOWDER_LANE`, `CLOWDER_EVENT` and `CLOWDER_TEXT` set; `""`: none.
    pub on_attention: String,
}

impl UiConfig {
    /// The attention command in force, if any.
    pub fn on_attention(&self) -> Option<&str> {
        (!self.on_attention.trim().is_empty()).then_some(self.on_attention.as_str())
    }
}

/// Which terminal signals call for attention.
#[derive(Debug, Clone, Copy, Default, Deserialize, Serialize, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Notify {
    /// The terminal bell (BEL).
    Bell,
    /// A desktop-notification escape (OSC 9 and OSC 777).
    Osc,
    /// The bell and the desktop notification.
    #[default]
    Both,
    /// Neither.
    Off,
}

impl Notify {
    pub fn bell(self) -> bool {
        matches!(self, Notify::Bell | Notify::Both)
    }

    pub fn osc(self) -> bool {
        matches!(self, Notify::Osc | Notify::Both)
    }
}
