//! A display line's detail, built when it is first looked at: almost no line is
//! ever expanded, so a tool's input and output are kept as the JSON they came
//! in and decoded, sanitised and capped only on first use, once.

use std::borrow::Cow;
use std::fmt;
use std::ops::Deref;
use std::sync::OnceLock;

use memchr::{memchr, memmem};
use serde_json::value::RawValue;

use super::super::text::{MAX_DETAIL_BYTES, cap_detail, floor_char_boundary, sanitize_block};
use super::decode::{Obj, Scalar, json_text, scalar};

/// Largest source kept for later. A larger one is rendered at once (so a line
/// never holds more than this plus its capped text); at this size the bytes
/// kept are a few times the 64 KiB text, and a value this large is rare.
const MAX_SOURCE_BYTES: usize = 256 * 1024;

/// Gathers a tool's output from its JSON value (a format's own layout).
pub(super) type Gather = fn(&RawValue, &mut Collected);

/// The full text behind a display line, for "expand" and search: built from
/// what was kept of the line on first use (it dereferences to the text).
pub struct Detail {
    source: Source,
    /// Nothing was lost before the source was kept (the line was not cut).
    complete: bool,
    text: OnceLock<String>,
}

/// What a detail's text is built from.
#[derive(Clone, Debug)]
enum Source {
    /// The text is already built.
    Built,
    /// Decoded text, to be sanitised and capped.
    Text(String),
    /// A value shown as indented JSON.
    Json(Box<RawValue>),
    /// A tool's input: `key: value` lines when its members are plain (see
    /// [`readable_input`]), else indented JSON.
    Input(Box<RawValue>),
    /// A tool's output, gathered from its value.
    Output(Box<RawValue>, Gather),
}

impl Source {
    fn len(&self) -> usize {
        match self {
            Source::Built => 0,
            Source::Text(text) => text.len(),
            Source::Json(raw) | Source::Input(raw) | Source::Output(raw, _) => raw.get().len(),
        }
    }
}

impl Detail {
    /// Decoded text; `complete`: nothing of it was cut before.
    pub(super) fn text(text: String, complete: bool) -> Detail {
        Detail::keep(Source::Text(text), complete)
    }

    pub(super) fn json(raw: &RawValue, complete: bool) -> Detail {
        Detail::keep(Source::Json(raw.to_owned()), complete)
    }

    pub(super) fn input(raw: &RawValue, complete: bool) -> Detail {
        Detail::keep(Source::Input(raw.to_owned()), complete)
    }

    pub(super) fn output(raw: &RawValue, gather: Gather, complete: bool) -> Detail {
        Detail::keep(Source::Output(raw.to_owned(), gather), complete)
    }

    fn keep(source: Source, complete: bool) -> Detail {
        let detail = Detail {
            source,
            complete,
            text: OnceLock::new(),
        };
        if detail.source.len() <= MAX_SOURCE_BYTES {
            return detail;
        }
        let text = detail.render();
        Detail {
            source: Source::Built,
            complete,
            text: OnceLock::from(text),
        }
    }

    fn render(&self) -> String {
        match &self.source {
            Source::Built => String::new(),
            Source::Text(text) => self.finish(text.as_str(), true),
            Source::Json(raw) => {
                let (pretty, complete) = json_text(raw, true);
                self.finish(pretty, complete)
            }
            Source::Input(raw) => match readable_input(raw) {
                Some(text) => self.finish(text, true),
                None => {
                    let (pretty, complete) = json_text(raw, true);
                    self.finish(pretty, complete)
                }
            },
            Source::Output(raw, gather) => {
                let mut body = Collected::default();
                gather(raw, &mut body);
                self.finish(body.text, body.complete)
            }
        }
    }

    fn finish<'t>(&self, text: impl Into<Cow<'t, str>>, complete: bool) -> String {
        cap_detail(sanitize_block(text), complete && self.complete)
    }

    /// Whether the text was built (by use, or at once for a large source).
    #[cfg(test)]
    pub(crate) fn is_rendered(&self) -> bool {
        self.text.get().is_some()
    }

    /// Bytes held: the source and the text, if built.
    #[cfg(test)]
    pub(super) fn held_bytes(&self) -> usize {
        self.source.len() + self.text.get().map_or(0, String::len)
    }
}

impl Deref for Detail {
    type Target = str;

    fn deref(&self) -> &str {
        self.text.get_or_init(|| self.render())
    }
}

/// A text shown as it is.
impl From<String> for Detail {
    fn from(text: String) -> Detail {
        Detail {
            source: Source::Built,
            complete: true,
            text: OnceLock::from(text),
        }
    }
}

impl From<&str> for Detail {
    fn from(text: &str) -> Detail {
        Detail::from(text.to_owned())
    }
}

impl Clone for Detail {
    fn clone(&self) -> Detail {
        Detail {
            source: self.source.clone(),
            complete: self.complete,
            text: self.text.clone(),
        }
    }
}

/// Two details are equal when their texts are.
impl PartialEq for Detail {
    fn eq(&self, other: &Detail) -> bool {
        **self == **other
    }
}

impl fmt::Debug for Detail {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&**self, f)
    }
}

impl fmt::Display for Detail {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self)
    }
}

/// A tool input of plain members as `key: value` lines, each text as written
/// (a command, an agent's prompt, a file's content): JSON would show a
/// command's quotes as `\"` and line breaks as `\n`. `None` when a member is
/// an object or a list.
pub(super) fn readable_input(input: &RawValue) -> Option<String> {
    let members = Obj::of(Some(input)).filter(|m| !m.members().is_empty())?;
    let mut values = Vec::with_capacity(members.members().len());
    for (key, raw) in members.members() {
        let value = match scalar(Some(*raw)) {
            Scalar::Str(s) => s,
            Scalar::Absent if raw.get() == "null" => Cow::Borrowed("null"),
            Scalar::Absent => return None,
            _ => Cow::Borrowed(raw.get().trim()),
        };
        values.push((key, value));
    }
    let mut out = String::new();
    for (key, value) in values {
        if !out.is_empty() {
            out.push('\n');
        }
        out.push_str(key);
        out.push(':');
        out.push(if value.contains('\n') { '\n' } else { ' ' });
        out.push_str(&value);
    }
    Some(out)
}

/// A JSON string value that decodes (a lone surrogate does not), as it is.
pub(super) fn json_str(raw: Option<&RawValue>) -> Option<&RawValue> {
    let raw = raw.filter(|raw| raw.get().starts_with('"'))?;
    let simple = memmem::find(raw.get().as_bytes(), b"\\u").is_none();
    (simple || scalar(Some(raw)).str().is_some()).then_some(raw)
}

/// A tool's output gathered for its result line: the text (capped) and its
/// line count (of the whole). A summary keeps only the text up to its first
/// non-blank line: the rest is counted, and left for the detail to decode.
pub(super) struct Collected {
    pub(super) text: String,
    /// Everything was kept in `text`.
    pub(super) complete: bool,
    newlines: usize,
    ends_with_newline: bool,
    any: bool,
    summary: bool,
    /// Length of `text`'s leading whitespace, as far as it was looked at.
    blank: usize,
    /// A summary keeps nothing more: `text` holds a whole non-blank line, or
    /// all it can.
    done: bool,
}

impl Default for Collected {
    fn default() -> Self {
        Self {
            text: String::new(),
            complete: true,
            newlines: 0,
            ends_with_newline: false,
            any: false,
            summary: false,
            blank: 0,
            done: false,
        }
    }
}

impl Collected {
    /// What a result line shows (first line, line count), without the text.
    pub(super) fn summary() -> Self {
        Self {
            summary: true,
            ..Self::default()
        }
    }

    pub(super) fn push_str(&mut self, s: &str) {
        self.newlines += memchr::memchr_iter(b'\n', s.as_bytes()).count();
        if !s.is_empty() {
            self.any = true;
            self.ends_with_newline = s.ends_with('\n');
        }
        if self.done {
            return;
        }
        if self.complete {
            let room = MAX_DETAIL_BYTES.saturating_sub(self.text.len());
            if s.len() <= room {
                self.text.push_str(s);
            } else {
                self.text.push_str(&s[..floor_char_boundary(s, room)]);
                self.complete = false;
            }
        }
        if self.summary {
            // Only what was added is looked at: thousands of blank lines
            // may come before the first line.
            let rest = self.text[self.blank..].trim_start();
            self.blank = self.text.len() - rest.len();
            self.done = !self.complete || memchr(b'\n', rest.as_bytes()).is_some();
        }
    }

    /// Adds the text of a JSON string value. A summary decodes it only up to
    /// the first non-blank line, and counts the rest's lines in the JSON.
    pub(super) fn push_json_str(&mut self, raw: &RawValue) {
        let literal = raw.get();
        let inner = literal
            .strip_prefix('"')
            .and_then(|l| l.strip_suffix('"'))
            .filter(|inner| self.summary && memmem::find(inner.as_bytes(), b"\\u").is_none());
        let Some(inner) = inner else {
            self.push_str(&scalar(Some(raw)).cow().unwrap_or_default());
            return;
        };
        // Only two-byte escapes are left: a cut after `\n` splits none.
        let bytes = inner.as_bytes();
        let mut at = 0;
        while !self.done && at < bytes.len() {
            let end = newline_escape(bytes, at).map_or(bytes.len(), |i| i + 2);
            let line: String =
                serde_json::from_str(&format!("\"{}\"", &inner[at..end])).unwrap_or_default();
            self.push_str(&line);
            at = end;
        }
        if at < bytes.len() {
            self.count_escaped(&bytes[at..]);
        }
    }

    /// Counts what JSON string text (two-byte escapes only) adds.
    fn count_escaped(&mut self, bytes: &[u8]) {
        let mut at = 0;
        let mut ends_with_newline = false;
        while let Some(i) = newline_escape(bytes, at) {
            self.newlines += 1;
            at = i + 2;
            ends_with_newline = at == bytes.len();
        }
        self.any = true;
        self.ends_with_newline = ends_with_newline;
    }

    /// Adds one content block, on its own line after the previous one.
    pub(super) fn push_block(&mut self, add: impl FnOnce(&mut Self)) {
        if self.any && !self.ends_with_newline {
            self.push_str("\n");
        }
        add(self);
    }

    /// First non-blank line (of the kept part) and the number of other lines
    /// in the whole.
    pub(super) fn first_line(&self) -> (&str, usize) {
        if !self.any {
            return ("", 0);
        }
        let total = self.newlines + 1 - usize::from(self.ends_with_newline);
        let first = self
            .text
            .split('\n')
            .find(|l| !l.trim().is_empty())
            .unwrap_or("")
            .trim();
        (first, total.saturating_sub(1))
    }
}

/// Where the next `\n` escape starts in JSON string text without `\u` escapes.
fn newline_escape(bytes: &[u8], from: usize) -> Option<usize> {
    let mut at = from;
    while let Some(i) = memchr(b'\\', &bytes[at..]).map(|i| at + i) {
        if bytes.get(i + 1) == Some(&b'n') {
            return Some(i);
        }
        at = i + 2;
        if at >= bytes.len() {
            return None;
        }
    }
    None
}
