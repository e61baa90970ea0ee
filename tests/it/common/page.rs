//! `clowder serve --http` as the tests drive it without a browser: started
//! on a free loopback port, asked over real HTTP with its token, `Origin`
//! and CSRF token as the page asks, and ended with Ctrl-C or on drop.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};

use serde_json::{Value, json};

use super::git::clowder_command;
use super::{DEADLINE, send_signal, wait_until};

/// A running `clowder serve --http`, and what it printed.
pub struct Page {
    child: Child,
    /// `http://127.0.0.1:PORT/`.
    pub base: String,
    pub token: String,
    /// The `Authorization` header's value.
    pub auth: String,
}

impl Page {
    /// Serves the host of `root` on a free loopback port.
    pub fn start(root: &Path) -> Page {
        Page::start_with(root, &["serve", "--http", "127.0.0.1:0"])
    }

    /// `clowder ARGS` in `root`; its first line on stdout is the address.
    pub fn start_with(root: &Path, args: &[&str]) -> Page {
        Page::spawned(&mut clowder_command(root, args))
    }

    /// `command` (a `clowder serve`, its stdout piped), once it printed its address.
    pub fn spawned(command: &mut Command) -> Page {
        let mut child = command
            .stderr(Stdio::null())
            .spawn()
            .expect("start clowder serve");
        let stdout = child.stdout.take().expect("stdout");
        let mut line = String::new();
        BufReader::new(stdout)
            .read_line(&mut line)
            .expect("read the address");
        let url = line.trim().to_string();
        let (base, token) = url
            .split_once("#token=")
            .or_else(|| url.split_once("?token="))
            .expect("an address with a token");
        assert!(base.starts_with("http://") && base.ends_with('/'), "{url}");
        Page {
            child,
            base: base.to_string(),
            token: token.to_string(),
            auth: format!("Bearer {token}"),
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn origin(&self) -> String {
        self.base.trim_end_matches('/').to_string()
    }

    /// GET `path` with the token: the status and the JSON answer.
    pub fn get(&self, path: &str) -> (u16, Value) {
        let mut response = agent()
            .get(format!("{}{path}", self.base))
            .header("Authorization", &self.auth)
            .call()
            .expect("GET");
        let status = response.status().as_u16();
        let text = response.body_mut().read_to_string().expect("body");
        (status, serde_json::from_str(&text).expect("JSON"))
    }

    /// `/api/state`, which must answer 200.
    pub fn state(&self) -> Value {
        let (status, state) = self.get("api/state");
        assert_eq!(status, 200, "{state}");
        state
    }

    pub fn view(&self) -> Value {
        self.state()["view"].clone()
    }

    /// POSTs `body` as the page would (token, `Origin`, CSRF token); the
    /// status and the JSON answer.
    pub fn post(&self, path: &str, body: Value) -> (u16, Value) {
        let csrf = self.state()["csrf"].as_str().expect("csrf").to_string();
        let origin = self.origin();
        let (status, answer) = self.post_with(
            path,
            body,
            &[("Origin", &origin), ("X-Clowder-Csrf", &csrf)],
        );
        assert!(!answer.is_string(), "not a JSON answer: {answer}");
        (status, answer)
    }

    /// POSTs `body` with the token and `headers`: the status, and the answer
    /// as JSON (or as a string, when it is not).
    pub fn post_with(&self, path: &str, body: Value, headers: &[(&str, &str)]) -> (u16, Value) {
        let mut request = agent()
            .post(format!("{}{path}", self.base))
            .header("Authorization", &self.auth);
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        let mut response = request.send_json(body).expect("POST");
        let status = response.status().as_u16();
        let text = response.body_mut().read_to_string().expect("body");
        let answer = serde_json::from_str(&text).unwrap_or(Value::String(text));
        (status, answer)
    }

    /// `POST /api/act`: the status and the host's words.
    pub fn act(&self, lane: &str, action: &str) -> (u16, String) {
        let (status, answer) = self.post("api/act", json!({"lane": lane, "action": action}));
        let text = answer["text"].as_str().unwrap_or_default().to_string();
        (status, text)
    }

    /// The state once `check` holds for it.
    pub fn wait_for_state(&self, what: &str, check: impl Fn(&Value) -> bool) -> Value {
        let mut last = Value::Null;
        let seen = wait_until(DEADLINE, || {
            last = self.state();
            check(&last)
        });
        assert!(seen, "never saw {what}; the last state: {last:#}");
        last
    }

    /// The view once `check` holds for it.
    pub fn wait_for(&self, what: &str, check: impl Fn(&Value) -> bool) -> Value {
        self.wait_for_state(what, |state| check(&state["view"]))["view"].clone()
    }

    /// Ends it as Ctrl-C would; it must exit 0.
    pub fn stop(mut self) {
        send_signal(self.child.id(), libc::SIGINT);
        let ended = wait_until(DEADLINE, || matches!(self.child.try_wait(), Ok(Some(_))));
        if !ended {
            let _ = self.child.kill();
        }
        let status = self.child.wait().expect("wait");
        assert!(ended, "clowder serve did not end on SIGINT");
        assert!(status.success(), "clowder serve exited with {status}");
    }
}

impl Drop for Page {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// HTTP that answers every status and follows no redirect.
pub fn agent() -> ureq::Agent {
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .max_redirects(0)
        .build()
        .into()
}
