//! A small borrowing JSON reader that keeps strings escaped until shown.

use super::*;

pub(super) struct Collected {
    pub(super) text: String,
    /// Everything was decoded into `text`.
    pub(super) complete: bool,
    pub(super) newlines: usize,
    pub(super) ends_with_newline: bool,
    pub(super) any: bool,
}

impl Default for Collected {
    fn default() -> Self {
        Self {
            text: String::new(),
            complete: true,
            newlines: 0,
            ends_with_newline: false,
            any: false,
        }
    }
}

impl Collected {
    pub(super) fn push_jstr(&mut self, s: JStr<'_>) {
        let (newlines, ends) = escaped_newlines(s);
        self.newlines += newlines;
        self.note(!s.raw.is_empty(), ends);
        if self.complete {
            // Decoding only shrinks text: one reservation is enough.
            self.text.reserve(
                s.raw
                    .len()
                    .min(MAX_DETAIL_BYTES.saturating_sub(self.text.len())),
            );
            let done = if s.escaped {
                unescape_into(s.raw, &mut self.text, MAX_DETAIL_BYTES)
            } else {
                push_capped(&mut self.text, s.raw, MAX_DETAIL_BYTES)
            };
            self.complete = done;
        }
    }

    pub(super) fn push_str(&mut self, s: &str) {
        self.newlines += s.matches('\n').count();
        self.note(!s.is_empty(), s.ends_with('\n'));
        if self.complete {
            self.complete = push_capped(&mut self.text, s, MAX_DETAIL_BYTES);
        }
    }

    pub(super) fn note(&mut self, non_empty: bool, ends_with_newline: bool) {
        if non_empty {
            self.any = true;
            self.ends_with_newline = ends_with_newline;
        }
    }

    /// Adds one content block, on its own line after the previous one.
    pub(super) fn push_block(&mut self, add: impl FnOnce(&mut Self)) {
        if self.any && !self.ends_with_newline {
            self.push_str("\n");
        }
        add(self);
    }

    /// First non-blank line (of the decoded part) and the number of other lines
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

/// Newline escapes in a raw JSON string, and whether it ends with one.
pub(super) fn escaped_newlines(s: JStr<'_>) -> (usize, bool) {
    static NEWLINE: LazyLock<memmem::Finder<'static>> =
        LazyLock::new(|| memmem::Finder::new(b"\\n"));
    if !s.escaped {
        return (0, false);
    }
    let bytes = s.raw.as_bytes();
    let mut count = 0;
    let mut last_end = usize::MAX;
    for at in NEWLINE.find_iter(bytes) {
        // `\\n` is an escaped backslash and a letter: the backslash before the
        // `n` starts an escape only if an even number of backslashes precede it.
        let preceding = bytes[..at]
            .iter()
            .rev()
            .take_while(|&&b| b == b'\\')
            .count();
        if preceding.is_multiple_of(2) {
            count += 1;
            last_end = at + 2;
        }
    }
    (count, last_end == bytes.len())
}

pub(super) fn push_capped(out: &mut String, s: &str, cap: usize) -> bool {
    let room = cap.saturating_sub(out.len());
    if s.len() <= room {
        out.push_str(s);
        true
    } else {
        out.push_str(&s[..floor_char_boundary(s, room)]);
        false
    }
}

// ---------------------------------------------------------------------------
// A borrowing JSON reader
//
// Strings stay slices of the line in their escaped form: most of a stream's
// bytes are strings nobody displays in full (file contents, command output),
// and decoding only what is shown keeps the parse near memory speed. The
// reader can also close a line that was cut at the pending-line cap, so a
// multi-megabyte event still yields its kind, ids and the start of its text.
// ---------------------------------------------------------------------------

/// A JSON string as it appears between its quotes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct JStr<'a> {
    pub(super) raw: &'a str,
    pub(super) escaped: bool,
}

impl<'a> JStr<'a> {
    pub(super) fn decode(self) -> Cow<'a, str> {
        if !self.escaped {
            return Cow::Borrowed(self.raw);
        }
        let mut out = String::with_capacity(self.raw.len());
        unescape_into(self.raw, &mut out, usize::MAX);
        Cow::Owned(out)
    }

    pub(super) fn is(self, key: &str) -> bool {
        if self.escaped {
            self.decode() == key
        } else {
            self.raw == key
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub(super) enum Json<'a> {
    Null,
    Bool(bool),
    Num(&'a str),
    Str(JStr<'a>),
    Arr(Vec<Json<'a>>),
    Obj(Vec<(JStr<'a>, Json<'a>)>),
}

impl<'a> Json<'a> {
    /// Member of an object; the last one wins if a key repeats.
    pub(super) fn get(&self, key: &str) -> Option<&Json<'a>> {
        match self {
            Json::Obj(members) => members
                .iter()
                .rev()
                .find(|(k, _)| k.is(key))
                .map(|(_, v)| v),
            _ => None,
        }
    }

    pub(super) fn str(&self) -> Option<Cow<'a, str>> {
        match self {
            Json::Str(s) => Some(s.decode()),
            _ => None,
        }
    }

    pub(super) fn get_str(&self, key: &str) -> Option<Cow<'a, str>> {
        self.get(key)?.str()
    }

    pub(super) fn get_u64(&self, key: &str) -> Option<u64> {
        self.get(key)?.u64()
    }

    /// Numbers and numeric strings alike: `429` and `"429"` both occur.
    pub(super) fn u64(&self) -> Option<u64> {
        match self {
            Json::Num(n) => n.parse().ok().or_else(|| {
                n.parse::<f64>()
                    .ok()
                    .filter(|f| f.is_finite() && *f >= 0.0 && *f < 1.8e19)
                    .map(|f| f as u64)
            }),
            Json::Str(s) => s.decode().trim().parse().ok(),
            _ => None,
        }
    }

    pub(super) fn i64(&self) -> Option<i64> {
        match self {
            Json::Num(n) => n.parse().ok().or_else(|| {
                n.parse::<f64>()
                    .ok()
                    .filter(|f| f.is_finite() && f.abs() < 9.0e18)
                    .map(|f| f as i64)
            }),
            Json::Str(s) => s.decode().trim().parse().ok(),
            _ => None,
        }
    }

    pub(super) fn f64(&self) -> Option<f64> {
        let value: Option<f64> = match self {
            Json::Num(n) => n.parse().ok(),
            Json::Str(s) => s.decode().trim().parse().ok(),
            _ => None,
        };
        value.filter(|f| f.is_finite())
    }

    pub(super) fn bool(&self) -> Option<bool> {
        match self {
            Json::Bool(b) => Some(*b),
            _ => None,
        }
    }

    pub(super) fn items(&self) -> &[Json<'a>] {
        match self {
            Json::Arr(items) => items,
            _ => &[],
        }
    }
}

pub(super) fn is_json_ws(c: char) -> bool {
    matches!(c, ' ' | '\t' | '\n' | '\r')
}

/// Parses a line holding one JSON object. With `partial`, the line was cut:
/// whatever is open at its end is closed (a cut string keeps its start, a cut
/// number, literal or key is dropped).
pub(super) fn parse_object(line: &str, partial: bool) -> Option<Json<'_>> {
    let body = line.trim_start_matches(is_json_ws);
    if !body.starts_with('{') {
        return None;
    }
    let mut parser = Parser {
        src: body,
        pos: 0,
        partial,
        cut: false,
    };
    let value = parser.object(1).ok()?;
    if !parser.cut {
        parser.skip_ws();
        if parser.pos != body.len() {
            return None;
        }
    }
    Some(value)
}

pub(super) enum Stop {
    Invalid,
    Eof,
}

pub(super) struct Parser<'a> {
    pub(super) src: &'a str,
    pub(super) pos: usize,
    pub(super) partial: bool,
    /// The input ended inside the value (only with `partial`).
    pub(super) cut: bool,
}

impl<'a> Parser<'a> {
    pub(super) fn peek(&self) -> Option<u8> {
        self.src.as_bytes().get(self.pos).copied()
    }

    pub(super) fn skip_ws(&mut self) {
        let bytes = self.src.as_bytes();
        while bytes
            .get(self.pos)
            .is_some_and(|c| matches!(c, b' ' | b'\t' | b'\n' | b'\r'))
        {
            self.pos += 1;
        }
    }

    /// The input ended: with `partial` the value read so far stands.
    pub(super) fn eof<T>(&mut self, value: T) -> Result<T, Stop> {
        if self.partial {
            self.cut = true;
            Ok(value)
        } else {
            Err(Stop::Eof)
        }
    }

    pub(super) fn value(&mut self, depth: usize) -> Result<Json<'a>, Stop> {
        self.skip_ws();
        match self.peek() {
            None => Err(Stop::Eof),
            Some(b'{') => self.object(depth + 1),
            Some(b'[') => self.array(depth + 1),
            Some(b'"') => self.string().map(Json::Str),
            Some(b't') => self.literal("true", Json::Bool(true)),
            Some(b'f') => self.literal("false", Json::Bool(false)),
            Some(b'n') => self.literal("null", Json::Null),
            Some(b'-' | b'0'..=b'9') => self.number(),
            Some(_) => Err(Stop::Invalid),
        }
    }

    pub(super) fn object(&mut self, depth: usize) -> Result<Json<'a>, Stop> {
        if depth > MAX_JSON_DEPTH {
            return Err(Stop::Invalid);
        }
        self.pos += 1;
        // Event objects have a handful of members; this saves regrowing.
        let mut members = Vec::with_capacity(8);
        self.skip_ws();
        match self.peek() {
            None => return self.eof(Json::Obj(members)),
            Some(b'}') => {
                self.pos += 1;
                return Ok(Json::Obj(members));
            }
            _ => {}
        }
        loop {
            self.skip_ws();
            match self.peek() {
                None => return self.eof(Json::Obj(members)),
                Some(b'"') => {}
                Some(_) => return Err(Stop::Invalid),
            }
            let key = self.string()?;
            if self.cut {
                return Ok(Json::Obj(members));
            }
            self.skip_ws();
            match self.peek() {
                None => return self.eof(Json::Obj(members)),
                Some(b':') => self.pos += 1,
                Some(_) => return Err(Stop::Invalid),
            }
            match self.value(depth) {
                Ok(value) => members.push((key, value)),
                Err(Stop::Eof) => return self.eof(Json::Obj(members)),
                Err(e) => return Err(e),
            }
            if self.cut {
                return Ok(Json::Obj(members));
            }
            self.skip_ws();
            match self.peek() {
                None => return self.eof(Json::Obj(members)),
                Some(b',') => self.pos += 1,
                Some(b'}') => {
                    self.pos += 1;
                    return Ok(Json::Obj(members));
                }
                Some(_) => return Err(Stop::Invalid),
            }
        }
    }

    pub(super) fn array(&mut self, depth: usize) -> Result<Json<'a>, Stop> {
        if depth > MAX_JSON_DEPTH {
            return Err(Stop::Invalid);
        }
        self.pos += 1;
        let mut items = Vec::with_capacity(4);
        self.skip_ws();
        match self.peek() {
            None => return self.eof(Json::Arr(items)),
            Some(b']') => {
                self.pos += 1;
                return Ok(Json::Arr(items));
            }
            _ => {}
        }
        loop {
            match self.value(depth) {
                Ok(value) => items.push(value),
                Err(Stop::Eof) => return self.eof(Json::Arr(items)),
                Err(e) => return Err(e),
            }
            if self.cut {
                return Ok(Json::Arr(items));
            }
            self.skip_ws();
            match self.peek() {
                None => return self.eof(Json::Arr(items)),
                Some(b',') => self.pos += 1,
                Some(b']') => {
                    self.pos += 1;
                    return Ok(Json::Arr(items));
                }
                Some(_) => return Err(Stop::Invalid),
            }
        }
    }

    /// At an opening quote. Escapes are not checked here: decoding is lenient.
    pub(super) fn string(&mut self) -> Result<JStr<'a>, Stop> {
        let bytes = self.src.as_bytes();
        let start = self.pos + 1;
        let mut i = start;
        let mut escaped = false;
        loop {
            let found = bytes.get(i..).and_then(|rest| memchr2(b'"', b'\\', rest));
            match found {
                Some(j) if bytes[i + j] == b'"' => {
                    let end = i + j;
                    self.pos = end + 1;
                    return Ok(JStr {
                        raw: &self.src[start..end],
                        escaped,
                    });
                }
                Some(j) => {
                    escaped = true;
                    i += j + 2;
                }
                None => {
                    self.pos = bytes.len();
                    let raw = self.src.get(start..).unwrap_or("");
                    return self.eof(JStr { raw, escaped });
                }
            }
        }
    }

    pub(super) fn literal(&mut self, word: &str, value: Json<'a>) -> Result<Json<'a>, Stop> {
        let rest = &self.src.as_bytes()[self.pos..];
        if rest.starts_with(word.as_bytes()) {
            self.pos += word.len();
            Ok(value)
        } else if word.as_bytes().starts_with(rest) {
            Err(Stop::Eof)
        } else {
            Err(Stop::Invalid)
        }
    }

    pub(super) fn number(&mut self) -> Result<Json<'a>, Stop> {
        let bytes = self.src.as_bytes();
        let start = self.pos;
        let mut i = start;
        let digits = |i: &mut usize| {
            let from = *i;
            while bytes.get(*i).is_some_and(u8::is_ascii_digit) {
                *i += 1;
            }
            *i - from
        };
        let stop = |i: usize| {
            if i >= bytes.len() {
                Stop::Eof
            } else {
                Stop::Invalid
            }
        };
        if bytes.get(i) == Some(&b'-') {
            i += 1;
        }
        match bytes.get(i) {
            Some(b'0') => i += 1,
            Some(b'1'..=b'9') => {
                digits(&mut i);
            }
            _ => return Err(stop(i)),
        }
        if bytes.get(i) == Some(&b'.') {
            i += 1;
            if digits(&mut i) == 0 {
                return Err(stop(i));
            }
        }
        if matches!(bytes.get(i), Some(b'e' | b'E')) {
            i += 1;
            if matches!(bytes.get(i), Some(b'+' | b'-')) {
                i += 1;
            }
            if digits(&mut i) == 0 {
                return Err(stop(i));
            }
        }
        if i >= bytes.len() {
            // A number that runs into the end of the input may have been cut.
            return Err(Stop::Eof);
        }
        self.pos = i;
        Ok(Json::Num(&self.src[start..i]))
    }
}

/// Decodes JSON escapes into `out`, up to `cap` bytes of it; false if it
/// stopped at the cap. Malformed escapes become U+FFFD, a dangling one at the
/// end (a cut line) is dropped.
pub(super) fn unescape_into(raw: &str, out: &mut String, cap: usize) -> bool {
    let bytes = raw.as_bytes();
    let mut i = 0;
    loop {
        let next = memchr(b'\\', &bytes[i..]).map_or(bytes.len(), |j| i + j);
        if !push_capped(out, &raw[i..next], cap) {
            return false;
        }
        let Some(&c) = bytes.get(next + 1) else {
            return true;
        };
        let (ch, used) = match c {
            b'n' => ('\n', 2),
            b't' => ('\t', 2),
            b'r' => ('\r', 2),
            b'b' => ('\u{8}', 2),
            b'f' => ('\u{c}', 2),
            b'"' => ('"', 2),
            b'\\' => ('\\', 2),
            b'/' => ('/', 2),
            // A `\\u` escape cut by the end of a truncated line.
            b'u' if bytes.len() < next + 6 => return true,
            b'u' => unicode_escape(bytes, next),
            _ => {
                let ch = raw[next + 1..].chars().next().unwrap_or('\u{fffd}');
                ('\u{fffd}', 1 + ch.len_utf8())
            }
        };
        if out.len() + ch.len_utf8() > cap {
            return false;
        }
        out.push(ch);
        i = next + used;
        if i >= bytes.len() {
            return true;
        }
    }
}

pub(super) fn hex4(bytes: &[u8], at: usize) -> Option<u32> {
    let digits = bytes.get(at..at + 4)?;
    digits
        .iter()
        .try_fold(0u32, |v, &d| Some(v * 16 + char::from(d).to_digit(16)?))
}

/// `\uXXXX` at `at` (the backslash), with surrogate pairs; (char, bytes used).
pub(super) fn unicode_escape(bytes: &[u8], at: usize) -> (char, usize) {
    let Some(high) = hex4(bytes, at + 2) else {
        return ('\u{fffd}', 2);
    };
    if (0xd800..0xdc00).contains(&high) {
        if bytes.get(at + 6..at + 8) == Some(b"\\u")
            && let Some(low) = hex4(bytes, at + 8)
            && (0xdc00..0xe000).contains(&low)
        {
            let c = 0x10000 + ((high - 0xd800) << 10) + (low - 0xdc00);
            return (char::from_u32(c).unwrap_or('\u{fffd}'), 12);
        }
        return ('\u{fffd}', 6);
    }
    (char::from_u32(high).unwrap_or('\u{fffd}'), 6)
}

/// Re-serialises a parsed value (strings stay as escaped in the input), pretty
/// or compact, up to about `cap` bytes; false if it stopped there.
pub(super) fn write_json(
    value: &Json<'_>,
    pretty: bool,
    indent: usize,
    out: &mut String,
    cap: usize,
) -> bool {
    if out.len() > cap {
        return false;
    }
    let newline = |out: &mut String, level: usize| {
        if pretty {
            out.push('\n');
            for _ in 0..level {
                out.push_str("  ");
            }
        }
    };
    match value {
        Json::Null => out.push_str("null"),
        Json::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Json::Num(n) => out.push_str(n),
        Json::Str(s) => {
            out.push('"');
            if !push_capped(out, s.raw, cap) {
                return false;
            }
            out.push('"');
        }
        Json::Arr(items) if items.is_empty() => out.push_str("[]"),
        Json::Arr(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                newline(out, indent + 1);
                if !write_json(item, pretty, indent + 1, out, cap) {
                    return false;
                }
            }
            newline(out, indent);
            out.push(']');
        }
        Json::Obj(members) if members.is_empty() => out.push_str("{}"),
        Json::Obj(members) => {
            out.push('{');
            for (i, (key, item)) in members.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                newline(out, indent + 1);
                out.push('"');
                if !push_capped(out, key.raw, cap) {
                    return false;
                }
                out.push_str(if pretty { "\": " } else { "\":" });
                if !write_json(item, pretty, indent + 1, out, cap) {
                    return false;
                }
            }
            newline(out, indent);
            out.push('}');
        }
    }
    out.len() <= cap
}

/// Feeds a value to `hasher` canonically: strings decoded, object members sorted
/// by key (the last of a repeated key wins, as in [`Json::get`]).
pub(super) fn hash_canonical(value: &Json<'_>, hasher: &mut impl std::hash::Hasher) {
    use std::hash::Hash;
    match value {
        Json::Null => 0u8.hash(hasher),
        Json::Bool(b) => (1u8, *b).hash(hasher),
        Json::Num(n) => (2u8, *n).hash(hasher),
        Json::Str(s) => (3u8, &*s.decode()).hash(hasher),
        Json::Arr(items) => {
            (4u8, items.len()).hash(hasher);
            for item in items {
                hash_canonical(item, hasher);
            }
        }
        Json::Obj(members) => {
            let mut sorted: Vec<(Cow<'_, str>, &Json<'_>)> =
                members.iter().map(|(k, v)| (k.decode(), v)).collect();
            // Stable sort, then keep the last of each key.
            sorted.sort_by(|a, b| a.0.cmp(&b.0));
            let mut unique: Vec<(Cow<'_, str>, &Json<'_>)> = Vec::with_capacity(sorted.len());
            for (key, item) in sorted {
                match unique.last_mut() {
                    Some(last) if last.0 == key => last.1 = item,
                    _ => unique.push((key, item)),
                }
            }
            (5u8, unique.len()).hash(hasher);
            for (key, item) in unique {
                key.hash(hasher);
                hash_canonical(item, hasher);
            }
        }
    }
}

/// A value as JSON text for a detail view; (text, complete).
pub(super) fn json_text(value: &Json<'_>, pretty: bool) -> (String, bool) {
    let mut text = String::new();
    let complete = write_json(value, pretty, 0, &mut text, MAX_DETAIL_BYTES);
    (text, complete)
}
