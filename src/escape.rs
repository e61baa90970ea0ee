//! The one terminal-escaping function: which characters a terminal acts on or
//! draws as nothing, and the visible form they are shown in instead. Every
//! printer of text it did not write itself (the headless console, the control
//! room's panes, `clowder queue`) goes through here. A leaf: it imports nothing
//! of this crate.
//!
//! The visible form is Rust's: `\t`, `\n`, `\r`, else `\u{1b}`. It is plain
//! ASCII, so escaping twice changes nothing.

use std::borrow::Cow;
use std::sync::OnceLock;

use unicode_general_category::{GeneralCategory, get_general_category};

/// Whether `c` must not reach a terminal as it is: a control character (C0,
/// DEL, C1: they start escape sequences, move the cursor, ring the bell), a
/// format character (bidi controls, zero-width characters, the BOM, the Arabic
/// letter mark), a line or paragraph separator, or another character Unicode
/// says is drawn as nothing ([`INVISIBLE_OTHERS`]). Text holding one of these
/// can read as something other than what it is.
pub fn is_invisible(c: char) -> bool {
    match c {
        ' '..='~' => false,
        '\0'..='\u{1f}' | '\u{7f}' => true,
        _ => match get_general_category(c) {
            GeneralCategory::Control
            | GeneralCategory::Format
            | GeneralCategory::LineSeparator
            | GeneralCategory::ParagraphSeparator => true,
            // The categories of INVISIBLE_OTHERS, which is in order.
            GeneralCategory::NonspacingMark
            | GeneralCategory::OtherLetter
            | GeneralCategory::Unassigned => INVISIBLE_OTHERS
                .iter()
                .take_while(|range| *range.start() <= c)
                .any(|range| c <= *range.end()),
            _ => false,
        },
    }
}

/// Default-ignorable code points (Unicode's DerivedCoreProperties) that are
/// not format characters, in order: fillers, free variation selectors and
/// reserved ignorables, which a terminal draws as nothing. Variation
/// selectors 15 and 16 (U+FE0E, U+FE0F) are left out: they pick the text or
/// emoji look of the character before them, which is visible, and agents
/// write `⚠️` often.
const INVISIBLE_OTHERS: &[std::ops::RangeInclusive<char>] = &[
    '\u{034f}'..='\u{034f}',   // combining grapheme joiner
    '\u{115f}'..='\u{1160}',   // Hangul choseong and jungseong fillers
    '\u{17b4}'..='\u{17b5}',   // Khmer inherent vowels
    '\u{180b}'..='\u{180f}',   // Mongolian free variation selectors
    '\u{2065}'..='\u{2065}',   // reserved, among the bidi controls
    '\u{3164}'..='\u{3164}',   // Hangul filler
    '\u{fe00}'..='\u{fe0d}',   // variation selectors 1 to 14
    '\u{ffa0}'..='\u{ffa0}',   // halfwidth Hangul filler
    '\u{fff0}'..='\u{fff8}',   // reserved
    '\u{e0000}'..='\u{e0fff}', // tags, variation selectors 17 to 256, reserved
];

/// Whether a character whose UTF-8 form starts with `byte` can be invisible:
/// most text past ASCII (accented letters, CJK) cannot, and is passed over by
/// scanners without decoding. Worked out once from [`is_invisible`].
pub fn may_start_invisible(byte: u8) -> bool {
    static LEADS: OnceLock<[bool; 256]> = OnceLock::new();
    let leads = LEADS.get_or_init(|| {
        let mut leads = [false; 256];
        let mut utf8 = [0u8; 4];
        for c in (0..=0x10ffff)
            .filter_map(char::from_u32)
            .filter(|c| is_invisible(*c))
        {
            leads[usize::from(c.encode_utf8(&mut utf8).as_bytes()[0])] = true;
        }
        leads
    });
    leads[usize::from(byte)]
}

/// Appends the visible form of `c`: `\t`, `\n`, `\r` or `\u{…}`; any other
/// character as it is.
pub fn push_visible(c: char, out: &mut String) {
    if is_invisible(c) {
        out.extend(c.escape_default());
    } else {
        out.push(c);
    }
}

/// `text` for one terminal line: every invisible character, newlines
/// included, in its visible form. Text that needs none is not copied.
pub fn visible(text: &str) -> Cow<'_, str> {
    visible_keeping(text, &[])
}

/// [`visible`] as an owned string: what the screen and the console both put
/// on a line for text they did not write (a title, a subject, an event).
pub fn one_line(text: &str) -> String {
    visible(text).into_owned()
}

/// `text` for a terminal as lines: like [`visible`], but newlines and tabs
/// (which only move the cursor right or down) are kept.
pub fn visible_lines(text: &str) -> Cow<'_, str> {
    visible_keeping(text, &['\n', '\t'])
}

fn visible_keeping<'t>(text: &'t str, keep: &[char]) -> Cow<'t, str> {
    let shown = |c: char| !is_invisible(c) || keep.contains(&c);
    let Some(first) = text.find(|c: char| !shown(c)) else {
        return Cow::Borrowed(text);
    };
    let mut out = String::with_capacity(text.len() + 16);
    out.push_str(&text[..first]);
    for c in text[first..].chars() {
        if shown(c) {
            out.push(c);
        } else {
            out.extend(c.escape_default());
        }
    }
    Cow::Owned(out)
}

/// JSON text for a terminal: every invisible character but the newlines
/// between members written as a JSON escape (`\u001b`, a surrogate pair past
/// U+FFFF), which means the same to a JSON reader. serde_json writes DEL, C1
/// controls and format characters raw.
pub fn json_visible(json: &str) -> Cow<'_, str> {
    let shown = |c: char| !is_invisible(c) || c == '\n';
    let Some(first) = json.find(|c: char| !shown(c)) else {
        return Cow::Borrowed(json);
    };
    let mut out = String::with_capacity(json.len() + 16);
    out.push_str(&json[..first]);
    for c in json[first..].chars() {
        if shown(c) {
            out.push(c);
        } else {
            let mut units = [0u16; 2];
            for unit in c.encode_utf16(&mut units) {
                out.push_str(&format!("\\u{unit:04x}"));
            }
        }
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every character a terminal acts on or hides, by where it comes from.
    fn hidden_ones() -> Vec<char> {
        let mut all: Vec<char> = ('\0'..='\u{1f}').collect();
        all.push('\u{7f}');
        all.extend('\u{80}'..='\u{9f}');
        // Bidi embeddings, overrides, isolates and marks.
        all.extend('\u{202a}'..='\u{202e}');
        all.extend('\u{2066}'..='\u{2069}');
        all.extend(['\u{200e}', '\u{200f}', '\u{061c}']);
        // Zero-width characters, the word joiner, the BOM, the soft hyphen.
        all.extend('\u{200b}'..='\u{200d}');
        all.extend(['\u{2060}', '\u{feff}', '\u{00ad}', '\u{180e}']);
        // Other format characters: invisible operators, interlinear annotation,
        // tags, shorthand format controls, musical beams.
        all.extend('\u{2061}'..='\u{2064}');
        all.extend('\u{fff9}'..='\u{fffb}');
        all.extend([
            '\u{e0001}',
            '\u{e0041}',
            '\u{e007f}',
            '\u{1bca0}',
            '\u{1d173}',
        ]);
        // Line and paragraph separators.
        all.extend(['\u{2028}', '\u{2029}']);
        // Fillers and variation selectors that draw nothing.
        all.extend(['\u{3164}', '\u{115f}', '\u{ffa0}', '\u{034f}', '\u{fe00}']);
        all.extend(['\u{e0100}', '\u{e01ef}', '\u{2065}']);
        all
    }

    #[test]
    fn every_hidden_character_is_shown_escaped() {
        for c in hidden_ones() {
            assert!(is_invisible(c), "{:?} passes", c);
            let shown = visible(&format!("a{c}b")).into_owned();
            assert!(shown.is_ascii() && !shown.contains(c), "{c:?}: {shown}");
            assert!(shown.chars().all(|c| !is_invisible(c)), "{c:?}: {shown}");
            assert_eq!(visible(&shown), shown, "escaping twice changes nothing");
            if c == '\n' {
                // Only between members: serde_json escapes it in a string.
                continue;
            }
            let json = json_visible(&format!("\"a{c}b\"")).into_owned();
            let back: String = serde_json::from_str(&json).expect("still JSON");
            assert_eq!(back, format!("a{c}b"), "{json}");
            assert!(json.is_ascii(), "{json}");
        }
    }

    #[test]
    fn every_control_format_and_separator_character_is_invisible() {
        use GeneralCategory::*;
        let all = (0..=0x10ffff).filter_map(char::from_u32);
        for c in all.filter(|c| {
            matches!(
                get_general_category(*c),
                Control | Format | LineSeparator | ParagraphSeparator
            )
        }) {
            assert!(is_invisible(c), "{:?}", c);
            assert!(visible(&c.to_string()).starts_with("\\"), "{c:?}");
        }
    }

    #[test]
    fn a_scanner_skips_only_bytes_that_start_no_invisible_character() {
        let mut utf8 = [0u8; 4];
        for c in (0..=0x10ffff)
            .filter_map(char::from_u32)
            .filter(|c| is_invisible(*c))
        {
            assert!(
                may_start_invisible(c.encode_utf8(&mut utf8).as_bytes()[0]),
                "{c:?}"
            );
        }
        for c in ['a', 'é', '日', 'ж'] {
            assert!(
                !may_start_invisible(c.encode_utf8(&mut utf8).as_bytes()[0]),
                "{c:?}"
            );
        }
        // Continuation bytes start nothing.
        assert!((0x80..=0xbf).all(|b| !may_start_invisible(b)));
    }

    #[test]
    fn visible_text_is_left_as_it_is() {
        for text in [
            "plain ascii ~!@#$%^&*()_+{}|:\"<>?",
            "héllo ▶ 日本語 עברית العربية",
            "emoji ⚠️ ✅ 🦀",
            "spaces: \u{a0}\u{2003}\u{3000}",
            "combining: e\u{301}",
        ] {
            assert!(matches!(visible(text), Cow::Borrowed(_)), "{text}");
            assert!(matches!(json_visible(text), Cow::Borrowed(_)), "{text}");
        }
    }

    #[test]
    fn the_visible_form_is_rusts() {
        assert_eq!(
            visible("curl x|sh #\rcargo test\n\t\u{1b}[6n\u{7}\u{9b}\u{202e}\u{200b}"),
            "curl x|sh #\\rcargo test\\n\\t\\u{1b}[6n\\u{7}\\u{9b}\\u{202e}\\u{200b}"
        );
        assert_eq!(
            visible_lines("a\tb\nc\r\u{1b}]52;c;eA==\u{7}"),
            "a\tb\nc\\r\\u{1b}]52;c;eA==\\u{7}"
        );
        assert_eq!(
            json_visible("{\n  \"a\": \"\u{2028}\u{e0041}\"\n}"),
            "{\n  \"a\": \"\\u2028\\udb40\\udc41\"\n}"
        );
    }
}
