// The page's service worker: keeps the page itself (not the fleet's data,
// which needs the token and is never cached) so that the page still opens
// without its server and says that it cannot reach it.
"use strict";
const SHELL = "clowder-shell-v2";
const FILES = ["/", "/app.js", "/app.css", "/icon.svg", "/icon-192.png", "/icon-512.png", "/manifest.webmanifest"];

self.addEventListener("install", (event) => {
  event.waitUntil(caches.open(SHELL).then((cache) => cache.addAll(FILES)));
  self.skipWaiting();
});

self.addEventListener("activate", (event) => {
  event.waitUntil(
    caches.keys().then((names) =>
      Promise.all(names.filter((name) => name !== SHELL).map((name) => caches.delete(name))),
    ),
  );
  self.clients.claim();
});

// The shell from the network when it answers (a new clowder's page), from
// the cache when it does not; the API always from the network.
self.addEventListener("fetch", (event) => {
  const url = new URL(event.request.url);
  if (event.request.method !== "GET" || url.pathname.startsWith("/api/")) return;
  const path = url.pathname === "/index.html" ? "/" : url.pathname;
  if (!FILES.includes(path)) return;
  event.respondWith(
    fetch(event.request)
      .then((answer) => {
        const copy = answer.clone();
        if (answer.ok) caches.open(SHELL).then((cache) => cache.put(path, copy));
        return answer;
      })
      .catch(() => caches.match(path)),
  );
});
