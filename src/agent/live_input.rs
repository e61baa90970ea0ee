//! Agents that take a message while a session runs: which command lines ask
//! for it, and how a message is written to the agent's stdin.
//!
//! Claude Code run as `claude -p --input-format stream-json` reads user
//! messages as JSON lines on its stdin: the first is the prompt, a later one
//! enters at the agent's next model call, and the session ends once stdin is
//! closed. A second agent with such an input is one more variant here: how
//! its command line asks for it, and how one message is written.

/// The heading of each note in a message to the agent (at the top of a
/// prompt, or alone in a message told while it runs): it marks the text as
/// the human's, and the output pane finds a note the agent echoed by it.
pub const NOTE_HEADING: &str = "## Note from your human operator";

/// How a running agent takes messages on its stdin.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LiveInput {
    /// Claude Code's `--input-format stream-json`.
    ClaudeStreamJson,
}

impl LiveInput {
    /// The live input the agent's arguments ask for, if any.
    pub fn of(args: &[String]) -> Option<LiveInput> {
        option_value(args, "--input-format")
            .filter(|format| *format == "stream-json")
            .map(|_| LiveInput::ClaudeStreamJson)
    }

    /// One message, as one line for the agent's stdin.
    pub fn message(self, text: &str) -> Vec<u8> {
        match self {
            LiveInput::ClaudeStreamJson => {
                // `type` first, as the agent writes its own user lines: an
                // echoed note takes the reader's fast path for such lines.
                let text = serde_json::Value::from(text);
                format!(
                    "{{\"type\":\"user\",\"message\":{{\"role\":\"user\",\"content\":[{{\"type\":\"text\",\"text\":{text}}}]}},\"parent_tool_use_id\":null,\"session_id\":\"\"}}\n"
                )
                .into_bytes()
            }
        }
    }

    /// Whether the agent echoes each message it takes into its output, where
    /// the output pane shows it (`--replay-user-messages`).
    pub fn echoes(self, args: &[String]) -> bool {
        match self {
            LiveInput::ClaudeStreamJson => args.iter().any(|a| a == "--replay-user-messages"),
        }
    }
}

/// The value of `--name VALUE` or `--name=VALUE`, the last one given.
fn option_value<'a>(args: &'a [String], name: &str) -> Option<&'a str> {
    let mut found = None;
    let mut words = args.iter();
    while let Some(word) = words.next() {
        if word == name {
            found = words.next().map(String::as_str);
        } else if let Some(value) = word
            .strip_prefix(name)
            .and_then(|rest| rest.strip_prefix('='))
        {
            found = Some(value);
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(words: &[&str]) -> Vec<String> {
        words.iter().map(|w| w.to_string()).collect()
    }

    #[test]
    fn only_stream_json_input_is_live() {
        let live = args(&["-p", "--input-format", "stream-json", "--verbose"]);
        assert_eq!(LiveInput::of(&live), Some(LiveInput::ClaudeStreamJson));
        let joined = args(&["-p", "--input-format=stream-json"]);
        assert_eq!(LiveInput::of(&joined), Some(LiveInput::ClaudeStreamJson));
        for plain in [
            args(&["-p", "{prompt}", "--output-format", "stream-json"]),
            args(&["-p", "--input-format", "text"]),
            args(&["exec", "--json", "{prompt}"]),
            args(&["--input-format"]),
        ] {
            assert_eq!(LiveInput::of(&plain), None, "{plain:?}");
        }
    }

    #[test]
    fn a_message_is_one_json_line() {
        let line = LiveInput::ClaudeStreamJson.message("fix \"the\" test\nfirst");
        assert_eq!(line.last(), Some(&b'\n'));
        assert_eq!(line.iter().filter(|b| **b == b'\n').count(), 1);
        let value: serde_json::Value = serde_json::from_slice(&line).expect("json");
        assert_eq!(value["type"], "user");
        assert_eq!(
            value["message"]["content"][0]["text"],
            "fix \"the\" test\nfirst"
        );
    }
}
