//! A host serves its clients fairly: one client that sends requests as fast
//! as it can neither slows another client's answers nor grows the host's
//! memory without bound. Through the real binary, a headless fleet of fake
//! agents, and clients that speak the protocol by hand.

use crate::common;

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use common::host::{HostFleet, stop_host};
use common::{DEADLINE, wait_until};
use serde_json::{Value, json};

fn connect(fleet: &HostFleet) -> (BufReader<UnixStream>, UnixStream) {
    let stream = UnixStream::connect(fleet.socket()).expect("connect to host.sock");
    stream.set_read_timeout(Some(DEADLINE)).expect("timeout");
    let writer = stream.try_clone().expect("clone");
    (BufReader::new(stream), writer)
}

fn read(reader: &mut BufReader<UnixStream>) -> Option<Value> {
    let mut text = String::new();
    match reader.read_line(&mut text) {
        Ok(0) | Err(_) => None,
        Ok(_) => serde_json::from_str(&text).ok(),
    }
}

fn rss_kb(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

/// A client that sends `per_second` requests (pause, resume, and again)
/// without waiting for their replies, and reads whatever comes back, until
/// `stop`; how many it sent.
fn flood(
    fleet: &HostFleet,
    per_second: u64,
    stop: Arc<AtomicBool>,
    request: fn(u64) -> Value,
) -> std::thread::JoinHandle<u64> {
    let (mut reader, mut writer) = connect(fleet);
    std::thread::spawn(move || while read(&mut reader).is_some() {});
    std::thread::spawn(move || {
        let gap = Duration::from_micros(1_000_000 / per_second);
        let start = Instant::now();
        let mut sent: u64 = 0;
        while !stop.load(Ordering::Relaxed) {
            let line = request(sent);
            if writer.write_all(format!("{line}\n").as_bytes()).is_err() {
                break;
            }
            sent += 1;
            let due = start + gap * sent as u32;
            std::thread::sleep(due.saturating_duration_since(Instant::now()));
        }
        sent
    })
}

/// Round trips of `count` pings, one every 100 ms, each waited for.
fn ping_times(fleet: &HostFleet, count: u64) -> Vec<Duration> {
    let (mut reader, mut writer) = connect(fleet);
    let mut times = Vec::new();
    for re in 1..=count {
        let asked = Instant::now();
        let line = json!({"type": "ping", "re": re});
        writer
            .write_all(format!("{line}\n").as_bytes())
            .expect("ping");
        loop {
            let message = read(&mut reader).expect("the host answers");
            if message["type"] == "reply" && message["re"] == re {
                break;
            }
        }
        times.push(asked.elapsed());
        std::thread::sleep(Duration::from_millis(100));
    }
    times.sort();
    times
}

#[test]
fn a_client_that_floods_requests_slows_no_other_client_and_grows_no_queue() {
    let fleet = HostFleet::new(&["api", "docs"], 3);
    let host = fleet.host("none");
    let pid = host.id();
    let (mut reader, _writer) = connect(&fleet);
    assert_eq!(read(&mut reader).expect("hello")["type"], "hello");
    let quiet = ping_times(&fleet, 5);
    let before = rss_kb(pid);

    let stop = Arc::new(AtomicBool::new(false));
    // A diff is git work on the host, and its answer goes to every client.
    let request: fn(u64) -> Value = |n| {
        let lane = if n % 2 == 0 { "api" } else { "docs" };
        json!({"type": "request", "request": {"diff": lane}})
    };
    let flooders: Vec<_> = (0..2)
        .map(|_| flood(&fleet, 400, Arc::clone(&stop), request))
        .collect();
    std::thread::sleep(Duration::from_secs(2));
    let busy = ping_times(&fleet, 30);
    let peak = Arc::new(AtomicU64::new(0));
    peak.fetch_max(rss_kb(pid), Ordering::Relaxed);
    stop.store(true, Ordering::Relaxed);
    let sent: u64 = flooders.into_iter().map(|f| f.join().expect("flood")).sum();
    let median = busy[busy.len() / 2];
    let grown = peak.load(Ordering::Relaxed).saturating_sub(before);
    eprintln!(
        "quiet ping median {:?}; flooded ({sent} requests) ping median {median:?}, slowest {:?}; RSS {before} kB, then +{grown} kB",
        quiet[quiet.len() / 2],
        busy[busy.len() - 1]
    );
    assert!(
        median < Duration::from_millis(250),
        "another client's ping took {median:?} at the median while one flooded: {busy:?}"
    );
    assert!(
        grown < 8 * 1024,
        "the host grew by {grown} kB under a flood of {sent} requests"
    );
    // The host still answers and acts after the flood.
    assert!(wait_until(DEADLINE, || ping_times(&fleet, 1)[0]
        < Duration::from_secs(1)));
    stop_host(fleet.root(), host);
}
