//! Who may use the web inbox: the token (a random one per start, or
//! `--token-file`), its cookie, the CSRF token of state-changing requests,
//! the `Origin` check, and the brake on failed token attempts.

use std::collections::HashMap;
use std::net::IpAddr;
use std::path::Path;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The cookie that carries the token once the printed URL was opened.
pub const COOKIE: &str = "clowder_token";
/// The header a page's state-changing request carries its CSRF token in.
pub const CSRF_HEADER: &str = "x-clowder-csrf";
/// A token file's token is at least this long: it guards what agents may run.
const MIN_TOKEN_LEN: usize = 16;
/// Failed attempts from one address before it must wait.
const FREE_FAILURES: u32 = 10;
/// The longest wait after failed attempts.
const MAX_LOCK: Duration = Duration::from_secs(60);
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
            "{}: line 1: the token must be printable ASCII without `;`, `,`, quotes or backslashes (it goes into a cookie)",
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

/// The value of cookie `name` in a `Cookie` header.
pub fn cookie_value<'a>(header: &'a str, name: &str) -> Option<&'a str> {
    header.split(';').find_map(|pair| {
        let (key, value) = pair.trim().split_once('=')?;
        (key == name).then_some(value)
    })
}

/// The `Set-Cookie` that keeps the token in the browser, out of scripts' reach.
pub fn set_cookie(token: &str) -> String {
    format!("{COOKIE}={token}; HttpOnly; SameSite=Strict; Path=/")
}

/// Whether a state-changing request comes from the page itself: its
/// `Origin` is the address the browser reached us at.
pub fn same_origin(origin: Option<&str>, host: Option<&str>) -> bool {
    match (origin, host) {
        (Some(origin), Some(host)) => origin == format!("http://{host}"),
        _ => false,
    }
}

/// Failed token attempts per address, and how long each must wait.
#[derive(Default)]
pub struct Brake {
    seen: Mutex<HashMap<IpAddr, Failures>>,
}

#[derive(Clone, Copy)]
struct Failures {
    count: u32,
    locked_until: Option<Instant>,
}

impl Brake {
    /// `Some(wait)` while `addr` must wait before its next attempt is even
    /// read: a right token is not taken either, or guessing would go on at
    /// full speed.
    pub fn locked(&self, addr: IpAddr, now: Instant) -> Option<Duration> {
        let seen = self.seen.lock().ok()?;
        let until = seen.get(&addr)?.locked_until?;
        (until > now).then(|| until - now)
    }

    /// A wrong token from `addr`: past the free attempts, each one doubles its wait.
    pub fn failed(&self, addr: IpAddr, now: Instant) {
        let Ok(mut seen) = self.seen.lock() else {
            return;
        };
        if seen.len() >= MAX_REMEMBERED && !seen.contains_key(&addr) {
            seen.retain(|_, failures| failures.locked_until.is_some_and(|until| until > now));
            if seen.len() >= MAX_REMEMBERED {
                return;
            }
        }
        let failures = seen.entry(addr).or_insert(Failures {
            count: 0,
            locked_until: None,
        });
        failures.count = failures.count.saturating_add(1);
        if failures.count >= FREE_FAILURES {
            let doublings = (failures.count - FREE_FAILURES).min(6);
            let wait = Duration::from_secs(1 << doublings).min(MAX_LOCK);
            failures.locked_until = Some(now + wait);
        }
    }

    /// A right token from `addr`: its failures are forgotten.
    pub fn succeeded(&self, addr: IpAddr) {
        if let Ok(mut seen) = self.seen.lock() {
            seen.remove(&addr);
        }
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
    fn the_cookie_is_found_among_others() {
        let header = "a=1; clowder_token=s3cret; b=2";
        assert_eq!(cookie_value(header, COOKIE), Some("s3cret"));
        assert_eq!(cookie_value("a=1", COOKIE), None);
        assert!(set_cookie("t").contains("HttpOnly; SameSite=Strict"));
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
    fn failures_past_the_free_ones_lock_the_address_longer_each_time() {
        let brake = Brake::default();
        let addr: IpAddr = [127, 0, 0, 1].into();
        let start = Instant::now();
        for _ in 0..FREE_FAILURES - 1 {
            brake.failed(addr, start);
        }
        assert_eq!(brake.locked(addr, start), None);
        brake.failed(addr, start);
        assert_eq!(brake.locked(addr, start), Some(Duration::from_secs(1)));
        brake.failed(addr, start);
        assert_eq!(brake.locked(addr, start), Some(Duration::from_secs(2)));
        assert_eq!(brake.locked(addr, start + Duration::from_secs(3)), None);
        brake.succeeded(addr);
        assert_eq!(brake.locked(addr, start), None);
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
