//! `docs/protocol.schema.json` is what `clowder attach --protocol-schema`
//! prints, so that writers of clients read the protocol of this version; it is
//! a valid JSON Schema whose two sides take real messages and refuse wrong
//! ones. (`tests/it/host_socket.rs` checks every line a live host sends with it.)

use crate::common;

use std::path::Path;
use std::process::Command;

use common::{stderr_of, stdout_of};
use serde_json::{Value, json};

fn docs_schema() -> Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/protocol.schema.json");
    let text = std::fs::read_to_string(path).expect("read docs/protocol.schema.json");
    serde_json::from_str(&text).expect("docs/protocol.schema.json is JSON")
}

#[test]
fn the_schema_in_docs_is_the_one_the_binary_prints() {
    let output = Command::new(common::clowder_bin())
        .args(["attach", "--protocol-schema"])
        .output()
        .expect("run clowder");
    assert_eq!(output.status.code(), Some(0), "{}", stderr_of(&output));
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/protocol.schema.json");
    let kept = std::fs::read_to_string(path).expect("read docs/protocol.schema.json");
    assert!(
        kept == stdout_of(&output),
        "docs/protocol.schema.json is stale: run `cargo run -q -- attach --protocol-schema > docs/protocol.schema.json`"
    );
}

#[test]
fn each_side_of_the_schema_takes_real_messages_and_refuses_wrong_ones() {
    let schema = docs_schema();
    assert_eq!(schema["protocol"], 1);
    let server = jsonschema::validator_for(&schema["server"]).expect("the server side is a schema");
    let client = jsonschema::validator_for(&schema["client"]).expect("the client side is a schema");
    let good_client = [
        json!({"type": "ping", "re": 1}),
        json!({"type": "hello", "protocol": 1, "client": "a script"}),
        json!({"type": "request", "re": 2, "request": {"command": {"lane": "api", "command": "pause"}}}),
        json!({"type": "decide", "id": "r-1", "decision": {"decision": "reject", "reason": "no"}}),
        json!({"type": "follow", "lane": "api", "file": "/x/.clowder/lanes/api/a.jsonl"}),
        json!({"type": "changes"}),
    ];
    for message in &good_client {
        assert!(client.is_valid(message), "the schema refuses {message}");
    }
    let bad_client = [
        json!({"type": "format_disk"}),
        json!({"type": "ping"}),
        json!({"type": "decide", "id": "r-1", "decision": {"decision": "maybe"}}),
    ];
    for message in &bad_client {
        assert!(!client.is_valid(message), "the schema takes {message}");
    }
    let good_server = [
        json!({"type": "reply", "re": 1, "ok": true, "text": "pong"}),
        json!({"type": "refused", "reason": "no", "closing": true}),
        json!({"type": "overflowed", "dropped": 3}),
        json!({"type": "hello", "protocol": 1, "clowder": "0.1.0", "host": "h", "folder": "/x", "pid": 1}),
        json!({"type": "snapshot", "lanes": [], "facts": [], "plans": [], "idle": null, "recent": [], "requests": []}),
        json!({"type": "snapshot", "lanes": [], "facts": [], "plans": [], "idle": null, "recent": [], "requests": [], "changes": true}),
        json!({"type": "lane_changed", "lane": "api", "queued": false, "output_bytes": 6500,
               "last_output_growth": "2026-11-29T03:00:00Z", "last_update": "2026-11-29T03:00:00Z",
               "totals": {"cost_usd": 0.5, "turns": 3, "tool_calls": 7}}),
    ];
    for message in &good_server {
        assert!(server.is_valid(message), "the schema refuses {message}");
    }
    assert!(!server.is_valid(&json!({"type": "reply", "re": 1})));
    assert!(!server.is_valid(&json!({"type": "lane_changed", "lane": "api"})));
}
