//! A headless Chromium driven over WebDriver, for the tests of the web inbox:
//! Debian's `chromedriver` started on a free loopback port, one session of
//! `/usr/bin/chromium` with a fresh profile and a chosen window size, and
//! blocking helpers (go to, wait for, read, click, type, screenshot) that poll
//! to generous deadlines. Dropping a [`Browser`] ends the session and kills
//! chromedriver and every Chromium process it started.
//!
//! Only `tests/it/web_browser.rs` includes it (`#[path]`), so the other test
//! binaries do not link the WebDriver client.

use std::net::{TcpListener, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use fantoccini::{Client, ClientBuilder, Locator};
use hyper_util::client::legacy::connect::HttpConnector;
use serde_json::{Value, json};
use tempfile::TempDir;

use crate::common::{DEADLINE, pid_alive, wait_until};

pub const CHROMIUM: &str = "/usr/bin/chromium";
pub const CHROMEDRIVER: &str = "/usr/bin/chromedriver";

/// A phone's viewport (an iPhone 12 to 15), and a laptop's.
pub const PHONE: (u32, u32) = (390, 844);
pub const DESKTOP: (u32, u32) = (1280, 800);

/// Below this width Chromium's window cannot go.
const MIN_WINDOW_WIDTH: u32 = 500;

/// One chromedriver and one Chromium session in it.
pub struct Browser {
    runtime: tokio::runtime::Runtime,
    client: Option<Client>,
    /// A phone's viewport: touch, not a mouse.
    phone: bool,
    driver: Child,
    /// Chromium's profile and chromedriver's log; its path is in the command
    /// line of every Chromium process of this browser, which is how
    /// [`Browser::processes`] finds them.
    profile: TempDir,
}

impl Browser {
    /// A headless Chromium whose viewport is `size` (width, height) pixels.
    pub fn start(size: (u32, u32)) -> Browser {
        for program in [CHROMIUM, CHROMEDRIVER] {
            assert!(
                Path::new(program).exists(),
                "{program} is missing: the browser tests need Debian's chromium and \
                 chromium-driver, which `.ci/run` installs (apt-get install chromium chromium-driver)"
            );
        }
        let profile = tempfile::tempdir().expect("tempdir for the browser profile");
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("tokio runtime");
        let (driver, port) = start_driver(profile.path());
        let mut browser = Browser {
            runtime,
            client: None,
            phone: size.0 < MIN_WINDOW_WIDTH,
            driver,
            profile,
        };
        let capabilities = capabilities(&browser.profile.path().join("chromium"), size);
        let url = format!("http://127.0.0.1:{port}");
        let client = browser.runtime.block_on(async {
            ClientBuilder::new(HttpConnector::new())
                .capabilities(capabilities)
                .connect(&url)
                .await
        });
        match client {
            Ok(client) => browser.client = Some(client),
            Err(e) => panic!(
                "chromedriver did not start Chromium: {e}\nchromedriver's log:\n{}",
                browser.driver_log()
            ),
        }
        browser
    }

    fn client(&self) -> &Client {
        self.client
            .as_ref()
            .expect("the session is open until drop")
    }

    fn driver_log(&self) -> String {
        std::fs::read_to_string(self.profile.path().join("chromedriver.log")).unwrap_or_default()
    }

    /// chromedriver's process id.
    pub fn driver_pid(&self) -> u32 {
        self.driver.id()
    }

    /// What every process of this browser has in its command line.
    pub fn marker(&self) -> PathBuf {
        self.profile.path().to_path_buf()
    }

    pub fn goto(&self, url: &str) {
        let done = self.runtime.block_on(self.client().goto(url));
        done.unwrap_or_else(|e| panic!("go to {url}: {e}"));
    }

    /// Runs `script` (a function body: `return …` gives the value) in the page.
    pub fn execute(&self, script: &str) -> Value {
        let value = self.runtime.block_on(self.client().execute(script, vec![]));
        value.unwrap_or_else(|e| panic!("execute {script:?}: {e}"))
    }

    /// Polls every 50 ms until `script` returns `true`, or panics at the deadline
    /// showing `what` and the page's text.
    pub fn wait_js(&self, what: &str, script: &str) {
        let start = Instant::now();
        while start.elapsed() < DEADLINE {
            if self.execute(script) == Value::Bool(true) {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!(
            "waited {DEADLINE:?} for {what}; the page reads:\n{}",
            self.page_text()
        );
    }

    /// Waits until an element matches `css`.
    pub fn wait_for(&self, css: &str) {
        let script = format!("return document.querySelector({css:?}) !== null;");
        self.wait_js(&format!("an element {css}"), &script);
    }

    /// Waits until the text of the first element matching `css` satisfies `ok`;
    /// returns that text.
    pub fn wait_text(&self, css: &str, mut ok: impl FnMut(&str) -> bool) -> String {
        let start = Instant::now();
        let mut last = None;
        while start.elapsed() < DEADLINE {
            last = self.try_text(css);
            if last.as_deref().is_some_and(&mut ok) {
                return last.unwrap_or_default();
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!(
            "waited {DEADLINE:?} for the text of {css}; last {last:?}; the page reads:\n{}",
            self.page_text()
        );
    }

    /// Waits until the texts of every element matching `css`, a line each,
    /// satisfy `ok`; returns them.
    pub fn wait_texts(&self, css: &str, mut ok: impl FnMut(&str) -> bool) -> String {
        let start = Instant::now();
        let mut last = String::new();
        while start.elapsed() < DEADLINE {
            last = self.texts(css).join("\n");
            if ok(&last) {
                return last;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("waited {DEADLINE:?} for the texts of {css}; last:\n{last}");
    }

    /// The text of the first element matching `css`, or None without one.
    pub fn try_text(&self, css: &str) -> Option<String> {
        let script =
            format!("const e = document.querySelector({css:?}); return e && e.textContent;");
        self.execute(&script).as_str().map(str::to_string)
    }

    /// The text of the first element matching `css`, waiting for it.
    pub fn text(&self, css: &str) -> String {
        self.wait_for(css);
        self.try_text(css).unwrap_or_default()
    }

    /// The texts of every element matching `css`, in document order.
    pub fn texts(&self, css: &str) -> Vec<String> {
        let script = format!(
            "return Array.from(document.querySelectorAll({css:?})).map(e => e.textContent);"
        );
        let value = self.execute(&script);
        let items = value.as_array().cloned().unwrap_or_default();
        items
            .iter()
            .map(|v| v.as_str().unwrap_or_default().to_string())
            .collect()
    }

    /// How many elements match `css`.
    pub fn count(&self, css: &str) -> usize {
        let script = format!("return document.querySelectorAll({css:?}).length;");
        self.execute(&script).as_u64().unwrap_or(0) as usize
    }

    /// Clicks the first element matching `css` as a user would (WebDriver's
    /// click: scrolled into view, refused when covered), once it exists. An
    /// element redrawn between finding it and clicking it is found again.
    pub fn click(&self, css: &str) {
        self.wait_for(css);
        let mut tries = 0;
        loop {
            let clicked = self
                .runtime
                .block_on(async { self.client().find(Locator::Css(css)).await?.click().await });
            match clicked {
                Ok(()) => return,
                Err(e) if tries < 20 && is_stale(&e) => tries += 1,
                Err(e) => panic!("click {css}: {e}"),
            }
        }
    }

    /// Presses the middle of the first element matching `css` for `hold`, as
    /// a finger (on a phone-sized browser) or a mouse button does, then lets
    /// go. The place is pressed, not the element: one redrawn meanwhile is
    /// what a person would press.
    pub fn press(&self, css: &str, hold: Duration) {
        use fantoccini::actions::{
            InputSource, MOUSE_BUTTON_LEFT, MouseActions, PointerAction, TouchActions,
        };
        self.wait_for(css);
        let script = format!(
            "const e = document.querySelector({css:?}); e.scrollIntoView({{block: 'center'}});
             const r = e.getBoundingClientRect(); return [r.x + r.width / 2, r.y + r.height / 2];"
        );
        let middle = self.execute(&script);
        let at = |i: usize| {
            middle[i]
                .as_f64()
                .unwrap_or_else(|| panic!("no place for {css}"))
        };
        let steps = [
            PointerAction::MoveTo {
                duration: None,
                x: at(0).round(),
                y: at(1).round(),
            },
            PointerAction::Down {
                button: MOUSE_BUTTON_LEFT,
            },
            PointerAction::Pause { duration: hold },
            PointerAction::Up {
                button: MOUSE_BUTTON_LEFT,
            },
        ];
        let pressed = self.runtime.block_on(async {
            if self.phone {
                let touch = steps
                    .into_iter()
                    .fold(TouchActions::new("finger".into()), InputSource::then);
                self.client().perform_actions(touch).await?;
            } else {
                let mouse = steps
                    .into_iter()
                    .fold(MouseActions::new("mouse".into()), InputSource::then);
                self.client().perform_actions(mouse).await?;
            }
            self.client().release_actions().await
        });
        pressed.unwrap_or_else(|e| panic!("press {css}: {e}"));
    }

    /// Types `text` into the first element matching `css`, once it exists
    /// (WebDriver's keys: "\u{E007}" is Enter).
    pub fn send_keys(&self, css: &str, text: &str) {
        self.wait_for(css);
        let typed = self.runtime.block_on(async {
            self.client()
                .find(Locator::Css(css))
                .await?
                .send_keys(text)
                .await
        });
        typed.unwrap_or_else(|e| panic!("type into {css}: {e}"));
    }

    /// Types `text` into whatever has the focus (keyboard shortcuts).
    pub fn keys(&self, text: &str) {
        let typed = self
            .runtime
            .block_on(async { self.client().active_element().await?.send_keys(text).await });
        typed.unwrap_or_else(|e| panic!("type {text:?}: {e}"));
    }

    /// The text of a JavaScript dialog (`alert`…) if one is open.
    pub fn alert_text(&self) -> Option<String> {
        self.runtime.block_on(self.client().get_alert_text()).ok()
    }

    /// A PNG of the viewport, written to `path` (its folder made).
    pub fn screenshot(&self, path: &Path) {
        let png = self.runtime.block_on(self.client().screenshot());
        let png = png.unwrap_or_else(|e| panic!("screenshot: {e}"));
        if let Some(folder) = path.parent() {
            std::fs::create_dir_all(folder).expect("make the screenshot's folder");
        }
        std::fs::write(path, png).unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
    }

    /// The page's visible text, for failure messages.
    pub fn page_text(&self) -> String {
        let script = "return document.body ? document.body.innerText : '';";
        let text = self.runtime.block_on(self.client().execute(script, vec![]));
        match text {
            Ok(value) => value.as_str().unwrap_or_default().to_string(),
            Err(e) => format!("(cannot read the page: {e})"),
        }
    }

    /// Live processes started for this browser: chromedriver and every
    /// process whose command line names this browser's profile.
    pub fn processes(&self) -> Vec<i32> {
        browser_processes(self.driver.id(), &self.marker())
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        if let Some(client) = self.client.take() {
            // A hung session must not hang the test: chromedriver is killed below anyway.
            let close =
                async { tokio::time::timeout(Duration::from_secs(10), client.close()).await };
            let _ = self.runtime.block_on(close);
        }
        let pid = self.driver.id();
        // chromedriver leads its own process group, which Chromium's processes join.
        // SAFETY: kill(2) with a process group and a signal number touches no memory.
        unsafe { libc::kill(-(pid as i32), libc::SIGKILL) };
        let _ = self.driver.kill();
        let _ = self.driver.wait();
        let marker = self.marker();
        let gone = wait_until(Duration::from_secs(20), || {
            let left = browser_processes(pid, &marker);
            for pid in &left {
                // SAFETY: as above, for one process that names our profile.
                unsafe { libc::kill(*pid, libc::SIGKILL) };
            }
            left.is_empty()
        });
        if !gone && !std::thread::panicking() {
            panic!(
                "browser processes outlived the browser: {:?}",
                browser_processes(pid, &marker)
            );
        }
    }
}

fn is_stale(error: &fantoccini::error::CmdError) -> bool {
    error.to_string().contains("stale element")
}

/// The variable in the environment of every process of a browser, its value the browser's folder.
const MARKER_VAR: &str = "CLOWDER_TEST_BROWSER";

/// Live processes that are `driver`, name `marker` in their command line or
/// have it in their environment.
pub fn browser_processes(driver: u32, marker: &Path) -> Vec<i32> {
    let entry = [
        MARKER_VAR.as_bytes(),
        b"=",
        marker.as_os_str().as_encoded_bytes(),
    ]
    .concat();
    let marker = marker.as_os_str().as_encoded_bytes();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(Result::ok)
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| pid_alive(*pid))
        .filter(|pid| {
            *pid == driver as i32
                || std::fs::read(format!("/proc/{pid}/cmdline"))
                    .is_ok_and(|line| line.windows(marker.len()).any(|w| w == marker))
                || std::fs::read(format!("/proc/{pid}/environ"))
                    .is_ok_and(|env| env.split(|b| *b == 0).any(|var| var == entry))
        })
        .collect()
}

/// chromedriver on a free loopback port, once its `/status` answers; its log
/// goes to `folder/chromedriver.log`. A port taken between our look and its
/// bind makes it exit: then another port is tried.
fn start_driver(folder: &Path) -> (Child, u16) {
    let log_path = folder.join("chromedriver.log");
    for _ in 0..5 {
        let port = free_port();
        let log = std::fs::File::create(&log_path).expect("create chromedriver.log");
        let mut driver = Command::new(CHROMEDRIVER)
            .arg(format!("--port={port}"))
            .arg(format!("--log-path={}", log_path.display()))
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("clone the log file"))
            .stderr(log)
            .process_group(0)
            // Crashpad's handler leaves the group and the profile: the variable
            // finds it. Its reports stay out of the user's home.
            .env(MARKER_VAR, folder)
            .env("HOME", folder)
            .env("XDG_CONFIG_HOME", folder.join("config"))
            .env("XDG_CACHE_HOME", folder.join("cache"))
            .spawn()
            .unwrap_or_else(|e| panic!("start {CHROMEDRIVER}: {e}"));
        let ready = wait_until(DEADLINE, || {
            status_ready(port) || matches!(driver.try_wait(), Ok(Some(_)))
        });
        if ready && matches!(driver.try_wait(), Ok(None)) {
            return (driver, port);
        }
        let _ = driver.kill();
        let _ = driver.wait();
        if !ready {
            break;
        }
    }
    panic!(
        "chromedriver never answered /status:\n{}",
        std::fs::read_to_string(&log_path).unwrap_or_default()
    );
}

fn free_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind a free port");
    listener.local_addr().expect("local address").port()
}

/// Whether chromedriver's `GET /status` says it is ready.
fn status_ready(port: u16) -> bool {
    use std::io::{Read, Write};
    let Ok(mut stream) = TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
    let request =
        format!("GET /status HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n");
    if stream.write_all(request.as_bytes()).is_err() {
        return false;
    }
    let mut answer = String::new();
    let _ = stream.read_to_string(&mut answer);
    answer.starts_with("HTTP/1.1 200")
}

/// Headless Chromium, quiet (no network of its own, no first-run pages), its
/// profile in `profile` and its window `size`.
fn capabilities(profile: &Path, size: (u32, u32)) -> serde_json::Map<String, Value> {
    let args = [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-dev-shm-usage",
    ]
    .map(str::to_string)
    .into_iter()
    .chain([
        format!("--user-data-dir={}", profile.display()),
        format!("--window-size={},{}", size.0, size.1),
    ])
    .collect::<Vec<_>>();
    // The viewport is emulated: a window is never narrower than 500 px, and a
    // headless one still keeps room for a toolbar it does not draw. Below
    // that width it is a phone: touch and mobile layout.
    let phone = size.0 < MIN_WINDOW_WIDTH;
    let metrics = json!({
        "width": size.0, "height": size.1, "pixelRatio": 1.0, "touch": phone, "mobile": phone,
    });
    let options = json!({
        "binary": CHROMIUM,
        "args": args,
        "mobileEmulation": { "deviceMetrics": metrics },
    });
    let capabilities = json!({ "browserName": "chrome", "goog:chromeOptions": options });
    match capabilities {
        Value::Object(map) => map,
        _ => unreachable!("a JSON object literal"),
    }
}

/// The width and height of a PNG, from its header.
pub fn png_size(png: &[u8]) -> Option<(u32, u32)> {
    if png.get(1..4)? != b"PNG" {
        return None;
    }
    let number = |at: usize| Some(u32::from_be_bytes(png.get(at..at + 4)?.try_into().ok()?));
    Some((number(16)?, number(20)?))
}
