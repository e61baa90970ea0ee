//! The JSON building blocks the format decoders share, over serde_json: lenient
//! scalars and objects (a value of an unexpected type reads as absent and never
//! fails its line), raw values kept undecoded until something shows them, and
//! the closing of a line cut at the length cap.

use std::borrow::Cow;
use std::fmt;
use std::marker::PhantomData;

use serde::de::value::MapAccessDeserializer;
use serde::de::{self, Deserialize, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::value::RawValue;

use super::text::{MAX_DETAIL_BYTES, floor_char_boundary};

/// Any JSON value where a scalar is expected; containers and `null` are absent.
#[derive(Debug, Clone, Default, PartialEq)]
pub(super) enum Scalar<'a> {
    #[default]
    Absent,
    Str(Cow<'a, str>),
    U64(u64),
    I64(i64),
    F64(f64),
    Bool(bool),
}

impl<'a> Scalar<'a> {
    pub(super) fn str(&self) -> Option<&str> {
        match self {
            Scalar::Str(s) => Some(s),
            _ => None,
        }
    }

    pub(super) fn cow(&self) -> Option<Cow<'a, str>> {
        match self {
            Scalar::Str(s) => Some(s.clone()),
            _ => None,
        }
    }

    /// A non-empty string.
    pub(super) fn text(&self) -> Option<&str> {
        self.str().filter(|s| !s.is_empty())
    }

    /// Numbers and numeric strings alike: `429` and `"429"` both occur.
    pub(super) fn u64(&self) -> Option<u64> {
        match *self {
            Scalar::U64(n) => Some(n),
            Scalar::I64(n) => u64::try_from(n).ok(),
            Scalar::F64(f) if (0.0..1.8e19).contains(&f) => Some(f as u64),
            Scalar::Str(ref s) => s.trim().parse().ok(),
            _ => None,
        }
    }

    pub(super) fn i64(&self) -> Option<i64> {
        match *self {
            Scalar::U64(n) => i64::try_from(n).ok(),
            Scalar::I64(n) => Some(n),
            Scalar::F64(f) if f.is_finite() && f.abs() < 9.0e18 => Some(f as i64),
            Scalar::Str(ref s) => s.trim().parse().ok(),
            _ => None,
        }
    }

    pub(super) fn f64(&self) -> Option<f64> {
        let value = match *self {
            Scalar::U64(n) => Some(n as f64),
            Scalar::I64(n) => Some(n as f64),
            Scalar::F64(f) => Some(f),
            Scalar::Str(ref s) => s.trim().parse().ok(),
            _ => None,
        };
        value.filter(|f: &f64| f.is_finite())
    }

    pub(super) fn bool(&self) -> Option<bool> {
        match *self {
            Scalar::Bool(b) => Some(b),
            _ => None,
        }
    }
}

struct ScalarVisitor;

impl<'de> Visitor<'de> for ScalarVisitor {
    type Value = Scalar<'de>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Self::Value, E> {
        Ok(Scalar::Bool(v))
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Self::Value, E> {
        Ok(Scalar::I64(v))
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Self::Value, E> {
        Ok(Scalar::U64(v))
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Self::Value, E> {
        Ok(Scalar::F64(v))
    }

    fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
        Ok(Scalar::Str(Cow::Borrowed(v)))
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
        Ok(Scalar::Str(Cow::Owned(v.to_owned())))
    }

    fn visit_string<E: de::Error>(self, v: String) -> Result<Self::Value, E> {
        Ok(Scalar::Str(Cow::Owned(v)))
    }

    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(Scalar::Absent)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(Scalar::Absent)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(Scalar::Absent)
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for Scalar<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(ScalarVisitor)
    }
}

/// An `error` member: a code or text (Claude's assistant lines), or an object
/// whose `message` says what failed (Codex's `turn.failed`).
#[derive(Debug, Default, Clone, PartialEq)]
pub(super) enum ErrorField<'a> {
    #[default]
    Absent,
    Text(Cow<'a, str>),
    Object {
        message: Option<Cow<'a, str>>,
    },
}

struct ErrorVisitor;

impl<'de> Visitor<'de> for ErrorVisitor {
    type Value = ErrorField<'de>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut message = None;
        while let Some(key) = map.next_key::<Scalar<'de>>()? {
            if key.str() == Some("message") {
                message = map.next_value::<Scalar<'de>>()?.cow();
            } else {
                map.next_value::<IgnoredAny>()?;
            }
        }
        Ok(ErrorField::Object { message })
    }

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Self::Value, A::Error> {
        ScalarVisitor.visit_seq(seq).map(|_| ErrorField::Absent)
    }

    fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
        Ok(ErrorField::Text(Cow::Borrowed(v)))
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
        Ok(ErrorField::Text(Cow::Owned(v.to_owned())))
    }

    fn visit_bool<E: de::Error>(self, _: bool) -> Result<Self::Value, E> {
        Ok(ErrorField::Absent)
    }

    fn visit_i64<E: de::Error>(self, _: i64) -> Result<Self::Value, E> {
        Ok(ErrorField::Absent)
    }

    fn visit_u64<E: de::Error>(self, _: u64) -> Result<Self::Value, E> {
        Ok(ErrorField::Absent)
    }

    fn visit_f64<E: de::Error>(self, _: f64) -> Result<Self::Value, E> {
        Ok(ErrorField::Absent)
    }

    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(ErrorField::Absent)
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for ErrorField<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(ErrorVisitor)
    }
}

/// An object decoded as `T` where one is expected; any other value is absent.
#[derive(Debug)]
pub(super) struct Loose<T>(pub(super) Option<T>);

impl<T> Default for Loose<T> {
    fn default() -> Self {
        Loose(None)
    }
}

struct LooseVisitor<T>(PhantomData<T>);

impl<'de, T: Deserialize<'de>> Visitor<'de> for LooseVisitor<T> {
    type Value = Loose<T>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
        T::deserialize(MapAccessDeserializer::new(map)).map(|t| Loose(Some(t)))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Self::Value, A::Error> {
        ScalarVisitor.visit_seq(seq).map(|_| Loose(None))
    }

    fn visit_bool<E: de::Error>(self, _: bool) -> Result<Self::Value, E> {
        Ok(Loose(None))
    }

    fn visit_i64<E: de::Error>(self, _: i64) -> Result<Self::Value, E> {
        Ok(Loose(None))
    }

    fn visit_u64<E: de::Error>(self, _: u64) -> Result<Self::Value, E> {
        Ok(Loose(None))
    }

    fn visit_f64<E: de::Error>(self, _: f64) -> Result<Self::Value, E> {
        Ok(Loose(None))
    }

    fn visit_str<E: de::Error>(self, _: &str) -> Result<Self::Value, E> {
        Ok(Loose(None))
    }

    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(Loose(None))
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Loose<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(LooseVisitor(PhantomData))
    }
}

/// A member that is an object decoded as `T`, or a text.
#[derive(Debug, Default)]
pub(super) enum ObjOrText<'a, T> {
    #[default]
    Absent,
    Text(Cow<'a, str>),
    Object(T),
}

impl<'a, T> ObjOrText<'a, T> {
    pub(super) fn object(&self) -> Option<&T> {
        match self {
            ObjOrText::Object(t) => Some(t),
            _ => None,
        }
    }

    pub(super) fn text(&self) -> Option<Cow<'a, str>> {
        match self {
            ObjOrText::Text(t) => Some(t.clone()),
            _ => None,
        }
    }
}

struct ObjOrTextVisitor<'a, T>(PhantomData<(&'a (), T)>);

impl<'de: 'a, 'a, T: Deserialize<'de>> Visitor<'de> for ObjOrTextVisitor<'a, T> {
    type Value = ObjOrText<'a, T>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
        T::deserialize(MapAccessDeserializer::new(map)).map(ObjOrText::Object)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Self::Value, A::Error> {
        ScalarVisitor.visit_seq(seq).map(|_| ObjOrText::Absent)
    }

    fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
        Ok(ObjOrText::Text(Cow::Borrowed(v)))
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
        Ok(ObjOrText::Text(Cow::Owned(v.to_owned())))
    }

    fn visit_bool<E: de::Error>(self, _: bool) -> Result<Self::Value, E> {
        Ok(ObjOrText::Absent)
    }

    fn visit_i64<E: de::Error>(self, _: i64) -> Result<Self::Value, E> {
        Ok(ObjOrText::Absent)
    }

    fn visit_u64<E: de::Error>(self, _: u64) -> Result<Self::Value, E> {
        Ok(ObjOrText::Absent)
    }

    fn visit_f64<E: de::Error>(self, _: f64) -> Result<Self::Value, E> {
        Ok(ObjOrText::Absent)
    }

    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(ObjOrText::Absent)
    }
}

impl<'de: 'a, 'a, T: Deserialize<'de>> Deserialize<'de> for ObjOrText<'a, T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(ObjOrTextVisitor(PhantomData))
    }
}

/// A member that is an array of `T`, or a text.
#[derive(Debug)]
pub(super) enum ListOrText<'a, T> {
    Absent,
    Text(Cow<'a, str>),
    List(Vec<T>),
}

struct ListOrTextVisitor<'a, T>(PhantomData<(&'a (), T)>);

impl<'de: 'a, 'a, T: Deserialize<'de>> Visitor<'de> for ListOrTextVisitor<'a, T> {
    type Value = ListOrText<'a, T>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Self::Value, A::Error> {
        ListVisitor(PhantomData)
            .visit_seq(seq)
            .map(|list| ListOrText::List(list.0))
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
        ScalarVisitor.visit_map(map).map(|_| ListOrText::Absent)
    }

    fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
        Ok(ListOrText::Text(Cow::Borrowed(v)))
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
        Ok(ListOrText::Text(Cow::Owned(v.to_owned())))
    }

    fn visit_bool<E: de::Error>(self, _: bool) -> Result<Self::Value, E> {
        Ok(ListOrText::Absent)
    }

    fn visit_i64<E: de::Error>(self, _: i64) -> Result<Self::Value, E> {
        Ok(ListOrText::Absent)
    }

    fn visit_u64<E: de::Error>(self, _: u64) -> Result<Self::Value, E> {
        Ok(ListOrText::Absent)
    }

    fn visit_f64<E: de::Error>(self, _: f64) -> Result<Self::Value, E> {
        Ok(ListOrText::Absent)
    }

    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(ListOrText::Absent)
    }
}

impl<'de: 'a, 'a, T: Deserialize<'de>> Deserialize<'de> for ListOrText<'a, T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(ListOrTextVisitor(PhantomData))
    }
}

/// An array's items decoded as `T`; any other value is an empty list.
#[derive(Debug)]
pub(super) struct List<T>(pub(super) Vec<T>);

impl<T> Default for List<T> {
    fn default() -> Self {
        List(Vec::new())
    }
}

struct ListVisitor<T>(PhantomData<T>);

impl<'de, T: Deserialize<'de>> Visitor<'de> for ListVisitor<T> {
    type Value = List<T>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element()? {
            items.push(item);
        }
        Ok(List(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
        ScalarVisitor.visit_map(map).map(|_| List::default())
    }

    fn visit_bool<E: de::Error>(self, _: bool) -> Result<Self::Value, E> {
        Ok(List::default())
    }

    fn visit_i64<E: de::Error>(self, _: i64) -> Result<Self::Value, E> {
        Ok(List::default())
    }

    fn visit_u64<E: de::Error>(self, _: u64) -> Result<Self::Value, E> {
        Ok(List::default())
    }

    fn visit_f64<E: de::Error>(self, _: f64) -> Result<Self::Value, E> {
        Ok(List::default())
    }

    fn visit_str<E: de::Error>(self, _: &str) -> Result<Self::Value, E> {
        Ok(List::default())
    }

    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(List::default())
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for List<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(ListVisitor(PhantomData))
    }
}

/// A raw value read as a scalar (absent if it is none).
pub(super) fn scalar(raw: Option<&RawValue>) -> Scalar<'_> {
    raw.and_then(|raw| serde_json::from_str(raw.get()).ok())
        .unwrap_or_default()
}

/// A raw value's items, if it is an array.
pub(super) fn items(raw: Option<&RawValue>) -> Vec<&RawValue> {
    raw.and_then(|raw| serde_json::from_str::<List<&RawValue>>(raw.get()).ok())
        .map(|list| list.0)
        .unwrap_or_default()
}

fn starts_with(raw: &RawValue, open: u8) -> bool {
    raw.get().trim_start().as_bytes().first() == Some(&open)
}

/// An object's members in order, their values raw: for the parts of events
/// that are read rarely or shown as they are.
#[derive(Debug, Default)]
pub(super) struct Obj<'a> {
    members: Vec<(Cow<'a, str>, &'a RawValue)>,
}

struct ObjVisitor;

impl<'de> Visitor<'de> for ObjVisitor {
    type Value = Obj<'de>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut members = Vec::new();
        while let Some(key) = map.next_key::<Scalar<'de>>()? {
            let value: &RawValue = map.next_value()?;
            members.push((key.cow().unwrap_or_default(), value));
        }
        Ok(Obj { members })
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for Obj<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_map(ObjVisitor)
    }
}

impl<'a> Obj<'a> {
    /// `None` unless `raw` is an object.
    pub(super) fn of(raw: Option<&'a RawValue>) -> Option<Obj<'a>> {
        let raw = raw.filter(|raw| starts_with(raw, b'{'))?;
        serde_json::from_str(raw.get()).ok()
    }

    pub(super) fn members(&self) -> &[(Cow<'a, str>, &'a RawValue)] {
        &self.members
    }

    /// A member; the last one wins if a key repeats.
    pub(super) fn get(&self, key: &str) -> Option<&'a RawValue> {
        self.members
            .iter()
            .rev()
            .find(|(k, _)| k == key)
            .map(|(_, v)| *v)
    }

    pub(super) fn scalar(&self, key: &str) -> Scalar<'a> {
        scalar(self.get(key))
    }

    pub(super) fn str(&self, key: &str) -> Option<Cow<'a, str>> {
        self.scalar(key).cow()
    }

    pub(super) fn obj(&self, key: &str) -> Option<Obj<'a>> {
        Obj::of(self.get(key))
    }

    pub(super) fn items(&self, key: &str) -> Vec<&'a RawValue> {
        items(self.get(key))
    }
}

/// A value as JSON text for a detail view, members in their order and strings
/// as written; (text, complete).
pub(super) fn json_text(value: &RawValue, pretty: bool) -> (String, bool) {
    let mut text = String::new();
    let complete = write_json(value, pretty, 0, &mut text, MAX_DETAIL_BYTES);
    (text, complete)
}

fn write_json(value: &RawValue, pretty: bool, indent: usize, out: &mut String, cap: usize) -> bool {
    if out.len() > cap {
        return false;
    }
    let newline = |out: &mut String, level: usize| {
        if pretty {
            out.push('\n');
            out.push_str(&"  ".repeat(level));
        }
    };
    if starts_with(value, b'{') {
        let obj = Obj::of(Some(value)).unwrap_or_default();
        if obj.members.is_empty() {
            out.push_str("{}");
            return true;
        }
        out.push('{');
        for (i, (key, item)) in obj.members.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            newline(out, indent + 1);
            out.push_str(&serde_json::to_string(key).unwrap_or_default());
            out.push_str(if pretty { ": " } else { ":" });
            if !write_json(item, pretty, indent + 1, out, cap) {
                return false;
            }
        }
        newline(out, indent);
        out.push('}');
    } else if starts_with(value, b'[') {
        let list = items(Some(value));
        if list.is_empty() {
            out.push_str("[]");
            return true;
        }
        out.push('[');
        for (i, item) in list.iter().enumerate() {
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
    } else {
        let raw = value.get().trim();
        let room = cap.saturating_sub(out.len());
        if raw.len() > room {
            out.push_str(&raw[..floor_char_boundary(raw, room)]);
            return false;
        }
        out.push_str(raw);
    }
    out.len() <= cap
}

/// Feeds a value to `hasher` canonically: strings decoded, object members
/// sorted by key (the last of a repeated key wins, as in [`Obj::get`]).
pub(super) fn hash_canonical(value: &RawValue, hasher: &mut impl std::hash::Hasher) {
    use std::hash::Hash;
    if let Some(obj) = Obj::of(Some(value)) {
        let mut sorted: Vec<&(Cow<'_, str>, &RawValue)> = obj.members.iter().collect();
        // Stable sort, then keep the last of each key.
        sorted.sort_by(|a, b| a.0.cmp(&b.0));
        let mut unique: Vec<&(Cow<'_, str>, &RawValue)> = Vec::with_capacity(sorted.len());
        for member in sorted {
            match unique.last_mut() {
                Some(last) if last.0 == member.0 => *last = member,
                _ => unique.push(member),
            }
        }
        (5u8, unique.len()).hash(hasher);
        for (key, item) in unique {
            key.hash(hasher);
            hash_canonical(item, hasher);
        }
    } else if starts_with(value, b'[') {
        let list = items(Some(value));
        (4u8, list.len()).hash(hasher);
        for item in list {
            hash_canonical(item, hasher);
        }
    } else {
        match scalar(Some(value)) {
            Scalar::Str(s) => (3u8, &*s).hash(hasher),
            _ => (2u8, value.get().trim()).hash(hasher),
        }
    }
}

/// The kept start of a line cut at the cap, made a whole JSON text: an open
/// string value ends at the cut, a cut key, number or literal is dropped, and
/// open arrays and objects are closed. `None` when it does not start an object.
pub(super) fn close_cut(prefix: &str) -> Option<String> {
    #[derive(Clone, Copy, PartialEq)]
    enum Expect {
        Key,
        Value,
        Other,
    }
    let body = prefix.trim_start();
    if !body.starts_with('{') {
        return None;
    }
    let bytes = body.as_bytes();
    // Open containers, and where the text so far closes into valid JSON.
    let mut stack: Vec<u8> = Vec::new();
    let mut safe = (0, Vec::new());
    let mut expect = Expect::Value;
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'{' | b'[' => {
                stack.push(bytes[i]);
                expect = if bytes[i] == b'{' {
                    Expect::Key
                } else {
                    Expect::Value
                };
                safe = (i + 1, stack.clone());
            }
            b'}' | b']' => {
                stack.pop();
                expect = Expect::Other;
                safe = (i + 1, stack.clone());
                if stack.is_empty() {
                    // A whole object: nothing was cut that needs closing.
                    return None;
                }
            }
            b',' => {
                safe = (i, stack.clone());
                expect = if stack.last() == Some(&b'{') {
                    Expect::Key
                } else {
                    Expect::Value
                };
            }
            b':' => expect = Expect::Value,
            b'"' => {
                let start = i;
                match string_end(bytes, start) {
                    Some(end) => {
                        if expect == Expect::Value {
                            safe = (end + 1, stack.clone());
                        }
                        expect = Expect::Other;
                        i = end;
                    }
                    None if expect == Expect::Value => {
                        let kept = without_cut_escape(&body[start..]);
                        return Some(closed(&body[..start], kept, &stack));
                    }
                    None => break,
                }
            }
            _ => {}
        }
        i += 1;
    }
    let (end, stack) = safe;
    Some(closed(&body[..end], "", &stack))
}

/// Where the string opening at `start` closes, if it does.
fn string_end(bytes: &[u8], start: usize) -> Option<usize> {
    let mut at = start + 1;
    loop {
        let rest = bytes.get(at..).unwrap_or_default();
        match memchr::memchr2(b'"', b'\\', rest) {
            Some(k) if bytes[at + k] == b'"' => return Some(at + k),
            Some(k) => at += k + 2,
            None => return None,
        }
    }
}

/// A cut string value's start, without a dangling escape.
fn without_cut_escape(open: &str) -> &str {
    let bytes = open.as_bytes();
    let trailing = bytes.iter().rev().take_while(|&&b| b == b'\\').count();
    if trailing % 2 == 1 {
        return &open[..open.len() - 1];
    }
    if let Some(at) = open.rfind("\\u") {
        let before = bytes[..at]
            .iter()
            .rev()
            .take_while(|&&b| b == b'\\')
            .count();
        if before % 2 == 0 && open.len() - at < 6 {
            return &open[..at];
        }
    }
    open
}

fn closed(head: &str, string: &str, stack: &[u8]) -> String {
    let mut text = String::with_capacity(head.len() + string.len() + stack.len() + 1);
    text.push_str(head);
    if !string.is_empty() {
        text.push_str(string);
        text.push('"');
    }
    for open in stack.iter().rev() {
        text.push(if *open == b'{' { '}' } else { ']' });
    }
    text
}
