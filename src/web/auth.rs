//! Who may use the web inbox: the token (a random one per start, or
//! `--token-file`), which the page keeps to itself and sends in an
//! `Authorization` header, never in a cookie (a cookie would go to every
//! server on the same host name, whatever its port); the CSRF token and the
//! `Origin` check of state-changing requests; and the brake on wrong tokens.

use std::collections::HashMap;
use std::net::IpAddr;
use std::path::Path;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The header a page's state-changing request carries its CSRF token in.
pub const CSRF_HEADER: &str = "x-clowder-csrf";
/// A token file's token is at least this long: it guards what agents may run.
const MIN_TOKEN_LEN: usize = 16;
/// Wrong tokens from one address that are answered at once.
const FREE_FAILURES: u32 = 10;
/// The longest an answer to a wrong token is held back.
const MAX_WAIT: Duration = Duration::from_secs(60);
/// An address that sent no wrong token for this long starts afresh.
const FORGET_AFTER: Duration = Duration::from_secs(600);
/// Addresses remembered at most: a flood of addresses cannot grow memory.
const MAX_REMEMBERED: usize = 10_000;

/// A random secret: 32 bytes as hex.
pub fn random_token() -> Result<String, String> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).map_err(|err| format!("no random numbers: {err}"))?;
    Ok(bytes.iter().map(|byte| format!("{byte:02x}")).collect())
}

/// The token of `--token-file`: its first line, trimmed.
pub fn token_from_file(path: &Path) -> Result<String, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|err| format!("cannot read the token file {}: {err}", path.display()))?;
    let token = text.lines().next().unwrap_or("").trim().to_string();
    if token.len() < MIN_TOKEN_LEN {
        return Err(format!(
            "{}: line 1: expected a token of at least {MIN_TOKEN_LEN} characters (e.g. `openssl rand -hex 32 > {}`)",
            path.display(),
            path.display()
        ));
    }
    if !token.chars().all(|c| c.is_ascii_graphic()) || token.contains([';', ',', '"', '\\']) {
        return Err(format!(
            "{}: line 1: the token must be printable ASCII without `;`, `,`, quotes or backslashes (it goes into a header)",
            path.display()
        ));
    }
    Ok(token)
}

/// Equal, in a time that does not depend on where the texts differ.
pub fn same_secret(given: &str, expected: &str) -> bool {
    let (given, expected) = (given.as_bytes(), expected.as_bytes());
    let mut differ = given.len() ^ expected.len();
    for (index, byte) in expected.iter().enumerate() {
        differ |= usize::from(byte ^ given.get(index).copied().unwrap_or(0));
    }
    differ == 0
}

/// The token of an `Authorization: Bearer TOKEN` header.
pub fn bearer(header: &str) -> Option<&str> {
    let (scheme, token) = header.trim().split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then(|| token.trim())
}

/// Whether a state-changing request comes from the page itself: its
/// `Origin` is the address the browser reached us at.
pub fn same_origin(origin: Option<&str>, host: Option<&str>) -> bool {
    match (origin, host) {
        (Some(origin), Some(host)) => origin == format!("http://{host}"),
        _ => false,
    }
}

/// Wrong tokens per address, and how long the answer to the next one is
/// held back. A right token is never braked: every local process shares
/// 127.0.0.1 with the page's own browser and its SSH tunnels.
#[derive(Default)]
pub struct Brake {
    seen: Mutex<HashMap<IpAddr, Failures>>,
}

#[derive(Clone, Copy)]
struct Failures {
    count: u32,
    last: Instant,
}

impl Brake {
    /// A wrong token from `addr`: how long to hold its answer back, `None`
    /// for the first few. Past them each one waits twice as long as the one
    /// before, up to a minute, so that guessing goes no faster than the
    /// connections a guesser may keep open ([`super::listen::MAX_UNTRUSTED`])
    /// allow.
    pub fn failed(&self, addr: IpAddr, now: Instant) -> Option<Duration> {
        let mut seen = self.seen.lock().ok()?;
        if seen.len() >= MAX_REMEMBERED && !seen.contains_key(&addr) {
            seen.retain(|_, failures| now.duration_since(failures.last) < FORGET_AFTER);
            if seen.len() >= MAX_REMEMBERED {
                return Some(MAX_WAIT);
            }
        }
        let failures = seen.entry(addr).or_insert(Failures {
            count: 0,
            last: now,
        });
        if now.duration_since(failures.last) >= FORGET_AFTER {
            failures.count = 0;
        }
        failures.count = failures.count.saturating_add(1);
        failures.last = now;
        let past = failures.count.checked_sub(FREE_FAILURES + 1)?;
        Some(Duration::from_secs(1 << past.min(6)).min(MAX_WAIT))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_compare_whole() {
        assert!(same_secret("abc", "abc"));
        assert!(!same_secret("abd", "abc"));
        assert!(!same_secret("ab", "abc"));
        assert!(!same_secret("abcd", "abc"));
        assert!(!same_secret("", "abc"));
    }

    #[test]
    fn the_token_is_read_from_a_bearer_header() {
        assert_eq!(bearer("Bearer s3cret"), Some("s3cret"));
        assert_eq!(bearer("bearer  s3cret "), Some("s3cret"));
        assert_eq!(bearer("Basic s3cret"), None);
        assert_eq!(bearer("s3cret"), None);
    }

    #[test]
    fn only_the_pages_own_origin_may_change_things() {
        assert!(same_origin(
            Some("http://127.0.0.1:7700"),
            Some("127.0.0.1:7700")
        ));
        assert!(!same_origin(
            Some("http://evil.test"),
            Some("127.0.0.1:7700")
        ));
        assert!(!same_origin(None, Some("127.0.0.1:7700")));
    }

    #[test]
    fn wrong_tokens_past_the_free_ones_wait_longer_each_time_and_are_forgotten() {
        let brake = Brake::default();
        let addr: IpAddr = [127, 0, 0, 1].into();
        let start = Instant::now();
        for _ in 0..FREE_FAILURES {
            assert_eq!(brake.failed(addr, start), None);
        }
        assert_eq!(brake.failed(addr, start), Some(Duration::from_secs(1)));
        assert_eq!(brake.failed(addr, start), Some(Duration::from_secs(2)));
        for _ in 0..10 {
            brake.failed(addr, start);
        }
        assert_eq!(brake.failed(addr, start), Some(MAX_WAIT));
        let later = start + FORGET_AFTER;
        assert_eq!(
            brake.failed(addr, later),
            None,
            "forgotten after a quiet while"
        );
        let other: IpAddr = [10, 0, 0, 1].into();
        assert_eq!(brake.failed(other, start), None);
    }

    #[test]
    fn a_short_or_odd_token_file_is_refused_with_its_line() {
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("token");
        std::fs::write(&path, "short\n").expect("write");
        let err = token_from_file(&path).unwrap_err();
        assert!(
            err.contains("line 1: expected a token of at least 16"),
            "{err}"
        );
        std::fs::write(&path, "0123456789abcdef;x\n").expect("write");
        assert!(token_from_file(&path).is_err());
        std::fs::write(&path, "0123456789abcdef0123\n").expect("write");
        assert_eq!(
            token_from_file(&path).expect("token"),
            "0123456789abcdef0123"
        );
    }
}
