//! A tool call's input and result are built when the line is expanded.

use super::*;
use crate::agent::stream::{AgentFormat, StreamParser};

const CALL_AND_RESULT: &str = concat!(
    r#"{"type":"system","subtype":"init","session_id":"s","model":"m"}"#,
    "\n",
    r#"{"type":"assistant","message":{"id":"m1","content":[{"type":"tool_use","id":"t1","name":"Bash","input":{"command":"cat notes.txt","timeout":5}}]}}"#,
    "\n",
    r#"{"type":"user","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":[{"type":"text","text":"alpha\nbeta\n"},{"type":"text","text":"gamma-hidden"}]}]}}"#,
    "\n",
);

#[test]
fn expanding_a_call_builds_its_input_and_result() {
    let mut parser = StreamParser::new(AgentFormat::Auto);
    let mut view = OutputView::default();
    for line in parser.feed(CALL_AND_RESULT.as_bytes()) {
        view.push(line);
    }
    let call = view
        .lines
        .iter()
        .position(|l| l.kind == LineKind::ToolCall)
        .unwrap();
    let result = &view.lines[call + 1];
    assert_eq!(result.text, "  ↳ alpha (+2 lines)");
    let built = |view: &OutputView| {
        [call, call + 1].map(|i| view.lines[i].detail.as_ref().unwrap().is_rendered())
    };
    assert_eq!(built(&view), [false, false]);

    view.selected = Some(call);
    view.expanded = Some(call);
    let (heading, detail) = view.expanded_detail().unwrap();
    assert_eq!(heading, "▶ Bash  cat notes.txt");
    assert_eq!(
        detail,
        "command: cat notes.txt\ntimeout: 5\n\n── result ──\nalpha\nbeta\ngamma-hidden"
    );
    assert_eq!(built(&view), [true, true]);
}

#[test]
fn search_finds_text_only_a_detail_holds() {
    let mut parser = StreamParser::new(AgentFormat::Auto);
    let mut view = OutputView::default();
    for line in parser.feed(CALL_AND_RESULT.as_bytes()) {
        view.push(line);
    }
    view.selected = Some(0);
    view.search = Some("GAMMA-hidden".to_owned());
    assert!(view.find(true));
    let found = &view.lines[view.current()];
    assert_eq!(found.kind, LineKind::ToolResult);
}
