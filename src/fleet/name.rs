//! `LaneName`: a lane's name, checked once so that it is safe as a folder name
//! and inside the branch name `clowder/NAME`.

use std::fmt;
use std::sync::LazyLock;

use regex::Regex;
use serde::{Deserialize, Serialize};

/// The rule every lane name follows (the contract of `clowder lane add`).
pub const NAME_RULE: &str = "^[a-z0-9][a-z0-9._-]{0,39}$";

static NAME_RE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(NAME_RULE).expect("NAME_RULE is a valid regex because it is a literal")
});

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct LaneName(String);

impl LaneName {
    /// Checks `name`; the error says what is wrong with it.
    pub fn parse(name: &str) -> Result<LaneName, String> {
        if !NAME_RE.is_match(name) {
            return Err(format!(
                "invalid lane name {name:?}: expected 1 to 40 characters of a-z, 0-9, '.', '_', '-', starting with a letter or digit ({NAME_RULE})"
            ));
        }
        // Names the rule lets through but git refuses in `clowder/NAME`.
        if name.contains("..") || name.ends_with('.') || name.ends_with(".lock") {
            return Err(format!(
                "invalid lane name {name:?}: git refuses a branch name with \"..\" or ending in \".\" or \".lock\""
            ));
        }
        Ok(LaneName(name.to_string()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// A lane of one of several hosts attached to one room, as the room names
    /// it: `HOST/NAME`. No command takes such a name: the room maps it back to
    /// the host and the lane before it asks anything.
    pub fn on_host(host: &str, lane: &LaneName) -> LaneName {
        LaneName(format!("{host}/{}", lane.0))
    }

    /// `(HOST, NAME)` of a name made by [`LaneName::on_host`].
    pub fn host_and_lane(&self) -> Option<(&str, LaneName)> {
        let (host, lane) = self.0.split_once('/')?;
        Some((host, LaneName::parse(lane).ok()?))
    }

    /// The lane's own branch, `clowder/NAME`.
    pub fn branch(&self) -> String {
        format!("clowder/{}", self.0)
    }
}

/// Looked up by its text: a room's maps of lanes are asked with the lane a
/// request names (`HOST/NAME` with several hosts, which no parse accepts).
impl std::borrow::Borrow<str> for LaneName {
    fn borrow(&self) -> &str {
        &self.0
    }
}

impl TryFrom<String> for LaneName {
    type Error = String;

    fn try_from(name: String) -> Result<Self, Self::Error> {
        LaneName::parse(&name)
    }
}

impl From<LaneName> for String {
    fn from(name: LaneName) -> String {
        name.0
    }
}

/// A string that follows [`NAME_RULE`].
impl schemars::JsonSchema for LaneName {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "LaneName".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({ "type": "string", "pattern": NAME_RULE })
    }
}

impl fmt::Display for LaneName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::str::FromStr for LaneName {
    type Err = String;

    fn from_str(name: &str) -> Result<Self, Self::Err> {
        LaneName::parse(name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_the_rule() {
        for good in ["a", "auth", "fix-1.2_b", "0", &"a".repeat(40)] {
            assert!(LaneName::parse(good).is_ok(), "{good} refused");
        }
        let long = "a".repeat(41);
        for bad in [
            "", "..", ".a", "-x", "_x", "Auth", "a/b", "a b", "é", &long, "a..b", "a.", "a.lock",
        ] {
            assert!(LaneName::parse(bad).is_err(), "{bad:?} accepted");
        }
    }
}
