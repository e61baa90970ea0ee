//! Bad input never panics: the config parser on arbitrary and mutated text, an
//! approval request on arbitrary JSON-ish text, and the agent-stream parser on
//! hostile terminal output.

use std::path::Path;

use clowder::agent::{AgentFormat, StreamParser};
use clowder::approvals::Request;
use clowder::config::Config;
use proptest::prelude::*;

const REFERENCE: &str = include_str!("../../harness.toml");

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn config_parser_never_panics_on_arbitrary_text(text in ".{0,400}") {
        let _ = Config::parse(&text, Path::new("harness.toml"));
    }

    /// Real configs with a slice replaced: errors, when they come, name the file.
    #[test]
    fn config_parser_locates_errors_in_mutated_configs(
        start in 0usize..REFERENCE.len(),
        len in 0usize..40,
        junk in "[\\[\\]=\"'a-z0-9 .{}#\\n-]{0,20}",
    ) {
        let mut text = REFERENCE.to_string();
        let start = (0..=start).rev().find(|i| text.is_char_boundary(*i)).unwrap_or(0);
        let end = (start + len).min(text.len());
        let end = (end..=text.len()).find(|i| text.is_char_boundary(*i)).unwrap_or(text.len());
        text.replace_range(start..end, &junk);
        if let Err(err) = Config::parse(&text, Path::new("harness.toml")) {
            prop_assert!(err.to_string().starts_with("harness.toml"));
            prop_assert!(!err.message.is_empty());
        }
    }

    #[test]
    fn approval_request_parsing_never_panics(text in "\\{.{0,300}") {
        let _ = serde_json::from_str::<Request>(&text);
    }

    /// Terminal noise: unterminated escapes, invalid UTF-8, carriage returns, in any chunking.
    #[test]
    fn text_output_is_made_harmless(
        bytes in proptest::collection::vec(prop_oneof![
            Just(0x1bu8), Just(b'['), Just(b'\r'), Just(b'\n'), Just(0x07), Just(0xff), Just(0xc3), any::<u8>()
        ], 0..600),
        split in 1usize..64,
    ) {
        let mut parser = StreamParser::new(AgentFormat::Text);
        let mut lines = Vec::new();
        for chunk in bytes.chunks(split) {
            lines.extend(parser.feed(chunk));
        }
        lines.extend(parser.finish());
        for line in lines {
            // Only colour sequences (ESC [ … m) may remain; nothing else can move the cursor.
            let mut rest = line.text.as_str();
            while let Some(at) = rest.find('\u{1b}') {
                let sequence = &rest[at..];
                prop_assert!(sequence.starts_with("\u{1b}["), "{:?}", line.text);
                let end = sequence.find('m');
                prop_assert!(end.is_some(), "unterminated escape kept: {:?}", line.text);
                let body = &sequence[2..end.unwrap_or(0)];
                prop_assert!(body.chars().all(|c| c.is_ascii_digit() || c == ';'), "{:?}", line.text);
                rest = &sequence[end.unwrap_or(0)..];
            }
            prop_assert!(!line.text.contains('\r') && !line.text.contains('\u{7}'), "{:?}", line.text);
        }
    }
}

#[test]
fn ten_megabytes_without_a_newline_stay_bounded() {
    let mut parser = StreamParser::new(AgentFormat::Auto);
    let chunk = vec![b'x'; 1 << 20];
    let mut lines = Vec::new();
    for _ in 0..10 {
        lines.extend(parser.feed(&chunk));
    }
    lines.extend(parser.finish());
    assert!(!lines.is_empty());
    assert!(
        lines.iter().all(|l| l.text.len() <= 4096),
        "a display line is bounded"
    );
}
