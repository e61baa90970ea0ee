//! Adding a lane from the control room's new-lane dialog: the request it
//! makes, and [`submit`], run by the fleet host off the screen's thread.

use std::path::{Path, PathBuf};

use super::LaneName;
use super::lanes::{self, AddOptions};

/// Where a new lane's prompt comes from.
#[derive(
    Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum PromptSource {
    /// The fleet's prompt (`[session] prompt_file`).
    Default,
    /// A file, relative to the fleet folder.
    File(PathBuf),
    /// Text typed in the dialog, saved under `.clowder/prompts/NAME.md`.
    Typed(String),
}

/// What the dialog asks for, checked.
#[derive(
    Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize, schemars::JsonSchema,
)]
pub struct NewLaneRequest {
    pub name: LaneName,
    pub prompt: PromptSource,
    /// None: the current HEAD.
    pub base: Option<String>,
}

/// Adds the lane `request` asks for in the fleet of `root`, as `clowder lane
/// add` does; a typed prompt is saved first as `.clowder/prompts/NAME.md` (never
/// over an existing file). Returns what to tell the user, or why nothing was added.
pub fn submit(root: &Path, request: &NewLaneRequest) -> Result<String, String> {
    let name = &request.name;
    let registry = crate::fleet::registry::load(root)?;
    if registry.lane(name).is_some() {
        return Err(format!("lane {name} already exists"));
    }
    let (prompt_file, written) = match &request.prompt {
        PromptSource::Default => (None, None),
        PromptSource::File(file) => (Some(file.clone()), None),
        PromptSource::Typed(text) => {
            let relative = crate::store::paths::typed_prompt(Path::new(""), name.as_str());
            let path = root.join(&relative);
            write_new(&path, text)?;
            (Some(relative), Some(path))
        }
    };
    let options = AddOptions {
        prompt_file,
        base: request.base.clone(),
        ..AddOptions::default()
    };
    match lanes::add(root, name, options) {
        Ok(lane) => Ok(format!(
            "lane {name} added: branch {} in {}",
            lane.branch.unwrap_or_default(),
            lane.dir.display()
        )),
        Err(failure) => {
            // Only the file written just now, for this lane.
            if let Some(path) = written {
                let _ = std::fs::remove_file(path);
            }
            Err(failure.message().to_string())
        }
    }
}

/// Writes `text` to `path` whole (a temporary file renamed into place), refusing
/// when `path` exists.
fn write_new(path: &Path, text: &str) -> Result<(), String> {
    use std::io::Write;
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir)
        .map_err(|err| format!("cannot create {}: {err}", dir.display()))?;
    let mut file = tempfile::NamedTempFile::new_in(dir)
        .map_err(|err| format!("cannot write in {}: {err}", dir.display()))?;
    let mut body = text.to_string();
    if !body.ends_with('\n') {
        body.push('\n');
    }
    file.write_all(body.as_bytes())
        .and_then(|()| file.as_file().sync_all())
        .map_err(|err| format!("cannot write {}: {err}", path.display()))?;
    file.persist_noclobber(path).map_err(|err| {
        if err.error.kind() == std::io::ErrorKind::AlreadyExists {
            format!(
                "{} already exists: it is kept; give it as the prompt file instead",
                path.display()
            )
        } else {
            format!("cannot write {}: {}", path.display(), err.error)
        }
    })?;
    Ok(())
}
