//! The validated scalars of `harness.toml`: amounts, counts, durations, paths,
//! patterns. Each checks its value while it is deserialized, so that a bad one is
//! reported where it stands, with what was expected.

use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use serde::de::{self, Deserializer, Visitor};
use serde::{Deserialize, Serialize};

use super::wait::Wait;
/// The completion promise: empty (off), or a text with something besides blanks.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Promise(pub String);

impl<'de> Deserialize<'de> for Promise {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let value = String::deserialize(d)?;
        if !value.is_empty() && value.trim().is_empty() {
            return Err(de::Error::invalid_value(
                de::Unexpected::Str(&value),
                &"a text such as \"TASK_COMPLETE\", or \"\" for none (blanks alone would match almost any message)",
            ));
        }
        if value.contains('\n') {
            return Err(de::Error::invalid_value(
                de::Unexpected::Str(&value),
                &"a text on one line, such as \"TASK_COMPLETE\"",
            ));
        }
        Ok(Promise(value))
    }
}

/// An autonomy level from 1 (ask before every session) to 5 (never ask).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Autonomy(pub u8);

impl<'de> Deserialize<'de> for Autonomy {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        deserialize_whole(d, 1, 5, "an autonomy level from 1 to 5").map(|v| Autonomy(v as u8))
    }
}

/// An amount of US dollars, zero or more.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Usd(pub f64);

impl<'de> Deserialize<'de> for Usd {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        const EXPECTED: &str = "an amount of US dollars, zero (no limit) or more, e.g. 5 or 0.5";
        let number = d.deserialize_any(NumberVisitor { expected: EXPECTED })?;
        let value = number.as_f64();
        if !value.is_finite() || !(0.0..1e12).contains(&value) {
            return Err(invalid_number(number, EXPECTED));
        }
        Ok(Usd(value))
    }
}

/// 0 (off) or a number of repeats of at least 2.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct DoomLoopThreshold(pub u64);

impl<'de> Deserialize<'de> for DoomLoopThreshold {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        const EXPECTED: &str = "0 (off) or a whole number of at least 2";
        match deserialize_whole(d, 0, u64::MAX, EXPECTED)? {
            1 => Err(invalid_number(Number::Int(1), EXPECTED)),
            value => Ok(DoomLoopThreshold(value)),
        }
    }
}

/// A duration written `90s`, `90m`, `8h` or `1.5d`, or `""` for none.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct OptionalDuration {
    pub text: String,
    pub duration: Option<Duration>,
}

impl OptionalDuration {
    pub fn parse(text: &str) -> Result<OptionalDuration, String> {
        let trimmed = text.trim();
        if trimmed.is_empty() {
            return Ok(OptionalDuration {
                text: String::new(),
                duration: None,
            });
        }
        let bad = || {
            format!(
                "`{trimmed}` is not a duration, expected e.g. 90s, 90m, 8h, 1.5d, or \"\" for no limit"
            )
        };
        let split = trimmed
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .ok_or_else(bad)?;
        let (number, unit) = trimmed.split_at(split);
        let number: f64 = number.parse().map_err(|_| bad())?;
        let scale = match unit {
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            "d" => 86_400.0,
            _ => return Err(bad()),
        };
        let duration = positive_duration(number, scale).ok_or_else(bad)?;
        Ok(OptionalDuration {
            text: trimmed.to_string(),
            duration: Some(duration),
        })
    }
}

impl Serialize for OptionalDuration {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.text)
    }
}

impl<'de> Deserialize<'de> for OptionalDuration {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let value = String::deserialize(d)?;
        OptionalDuration::parse(&value).map_err(de::Error::custom)
    }
}

/// A wait as `clowder gate --timeout` takes it, checked when the config is read.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct WaitSetting(pub String);

impl WaitSetting {
    pub fn parse(&self) -> Wait {
        self.0.parse().unwrap_or(Wait {
            limit: Some(Duration::from_secs(540)),
            label: "9m".into(),
        })
    }
}

impl<'de> Deserialize<'de> for WaitSetting {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let value = String::deserialize(d)?;
        value.parse::<Wait>().map_err(|err| {
            de::Error::custom(format!(
                "{err}, expected a duration such as 90s, 10m, 1h or never"
            ))
        })?;
        Ok(WaitSetting(value))
    }
}

pub(super) fn positive_duration(value: f64, unit_secs: f64) -> Option<Duration> {
    let secs = value * unit_secs;
    (value.is_finite() && value > 0.0 && secs < 1e12).then(|| Duration::from_secs_f64(secs))
}

/// A number as TOML wrote it, so that messages show `-1`, not `-1.0`.
#[derive(Debug, Clone, Copy)]
enum Number {
    Int(i128),
    Float(f64),
}

impl Number {
    fn as_f64(self) -> f64 {
        match self {
            Number::Int(v) => v as f64,
            Number::Float(v) => v,
        }
    }
}

impl fmt::Display for Number {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Number::Int(v) => write!(f, "{v}"),
            Number::Float(v) => write!(f, "{v}"),
        }
    }
}

/// Accepts an integer or a float; anything else is "invalid type" with `expected`.
struct NumberVisitor {
    expected: &'static str,
}

impl Visitor<'_> for NumberVisitor {
    type Value = Number;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str(self.expected)
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Number, E> {
        Ok(Number::Int(v.into()))
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Number, E> {
        Ok(Number::Int(v.into()))
    }
    fn visit_i128<E: de::Error>(self, v: i128) -> Result<Number, E> {
        Ok(Number::Int(v))
    }
    fn visit_u128<E: de::Error>(self, v: u128) -> Result<Number, E> {
        Ok(Number::Int(i128::try_from(v).unwrap_or(i128::MAX)))
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Number, E> {
        Ok(Number::Float(v))
    }
}

fn invalid_number<E: de::Error>(value: Number, expected: &str) -> E {
    E::custom(format!("invalid value: {value}, expected {expected}"))
}

fn deserialize_duration<'de, D: Deserializer<'de>>(
    deserializer: D,
    unit_secs: f64,
    allow_zero: bool,
    expected: &'static str,
) -> Result<Duration, D::Error> {
    let number = deserializer.deserialize_any(NumberVisitor { expected })?;
    let value = number.as_f64();
    let ok = value.is_finite() && (value > 0.0 || (allow_zero && value == 0.0));
    if !ok {
        return Err(invalid_number(number, expected));
    }
    // Past ~30,000 years a duration is surely a typo, and would overflow timers.
    if value * unit_secs >= 1e12 {
        return Err(de::Error::custom(format!(
            "invalid value: {number} is too large, expected {expected}"
        )));
    }
    Ok(Duration::from_secs_f64(value * unit_secs))
}

/// A whole number in `min..=max`, with a message in words rather than Rust types.
fn deserialize_whole<'de, D: Deserializer<'de>>(
    deserializer: D,
    min: u64,
    max: u64,
    expected: &'static str,
) -> Result<u64, D::Error> {
    match deserializer.deserialize_any(NumberVisitor { expected })? {
        Number::Int(v) if v >= i128::from(min) && v <= i128::from(max) => {
            u64::try_from(v).map_err(|_| invalid_number(Number::Int(v), expected))
        }
        other => Err(invalid_number(other, expected)),
    }
}

pub(super) fn deserialize_count_u64<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
    deserialize_whole(d, 0, u64::MAX, "a whole number, zero or more")
}

pub(super) fn deserialize_count_u32<'de, D: Deserializer<'de>>(d: D) -> Result<u32, D::Error> {
    let value = deserialize_whole(d, 0, u64::from(u32::MAX), "a whole number, zero or more")?;
    u32::try_from(value).map_err(|_| de::Error::custom("number out of range"))
}

macro_rules! duration_type {
    ($name:ident, $unit:expr, $allow_zero:expr, $expected:expr) => {
        #[derive(Debug, Clone, Copy, PartialEq)]
        pub struct $name(pub Duration);

        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                deserialize_duration(d, $unit, $allow_zero, $expected).map($name)
            }
        }

        impl Serialize for $name {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_f64(self.0.as_secs_f64() / $unit)
            }
        }
    };
}

duration_type!(
    Seconds,
    1.0,
    true,
    "a number of seconds, zero or more (fractions allowed, e.g. 0.5)"
);
duration_type!(
    PositiveSeconds,
    1.0,
    false,
    "a positive number of seconds (fractions allowed, e.g. 0.5)"
);
duration_type!(
    PositiveMinutes,
    60.0,
    false,
    "a positive number of minutes (fractions allowed, e.g. 0.02)"
);

/// A whole number of at least 1.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct PositiveCount(pub u64);

impl<'de> Deserialize<'de> for PositiveCount {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        deserialize_whole(d, 1, u64::MAX, "a whole number of at least 1").map(PositiveCount)
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NonEmptyString(pub String);

impl<'de> Deserialize<'de> for NonEmptyString {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let value = String::deserialize(d)?;
        if value.trim().is_empty() {
            return Err(de::Error::invalid_value(
                de::Unexpected::Str(&value),
                &"a non-empty string",
            ));
        }
        Ok(NonEmptyString(value))
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NonEmptyPath(pub PathBuf);

impl From<&str> for NonEmptyPath {
    fn from(path: &str) -> Self {
        NonEmptyPath(PathBuf::from(path))
    }
}

impl<'de> Deserialize<'de> for NonEmptyPath {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let value = String::deserialize(d)?;
        if value.is_empty() {
            return Err(de::Error::invalid_value(
                de::Unexpected::Str(&value),
                &"a non-empty path",
            ));
        }
        Ok(NonEmptyPath(PathBuf::from(value)))
    }
}

/// A file-name prefix: non-empty, and no path separator, so that output files stay
/// in `output_dir`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FileStem(pub String);

impl<'de> Deserialize<'de> for FileStem {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let value = String::deserialize(d)?;
        if value.is_empty() || value.contains('/') || value.contains('\0') {
            return Err(de::Error::invalid_value(
                de::Unexpected::Str(&value),
                &"a non-empty file name prefix without `/`",
            ));
        }
        Ok(FileStem(value))
    }
}

/// A regex, compiled once per process: the gate compiled every rule's regexes
/// again for each call and each simple command, which was most of its time
/// (87 % of its instructions for `ls -la` under 42 rules). The patterns come
/// from the configuration, so the cache holds at most one entry per rule.
pub fn compiled_regex(pattern: &str) -> Option<regex::Regex> {
    compiled_regex_or_error(pattern).ok()
}

fn compiled_regex_or_error(pattern: &str) -> Result<regex::Regex, regex::Error> {
    use std::collections::HashMap;
    use std::sync::{LazyLock, Mutex};
    type Cache = HashMap<String, Result<regex::Regex, regex::Error>>;
    static CACHE: LazyLock<Mutex<Cache>> = LazyLock::new(Mutex::default);
    let mut cache = CACHE
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    cache
        .entry(pattern.to_string())
        .or_insert_with(|| regex::Regex::new(pattern))
        .clone()
}

/// A regular expression, checked when the config is read.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Pattern(pub String);

impl<'de> Deserialize<'de> for Pattern {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let value = String::deserialize(d)?;
        if value.is_empty() {
            return Err(de::Error::invalid_value(
                de::Unexpected::Str(&value),
                &"a non-empty regular expression",
            ));
        }
        if let Err(err) = compiled_regex_or_error(&value) {
            // The regex error draws a caret diagram over several lines; its last
            // line says what is wrong.
            let text = err.to_string();
            let detail = text
                .lines()
                .rev()
                .find(|line| !line.trim().is_empty())
                .unwrap_or_default()
                .trim()
                .trim_start_matches("error: ");
            return Err(de::Error::custom(format!(
                "invalid regular expression {value:?}: {detail}, expected a valid regex"
            )));
        }
        Ok(Pattern(value))
    }
}

pub fn pattern_strings(patterns: &[Pattern]) -> Vec<String> {
    patterns.iter().map(|p| p.0.clone()).collect()
}
