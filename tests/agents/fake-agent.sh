#!/usr/bin/env bash
# A fake coding agent for clowder's tests. It behaves as the mode says, so tests can
# drive every path of the supervisor with a real process.
#
# Usage: fake-agent.sh MODE [ARG]   (the prompt, if passed, is ignored unless MODE uses it)
# Modes:
#   normal [LINES]      emit Claude-style stream-json: init, LINES assistant lines, result
#   empty               print nothing, exit 0
#   tiny                print a few bytes (under min_output_bytes), exit 0
#   hang                print one line, then sleep forever (watchdog target)
#   ignore-term         print one line, ignore SIGTERM, sleep forever
#   background [SECS]   print normal output, leave `sleep SECS` running in the background, exit
#   fork N              start N children that sleep, print, then wait on them
#   flood BYTES         write BYTES bytes of stream-json-shaped lines, exit
#   term-marker FILE    print, then sleep; on SIGTERM write FILE and exit 143
#   replay FILE         print FILE (a stream-json transcript) line by line, exit
#   slow SECS           print a line every 0.1 s for SECS seconds, exit
#   drip FILE [HANG]    print FILE line by line, 0.2 s apart, then sleep HANG s (default 0), exit
#   burst FILE [HANG]   print FILE in one write, then sleep HANG s (default 0), exit
#   exit CODE           print normal output, exit CODE
#   prompt              print the prompt (first argument after the mode) and normal output
#   setsid-escape [SECS] start `sleep SECS` in a session of its own (out of the agent's
#                       process group), print normal output and "escaped pid PID", exit
#   stdin [SECS]        read messages on stdin as `claude -p --input-format stream-json`
#                       does: the first is the prompt; then a "tool call" of SECS s
#                       (default 2) during which a message that arrives enters the turn
#                       at once ("Read the note."), then the result; a message after the
#                       result runs a turn of its own; ends when stdin closes. Each message
#                       taken is echoed when --replay-user-messages is among the arguments.
#                       FAKE_AGENT_STALL=1: never writes a result (the watchdog's target);
#                       FAKE_AGENT_EOF_MARK=FILE: created once stdin is closed;
#                       FAKE_AGENT_LINGER=SECS: how long it stays after that.
# Env: FAKE_AGENT_PIDFILE=path  append "pid pgid" of this process on start.
#      FAKE_AGENT_ARGSFILE=path  append its arguments, one a line, then
#                                CLOWDER_GATE_HANDED=VALUE and an empty line.
# What clowder hands a `claude` (`--settings JSON`) or a `codex exec` (`exec -c
# KEY=VALUE --dangerously-bypass-hook-trust`) before the mode is skipped.
set -u
case " $* " in *" --replay-user-messages "*) replay_input=1 ;; *) replay_input=0 ;; esac
if [ -n "${FAKE_AGENT_ARGSFILE:-}" ]; then
  { printf '%s\n' "$@"; echo "CLOWDER_GATE_HANDED=${CLOWDER_GATE_HANDED:-}"; echo; } >> "$FAKE_AGENT_ARGSFILE"
fi
while [ $# -gt 0 ]; do
  case "$1" in
    --settings|-c) shift 2 ;;
    exec|--dangerously-bypass-hook-trust) shift ;;
    *) break ;;
  esac
done
mode=${1:-normal}
arg=${2:-}
if [ -n "${FAKE_AGENT_PIDFILE:-}" ]; then
  echo "$$ $(ps -o pgid= -p $$ | tr -d ' ')" >> "$FAKE_AGENT_PIDFILE"
fi

init_line='{"type":"system","subtype":"init","session_id":"fake-session","model":"claude-sonnet-4-5","tools":["Bash","Edit"],"cwd":"/tmp"}'
result_line='{"type":"result","subtype":"success","is_error":false,"num_turns":2,"duration_ms":1200,"total_cost_usd":0.0123,"result":"All done.","session_id":"fake-session"}'

assistant() {
  printf '{"type":"assistant","message":{"id":"msg_%s","role":"assistant","content":[{"type":"text","text":"Step %s: working on the task."}],"usage":{"input_tokens":10,"output_tokens":5}}}\n' "$1" "$1"
}

took() {
  if [ "$replay_input" = 1 ]; then printf '%s\n' "$1"; fi
}

# Claude Code with stream-json input: see the `stdin` mode above.
stdin_mode() {
  local ticks
  ticks=$(awk "BEGIN { print int(${1:-2} * 10) }")
  IFS= read -r first || exit 0
  echo "$init_line"
  took "$first"
  printf '{"type":"assistant","message":{"id":"msg_tool","role":"assistant","content":[{"type":"tool_use","id":"toolu_long","name":"Bash","input":{"command":"sleep %s"}}],"usage":{"input_tokens":10,"output_tokens":5}}}\n' "${1:-2}"
  local i=0 line n=1
  while [ "$i" -lt "$ticks" ]; do
    i=$((i+1))
    if IFS= read -r -t 0.1 line && [ -n "$line" ]; then
      took "$line"
      n=$((n+1)); printf '{"type":"assistant","message":{"id":"msg_note%s","role":"assistant","content":[{"type":"text","text":"Read the note."}],"usage":{"input_tokens":10,"output_tokens":5}}}\n' "$n"
    fi
  done
  printf '{"type":"user","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_long","content":"done"}]}}\n'
  if [ "${FAKE_AGENT_STALL:-}" = 1 ]; then exec sleep 100000; fi
  assistant 1
  echo "$result_line"
  while IFS= read -r line; do
    [ -n "$line" ] || continue
    took "$line"
    n=$((n+1)); assistant "$n"
    echo "$result_line"
  done
  if [ -n "${FAKE_AGENT_EOF_MARK:-}" ]; then : > "$FAKE_AGENT_EOF_MARK"; fi
  sleep "${FAKE_AGENT_LINGER:-0}"
}

normal() {
  local lines=${1:-3}
  echo "$init_line"
  for i in $(seq 1 "$lines"); do assistant "$i"; done
  echo "$result_line"
}

case "$mode" in
  normal) normal "${arg:-3}" ;;
  empty) exit 0 ;;
  tiny) printf 'ok\n' ;;
  hang) echo "$init_line"; exec sleep 100000 ;;
  ignore-term)
    trap '' TERM
    echo "$init_line"
    # Keep the shell itself alive (not exec) so the TERM trap applies to it.
    while true; do sleep 1; done ;;
  background)
    normal 3
    sleep "${arg:-600}" &
    exit 0 ;;
  fork)
    for _ in $(seq 1 "${arg:-3}"); do sleep 600 & done
    normal 3
    wait ;;
  flood)
    line='{"type":"assistant","message":{"id":"msg_flood","content":[{"type":"text","text":"0123456789012345678901234567890123456789012345678901234567890123456789"}]}}'
    count=$(( ${arg:-1000000} / (${#line} + 1) + 1 ))
    yes "$line" | head -n "$count" ;;
  term-marker)
    trap 'echo terminated > "$arg"; exit 143' TERM
    echo "$init_line"
    while true; do sleep 0.1; done ;;
  replay) cat "$arg" ;;
  drip)
    while IFS= read -r line; do printf '%s\n' "$line"; sleep 0.2; done < "$arg"
    sleep "${3:-0}" ;;
  burst) cat "$arg"; sleep "${3:-0}" ;;
  slow)
    end=$(( $(date +%s) + ${arg:-2} ))
    i=0
    while [ "$(date +%s)" -lt "$end" ]; do i=$((i+1)); assistant "$i"; sleep 0.1; done
    echo "$result_line" ;;
  exit) normal 3; exit "${arg:-1}" ;;
  prompt) printf '%s\n' "$arg"; normal 3 ;;
  stdin) stdin_mode "${arg:-2}" ;;
  setsid-escape)
    # Not a group leader, so setsid(1) calls setsid() itself and execs: $! is the sleep.
    setsid sleep "${arg:-1000}" &
    child=$!
    # Exit only once it has left the group: until then the group kill would get it.
    while kill -0 "$child" 2>/dev/null && [ "$(ps -o sid= -p "$child" | tr -d ' ')" != "$child" ]; do
      sleep 0.01
    done
    normal 3
    echo "escaped pid $child" ;;
  *) echo "fake-agent: unknown mode $mode" >&2; exit 64 ;;
esac
