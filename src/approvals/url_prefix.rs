//! A rule's prefix read as a URL: scheme, credentials, host and port compared
//! exactly and the path by whole segments, both sides parsed as a browser parses
//! them (WHATWG, the `url` crate), so text that a parser reads differently from
//! how it looks (`https://docs.rs\t.evil.com/`) cannot pass as the rule's site.

use url::Url;

/// Why no rule may allow `raw`, if there is a reason: a URL parser drops tabs
/// and line breaks and reads past spaces, so such a URL is not what it shows.
pub fn never_allowed(raw: &str) -> Option<String> {
    if let Some(c) = raw
        .chars()
        .find(|c| c.is_control() || c.is_whitespace() || super::is_unsafe_char(*c))
    {
        return Some(format!(
            "a URL holding a control character or white space (U+{:04X})",
            c as u32
        ));
    }
    if Url::parse(raw).is_err() {
        return Some("a URL that cannot be parsed".into());
    }
    None
}

/// The URL as a browser reads it (tabs and line breaks dropped, `..` resolved,
/// the host lowercased), if it is one.
pub fn parsed(raw: &str) -> Option<Url> {
    Url::parse(raw).ok()
}

/// Whether the prefix, read as a URL, covers `url`: same scheme, credentials,
/// host and port; the prefix's path segments begin `url`'s (`/a` covers `/a` and
/// `/a/b`, not `/ab`); a query or fragment in the prefix must be `url`'s own, and
/// then the path must be the same. A prefix that is not a URL covers nothing.
pub fn covers(prefix: &str, url: &Url) -> bool {
    let Some(rule) = parsed(prefix) else {
        return false;
    };
    let same_site = rule.scheme() == url.scheme()
        && rule.username() == url.username()
        && rule.password() == url.password()
        && rule.host() == url.host()
        && rule.port_or_known_default() == url.port_or_known_default();
    if !same_site {
        return false;
    }
    let (Some(want), Some(have)) = (segments(&rule), segments(url)) else {
        // A URL without a path of segments (`mailto:…`) is covered only by itself.
        return rule.as_str() == url.as_str();
    };
    let exact = rule.query().is_some() || rule.fragment().is_some();
    let path_ok = if exact {
        want == have
    } else {
        have.starts_with(&want)
    };
    path_ok
        && rule.query().is_none_or(|q| url.query() == Some(q))
        && rule.fragment().is_none_or(|f| url.fragment() == Some(f))
}

/// The path's segments, an empty last one (a trailing `/`) dropped.
fn segments(url: &Url) -> Option<Vec<&str>> {
    let mut parts: Vec<&str> = url.path_segments()?.collect();
    if parts.last() == Some(&"") {
        parts.pop();
    }
    Some(parts)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(prefix: &str, raw: &str) -> bool {
        never_allowed(raw).is_none() && parsed(raw).is_some_and(|url| covers(prefix, &url))
    }

    #[test]
    fn host_port_and_path_segments_are_compared_exactly() {
        let prefix = "https://docs.rs";
        assert!(check(prefix, "https://docs.rs"));
        assert!(check(prefix, "https://docs.rs/regex/latest"));
        assert!(check(prefix, "HTTPS://DOCS.RS/x?y#z"));
        assert!(check(prefix, "https://docs.rs:443/"));
        assert!(!check(prefix, "https://docs.rs.evil.com/"));
        assert!(!check(prefix, "https://docs.rs@evil.com/"));
        assert!(!check(prefix, "https://docs.rs:8443/"));
        assert!(!check(prefix, "http://docs.rs/"));
        assert!(!check(prefix, "https://user@docs.rs/"));
        for bad in ["\t", "\n", "\r", " ", "\u{0}"] {
            assert!(!check(prefix, &format!("https://docs.rs{bad}.evil.com/")));
        }
        let path = "https://example.com/a/";
        assert!(check(path, "https://example.com/a"));
        assert!(check(path, "https://example.com/a/b"));
        assert!(!check(path, "https://example.com/ab"));
        assert!(!check(path, "https://example.com/a/../b"));
        assert!(!check(path, "https://example.com/a%2F..%2Fb"));
        let query = "https://example.com/s?q=1";
        assert!(check(query, "https://example.com/s?q=1"));
        assert!(!check(query, "https://example.com/s?q=2"));
        assert!(!check(query, "https://example.com/s/t?q=1"));
        assert!(!check("docs.rs", "https://docs.rs/"));
    }
}
