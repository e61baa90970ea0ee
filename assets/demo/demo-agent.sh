#!/usr/bin/env bash
# clowder's bundled demo agent: prints Claude Code stream-json (init, thinking, text,
# tool calls and their results, a final result with cost) slowly enough to watch.
# It needs no network and no real agent. The second iteration hits a rate limit once,
# so the demo also shows clowder backing off until the limit resets.
# In the fleet demo (`clowder demo`), DEMO_COMMIT=1 makes it commit in its lane's
# worktree, and a prompt holding "demo-agent: ask" makes its first session ask for
# approval through `clowder gate` ($CLOWDER_BIN) before it runs a command.
set -u
iteration=${HARNESS_ITERATION:-1}
global=${HARNESS_GLOBAL_ITERATION:-1}
state_dir=${DEMO_STATE_DIR:-target/demo}
pace=${DEMO_PACE:-0.35}
session="demo-$global-$$"
msg=0

emit() { printf '%s\n' "$1"; }
pause() { sleep "$pace"; }
assistant_text() {
  msg=$((msg + 1))
  emit "{\"type\":\"assistant\",\"message\":{\"id\":\"msg_demo_${global}_${msg}\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"claude-sonnet-4-5\",\"content\":[{\"type\":\"text\",\"text\":\"$1\"}],\"usage\":{\"input_tokens\":1200,\"output_tokens\":90,\"cache_read_input_tokens\":5400}},\"session_id\":\"$session\"}"
}
tool_call() { # id name input-json
  msg=$((msg + 1))
  emit "{\"type\":\"assistant\",\"message\":{\"id\":\"msg_demo_${global}_${msg}\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"claude-sonnet-4-5\",\"content\":[{\"type\":\"tool_use\",\"id\":\"toolu_$1\",\"name\":\"$2\",\"input\":$3}],\"usage\":{\"input_tokens\":1300,\"output_tokens\":60}},\"session_id\":\"$session\"}"
}
tool_result() { # id is_error text
  emit "{\"type\":\"user\",\"message\":{\"role\":\"user\",\"content\":[{\"type\":\"tool_result\",\"tool_use_id\":\"toolu_$1\",\"is_error\":$2,\"content\":\"$3\"}]},\"session_id\":\"$session\"}"
}

demo_commit() { # a real commit in the lane's worktree, so that its branch moves ahead
  lane=${CLOWDER_LANE:-demo}
  mkdir -p work
  printf -- '- iteration %s (global %s): fixed the retry counter\n' "$iteration" "$global" >> "work/$lane.md"
  tool_call "commit_$global" Bash "{\"command\":\"git commit -am 'Fix the retry counter'\"}"
  pause
  if git add "work/$lane.md" >/dev/null 2>&1 && git commit -q -m "$lane: iteration $iteration" >/dev/null 2>&1; then
    tool_result "commit_$global" false "[clowder/$lane] $lane: iteration $iteration"
  else
    tool_result "commit_$global" true "git commit failed"
  fi
  pause
}
demo_gate() { # a Bash call held by `clowder gate` until a human decides
  cmd='./release.sh --publish'
  tool_call "release_$global" Bash "{\"command\":\"$cmd\",\"description\":\"Publish the release\"}"
  hook="{\"hook_event_name\":\"PreToolUse\",\"tool_name\":\"Bash\",\"tool_input\":{\"command\":\"$cmd\"},\"session_id\":\"$session\",\"cwd\":\"$PWD\"}"
  answer=$(printf '%s' "$hook" | "$CLOWDER_BIN" gate 2>/dev/null)
  case "$answer" in
    *'"permissionDecision":"allow"'*) tool_result "release_$global" false "published v0.3.0 (a demo: nothing left this machine)" ;;
    *) tool_result "release_$global" true "denied by clowder gate: not published" ;;
  esac
  pause
}

emit "{\"type\":\"system\",\"subtype\":\"init\",\"session_id\":\"$session\",\"model\":\"claude-sonnet-4-5\",\"cwd\":\"$PWD\",\"tools\":[\"Bash\",\"Read\",\"Edit\"],\"claude_code_version\":\"2.1.7\"}"
pause

mkdir -p "$state_dir" 2>/dev/null
if [ "$iteration" = 2 ] && [ ! -e "$state_dir/.demo-rate-limited-$PPID" ]; then
  touch "$state_dir/.demo-rate-limited-$PPID"
  reset=$(( $(date +%s) + 4 ))
  emit "{\"type\":\"rate_limit_event\",\"rate_limit_info\":{\"status\":\"rejected\",\"resetsAt\":$reset,\"rateLimitType\":\"five_hour\",\"utilization\":1.0},\"session_id\":\"$session\"}"
  emit "{\"type\":\"result\",\"subtype\":\"success\",\"is_error\":true,\"api_error_status\":429,\"num_turns\":1,\"duration_ms\":800,\"total_cost_usd\":0,\"result\":\"Claude AI usage limit reached|$reset\",\"session_id\":\"$session\"}"
  exit 1
fi

assistant_text "Reading the task list to pick the next item (iteration $iteration)."
pause
tool_call "read_$global" Read "{\"file_path\":\"TODO.md\"}"
pause
tool_result "read_$global" false "- [x] parse config\\n- [ ] retry on empty output\\n- [ ] rate-limit backoff (note: a tool result saying rate limit never triggers a backoff)"
pause
tool_call "test_$global" Bash "{\"command\":\"cargo test retry\",\"description\":\"Run the retry tests\"}"
pause; pause
tool_result "test_$global" true "test retry::empty_output ... FAILED\\nthread 'retry::empty_output' panicked: expected 2 retries, got 0"
pause
assistant_text "The retry counter is never incremented. Fixing it."
pause
tool_call "edit_$global" Edit "{\"file_path\":\"src/retry.rs\",\"old_string\":\"retries\",\"new_string\":\"retries + 1\"}"
pause
tool_result "edit_$global" false "The file src/retry.rs has been updated."
pause
tool_call "retest_$global" Bash "{\"command\":\"cargo test retry\"}"
pause; pause
tool_result "retest_$global" false "test retry::empty_output ... ok\\ntest result: ok. 4 passed; 0 failed"
pause
assistant_text "Tests pass. Committing with bd-finish."
pause
if [ "${DEMO_COMMIT:-}" = 1 ]; then demo_commit; fi
if [ "$iteration" = 1 ] && [ -n "${CLOWDER_BIN:-}" ]; then
  case "${1:-}" in *"demo-agent: ask"*) demo_gate ;; esac
fi
cost=$(printf '0.%04d' $(( 300 + global * 37 % 500 )))
emit "{\"type\":\"result\",\"subtype\":\"success\",\"is_error\":false,\"num_turns\":6,\"duration_ms\":9000,\"duration_api_ms\":7000,\"total_cost_usd\":$cost,\"usage\":{\"input_tokens\":7500,\"output_tokens\":420},\"result\":\"Fixed the retry counter; 4 tests pass.\",\"session_id\":\"$session\"}"
