//! A client's view of one lane's session output: the host follows the file
//! (only a file in that lane's own folder) and sends its lines rendered, as
//! the control room would show them. A client that does not keep up misses
//! lines, and is told how many it missed.

use std::path::Path;
use std::sync::Arc;

use tokio::sync::mpsc;

use crate::agent::follow::{FollowUpdate, Follower, follow};
use crate::agent::stream::AgentFormat;
use crate::fleet::LaneName;
use crate::fleet::wire::{Output, OutputLine, ServerMsg, line};

/// Starts following `file` of the fleet in `root` for one client, whose
/// queue is `lines`.
pub(super) fn follow_for(
    folder: &Path,
    format: AgentFormat,
    lines: &mpsc::Sender<Arc<str>>,
    lane: &LaneName,
    file: &Path,
) -> Result<Follower, String> {
    let inside = folder
        .canonicalize()
        .ok()
        .zip(file.canonicalize().ok())
        .is_some_and(|(folder, file)| file.starts_with(folder) && file.is_file());
    if !inside {
        return Err(format!(
            "not followed: {} is no output file of lane {lane}",
            file.display()
        ));
    }
    let (updates, mut read) = mpsc::unbounded_channel::<FollowUpdate>();
    let follower = follow(file.to_path_buf(), format, updates);
    let (lines, lane) = (lines.clone(), lane.clone());
    tokio::spawn(async move {
        let mut missed = 0usize;
        while let Some(update) = read.recv().await {
            let mut sent: Vec<OutputLine> = Vec::with_capacity(update.lines.len() + 1);
            if missed > 0 {
                let skipped = format!("… {missed} lines not sent: this client read too slowly …");
                sent.push(OutputLine::from(&crate::agent::follow::skipped_note(
                    skipped,
                )));
            }
            sent.extend(update.lines.iter().map(OutputLine::from));
            let count = update.lines.len();
            let output = Output {
                lane: lane.clone(),
                file: update.file,
                lines: sent,
                stats: update.stats,
                reset: update.reset,
            };
            match lines.try_send(Arc::from(line(&ServerMsg::Output(Box::new(output))))) {
                Ok(()) => missed = 0,
                Err(mpsc::error::TrySendError::Full(_)) => missed += count,
                Err(mpsc::error::TrySendError::Closed(_)) => return,
            }
        }
    });
    Ok(follower)
}
