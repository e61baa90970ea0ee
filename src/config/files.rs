//! The config's side of where files live: the names `[session]`, `[output]`
//! and `[shutdown]` give, handed to [`crate::store::paths`], which places them.

use std::path::Path;

use super::{Config, DEFAULT_CONFIG_FILE};
use crate::store::paths::{FileNames, LoopFiles};

impl Config {
    /// The configured names of a loop's files.
    pub fn file_names(&self) -> FileNames {
        FileNames {
            output_dir: self.session.output_dir.0.clone(),
            output_prefix: self.session.output_prefix(&self.agent),
            counter_file: self.session.counter_file.0.clone(),
            status_file: self.output.status_file.0.clone(),
            event_log: self.event_log_path().map(Path::to_path_buf),
            stop_file: self.shutdown.stop_file.0.clone(),
        }
    }

    /// The files of the single loop that runs in `working_dir` with this config.
    pub fn loop_files(&self, working_dir: &Path) -> LoopFiles {
        LoopFiles::single(working_dir, &self.file_names())
    }

    /// The files of lane `lane` of the fleet in `root` that runs with this config.
    pub fn lane_files(&self, root: &Path, lane: &str) -> LoopFiles {
        LoopFiles::lane(root, lane, &self.file_names())
    }

    /// The config a reader of the folder `root`'s files goes by: its
    /// `harness.toml`, as the fleet and plans there read it. One that cannot be
    /// read gives the defaults: a broken config must not hide a running loop.
    pub fn of_folder(root: &Path) -> Config {
        Config::load(&root.join(DEFAULT_CONFIG_FILE), false).unwrap_or_else(|err| {
            tracing::warn!("{err}: looking for the files where the defaults put them");
            Config::default()
        })
    }
}
