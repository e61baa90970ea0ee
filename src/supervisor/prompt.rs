//! Builds the prompt for a session: the output of each `prepend_commands` entry,
//! then the prompt file, joined by `\n---\n`; and puts it into the agent's argv.

use std::path::Path;
use std::time::Duration;

use super::hooks::run_shell;

pub const SEPARATOR: &str = "\n---\n";

/// What building the prompt produced, with any command that failed along the way.
pub struct BuiltPrompt {
    pub text: String,
    pub warnings: Vec<String>,
}

/// Reads the prompt file (fresh for every session, so edits take effect) and
/// prepends the commands' output. A command that fails or prints nothing adds
/// nothing; a missing prompt file is an error.
pub async fn build(
    prompt_file: &Path,
    prepend_commands: &[String],
    env: &[(String, String)],
    cwd: &Path,
    timeout: Duration,
) -> Result<BuiltPrompt, String> {
    let prompt = std::fs::read(prompt_file).map_err(|err| {
        format!(
            "cannot read the prompt file {}: {err}",
            prompt_file.display()
        )
    })?;
    let prompt = String::from_utf8_lossy(&prompt).into_owned();
    let mut parts = Vec::new();
    let mut warnings = Vec::new();
    for command in prepend_commands {
        match run_shell(command, env, cwd, timeout).await {
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
    parts.push(prompt);
    Ok(BuiltPrompt {
        text: parts.join(SEPARATOR),
        warnings,
    })
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
                &[],
                dir.path(),
                Duration::from_secs(10),
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
}
