//! The versions of the approval queue's files: requests (`pending/`), decisions
//! (`decided/`) and finished requests (`done/`). Version 0 is a file written
//! before versions were kept: the same fields, without the number. Unknown
//! fields stay refused in requests and decisions: a human approves a request
//! only as a whole, never what this clowder would not show.

use crate::store::versioned::{self, Format};

pub const REQUEST: Format = unchanged_since_0(1);
pub const DECISION: Format = unchanged_since_0(1);
pub const DONE: Format = unchanged_since_0(1);

const fn unchanged_since_0(current: u64) -> Format {
    Format {
        current,
        first: 0,
        unversioned: Some(0),
        migrate: versioned::no_changes,
        in_struct: false,
    }
}

/// `text` as a `T` (`what`: `request` or `decision`): a newer file says so,
/// anything else wrong is "not a valid WHAT".
pub fn read<T: serde::de::DeserializeOwned>(
    format: &Format,
    text: &str,
    what: &str,
) -> Result<T, String> {
    format.parse(text).map_err(|err| {
        if versioned::is_newer(&err) {
            err
        } else {
            format!("not a valid {what}: {err}")
        }
    })
}
