//! Details built on first use: the same texts as the details built as each
//! line was read, recorded in `eager_details.txt` (a SHA-256 of every display
//! line of each case) from the parser that built them eagerly.

use sha2::{Digest, Sha256};

use super::*;

const DIGESTS: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/src/agent/stream/tests/eager_details.txt"
);

/// Every fixture file, by path under `tests/fixtures`.
fn fixtures() -> Vec<(String, Vec<u8>)> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let mut found = Vec::new();
    let mut dirs = vec![root.clone()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
            } else if path
                .extension()
                .is_some_and(|e| e == "jsonl" || e == "ndjson" || e == "txt")
            {
                let name = path.strip_prefix(&root).unwrap().display().to_string();
                found.push((name, std::fs::read(&path).unwrap()));
            }
        }
    }
    found.sort();
    found
}

fn claude_line(value: serde_json::Value) -> String {
    format!("{value}\n")
}

/// Members in Claude Code's order (`type` first), so a line cut at the cap
/// keeps its kind.
fn tool_result(id: &str, content: serde_json::Value) -> String {
    format!(
        r#"{{"type":"user","message":{{"role":"user","content":[{{"type":"tool_result","tool_use_id":"{id}","content":{content},"is_error":false}}]}},"session_id":"s"}}"#
    ) + "\n"
}

fn tool_use(id: &str, name: &str, input: serde_json::Value) -> String {
    format!(
        r#"{{"type":"assistant","message":{{"id":"m{id}","content":[{{"type":"tool_use","id":"{id}","name":"{name}","input":{input}}}]}},"session_id":"s"}}"#
    ) + "\n"
}

fn numbered(lines: usize, width: usize) -> String {
    (0..lines)
        .map(|i| format!("{i:>6}: {}\n", "x".repeat(width)))
        .collect()
}

/// Inputs that reach every way a detail is built, the size limits included.
fn synthetic() -> Vec<(String, Vec<u8>)> {
    use serde_json::json;
    let init = format!("{INIT}\n");
    let claude = |body: String| (init.clone() + &body).into_bytes();
    let big = numbered(30_000, 40);
    let blank_start = format!("{}first line after blanks\nsecond\n", " \n".repeat(40_000));
    let escapes = format!(
        "\n\n   \n\x1b[31mred\x1b[0m\tcafé \u{202e}evil\r\nover\rwritten\n{}",
        numbered(2000, 30)
    );
    let codex = |lines: &[serde_json::Value]| {
        lines
            .iter()
            .map(|l| format!("{l}\n"))
            .collect::<String>()
            .into_bytes()
    };
    vec![
        ("bench stream 3 MiB".to_owned(), more::bench_stream(3 << 20)),
        (
            "result string, 1.2 MB, cut line".to_owned(),
            claude(tool_result("t1", json!(big))),
        ),
        (
            "result string, 300 KB".to_owned(),
            claude(tool_result("t1", json!(big[..300_000]))),
        ),
        (
            "result string, 60 KB".to_owned(),
            claude(tool_result("t1", json!(big[..60_000]))),
        ),
        (
            "result blocks, 300 KB and 60 KB".to_owned(),
            claude(
                tool_result(
                    "t1",
                    json!([{"type":"text","text":&big[..300_000]},{"type":"image","source":{}},"tail"]),
                ) + &tool_result(
                    "t2",
                    json!([{"type":"text","text":&big[..60_000]},{"type":"image","source":{}},{"type":"text","text":"\n"},{"type":"search_result"}]),
                ),
            ),
        ),
        (
            "result, first line past the cap".to_owned(),
            claude(tool_result("t1", json!(blank_start))),
        ),
        (
            "result, escapes and blank start".to_owned(),
            claude(
                tool_result("t1", json!(escapes))
                    + &tool_result("t2", json!([{"type":"text","text":&escapes}])),
            ),
        ),
        (
            "result, blank and empty".to_owned(),
            claude(
                tool_result("t1", json!(" \n\t\n"))
                    + &tool_result("t2", json!(""))
                    + &tool_result("t3", json!([]))
                    + &tool_result("t4", json!(null))
                    + &tool_result("t5", json!([{"type":"text","text":""},{"type":"text","text":"\n\n"}])),
            ),
        ),
        (
            "result, lone surrogate".to_owned(),
            claude(
                r#"{"type":"user","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"a\ud800b\nc"},{"type":"tool_result","tool_use_id":"t2","content":[{"type":"text","text":"\ud800x\ny"}]}]},"session_id":"s"}"#
                    .to_owned()
                    + "\n",
            ),
        ),
        (
            "inputs, readable and JSON, small and large".to_owned(),
            claude(
                tool_use("u1", "Write", json!({"file_path":"/a","content":&big[..300_000]}))
                    + &tool_use("u2", "Write", json!({"file_path":"/a","content":&big[..60_000]}))
                    + &tool_use("u3", "Bash", json!({"command":"ls","nested":{"a":[1,2,{"b":null}]}}))
                    + &tool_use("u4", "Edit", json!({"file_path":"/a","old_string":"x","new_string":&big[..300_000],"n":[1]}))
                    + &tool_use("u5", "Task", json!({"prompt":"line one\nline two","n":3,"ok":true,"none":null}))
                    + &tool_use("u6", "Other", json!("just a string"))
                    + &tool_use("u7", "Other", json!({})),
            ),
        ),
        (
            "thinking, 300 KB".to_owned(),
            claude(claude_line(
                json!({"type":"assistant","message":{"id":"m","content":[{"type":"thinking","thinking":&big[..300_000]}]}}),
            )),
        ),
        (
            "codex calls and results".to_owned(),
            codex(&[
                json!({"type":"thread.started","thread_id":"th"}),
                json!({"type":"item.started","item":{"id":"i1","type":"command_execution","command":"bash -lc 'cat big'","status":"in_progress"}}),
                json!({"type":"item.completed","item":{"id":"i1","type":"command_execution","command":"bash -lc 'cat big'","aggregated_output":&big[..300_000],"exit_code":0,"status":"completed"}}),
                json!({"type":"item.completed","item":{"id":"i2","type":"command_execution","command":"false","aggregated_output":escapes,"exit_code":1,"status":"failed"}}),
                json!({"type":"item.completed","item":{"id":"i3","type":"mcp_tool_call","server":"s","tool":"t","arguments":{"q":&big[..60_000]},"result":{"content":[{"type":"text","text":&big[..60_000]},{"type":"image"},{"type":"text","text":"end"}]},"status":"completed"}}),
                json!({"type":"item.completed","item":{"id":"i4","type":"mcp_tool_call","server":"s","tool":"t","arguments":{"q":&big[..300_000]},"result":{"content":[{"type":"text","text":&big[..300_000]}]},"status":"completed"}}),
                json!({"type":"item.completed","item":{"id":"i5","type":"mcp_tool_call","server":"s","tool":"t","arguments":null,"error":{"message":"boom\nmore"},"status":"failed"}}),
                json!({"type":"item.completed","item":{"id":"i6","type":"mcp_tool_call","server":"s","tool":"t","result":{"content":[]},"status":"completed"}}),
            ]),
        ),
    ]
}

/// Every display line of one input, each with its detail, as bytes.
fn rendered(input: &[u8]) -> Vec<Rendered> {
    let mut parser = StreamParser::new(AgentFormat::Auto);
    let mut out = Vec::new();
    for chunk in input.chunks(64 * 1024) {
        out.extend(parser.feed(chunk));
    }
    out.extend(parser.finish());
    out
}

fn digest(lines: &[Rendered]) -> String {
    let mut hash = Sha256::new();
    for line in lines {
        hash.update(format!("{:?}\x1f", line.kind));
        hash.update(&line.text);
        hash.update(format!(
            "\x1f{}\x1f{}\x1f",
            line.tool_use_id.as_deref().unwrap_or("\0"),
            line.is_error
        ));
        hash.update(line.detail.as_deref().unwrap_or("\0none"));
        hash.update("\x1e");
    }
    format!("{:x}", hash.finalize())
}

fn cases() -> Vec<(String, Vec<u8>)> {
    let mut all = fixtures();
    all.extend(synthetic());
    all
}

/// `CLOWDER_WRITE_EAGER_DETAILS=1` records the digests of the parser in use.
#[test]
fn details_are_the_texts_built_eagerly() {
    let actual: Vec<(String, String)> = cases()
        .into_iter()
        .map(|(name, input)| (name, digest(&rendered(&input))))
        .collect();
    if std::env::var_os("CLOWDER_WRITE_EAGER_DETAILS").is_some() {
        let text: String = actual
            .iter()
            .map(|(name, digest)| format!("{digest}  {name}\n"))
            .collect();
        std::fs::write(DIGESTS, text).unwrap();
        return;
    }
    let expected = std::fs::read_to_string(DIGESTS).unwrap();
    let expected: Vec<(String, String)> = expected
        .lines()
        .map(|l| {
            let (digest, name) = l.split_once("  ").unwrap();
            (name.to_owned(), digest.to_owned())
        })
        .collect();
    assert_eq!(actual, expected);
}

fn tool_lines(lines: &[Rendered]) -> Vec<&Rendered> {
    lines
        .iter()
        .filter(|l| matches!(l.kind, LineKind::ToolCall | LineKind::ToolResult))
        .filter(|l| l.detail.is_some())
        .collect()
}

#[test]
fn details_are_built_when_first_used_and_once() {
    let (_, input) = fixtures()
        .into_iter()
        .find(|(name, _)| name == "agent/six_reads.jsonl")
        .unwrap();
    let lines = rendered(&input);
    let tools = tool_lines(&lines);
    assert_eq!(tools.len(), 12, "{lines:#?}");
    let details: Vec<&Detail> = tools.iter().map(|l| l.detail.as_ref().unwrap()).collect();
    assert!(details.iter().all(|d| !d.is_rendered()));
    let first: &str = details[1];
    assert!(details[1].is_rendered());
    assert!(details.iter().skip(2).all(|d| !d.is_rendered()));
    // Built once: the same text is handed out again.
    assert!(std::ptr::eq(first, &**details[1]));
    // A copy made before use builds its own.
    let copy = details[2].clone();
    assert_eq!(copy, *details[2]);
    assert!(copy.is_rendered() && details[2].is_rendered());
}

/// A line of output a whole file long keeps at most the bounded source and
/// the capped text, whatever its size.
#[test]
fn a_detail_holds_a_bounded_part_of_a_large_line() {
    let big = numbered(30_000, 40);
    let limit = 256 * 1024 + MAX_DETAIL_BYTES;
    for (content, whole) in [
        (serde_json::json!(big), false),
        (serde_json::json!(big[..900_000]), true),
        (
            serde_json::json!([{"type":"text","text":&big[..200_000]}]),
            true,
        ),
    ] {
        let input = format!("{INIT}\n{}", tool_result("t1", content));
        assert!(input.len() > 200_000);
        let lines = rendered(input.as_bytes());
        let detail = tool_lines(&lines)[0].detail.as_ref().unwrap();
        assert!(detail.held_bytes() <= limit, "{}", detail.held_bytes());
        assert!(detail.len() <= MAX_DETAIL_BYTES);
        assert!(detail.held_bytes() <= limit, "{}", detail.held_bytes());
        assert!(detail.ends_with(TRUNCATED_MARK));
        assert!(detail.starts_with("     0: xxxx"));
        assert_eq!(whole, input.len() < MAX_PENDING_BYTES);
    }
}
