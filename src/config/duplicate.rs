//! Names the key of a "duplicate key" error: the TOML parser points at the second
//! occurrence but says neither its dotted key nor where the first one stands.
//!
//! The second occurrence is renamed to a mark, the text parsed again (now without
//! the clash), and the mark looked up: its path is the key, and the original name
//! in the same table is the first occurrence.

use std::ops::Range;

use toml_edit::{Item, TableLike, Value};

/// A name no config uses, so the renamed key clashes with nothing.
const MARK: &str = "clowder_second_occurrence_7f3a";

/// The dotted key and the message for a duplicate whose second name is at `span`.
pub(super) fn describe(text: &str, span: Range<usize>) -> Option<(String, String)> {
    let raw = text.get(span.clone())?;
    let name = toml_edit::Key::parse(raw).ok()?.pop()?.get().to_string();
    let marked = format!("{}{MARK}{}", &text[..span.start], &text[span.end..]);
    let document = toml_edit::Document::parse(marked.as_str()).ok()?;
    let mut path = Vec::new();
    let found = search_table(document.as_table(), &name, &mut path)?;
    let key = path.concat();
    let first = found
        .first_offset
        .map(|offset| format!(" (first at line {})", super::line_column(text, offset).0))
        .unwrap_or_default();
    let message = if found.is_table {
        format!(
            "duplicate table{first}, expected each table once: merge the two `[{key}]` sections"
        )
    } else {
        format!("duplicate key{first}, expected each key once in its table")
    };
    Some((key, message))
}

struct Found {
    is_table: bool,
    first_offset: Option<usize>,
}

/// Depth-first; `path` holds the segments as serde_path_to_error writes them.
fn search_table(table: &dyn TableLike, name: &str, path: &mut Vec<String>) -> Option<Found> {
    for (key, item) in table.iter() {
        let segment = if path.is_empty() {
            key.to_string()
        } else {
            format!(".{key}")
        };
        if key == MARK {
            path.push(segment.replace(MARK, name));
            let first = table.get_key_value(name);
            let is_table = |item: &Item| matches!(item, Item::Table(_) | Item::ArrayOfTables(_));
            return Some(Found {
                is_table: is_table(item) && first.is_some_and(|(_, item)| is_table(item)),
                first_offset: first.and_then(|(key, _)| key.span()).map(|span| span.start),
            });
        }
        path.push(segment);
        if let Some(found) = search_item(item, name, path) {
            return Some(found);
        }
        path.pop();
    }
    None
}

fn search_item(item: &Item, name: &str, path: &mut Vec<String>) -> Option<Found> {
    match item {
        Item::Table(table) => search_table(table, name, path),
        Item::ArrayOfTables(tables) => tables.iter().enumerate().find_map(|(i, table)| {
            path.push(format!("[{i}]"));
            let found = search_table(table, name, path);
            if found.is_none() {
                path.pop();
            }
            found
        }),
        Item::Value(value) => search_value(value, name, path),
        Item::None => None,
    }
}

fn search_value(value: &Value, name: &str, path: &mut Vec<String>) -> Option<Found> {
    match value {
        Value::InlineTable(table) => search_table(table, name, path),
        Value::Array(values) => values.iter().enumerate().find_map(|(i, value)| {
            path.push(format!("[{i}]"));
            let found = search_value(value, name, path);
            if found.is_none() {
                path.pop();
            }
            found
        }),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use crate::config::Config;

    fn error(text: &str) -> String {
        Config::parse(text, Path::new("harness.toml"))
            .expect_err("a duplicate")
            .to_string()
    }

    #[test]
    fn a_table_twice_is_named_with_its_first_line() {
        assert_eq!(
            error("[session]\nmax_iterations = 3\n\n[session]\nprompt_file = \"x\"\n"),
            "harness.toml:4:2: key `session`: duplicate table (first at line 1), expected each table once: merge the two `[session]` sections"
        );
    }

    #[test]
    fn a_key_twice_is_named_with_its_table() {
        assert_eq!(
            error("[hooks]\n\"timeout_secs\" = 1\ntimeout_secs = 2\n"),
            "harness.toml:3:1: key `hooks.timeout_secs`: duplicate key (first at line 2), expected each key once in its table"
        );
    }

    #[test]
    fn keys_inside_inline_tables_and_dotted_keys_are_named() {
        let text = "[approvals]\nallow = [{ tool = \"a\" }, { tool = \"a\", tool = \"b\" }]\n";
        assert!(
            error(text)
                .starts_with("harness.toml:2:40: key `approvals.allow[1].tool`: duplicate key"),
            "{}",
            error(text)
        );
        assert!(
            error("session.max_iterations = 1\nsession.max_iterations = 2\n").starts_with(
                "harness.toml:2:9: key `session.max_iterations`: duplicate key (first at line 1)"
            ),
            "{}",
            error("session.max_iterations = 1\nsession.max_iterations = 2\n")
        );
    }
}
