//! A rejected rate limit passed by paying for overage: an `overage` event with the
//! session, a counter in the status file and `--status`, and no backoff.

use crate::common;

use std::path::Path;

use common::*;

#[test]
fn a_limit_passed_on_overage_is_an_event_and_a_counter_not_a_backoff() {
    let transcript = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/transcripts/claude_overage_then_success.jsonl");
    let project = Project::new(&fast_config(&["replay", &transcript.to_string_lossy()], ""));
    let output = project.run(&["--headless", "1"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr_of(&output));
    let overage = project.events_named("overage");
    assert_eq!(overage.len(), 1, "{overage:?}");
    assert_eq!(overage[0]["global"], 1);
    assert_eq!(overage[0]["count"], 1);
    assert!(project.events_named("rate_limited").is_empty());
    let status = project.status();
    assert_eq!(status["counters"]["overages"], 1, "{status}");
    assert_eq!(status["counters"]["rate_limits"], 0, "{status}");
    let shown = stdout_of(&project.run(&["--status"]));
    assert!(
        shown.contains("Overage: 1 (rate limits passed by paying for overage)"),
        "{shown}"
    );
}
