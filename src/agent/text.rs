//! Text safety: agent output made harmless for a terminal (controls, escapes, caps).

use std::borrow::Cow;

use memchr::memchr;

use crate::escape::{is_invisible, may_start_invisible, push_visible};

/// Cap for [`Rendered::detail`]: enough to read a tool's output, small enough for a UI.
pub(super) const MAX_DETAIL_BYTES: usize = 64 * 1024;
/// Longest [`Rendered::text`], in characters, including the ellipsis.
pub(super) const MAX_TEXT_CHARS: usize = 500;
/// Tab stops for expanding tabs, as in a terminal.
pub(super) const TAB_WIDTH: usize = 8;
/// Colour sequences a plain line may keep in total; a line made of nothing but
/// SGR codes must not slip past the length cap.
pub(super) const MAX_SGR_BYTES_PER_LINE: usize = 2048;
/// Longest single SGR sequence that is kept.
pub(super) const MAX_SGR_SEQUENCE_BYTES: usize = 64;
/// Appended to a detail that was cut.
pub(super) const TRUNCATED_MARK: &str = "\n… (truncated)";

/// One display line from agent text the agent composed, ran or got back (a
/// JSON string): escape sequences removed, every other invisible character
/// (a carriage return too, so nothing before it hides) shown escaped.
pub(super) fn clean(text: &str) -> String {
    let text = text.trim_end_matches(['\r', '\n']);
    let mut out = String::new();
    if is_safe_text(text, false)
        && (text.len() <= MAX_TEXT_CHARS || char_count(text) <= MAX_TEXT_CHARS)
    {
        out.push_str(text);
    } else {
        sanitize_run(text, false, MAX_TEXT_CHARS, false, &mut out);
    }
    out
}

/// Caps a composed display line at MAX_TEXT_CHARS, ending it with an ellipsis.
pub(super) fn fit(text: String) -> String {
    if text.len() <= MAX_TEXT_CHARS {
        return text;
    }
    match text.char_indices().nth(MAX_TEXT_CHARS) {
        None => text,
        Some(_) => {
            let cut = text
                .char_indices()
                .nth(MAX_TEXT_CHARS - 1)
                .map_or(text.len(), |(i, _)| i);
            let mut text = text;
            text.truncate(cut);
            text.push('…');
            text
        }
    }
}

/// Whether text can be shown as it is (newlines allowed or not). Most text
/// can, so this is built to be fast: a branch-free control scan per block,
/// then a look at each character past ASCII, if any.
pub(super) fn is_safe_text(text: &str, allow_newline: bool) -> bool {
    let bytes = text.as_bytes();
    let newline = if allow_newline { b'\n' } else { 0xff };
    let mut past_ascii = false;
    for block in bytes.chunks(256) {
        let (control, high) = block.iter().fold((false, false), |(control, high), &b| {
            (
                control | ((b < 0x20 && b != newline) | (b == 0x7f)),
                high | (b >= 0x80),
            )
        });
        if control {
            return false;
        }
        past_ascii |= high;
    }
    !past_ascii
        || !bytes.iter().enumerate().any(|(at, &b)| {
            // A byte that can start one is a lead byte: `at` is a char boundary.
            b >= 0x80
                && may_start_invisible(b)
                && text[at..].chars().next().is_some_and(is_invisible)
        })
}

pub(super) fn char_count(text: &str) -> usize {
    // Every byte that is not a UTF-8 continuation byte starts a char.
    text.bytes().filter(|b| (b & 0xc0) != 0x80).count()
}

/// One display line from one line of what an agent wrote to its terminal:
/// the text after the last carriage return (what a terminal would show,
/// roughly), without escape sequences (colour SGR kept only with `keep_sgr`),
/// tabs expanded, every other invisible character shown escaped, at most
/// `max_chars` visible characters with an ellipsis.
pub(super) fn sanitize_line(text: &str, keep_sgr: bool, max_chars: usize) -> String {
    let mut out = String::new();
    let text = text.trim_end_matches(['\r', '\n']);
    let (before, tail) = match memchr::memrchr(b'\r', text.as_bytes()) {
        Some(i) => (&text[..i], &text[i + 1..]),
        None => ("", text),
    };
    if keep_sgr && before.contains('\x1b') {
        carry_sgr(before, &mut out);
    }
    if is_safe_text(tail, false) && (tail.len() <= max_chars || char_count(tail) <= max_chars) {
        out.push_str(tail);
    } else {
        sanitize_run(tail, keep_sgr, max_chars, false, &mut out);
    }
    out
}

/// The careful path: copies runs of ordinary text whole and deals with each
/// escape sequence, tab or other invisible character between them.
pub(super) fn sanitize_run(
    text: &str,
    keep_sgr: bool,
    max_chars: usize,
    keep_newlines: bool,
    out: &mut String,
) {
    let bytes = text.as_bytes();
    let mut sink = Sink {
        out,
        visible: 0,
        column: 0,
        last_char_at: None,
        max_chars,
    };
    let mut sgr_bytes = 0usize;
    let mut i = 0;
    while i < bytes.len() {
        let j = visible_run_end(text, i);
        if j > i && !sink.push_run(&text[i..j]) {
            return;
        }
        i = j;
        let Some(&b) = bytes.get(i) else {
            break;
        };
        match b {
            0x1b => {
                let end = escape_end(bytes, i);
                if keep_sgr
                    && is_sgr(&bytes[i..end])
                    && sgr_bytes + (end - i) <= MAX_SGR_BYTES_PER_LINE
                {
                    sgr_bytes += end - i;
                    sink.out.push_str(&text[i..end]);
                }
                i = end;
            }
            b'\t' => {
                let spaces = TAB_WIDTH - sink.column % TAB_WIDTH;
                if !sink.push_run(&"        "[..spaces]) {
                    return;
                }
                i += 1;
            }
            b'\n' if keep_newlines => {
                sink.out.push('\n');
                sink.column = 0;
                i += 1;
            }
            _ => {
                let Some(c) = text[i..].chars().next() else {
                    break;
                };
                let mut shown = String::new();
                push_visible(c, &mut shown);
                if !sink.push_run(&shown) {
                    return;
                }
                i += c.len_utf8();
            }
        }
    }
}

/// Where the run of characters shown as they are that starts at `from` ends:
/// at an invisible character or the end (a char boundary either way).
fn visible_run_end(text: &str, from: usize) -> usize {
    let bytes = text.as_bytes();
    let mut j = from;
    while let Some(&b) = bytes.get(j) {
        if b.is_ascii() {
            if b < 0x20 || b == 0x7f {
                break;
            }
            j += 1;
        } else if !may_start_invisible(b) {
            // The rest of the character, if any, starts nothing either.
            j += 1;
        } else {
            let Some(c) = text[j..].chars().next() else {
                break;
            };
            if is_invisible(c) {
                break;
            }
            j += c.len_utf8();
        }
    }
    j
}

/// Visible characters going into a display line, up to a cap.
pub(super) struct Sink<'o> {
    out: &'o mut String,
    visible: usize,
    /// Characters since the last kept newline, for tab stops.
    column: usize,
    /// Where the last visible char starts in `out`: it becomes the ellipsis
    /// when one more would exceed the cap.
    last_char_at: Option<usize>,
    max_chars: usize,
}

impl Sink<'_> {
    /// Adds a run of ordinary text; false once the cap is reached (the
    /// ellipsis is then in place).
    pub(super) fn push_run(&mut self, run: &str) -> bool {
        let chars = char_count(run);
        let room = self.max_chars.saturating_sub(self.visible);
        let (kept, complete) = if chars <= room {
            (run, true)
        } else {
            let cut = run.char_indices().nth(room).map_or(run.len(), |(k, _)| k);
            (&run[..cut], false)
        };
        if let Some((last, _)) = kept.char_indices().next_back() {
            self.last_char_at = Some(self.out.len() + last);
        }
        self.out.push_str(kept);
        if complete {
            self.visible += chars;
            self.column += chars;
            return true;
        }
        if let Some(at) = self.last_char_at {
            self.out.truncate(at);
        }
        self.out.push('…');
        false
    }
}

/// Keeps the colour state set before a carriage return, so that overwritten
/// progress text does not take its colour with it.
pub(super) fn carry_sgr(before: &str, out: &mut String) {
    let bytes = before.as_bytes();
    let mut found: Vec<&str> = Vec::new();
    let mut i = 0;
    while let Some(j) = memchr(0x1b, &bytes[i..]) {
        let start = i + j;
        let end = escape_end(bytes, start);
        if is_sgr(&bytes[start..end]) {
            found.push(&before[start..end]);
        }
        i = end;
    }
    // Only the latest few matter for the state the tail is drawn in.
    let mut budget = 128usize;
    let mut keep = found.len();
    while keep > 0 && found[keep - 1].len() <= budget {
        budget -= found[keep - 1].len();
        keep -= 1;
    }
    for seq in &found[keep..] {
        out.push_str(seq);
    }
}

/// `ESC [ digits;… m` with nothing else in it, short.
pub(super) fn is_sgr(seq: &[u8]) -> bool {
    seq.len() >= 3
        && seq.len() <= MAX_SGR_SEQUENCE_BYTES
        && seq.starts_with(b"\x1b[")
        && seq.ends_with(b"m")
        && seq[2..seq.len() - 1]
            .iter()
            .all(|c| c.is_ascii_digit() || *c == b';' || *c == b':')
}

/// End (exclusive) of the escape sequence starting at `bytes[start] == ESC`,
/// as `vte`'s parser (the DEC ANSI state machine) reads it. Always ends on an
/// ASCII byte or the end, so slicing there is safe. An OSC, DCS, SOS, PM or APC
/// string runs to ESC `\` (string terminator), BEL or another ESC; any other
/// sequence also stops before a non-ASCII byte or a control character.
pub(super) fn escape_end(bytes: &[u8], start: usize) -> usize {
    let string = matches!(bytes.get(start + 1), Some(b']' | b'P' | b'X' | b'^' | b'_'));
    let mut parser = vte::Parser::new();
    let mut seen = SequenceEnd::default();
    parser.advance(&mut seen, &bytes[start..=start]);
    let mut j = start + 1;
    while let Some(&b) = bytes.get(j) {
        match b {
            0x1b if string && bytes.get(j + 1) == Some(&b'\\') => return j + 2,
            0x1b => return j,
            0x07 if string => return j + 1,
            // A string (a window title, a DCS payload) runs to its terminator,
            // whatever it holds; any other sequence stops where it stops being one.
            _ if string => {}
            0x80.. | 0..0x20 | 0x7f => return j,
            _ => {}
        }
        parser.advance(&mut seen, &bytes[j..=j]);
        j += 1;
        if seen.done {
            return j;
        }
    }
    j
}

/// Notes when `vte` finishes a sequence.
#[derive(Default)]
struct SequenceEnd {
    done: bool,
}

impl vte::Perform for SequenceEnd {
    fn csi_dispatch(&mut self, _: &vte::Params, _: &[u8], _: bool, _: char) {
        self.done = true;
    }

    fn esc_dispatch(&mut self, _: &[u8], _: bool, _: u8) {
        self.done = true;
    }

    fn print(&mut self, _: char) {
        self.done = true;
    }
}

/// Multi-line text for a detail view: sanitised like [`clean`] lines, but
/// newlines kept and nothing cut. Text that needs no change is not copied.
pub(super) fn sanitize_block<'t>(text: impl Into<Cow<'t, str>>) -> String {
    let text = text.into();
    let end = text.trim_end_matches(['\n', '\r']).len();
    if is_safe_text(&text[..end], true) {
        let mut text = text.into_owned();
        text.truncate(end);
        return text;
    }
    let mut out = String::with_capacity(end);
    sanitize_run(&text[..end], false, usize::MAX, true, &mut out);
    out
}

/// Caps a detail at MAX_DETAIL_BYTES including the truncation mark.
pub(super) fn cap_detail(mut text: String, complete: bool) -> String {
    if complete && text.len() <= MAX_DETAIL_BYTES {
        return text;
    }
    let limit = MAX_DETAIL_BYTES - TRUNCATED_MARK.len();
    if text.len() > limit {
        text.truncate(floor_char_boundary(&text, limit));
    }
    text.push_str(TRUNCATED_MARK);
    text
}

pub(super) fn cap_bytes(mut text: String, cap: usize) -> String {
    if text.len() > cap {
        text.truncate(floor_char_boundary(&text, cap - '…'.len_utf8()));
        text.push('…');
    }
    text
}

pub(super) fn floor_char_boundary(s: &str, mut i: usize) -> usize {
    if i >= s.len() {
        return s.len();
    }
    while !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

pub(super) fn decode_utf8(raw: &[u8], truncated: bool) -> Cow<'_, str> {
    // Every line is checked once, here, with SIMD: what serde_json then reads
    // from the `&str` (borrowed strings, raw values) is not checked again.
    if let Ok(text) = simdutf8::basic::from_utf8(raw) {
        return Cow::Borrowed(text);
    }
    match std::str::from_utf8(raw) {
        Ok(text) => Cow::Borrowed(text),
        // A line cut at the cap may end inside a character: drop that part
        // rather than show a replacement char.
        Err(e) if truncated && e.error_len().is_none() => {
            Cow::Borrowed(std::str::from_utf8(&raw[..e.valid_up_to()]).unwrap_or_default())
        }
        Err(_) => String::from_utf8_lossy(raw),
    }
}

// ---------------------------------------------------------------------------
// Text gathered from JSON strings, bounded
// ---------------------------------------------------------------------------

#[cfg(test)]
mod escape_tests {
    use super::*;

    #[test]
    fn sequences_end_where_a_terminal_ends_them() {
        for (text, end) in [
            ("\x1b[1;31mred", 7),
            ("\x1b[?25lx", 6),
            ("\x1b]0;título\x07after", "\x1b]0;título\x07".len()),
            ("\x1b]8;;https://x\x1b\\link", 16),
            ("\x1b(Bx", 3),
            ("\x1b7x", 2),
            ("\x1b[31\nm", 4),
            ("\x1b", 1),
            ("\x1b\x1b[m", 1),
        ] {
            assert_eq!(escape_end(text.as_bytes(), 0), end, "{text:?}");
        }
    }

    #[test]
    fn only_colour_survives_and_invisible_characters_are_shown() {
        let line = "\x1b]0;title\x07\x1b[2J\x1b[32mok\x1b[0m \u{202e}evil\u{200b}\u{7}";
        assert_eq!(
            sanitize_line(line, true, 100),
            "\x1b[32mok\x1b[0m \\u{202e}evil\\u{200b}\\u{7}"
        );
        assert_eq!(clean(line), "ok \\u{202e}evil\\u{200b}\\u{7}");
        assert_eq!(clean("curl x|sh #\rcargo test"), "curl x|sh #\\rcargo test");
        assert_eq!(sanitize_line("10%\r100%", false, 100), "100%");
    }
}
