//! The JSON Schema of `harness.toml` (`clowder config schema`, and the committed
//! `assets/harness.schema.json` that editors read through the `#:schema` line).
//!
//! The checked newtypes deserialize by hand, so their schemas are written here
//! to say what the checks accept.

use std::borrow::Cow;

use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};

use super::{
    Autonomy, Config, DoomLoopThreshold, FileStem, NonEmptyPath, NonEmptyString, OptionalDuration,
    Pattern, PositiveCount, PositiveMinutes, PositiveSeconds, Promise, Seconds, Usd, WaitSetting,
};

/// The schema as pretty JSON, draft 7 (what Taplo and Even Better TOML read).
pub fn to_json() -> String {
    let mut schema = schemars::generate::SchemaSettings::draft07()
        .into_generator()
        .into_root_schema_for::<Config>();
    schema.insert("title".into(), "clowder harness.toml".into());
    let mut text = serde_json::to_string_pretty(&schema)
        .expect("a schema built from JSON values serializes, because it is JSON");
    text.push('\n');
    text
}

/// Implements `JsonSchema` for a newtype as an inline schema.
macro_rules! schema {
    ($type:ty, $($json:tt)+) => {
        impl JsonSchema for $type {
            fn schema_name() -> Cow<'static, str> {
                stringify!($type).into()
            }
            fn inline_schema() -> bool {
                true
            }
            fn json_schema(_: &mut SchemaGenerator) -> Schema {
                json_schema!($($json)+)
            }
        }
    };
}

schema!(PositiveCount, {
    "type": "integer",
    "minimum": 1,
    "description": "A whole number of at least 1."
});
schema!(Seconds, {
    "type": "number",
    "minimum": 0,
    "description": "A number of seconds, zero or more (fractions allowed, e.g. 0.5)."
});
schema!(PositiveSeconds, {
    "type": "number",
    "exclusiveMinimum": 0,
    "description": "A positive number of seconds (fractions allowed, e.g. 0.5)."
});
schema!(PositiveMinutes, {
    "type": "number",
    "exclusiveMinimum": 0,
    "description": "A positive number of minutes (fractions allowed, e.g. 0.02)."
});
schema!(NonEmptyString, {
    "type": "string",
    "pattern": "\\S",
    "description": "A non-empty string."
});
schema!(NonEmptyPath, {
    "type": "string",
    "minLength": 1,
    "description": "A non-empty path, relative to the working folder."
});
schema!(FileStem, {
    "type": "string",
    "pattern": "^[^/\u{0}]+$",
    "description": "A non-empty file name prefix without `/`."
});
schema!(Pattern, {
    "type": "string",
    "minLength": 1,
    "format": "regex",
    "description": "A regular expression (Rust regex syntax)."
});
schema!(Promise, {
    "type": "string",
    "pattern": "^([^\\n]*\\S[^\\n]*)?$",
    "description": "A text on one line, such as \"TASK_COMPLETE\", or \"\" for none."
});
schema!(Usd, {
    "type": "number",
    "minimum": 0,
    "description": "An amount of US dollars, zero (no limit) or more, e.g. 5 or 0.5."
});
schema!(DoomLoopThreshold, {
    "type": "integer",
    "minimum": 0,
    "not": { "const": 1 },
    "description": "0 (off) or a whole number of at least 2."
});
schema!(Autonomy, {
    "type": "integer",
    "minimum": 1,
    "maximum": 5,
    "description": "An autonomy level from 1 (ask before every session) to 5 (never ask)."
});
schema!(OptionalDuration, {
    "type": "string",
    "pattern": "^\\s*([0-9]*\\.?[0-9]+[smhd])?\\s*$",
    "description": "A duration as a string: 90s, 90m, 8h or 1.5d; \"\" for no limit."
});
schema!(WaitSetting, {
    "type": "string",
    "pattern": "^\\s*(never|[0-9]*\\.?[0-9]+[smh])\\s*$",
    "description": "A duration as a string: 90s, 10m, 1h, or never."
});

#[cfg(test)]
mod tests {
    #[test]
    fn the_schema_names_every_section_and_forbids_unknown_keys() {
        let schema: serde_json::Value =
            serde_json::from_str(&super::to_json()).expect("valid JSON");
        let sections = schema["properties"].as_object().expect("properties");
        for section in ["session", "agent", "watchdog", "hooks", "output", "guard"] {
            assert!(sections.contains_key(section), "{section}");
        }
        assert_eq!(schema["additionalProperties"], false);
    }
}
