//! The `schema_version` of the state files clowder writes and reads back: one
//! check and one migration path for all of them. A newer file is refused before
//! any of its fields is read; an older one is brought up to date in memory, and
//! is written back in the new shape only when clowder writes it anyway.
//!
//! Fields this build does not know are ignored within a version it reads: a later
//! clowder may add a field an older one can do without, and raises the version
//! only for a change an older one must not miss.

use std::path::Path;

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

/// The key every versioned file carries at its top.
pub const KEY: &str = "schema_version";

/// One file's format: what this build writes, and how older ones are read.
pub struct Format {
    /// The version this build writes, and the highest it reads.
    pub current: u64,
    /// The first version there was: a lower one is no file clowder wrote.
    pub first: u64,
    /// The version a file without [`KEY`] is taken for (files written before
    /// versions were kept); `None`: such a file is refused.
    pub unversioned: Option<u64>,
    /// Brings a file of version `from` to `from + 1`, in place.
    pub migrate: fn(from: u64, value: &mut Value) -> Result<(), String>,
    /// Whether the type read has a `schema_version` field of its own; else the
    /// key is taken out before the fields are read.
    pub in_struct: bool,
}

/// A migration for a format whose older versions differ only in their number.
pub fn no_changes(_from: u64, _value: &mut Value) -> Result<(), String> {
    Ok(())
}

/// What is said of a file made by a newer clowder (after the file's name).
pub fn newer(found: u64, current: u64) -> String {
    format!("made by a newer clowder (schema {found}, this one reads up to {current})")
}

/// Whether an error of [`Format::upgrade`] is [`newer`]'s refusal.
pub fn is_newer(err: &str) -> bool {
    err.starts_with("made by a newer clowder")
}

impl Format {
    /// `text` parsed, checked and migrated to [`Format::current`]; the error says
    /// where in the file, not which file.
    pub fn upgrade(&self, text: &str) -> Result<Value, String> {
        let mut value: Value = serde_json::from_str(text).map_err(|err| {
            let what = err.to_string();
            // serde_json ends its message with the place, which is said first here.
            let what = what
                .rsplit_once(" at line ")
                .map_or(what.as_str(), |(w, _)| w);
            format!(
                "line {} column {}: not valid JSON: {what}",
                err.line(),
                err.column()
            )
        })?;
        self.upgrade_value(&mut value)?;
        Ok(value)
    }

    /// As [`Format::upgrade`], on JSON already parsed.
    pub fn upgrade_value(&self, value: &mut Value) -> Result<(), String> {
        let Some(object) = value.as_object() else {
            return Err("not a JSON object".into());
        };
        let found = match object.get(KEY) {
            None => self
                .unversioned
                .ok_or_else(|| format!("no {KEY}: not a file clowder wrote"))?,
            Some(number) => number
                .as_u64()
                .ok_or_else(|| format!("{KEY}: expected a whole number such as 1"))?,
        };
        if found > self.current {
            return Err(newer(found, self.current));
        }
        if found < self.first {
            return Err(format!(
                "{KEY} {found}: no clowder wrote this version (the first was {})",
                self.first
            ));
        }
        for from in found..self.current {
            (self.migrate)(from, value)
                .map_err(|err| format!("{KEY} {from}: cannot be read as {}: {err}", from + 1))?;
        }
        if let Some(object) = value.as_object_mut() {
            if self.in_struct {
                object.insert(KEY.into(), Value::from(self.current));
            } else {
                object.remove(KEY);
            }
        }
        Ok(())
    }

    /// `text` read as a `T` of the current version; errors name the key.
    pub fn parse<T: DeserializeOwned>(&self, text: &str) -> Result<T, String> {
        let value = self.upgrade(text)?;
        serde_path_to_error::deserialize(value)
            .map_err(|err| format!("at {}: {}", err.path(), err.inner()))
    }

    /// As [`Format::parse`], every error starting with the file's name.
    pub fn read<T: DeserializeOwned>(&self, path: &Path, text: &str) -> Result<T, String> {
        self.parse(text)
            .map_err(|err| format!("{}: {err}", path.display()))
    }

    /// `value` as pretty JSON, with [`KEY`] first when its type has none.
    pub fn to_vec_pretty<T: Serialize>(&self, value: &T) -> serde_json::Result<Vec<u8>> {
        if self.in_struct {
            return serde_json::to_vec_pretty(value);
        }
        serde_json::to_vec_pretty(&self.stamped(value))
    }

    /// As [`Format::to_vec_pretty`], on one line.
    pub fn to_vec<T: Serialize>(&self, value: &T) -> serde_json::Result<Vec<u8>> {
        if self.in_struct {
            return serde_json::to_vec(value);
        }
        serde_json::to_vec(&self.stamped(value))
    }

    fn stamped<'a, T: Serialize>(&self, inner: &'a T) -> Stamped<'a, T> {
        Stamped {
            schema_version: self.current,
            inner,
        }
    }
}

#[derive(Serialize)]
struct Stamped<'a, T: Serialize> {
    schema_version: u64,
    #[serde(flatten)]
    inner: &'a T,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn renamed(from: u64, value: &mut Value) -> Result<(), String> {
        if from == 1 {
            let object = value.as_object_mut().ok_or("not an object")?;
            let old = object.remove("old").ok_or("no `old`")?;
            object.insert("new".into(), old);
        }
        Ok(())
    }

    const FORMAT: Format = Format {
        current: 2,
        first: 1,
        unversioned: Some(1),
        migrate: renamed,
        in_struct: false,
    };

    #[derive(Debug, PartialEq, Serialize, serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Thing {
        new: u32,
    }

    #[test]
    fn older_files_are_migrated_and_newer_ones_refused() {
        assert_eq!(FORMAT.parse::<Thing>(r#"{"old": 3}"#), Ok(Thing { new: 3 }));
        assert_eq!(
            FORMAT.parse::<Thing>(r#"{"schema_version": 1, "old": 3}"#),
            Ok(Thing { new: 3 })
        );
        assert_eq!(
            FORMAT.parse::<Thing>(r#"{"schema_version": 2, "new": 4}"#),
            Ok(Thing { new: 4 })
        );
        let err = FORMAT
            .parse::<Thing>(r#"{"schema_version": 3, "newer": true}"#)
            .expect_err("newer");
        assert_eq!(
            err,
            "made by a newer clowder (schema 3, this one reads up to 2)"
        );
        let err = FORMAT
            .read::<Thing>(Path::new("x.json"), r#"{"schema_version": "2"}"#)
            .expect_err("text");
        assert!(err.starts_with("x.json: schema_version: expected"), "{err}");
        let err = FORMAT.parse::<Thing>("{\"new\": 1,\n").expect_err("cut");
        assert!(err.starts_with("line 2 column 0"), "{err}");
    }

    #[test]
    fn what_is_written_carries_the_version_and_reads_back() {
        let bytes = FORMAT.to_vec(&Thing { new: 5 }).expect("encodes");
        let text = String::from_utf8(bytes).expect("utf-8");
        assert_eq!(text, r#"{"schema_version":2,"new":5}"#);
        assert_eq!(FORMAT.parse::<Thing>(&text), Ok(Thing { new: 5 }));
    }
}
