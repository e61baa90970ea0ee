//! Display helpers: durations, sizes, clock times, and fitting text to a width
//! measured in terminal cells. A leaf: it imports nothing of this crate.

use chrono::{DateTime, Utc};
use unicode_width::{UnicodeWidthChar, UnicodeWidthStr};

/// The ellipsis that marks text left out.
pub const ELLIPSIS: char = '…';

/// A dollar amount as JSON for a reader, to a millionth of a dollar: sums of
/// per-session costs are not exact in binary (`0.1 + 0.2` is `0.30000000000000004`).
pub fn usd_json<S: serde::Serializer>(usd: &Option<f64>, serializer: S) -> Result<S::Ok, S::Error> {
    match usd {
        Some(usd) => serializer.serialize_f64((usd * 1e6).round() / 1e6),
        None => serializer.serialize_none(),
    }
}

/// `1d 2h 3m`, `1h 2m`, `3m 7s`, `42s`; negative counts as zero.
pub fn duration(secs: i64) -> String {
    let secs = secs.max(0);
    let (days, hours, mins) = (secs / 86_400, secs / 3600 % 24, secs / 60 % 60);
    if days > 0 {
        format!("{days}d {hours}h {mins}m")
    } else if hours > 0 {
        format!("{hours}h {mins}m")
    } else if mins > 0 {
        format!("{mins}m {}s", secs % 60)
    } else {
        format!("{secs}s")
    }
}

/// Like [`duration`] with tenths of a second below a minute: `0.4s`, `2m 5s`.
pub fn duration_ms(ms: u64) -> String {
    let secs = ms / 1000;
    match ms {
        ms if ms < 60_000 => format!("{:.1}s", ms as f64 / 1000.0),
        ms if ms < 3_600_000 => format!("{}m {}s", secs / 60, secs % 60),
        _ => format!("{}h {}m", secs / 3600, (secs % 3600) / 60),
    }
}

/// `999 B`, `48.2 KB`, `200.0 MB` (powers of 1000).
pub fn bytes(bytes: u64) -> String {
    const UNITS: [&str; 4] = ["KB", "MB", "GB", "TB"];
    if bytes < 1000 {
        return format!("{bytes} B");
    }
    let mut value = bytes as f64 / 1000.0;
    let mut unit = 0;
    while value >= 1000.0 && unit < UNITS.len() - 1 {
        value /= 1000.0;
        unit += 1;
    }
    format!("{value:.1} {}", UNITS[unit])
}

/// `7500`, `12.5k`, `3.2M`: a count in at most five or six cells.
pub fn count(n: u64) -> String {
    match n {
        n if n < 10_000 => n.to_string(),
        n if n < 1_000_000 => format!("{:.1}k", n as f64 / 1000.0),
        n => format!("{:.1}M", n as f64 / 1_000_000.0),
    }
}

/// `14:03:09`, in UTC.
pub fn clock(at: DateTime<Utc>) -> String {
    at.format("%H:%M:%S").to_string()
}

/// `14:00`, in UTC.
pub fn clock_short(at: DateTime<Utc>) -> String {
    at.format("%H:%M").to_string()
}

/// How many terminal cells `text` takes.
pub fn width(text: &str) -> usize {
    UnicodeWidthStr::width(text)
}

/// `text` in at most `max` cells: cut at a character boundary and ended with `…`
/// when it is longer.
pub fn fit(text: &str, max: usize) -> String {
    if width(text) <= max {
        return text.to_string();
    }
    if max == 0 {
        return String::new();
    }
    format!("{}{ELLIPSIS}", clip(text, max - 1))
}

/// The start of `text` that fits in `cells` terminal cells, cut at a character
/// boundary, without an ellipsis.
pub fn clip(text: &str, cells: usize) -> &str {
    let mut used = 0;
    for (at, c) in text.char_indices() {
        used += c.width().unwrap_or(0);
        if used > cells {
            return &text[..at];
        }
    }
    text
}

/// `text` in `max` cells, cut after a whole word when one ends in its last
/// third (`branch clowder/api …`, not `branch clowder/a…`), else as [`fit`].
pub fn fit_words(text: &str, max: usize) -> String {
    if width(text) <= max || max == 0 {
        return fit(text, max);
    }
    let head = clip(text, max - 1);
    // A head that ends where a word ends is whole.
    let end = if text[head.len()..].starts_with(' ') {
        Some(head.len())
    } else {
        head.rfind(' ')
    };
    match end {
        Some(at) if width(&head[..at]) * 3 >= max * 2 => {
            format!("{}{ELLIPSIS}", head[..at].trim_end())
        }
        _ => fit(text, max),
    }
}

/// The first of `choices` that fits in `max` cells, else the last one fitted.
pub fn first_fitting(choices: &[String], max: usize) -> String {
    choices
        .iter()
        .find(|c| width(c) <= max)
        .cloned()
        .unwrap_or_else(|| fit(choices.last().map_or("", String::as_str), max))
}

/// Rows as left-aligned columns two spaces apart, each column as wide as its
/// widest cell (counted in characters), trailing blanks trimmed.
pub fn columns<R: AsRef<[String]>>(rows: &[R]) -> String {
    let mut widths: Vec<usize> = Vec::new();
    for row in rows {
        for (i, cell) in row.as_ref().iter().enumerate() {
            let chars = cell.chars().count();
            match widths.get_mut(i) {
                Some(width) => *width = (*width).max(chars),
                None => widths.push(chars),
            }
        }
    }
    let mut text = String::new();
    for row in rows {
        let cells: Vec<String> = row
            .as_ref()
            .iter()
            .zip(&widths)
            .map(|(cell, width)| format!("{cell:<width$}"))
            .collect();
        text.push_str(cells.join("  ").trim_end());
        text.push('\n');
    }
    text
}

/// A path in at most `max` cells, shortened in the middle so that its file name
/// stays: `…/navigation/oi_sidebar.dart`. Whole leading components go first; a
/// file name alone too long is cut at its start.
pub fn path_middle(path: &str, max: usize) -> String {
    if width(path) <= max {
        return path.to_string();
    }
    let parts: Vec<&str> = path.split('/').collect();
    // Keep as many trailing components as fit after "…/".
    for skip in 1..parts.len() {
        let tail = parts[skip..].join("/");
        if width(&tail) + 2 <= max {
            return format!("{ELLIPSIS}/{tail}");
        }
    }
    let name = parts.last().copied().unwrap_or(path);
    tail_fit(name, max)
}

/// The end of `text` in at most `max` cells, started with `…`.
fn tail_fit(text: &str, max: usize) -> String {
    if width(text) <= max {
        return text.to_string();
    }
    if max == 0 {
        return String::new();
    }
    let mut kept: Vec<char> = Vec::new();
    let mut used = 0;
    for c in text.chars().rev() {
        let w = c.width().unwrap_or(0);
        if used + w > max - 1 {
            break;
        }
        kept.push(c);
        used += w;
    }
    let mut out = String::from(ELLIPSIS);
    out.extend(kept.into_iter().rev());
    out
}

/// Whether `word` is a file's path: absolute, from home or from here, or with
/// two slashes or more. A branch such as `clowder/api` is a name, not a path:
/// shortened to `…/api` it would no longer say which branch.
fn is_path(word: &str) -> bool {
    word.contains('/')
        && (word.starts_with(['/', '~', '.']) || word.matches('/').count() >= 2)
        && !word.starts_with(ELLIPSIS)
}

/// Every path-looking word of `text` ([`is_path`]) shortened in the middle
/// until `text` fits in `max` cells or no path is left to shorten.
pub fn shorten_paths(text: &str, max: usize) -> String {
    let mut words: Vec<String> = text.split(' ').map(str::to_string).collect();
    let mut total = width(text);
    // The longest path gives way first.
    while total > max {
        let Some((index, long)) = words
            .iter()
            .enumerate()
            .filter(|(_, w)| is_path(w))
            .max_by_key(|(_, w)| width(w))
            .map(|(i, w)| (i, width(w)))
        else {
            break;
        };
        let excess = total - max;
        // Never below the file name: the end of the text gives way instead.
        let name = words[index].rsplit('/').next().unwrap_or_default();
        let target = long.saturating_sub(excess).max(width(name) + 2);
        let short = path_middle(&words[index], target);
        let short = if width(&short) >= long {
            format!("{ELLIPSIS}{short}")
        } else {
            short
        };
        total = total + width(&short) - long;
        words[index] = short;
    }
    words.join(" ")
}

/// `text` broken at spaces into lines of at most `max` cells; a word longer
/// than a line is cut.
pub fn wrap(text: &str, max: usize) -> Vec<String> {
    let max = max.max(1);
    let mut lines = Vec::new();
    let mut line = String::new();
    for word in text.split_whitespace() {
        let word = fit(word, max);
        let needed = if line.is_empty() {
            width(&word)
        } else {
            width(&line) + 1 + width(&word)
        };
        if needed > max && !line.is_empty() {
            lines.push(std::mem::take(&mut line));
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(&word);
    }
    if !line.is_empty() || lines.is_empty() {
        lines.push(line);
    }
    lines
}

/// `text` in at most about `max` characters: when longer, its start and its end
/// around `…`, then its length, so that what follows padding is never out of
/// sight (`cargo test …&& curl x | sh [16410 chars]`).
pub fn head_and_tail(text: &str, max: usize) -> String {
    let count = text.chars().count();
    if count <= max {
        return text.to_string();
    }
    let label = format!(" [{count} chars]");
    let room = max.saturating_sub(label.chars().count() + 1).max(2);
    let head = room * 2 / 5;
    let tail = room - head;
    let start: String = text.chars().take(head).collect();
    let end: String = text.chars().skip(count.saturating_sub(tail)).collect();
    format!("{start}…{end}{label}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_align_on_the_widest_cell_and_trim_the_end() {
        let rows = vec![
            vec!["NAME".to_string(), "STATE".into()],
            vec!["auth".into(), "running".into()],
            vec!["documentation".into(), "-".into()],
        ];
        assert_eq!(
            columns(&rows),
            "NAME           STATE\nauth           running\ndocumentation  -\n"
        );
    }

    #[test]
    fn sizes_and_durations_read_like_the_spec() {
        assert_eq!(bytes(48_200), "48.2 KB");
        assert_eq!(bytes(999), "999 B");
        assert_eq!(bytes(200_000_000), "200.0 MB");
        assert_eq!(duration(3 * 3600 + 42 * 60 + 5), "3h 42m");
        assert_eq!(duration(65), "1m 5s");
        assert_eq!(duration(9), "9s");
        assert_eq!(duration(-3), "0s");
        assert_eq!(duration_ms(400), "0.4s");
        assert_eq!(duration_ms(59_949), "59.9s");
        assert_eq!(duration_ms(125_000), "2m 5s");
        assert_eq!(duration_ms(7_500_000), "2h 5m");
        assert_eq!(count(7_500), "7500");
        assert_eq!(count(12_500), "12.5k");
    }

    #[test]
    fn clip_keeps_what_fits_in_the_cells() {
        assert_eq!(clip("abcdef", 4), "abcd");
        assert_eq!(clip("abc", 4), "abc");
        assert_eq!(clip("日本語", 5), "日本");
        assert_eq!(clip("e\u{301}tude", 2), "e\u{301}t");
        assert_eq!(clip("", 3), "");
    }

    #[test]
    fn fit_counts_cells_and_ends_with_an_ellipsis() {
        assert_eq!(fit("limit 30s", 20), "limit 30s");
        assert_eq!(fit("no session running", 10), "no sessio…");
        // A wide character is two cells: it is not split.
        assert_eq!(fit("日本語のテキスト", 5), "日本…");
        assert!(width(&fit("日本語のテキスト", 5)) <= 5);
    }

    #[test]
    fn paths_lose_their_middle_and_keep_their_file_name() {
        let path = "/home/me/app/lib/src/features/navigation/oi_sidebar.dart";
        assert_eq!(path_middle(path, 30), "…/navigation/oi_sidebar.dart");
        assert_eq!(path_middle(path, 17), "…/oi_sidebar.dart");
        assert_eq!(path_middle(path, 10), "…ebar.dart");
        assert_eq!(path_middle("short.rs", 10), "short.rs");
        let text = format!("session 3 writes to {path}");
        let short = shorten_paths(&text, 48);
        assert!(width(&short) <= 48, "{short}");
        assert!(short.ends_with("oi_sidebar.dart"), "{short}");
    }

    #[test]
    fn a_branch_keeps_its_name_and_a_cut_falls_between_words() {
        let text = "lane api added: branch clowder/api in /tmp/.tmpXyZ12/.clowder/worktrees/api";
        assert_eq!(
            shorten_paths(text, 40),
            "lane api added: branch clowder/api in …/api"
        );
        assert_eq!(
            fit_words(&shorten_paths(text, 28), 28),
            "lane api added: branch…"
        );
        assert_eq!(
            fit_words("removed lane api: worktree …/api", 18),
            "removed lane api:…"
        );
        assert_eq!(fit_words("abcdefghijklmnopqrstuvwxyz", 10), "abcdefghi…");
        assert_eq!(fit_words("short", 10), "short");
    }

    #[test]
    fn wrap_breaks_at_spaces() {
        assert_eq!(
            wrap("pause / resume the session (SIGSTOP / SIGCONT)", 20),
            ["pause / resume the", "session (SIGSTOP /", "SIGCONT)"]
        );
    }

    #[test]
    fn long_text_keeps_its_end_and_says_its_length() {
        assert_eq!(head_and_tail("short", 10), "short");
        let long = format!("ls {} && curl x | sh", "a".repeat(100));
        let shown = head_and_tail(&long, 50);
        assert!(shown.ends_with("curl x | sh [118 chars]"), "{shown}");
        assert!(shown.starts_with("ls a"), "{shown}");
        assert!(shown.chars().count() <= 50, "{shown}");
    }
}
