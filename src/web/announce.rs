//! What `clowder serve --http` prints: the page's addresses with the token
//! in the fragment (`/#token=…`, which a browser never sends to any server),
//! and how to reach it from elsewhere. An address such as `0.0.0.0` that no
//! other machine can open is replaced by this machine's own addresses.

use std::net::{IpAddr, SocketAddr};

/// The page's base URLs, the one to prefer first: the address listened on,
/// or, for an unspecified one, this machine's addresses of its family (those
/// other machines can reach before loopback).
pub fn bases(local: SocketAddr) -> Vec<String> {
    if !local.ip().is_unspecified() {
        return vec![base(local)];
    }
    let mut ips = machine_addresses(local.ip().is_ipv6());
    ips.sort_by_key(|ip| (ip.is_loopback(), ip.is_ipv6()));
    ips.dedup();
    if ips.is_empty() {
        ips.push(if local.is_ipv6() {
            IpAddr::from(std::net::Ipv6Addr::LOCALHOST)
        } else {
            IpAddr::from(std::net::Ipv4Addr::LOCALHOST)
        });
    }
    ips.into_iter()
        .map(|ip| base(SocketAddr::new(ip, local.port())))
        .collect()
}

fn base(addr: SocketAddr) -> String {
    format!("http://{addr}/")
}

/// The machine's IPv4 addresses, and its IPv6 ones too when `v6` (a socket
/// on `[::]` takes both); link-local IPv6 ones are left out, since a URL
/// needs their interface too.
fn machine_addresses(v6: bool) -> Vec<IpAddr> {
    let Ok(interfaces) = nix::ifaddrs::getifaddrs() else {
        return Vec::new();
    };
    interfaces
        .filter_map(|interface| {
            let address = interface.address?;
            if let Some(v4) = address.as_sockaddr_in() {
                return Some(IpAddr::from(v4.ip()));
            }
            let v6_addr = address.as_sockaddr_in6()?.ip();
            let link_local = (v6_addr.segments()[0] & 0xffc0) == 0xfe80;
            (v6 && !link_local).then_some(IpAddr::from(v6_addr))
        })
        .collect()
}

/// The page's addresses on stdout, one a line, the preferred first (the line
/// a script reads); how to reach it safely on stderr.
pub fn announce(bases: &[String], token: &str, local: SocketAddr) {
    use std::io::Write;
    let token: String = url::form_urlencoded::byte_serialize(token.as_bytes()).collect();
    let lines: String = bases
        .iter()
        .map(|base| format!("{base}#token={token}\n"))
        .collect();
    // A reader that took the first line and went must not end the page.
    let mut stdout = std::io::stdout().lock();
    let _ = stdout
        .write_all(lines.as_bytes())
        .and_then(|()| stdout.flush());
    eprintln!(
        "clowder serve: the web inbox is at the address above; the token after `#` stays in the browser (no server is sent it) and the page keeps it while its tab is open"
    );
    if local.ip().is_loopback() {
        eprintln!(
            "clowder serve: from another machine, tunnel to it: ssh -L {port}:127.0.0.1:{port} THIS-HOST, then open http://127.0.0.1:{port}/#token=…",
            port = local.port()
        );
    } else {
        eprintln!(
            "clowder serve: {local} is open to the network: reach it only through a private network (Tailscale, WireGuard) or an SSH tunnel, never from the internet"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unspecified_address_becomes_the_machines_own() {
        let any: SocketAddr = "0.0.0.0:7700".parse().expect("addr");
        let bases = bases(any);
        assert!(!bases.is_empty());
        assert!(bases.iter().all(|b| !b.contains("0.0.0.0")), "{bases:?}");
        assert!(bases.iter().all(|b| b.ends_with(":7700/")), "{bases:?}");
        let last = bases.last().expect("one");
        assert!(
            bases.len() == 1 || last.contains("127.0.0.1"),
            "loopback last: {bases:?}"
        );
        let one: SocketAddr = "127.0.0.1:7700".parse().expect("addr");
        assert_eq!(super::bases(one), ["http://127.0.0.1:7700/"]);
    }
}
