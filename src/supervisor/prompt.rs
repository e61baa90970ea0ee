//! Builds the prompt for a session and puts it into the agent's argv.
//!
//! The parts, joined by `\n---\n`: the human's notes (`clowder tell`), each
//! marked as the human's; the output of each `prepend_commands` entry;
//! the handoff the previous session left (`[prompt] handoff_file`), laid out as
//! [`format_handoff`] shows; from the second session of a run on, the
//! `[prompt] continuation` text; and the prompt file (left out when the
//! continuation replaces it).

use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;

use super::hooks::{ShellContext, run_shell};
use crate::config::ContinuationMode;

pub const SEPARATOR: &str = "\n---\n";
/// A handoff file larger than this is refused.
pub const MAX_HANDOFF_BYTES: u64 = 64 * 1024;

/// What building the prompt produced, with any command that failed along the way.
pub struct BuiltPrompt {
    pub text: String,
    pub warnings: Vec<String>,
    /// The handoff file was there but could not be used: (file, why).
    pub handoff_error: Option<(PathBuf, String)>,
}

/// The parts of the prompt besides the prompt file and the commands.
#[derive(Debug, Clone, Default)]
pub struct Extras {
    /// The continuation text, when this is not the run's first session.
    pub continuation: Option<String>,
    pub continuation_mode: ContinuationMode,
    /// Where the previous session may have left its handoff.
    pub handoff_file: Option<PathBuf>,
    /// The human's notes not yet delivered, oldest first: they come first.
    pub notes: Vec<String>,
}

/// Reads the prompt file (fresh for every session, so edits take effect) and
/// prepends the commands' output. A command that fails or prints nothing adds
/// nothing; a missing prompt file is an error.
pub async fn build(
    prompt_file: &Path,
    prepend_commands: &[String],
    extras: &Extras,
    env: &[(String, String)],
    cwd: &Path,
    timeout: Duration,
    ctx: &ShellContext,
) -> Result<BuiltPrompt, String> {
    let prompt = crate::store::small_file::read(prompt_file).map_err(|err| {
        format!(
            "cannot read the prompt file {}: {err}",
            prompt_file.display()
        )
    })?;
    let prompt = String::from_utf8_lossy(&prompt).into_owned();
    let (commands_out, warnings) =
        run_prepend_commands(prepend_commands, env, cwd, timeout, ctx).await;
    let mut parts = Vec::new();
    if !extras.notes.is_empty() {
        parts.push(crate::store::notes::prompt_block(&extras.notes));
    }
    parts.extend(commands_out);
    let mut handoff_error = None;
    if let Some(file) = &extras.handoff_file {
        match read_handoff(file) {
            Ok(Some(handoff)) => parts.push(format_handoff(&handoff)),
            Ok(None) => {}
            Err(error) => handoff_error = Some((file.clone(), error)),
        }
    }
    let continuation = extras
        .continuation
        .as_deref()
        .filter(|text| !text.trim().is_empty());
    if let Some(text) = continuation {
        parts.push(text.trim_end_matches('\n').to_string());
    }
    if continuation.is_none() || extras.continuation_mode == ContinuationMode::Prepend {
        parts.push(prompt);
    }
    Ok(BuiltPrompt {
        text: parts.join(SEPARATOR),
        warnings,
        handoff_error,
    })
}

/// The output of each prepend command that printed something, and a warning
/// for each that failed.
async fn run_prepend_commands(
    commands: &[String],
    env: &[(String, String)],
    cwd: &Path,
    timeout: Duration,
    ctx: &ShellContext,
) -> (Vec<String>, Vec<String>) {
    let mut parts = Vec::new();
    let mut warnings = Vec::new();
    for command in commands {
        match run_shell(command, env, cwd, timeout, ctx).await {
            Ok(run) => {
                if !run.succeeded() {
                    let how = if run.timed_out {
                        "timed out".to_string()
                    } else {
                        format!(
                            "exit {}",
                            run.exit_code.map_or("signal".into(), |c| c.to_string())
                        )
                    };
                    warnings.push(format!("prepend command `{command}` failed ({how})"));
                }
                let text = String::from_utf8_lossy(&run.stdout);
                let text = text.trim_end_matches('\n');
                if !text.trim().is_empty() {
                    parts.push(text.to_string());
                }
            }
            Err(err) => warnings.push(format!("prepend command `{command}`: {err}")),
        }
    }
    (parts, warnings)
}

/// What the previous session left for the next one.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Handoff {
    pub phase: Option<String>,
    pub completed: Vec<String>,
    pub next_step: Option<String>,
    pub critical_files: Vec<String>,
    pub memory_notes: Vec<String>,
}

/// Reads a handoff file: `Ok(None)` when there is none, `Err` with the reason
/// when it is there but unusable (too large, not UTF-8, not a JSON object,
/// a known key of the wrong type, none of the known keys). Unknown keys are
/// ignored: the file is the agent's, not ours.
pub fn read_handoff(path: &Path) -> Result<Option<Handoff>, String> {
    // The agent writes this file: a FIFO there must not hang the loop.
    let file = match crate::store::small_file::open(path) {
        Ok(file) => file,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(err) => return Err(format!("cannot read it: {err}")),
    };
    let mut bytes = Vec::new();
    file.take(MAX_HANDOFF_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|err| format!("cannot read it: {err}"))?;
    if bytes.len() as u64 > MAX_HANDOFF_BYTES {
        return Err(format!("larger than {} KiB", MAX_HANDOFF_BYTES / 1024));
    }
    let text = std::str::from_utf8(&bytes).map_err(|_| "not UTF-8 text".to_string())?;
    parse_handoff(text).map(Some)
}

/// A handoff file's text as a [`Handoff`], or why it is unusable.
fn parse_handoff(text: &str) -> Result<Handoff, String> {
    let value: Value = serde_json::from_str(text).map_err(|err| {
        format!(
            "line {} column {}: not valid JSON: {err}",
            err.line(),
            err.column()
        )
    })?;
    let Value::Object(object) = value else {
        return Err(
            "expected a JSON object with phase, completed, next_step, critical_files, memory_notes"
                .into(),
        );
    };
    let handoff = Handoff {
        phase: text_of(&object, "phase")?,
        completed: list_of(&object, "completed")?,
        next_step: text_of(&object, "next_step")?,
        critical_files: list_of(&object, "critical_files")?,
        memory_notes: list_of(&object, "memory_notes")?,
    };
    if handoff == Handoff::default() {
        return Err(
            "none of phase, completed, next_step, critical_files, memory_notes is set".into(),
        );
    }
    Ok(handoff)
}

/// A handoff key that holds a text; blank is none.
fn text_of(object: &serde_json::Map<String, Value>, key: &str) -> Result<Option<String>, String> {
    match object.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(text)) => Ok(Some(text.trim().to_string()).filter(|t| !t.is_empty())),
        Some(_) => Err(format!("key `{key}`: expected a string")),
    }
}

/// A handoff key that holds a list of texts, or one text.
fn list_of(object: &serde_json::Map<String, Value>, key: &str) -> Result<Vec<String>, String> {
    match object.get(key) {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::String(text)) => Ok(vec![text.trim().to_string()]),
        Some(Value::Array(items)) => items
            .iter()
            .map(|item| match item {
                Value::String(text) => Ok(text.trim().to_string()),
                _ => Err(format!("key `{key}`: expected a list of strings")),
            })
            .collect(),
        Some(_) => Err(format!("key `{key}`: expected a list of strings")),
    }
}

/// The handoff as it goes into the prompt; absent parts are left out:
///
/// ```text
/// ## Handoff from the previous session
/// Phase: <phase>
/// Completed:
/// - <item>
/// Next step: <next_step>
/// Critical files:
/// - <path>
/// Memory notes:
/// - <note>
/// ```
pub fn format_handoff(handoff: &Handoff) -> String {
    let mut text = String::from("## Handoff from the previous session");
    let list = |title: &str, items: &[String], text: &mut String| {
        let items: Vec<&String> = items.iter().filter(|i| !i.is_empty()).collect();
        if !items.is_empty() {
            text.push_str(&format!("\n{title}:"));
            for item in items {
                text.push_str(&format!("\n- {item}"));
            }
        }
    };
    if let Some(phase) = &handoff.phase {
        text.push_str(&format!("\nPhase: {phase}"));
    }
    list("Completed", &handoff.completed, &mut text);
    if let Some(next) = &handoff.next_step {
        text.push_str(&format!("\nNext step: {next}"));
    }
    list("Critical files", &handoff.critical_files, &mut text);
    list("Memory notes", &handoff.memory_notes, &mut text);
    text
}

/// Replaces every `{prompt}` in the configured arguments with the prompt text.
pub fn agent_args(template: &[String], prompt: &str) -> Vec<String> {
    template
        .iter()
        .map(|arg| arg.replace("{prompt}", prompt))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prepended_output_comes_first_and_empty_output_is_skipped() {
        let dir = tempfile::tempdir().expect("tempdir");
        let file = dir.path().join("PROMPT.md");
        std::fs::write(&file, "do the work").expect("write");
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        let built = runtime
            .block_on(build(
                &file,
                &[
                    "echo status: green".into(),
                    "true".into(),
                    "echo second".into(),
                ],
                &Extras::default(),
                &[],
                dir.path(),
                Duration::from_secs(10),
                &ShellContext::plain(),
            ))
            .expect("build");
        assert_eq!(built.text, "status: green\n---\nsecond\n---\ndo the work");
        assert!(built.warnings.is_empty());
    }

    #[test]
    fn placeholder_is_replaced_in_every_argument() {
        let args = agent_args(&["-p".into(), "{prompt}".into(), "x{prompt}y".into()], "P");
        assert_eq!(args, vec!["-p", "P", "xPy"]);
    }

    fn run_build(dir: &Path, extras: &Extras) -> BuiltPrompt {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        runtime
            .block_on(build(
                &dir.join("PROMPT.md"),
                &[],
                extras,
                &[],
                dir,
                Duration::from_secs(10),
                &ShellContext::plain(),
            ))
            .expect("build")
    }

    #[test]
    fn handoff_and_continuation_come_before_the_prompt() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join("PROMPT.md"), "do the work").expect("write");
        let handoff = dir.path().join("handoff.json");
        std::fs::write(
            &handoff,
            r#"{"phase":"tests","completed":["parser","cli"],"next_step":"fix the flaky test","critical_files":"src/lib.rs","memory_notes":[],"extra":1}"#,
        )
        .expect("write");
        let extras = Extras {
            continuation: Some("Continue where you left off.\n".into()),
            continuation_mode: ContinuationMode::Prepend,
            handoff_file: Some(handoff.clone()),
            notes: Vec::new(),
        };
        let built = run_build(dir.path(), &extras);
        assert_eq!(
            built.text,
            "## Handoff from the previous session\nPhase: tests\nCompleted:\n- parser\n- cli\nNext step: fix the flaky test\nCritical files:\n- src/lib.rs\n---\nContinue where you left off.\n---\ndo the work"
        );
        assert!(built.handoff_error.is_none());

        let replace = Extras {
            continuation_mode: ContinuationMode::Replace,
            handoff_file: None,
            ..extras
        };
        assert_eq!(
            run_build(dir.path(), &replace).text,
            "Continue where you left off."
        );
        // The human's notes come before everything, even a replaced prompt.
        let told = Extras {
            notes: vec!["use the v2 API".into()],
            ..replace
        };
        assert_eq!(
            run_build(dir.path(), &told).text,
            "## Note from your human operator\nuse the v2 API\n---\nContinue where you left off."
        );
    }

    #[test]
    fn a_bad_handoff_is_reported_and_skipped() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join("PROMPT.md"), "do the work").expect("write");
        let handoff = dir.path().join("handoff.json");
        let extras = Extras {
            handoff_file: Some(handoff.clone()),
            ..Extras::default()
        };
        // Missing: nothing to say.
        let built = run_build(dir.path(), &extras);
        assert_eq!(built.text, "do the work");
        assert!(built.handoff_error.is_none());
        for (content, expected) in [
            ("{\"phase\": ", "not valid JSON"),
            ("[1,2]", "expected a JSON object"),
            (
                "{\"completed\": 3}",
                "key `completed`: expected a list of strings",
            ),
            ("{\"phase\": [\"x\"]}", "key `phase`: expected a string"),
            ("{\"other\": 1}", "none of phase"),
        ] {
            std::fs::write(&handoff, content).expect("write");
            let built = run_build(dir.path(), &extras);
            assert_eq!(built.text, "do the work", "{content}");
            let (file, error) = built.handoff_error.expect("an error");
            assert_eq!(file, handoff);
            assert!(error.contains(expected), "{content}: {error}");
        }
        std::fs::write(&handoff, vec![b' '; 70 * 1024]).expect("write");
        let error = run_build(dir.path(), &extras)
            .handoff_error
            .expect("error")
            .1;
        assert!(error.contains("larger than 64 KiB"), "{error}");
    }
}
