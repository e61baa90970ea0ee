//! The web inbox's connections: each one must send its request's head within
//! [`HEAD_WAIT`], and at most [`MAX_UNTRUSTED`] may be open that have not yet
//! shown the right token (a new one closes the oldest), so that idle or
//! half-open connections from anyone cannot use up the page's descriptors.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use axum::Router;
use axum::extract::ConnectInfo;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Notify;
use tower::ServiceExt;

/// How long a connection may take to send a request's head, the first one
/// and each next one on a kept-alive connection.
pub const HEAD_WAIT: Duration = Duration::from_secs(10);

/// Connections open at most that no right token came on yet: the page's own
/// few, and room for a flood to take turns without reaching the limit of
/// descriptors.
pub const MAX_UNTRUSTED: usize = 64;

/// How long to wait before accepting again when accepting fails (no
/// descriptor left): some close meanwhile.
const ACCEPT_PAUSE: Duration = Duration::from_millis(100);

/// One connection: whether a request on it carried the right token, and how
/// to close it from outside.
#[derive(Default)]
pub struct Door {
    trusted: AtomicBool,
    close: Notify,
}

impl Door {
    /// A request on this connection showed the right token: it no longer
    /// counts against [`MAX_UNTRUSTED`].
    pub fn trust(&self) {
        self.trusted.store(true, Ordering::Release);
    }

    fn is_trusted(&self) -> bool {
        self.trusted.load(Ordering::Acquire)
    }
}

/// The untrusted connections open now, oldest first.
#[derive(Default)]
struct Doors {
    untrusted: Mutex<VecDeque<Weak<Door>>>,
}

impl Doors {
    /// A new connection's door; the oldest untrusted ones are closed to make
    /// room for it.
    fn admit(&self) -> Arc<Door> {
        let door = Arc::new(Door::default());
        if let Ok(mut open) = self.untrusted.lock() {
            open.retain(|weak| weak.upgrade().is_some_and(|door| !door.is_trusted()));
            while open.len() >= MAX_UNTRUSTED {
                if let Some(oldest) = open.pop_front().and_then(|weak| weak.upgrade()) {
                    oldest.close.notify_one();
                }
            }
            open.push_back(Arc::downgrade(&door));
        }
        door
    }
}

/// Serves `router` on `listener` until the runtime ends. Each request
/// carries the peer's address (`ConnectInfo`) and its connection's [`Door`].
pub async fn serve(listener: TcpListener, router: Router) {
    let doors = Doors::default();
    loop {
        let (stream, peer) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(err) => {
                tracing::warn!("clowder serve: cannot accept a connection: {err}");
                tokio::time::sleep(ACCEPT_PAUSE).await;
                continue;
            }
        };
        let door = doors.admit();
        tokio::spawn(serve_one(stream, peer, door, router.clone()));
    }
}

async fn serve_one(stream: TcpStream, peer: SocketAddr, door: Arc<Door>, router: Router) {
    let on_request = Arc::clone(&door);
    let service = hyper::service::service_fn(move |mut request: hyper::Request<Incoming>| {
        request.extensions_mut().insert(ConnectInfo(peer));
        request.extensions_mut().insert(Arc::clone(&on_request));
        router.clone().oneshot(request.map(axum::body::Body::new))
    });
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(HEAD_WAIT);
    let connection = builder.serve_connection(TokioIo::new(stream), service);
    tokio::select! {
        _ = connection => {}
        () = door.close.notified() => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_new_connection_closes_the_oldest_untrusted_one_and_never_a_trusted_one() {
        let doors = Doors::default();
        let trusted = doors.admit();
        trusted.trust();
        let mut open: Vec<Arc<Door>> = (0..MAX_UNTRUSTED).map(|_| doors.admit()).collect();
        let newest = doors.admit();
        let closed = |door: &Door| {
            let notified = door.close.notified();
            futures_util::FutureExt::now_or_never(notified).is_some()
        };
        assert!(closed(&open[0]), "the oldest untrusted one is closed");
        assert!(!closed(&open[1]));
        assert!(!closed(&trusted));
        assert!(!closed(&newest));
        open.remove(0);
        drop(open);
        assert_eq!(doors.untrusted.lock().expect("lock").len(), MAX_UNTRUSTED);
    }
}
