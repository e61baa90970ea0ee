//! Reading TOML into serde types with errors located by file, line, column and
//! dotted key.

use std::path::Path;

use super::{ConfigError, duplicate};

/// Parses TOML text into any serde type, locating errors by file, line, column and
/// dotted key; `file` is only used to name the source in errors.
pub(crate) fn parse_located<T: serde::de::DeserializeOwned>(
    text: &str,
    file: &Path,
) -> Result<T, ConfigError> {
    let locate = |span: Option<std::ops::Range<usize>>| span.map(|s| line_column(text, s.start));
    let deserializer = toml::de::Deserializer::parse(text).map_err(|err| {
        let message = first_line(err.message());
        let named = (message == "duplicate key")
            .then(|| duplicate::describe(text, err.span()?))
            .flatten();
        let (key, message) = named.map_or((None, message), |(k, m)| (Some(k), m));
        ConfigError {
            file: file.to_path_buf(),
            position: locate(err.span()),
            key,
            message,
        }
    })?;
    let value: T = serde_path_to_error::deserialize(deserializer).map_err(|err| {
        let path = err.path().to_string();
        let inner = err.into_inner();
        ConfigError {
            file: file.to_path_buf(),
            position: locate(inner.span()),
            key: (path != ".").then_some(path),
            message: first_line(inner.message()),
        }
    })?;
    Ok(value)
}

fn first_line(message: &str) -> String {
    message
        .lines()
        .next()
        .unwrap_or_default()
        .trim()
        .to_string()
}

pub(crate) fn line_column(text: &str, offset: usize) -> (usize, usize) {
    let offset = offset.min(text.len());
    let before = &text.as_bytes()[..offset];
    let line = before.iter().filter(|&&b| b == b'\n').count() + 1;
    let line_start = before
        .iter()
        .rposition(|&b| b == b'\n')
        .map_or(0, |i| i + 1);
    let column = String::from_utf8_lossy(&before[line_start..])
        .chars()
        .count()
        + 1;
    (line, column)
}
