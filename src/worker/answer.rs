//! The LLM's answer: exactly `{"reasoning"?: string, "actions": [{"tool", "args"}]}`,
//! checked strictly (a key twice in one object is ambiguous, so refused), and the
//! same shape as a JSON schema for Ollama's `format`.

use serde::de::{self, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// More actions in one answer refuse it: what is logged and fed back stays bounded.
pub(crate) const MAX_ACTIONS: usize = 20;

#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub(crate) struct Answer {
    #[serde(default)]
    pub reasoning: Option<String>,
    pub actions: Vec<Action>,
}

#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub(crate) struct Action {
    pub tool: String,
    pub args: Map<String, Value>,
}

/// Parses an answer. Only surrounding whitespace is forgiven: no code fences, no
/// text around the object, no extra field.
pub(crate) fn parse(text: &str) -> Result<Answer, String> {
    let text = text.trim();
    if text.is_empty() {
        return Err("empty answer: expected one JSON object".into());
    }
    let value = serde_json::from_str::<Strict>(text)
        .map_err(|err| format!("invalid answer: not JSON: {err}"))?
        .0;
    // serde would also take a struct from an array (`[null, []]`): only objects count.
    let objects = value.as_object().is_some_and(|answer| {
        answer
            .get("actions")
            .and_then(Value::as_array)
            .is_none_or(|actions| actions.iter().all(Value::is_object))
    });
    if !objects {
        return Err(
            "invalid answer: expected an object {\"actions\": [{\"tool\", \"args\"}, …]}".into(),
        );
    }
    let answer: Answer =
        serde_json::from_value(value).map_err(|err| format!("invalid answer: {err}"))?;
    if answer.actions.len() > MAX_ACTIONS {
        return Err(format!(
            "invalid answer: {} actions, at most {MAX_ACTIONS} per answer",
            answer.actions.len()
        ));
    }
    Ok(answer)
}

/// What `claude -p --output-format json` prints wraps the answer in `result`:
/// a JSON object whose `result` is a string yields that string.
pub(crate) fn unwrap_envelope(text: &str) -> String {
    if let Ok(Value::Object(object)) = serde_json::from_str::<Value>(text.trim())
        && !object.contains_key("actions")
        && let Some(Value::String(result)) = object.get("result")
    {
        return result.clone();
    }
    text.to_string()
}

/// The reasoning of a valid answer in `text`, if it has one.
pub(crate) fn reasoning_of(text: &str) -> Option<String> {
    parse(text).ok().and_then(|answer| answer.reasoning)
}

/// Any JSON, read as a [`Value`], but a key repeated in one object is an error
/// (serde_json alone keeps the last one, silently).
struct Strict(Value);

impl<'de> Deserialize<'de> for Strict {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(StrictVisitor).map(Strict)
    }
}

struct StrictVisitor;

impl<'de> Visitor<'de> for StrictVisitor {
    type Value = Value;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(serde_json::Number::from_f64(v).map_or(Value::Null, Value::Number))
    }

    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_string()))
    }

    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::new();
        while let Some(Strict(item)) = seq.next_element()? {
            items.push(item);
        }
        Ok(Value::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut object = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            if object.contains_key(&key) {
                return Err(de::Error::custom(format!(
                    "duplicate key {key:?}: an answer with a key twice is ambiguous"
                )));
            }
            let Strict(value) = map.next_value()?;
            object.insert(key, value);
        }
        Ok(Value::Object(object))
    }
}

/// The answer's JSON schema (Ollama's `format`), its tools named `tools`.
pub(crate) fn json_schema(tools: &[&str]) -> Value {
    serde_json::json!({
        "type": "object",
        "properties": {
            "reasoning": {"type": "string"},
            "actions": {
                "type": "array",
                "maxItems": MAX_ACTIONS,
                "items": {
                    "type": "object",
                    "properties": {
                        "tool": {"type": "string", "enum": tools},
                        "args": {"type": "object"}
                    },
                    "required": ["tool", "args"],
                    "additionalProperties": false
                }
            }
        },
        "required": ["actions"],
        "additionalProperties": false
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_valid_answer_parses() {
        let answer =
            parse(r#" {"reasoning":"r","actions":[{"tool":"read_file","args":{"path":"a"}}]} "#)
                .expect("valid");
        assert_eq!(answer.reasoning.as_deref(), Some("r"));
        assert_eq!(answer.actions[0].tool, "read_file");
        assert!(parse(r#"{"actions":[]}"#).is_ok());
    }

    #[test]
    fn anything_else_is_refused() {
        for bad in [
            "",
            "   \n",
            "not json",
            "```json\n{\"actions\":[]}\n```",
            r#"{"actions":[]} trailing"#,
            r#"{"reasoning":"r"}"#,
            r#"{"actions":[],"extra":1}"#,
            r#"{"actions":[{"tool":"x","args":{},"why":"no"}]}"#,
            r#"{"actions":[{"tool":"x"}]}"#,
            r#"{"actions":[{"tool":"x","args":[]}]}"#,
            r#"{"actions":[{"tool":1,"args":{}}]}"#,
            r#"{"actions":{}}"#,
            r#"{"reasoning":3,"actions":[]}"#,
            "[]",
            "null",
            r#"["", []]"#,
            r#"{"actions":[["read_file",{"path":"a"}]]}"#,
            r#"{"actions":[],"actions":[{"tool":"x","args":{}}]}"#,
            r#"{"actions":[{"tool":"x","tool":"y","args":{}}]}"#,
            r#"{"actions":[{"tool":"x","args":{"path":"a","path":"b"}}]}"#,
        ] {
            assert!(parse(bad).is_err(), "accepted {bad:?}");
        }
        assert!(parse("").expect_err("empty").contains("empty"));
        let twice = parse(r#"{"actions":[{"tool":"x","args":{"a":{"b":1,"b":2}}}]}"#);
        let err = twice.expect_err("duplicate");
        assert!(
            err.contains("duplicate key \"b\"") && err.contains("column"),
            "{err}"
        );
        let action = r#"{"tool":"read_file","args":{"path":"a"}}"#;
        let many = |n: usize| format!(r#"{{"actions":[{}]}}"#, vec![action; n].join(","));
        assert!(parse(&many(MAX_ACTIONS)).is_ok());
        assert!(
            parse(&many(MAX_ACTIONS + 1))
                .expect_err("too many")
                .contains("at most 20")
        );
    }

    #[test]
    fn the_claude_envelope_is_unwrapped() {
        let inner = r#"{"actions":[]}"#;
        let outer = serde_json::json!({"type": "result", "result": inner}).to_string();
        assert_eq!(unwrap_envelope(&outer), inner);
        assert_eq!(unwrap_envelope(inner), inner);
        assert_eq!(unwrap_envelope("plain"), "plain");
    }

    fn arb_json() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(Value::from),
            ".{0,8}".prop_map(Value::String),
        ];
        leaf.prop_recursive(3, 24, 4, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                prop::collection::btree_map("[a-z]{1,6}", inner, 0..4)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    proptest! {
        #[test]
        fn parse_never_panics(text in ".{0,200}") {
            let _ = parse(&text);
        }

        /// Whatever JSON comes in, it is accepted exactly when it has the shape.
        #[test]
        fn accepted_exactly_when_well_shaped(value in arb_json()) {
            let well_shaped = match &value {
                Value::Object(o) => {
                    o.keys().all(|k| k == "reasoning" || k == "actions")
                        && o.get("reasoning").is_none_or(|r| r.is_string() || r.is_null())
                        && o.get("actions").and_then(Value::as_array).is_some_and(|a| {
                            a.iter().all(|action| action.as_object().is_some_and(|x| {
                                x.len() == 2
                                    && x.get("tool").is_some_and(Value::is_string)
                                    && x.get("args").is_some_and(Value::is_object)
                            }))
                        })
                }
                _ => false,
            };
            prop_assert_eq!(parse(&value.to_string()).is_ok(), well_shaped);
        }

        #[test]
        fn a_well_shaped_answer_round_trips(
            reasoning in proptest::option::of(".{0,20}"),
            tools in prop::collection::vec("[a-z_]{1,12}", 0..=MAX_ACTIONS),
        ) {
            let answer = Answer {
                reasoning,
                actions: tools.into_iter().map(|tool| Action { tool, args: Map::new() }).collect(),
            };
            let text = serde_json::to_string(&answer).expect("serializes");
            prop_assert_eq!(parse(&text).expect("parses"), answer);
        }
    }
}
