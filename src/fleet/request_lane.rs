//! Which lane a pending approval request comes from, by the fleet's own records.
//! A request file says which lane made it, but whoever made it wrote that (an
//! agent can run `clowder ask` with any environment, or write a request file
//! itself), so the name is kept only where the registry and the folder the
//! request was made in agree with it.

use std::path::{Path, PathBuf};

use super::LaneName;
use super::registry::{self, Registry};
use crate::approvals::Request;

/// The registered lanes with their folders, made canonical once.
pub struct LaneFolders {
    root: Option<PathBuf>,
    lanes: Vec<(LaneName, Option<PathBuf>)>,
}

impl LaneFolders {
    pub fn new(root: &Path, registry: &Registry) -> LaneFolders {
        LaneFolders {
            root: root.canonicalize().ok(),
            lanes: registry
                .lanes
                .iter()
                .map(|lane| (lane.name.clone(), root.join(&lane.dir).canonicalize().ok()))
                .collect(),
        }
    }

    /// The lane a request named `named` and made in `cwd` comes from: the lane it
    /// names when that lane is registered and the request was made in its folder
    /// or in the fleet's folder (the host's own requests: a plan's steps);
    /// otherwise the lane whose folder holds `cwd` most closely; otherwise none.
    pub fn lane_of(&self, named: Option<&str>, cwd: Option<&str>) -> Option<&LaneName> {
        let cwd = cwd
            .map(PathBuf::from)
            .map(|cwd| cwd.canonicalize().unwrap_or(cwd));
        let holds = |dir: &Option<PathBuf>| {
            dir.as_ref()
                .zip(cwd.as_ref())
                .is_some_and(|(dir, cwd)| cwd.starts_with(dir))
        };
        let from_root = cwd.is_some() && cwd == self.root;
        let named = self
            .lanes
            .iter()
            .find(|(name, dir)| Some(name.as_str()) == named && (from_root || holds(dir)));
        if let Some((name, _)) = named {
            return Some(name);
        }
        self.lanes
            .iter()
            .filter(|(_, dir)| holds(dir))
            .max_by_key(|(_, dir)| dir.as_ref().map_or(0, |dir| dir.components().count()))
            .map(|(name, _)| name)
    }
}

/// Sets each request's lane from the records of the fleet in `root` (see
/// [`LaneFolders::lane_of`]); no lane when the registry cannot be read.
pub fn attribute(root: &Path, requests: &mut [Request]) {
    let registry = registry::load(root).unwrap_or_default();
    let folders = LaneFolders::new(root, &registry);
    for request in requests {
        let lane = folders.lane_of(request.lane.as_deref(), request.cwd.as_deref());
        request.lane = lane.map(|lane| lane.to_string());
    }
}
