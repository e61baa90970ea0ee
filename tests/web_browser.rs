//! The web inbox (`clowder serve --http`) in a real headless Chromium driven
//! over WebDriver (tests/common/browser.rs), and its refusals through real
//! HTTP. Needs Debian's `chromium` and `chromium-driver` (`.ci/run` installs them).

#[path = "common/browser.rs"]
mod browser;
mod common;

use std::net::SocketAddr;

use browser::{Browser, PHONE};

/// A page that answers a click, served by axum on a thread of its own.
fn serve_test_page() -> SocketAddr {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("local address");
    listener.set_nonblocking(true).expect("nonblocking");
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("tokio runtime");
        runtime.block_on(async move {
            let listener = tokio::net::TcpListener::from_std(listener).expect("tokio listener");
            const PAGE: &str = "<!doctype html><meta name=viewport content='width=device-width'>\
                 <input id=name><button id=go onclick=\"document.getElementById('out')\
                 .textContent = 'hello ' + document.getElementById('name').value\">Go</button>\
                 <p id=out></p>";
            let page = || async { axum::response::Html(PAGE) };
            let app = axum::Router::new().route("/", axum::routing::get(page));
            let _ = axum::serve(listener, app).await;
        });
    });
    addr
}

/// The helper itself: a phone-sized page, a click, text read back, and no
/// browser process left once it is dropped.
#[test]
fn browser_helper_clicks_reads_and_leaves_no_process() {
    let addr = serve_test_page();
    let browser = Browser::start(PHONE);
    browser.goto(&format!("http://{addr}/"));
    let viewport = browser.execute("return [window.innerWidth, window.innerHeight];");
    assert_eq!(viewport, serde_json::json!([390, 844]));
    browser.send_keys("#name", "phone");
    browser.click("#go");
    assert_eq!(browser.wait_text("#out", |t| !t.is_empty()), "hello phone");
    let dir = tempfile::tempdir().expect("tempdir");
    let shot = dir.path().join("shot.png");
    browser.screenshot(&shot);
    let png = std::fs::read(&shot).expect("read the screenshot");
    assert_eq!(
        browser::png_size(&png),
        Some(PHONE),
        "the screenshot is the phone's viewport"
    );

    let (driver, marker) = (browser.driver_pid(), browser.marker());
    assert!(
        browser.processes().len() > 2,
        "chromedriver and Chromium's processes: {:?}",
        browser.processes()
    );
    drop(browser);
    let left = browser::browser_processes(driver, &marker);
    assert!(left.is_empty(), "left running after drop: {left:?}");
}
