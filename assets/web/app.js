// The clowder web inbox. Everything the fleet says is put on the page as
// text (textContent), never as HTML: agent output and commands stay inert.
// The token comes in the address's fragment (`#token=…`, which the browser
// sends to no server), is kept in this tab's sessionStorage (which belongs
// to this origin, port included) and goes in a header on every request:
// never in a cookie, which would go to every server on 127.0.0.1.
"use strict";

(() => {
  const $ = (selector) => document.querySelector(selector);
  const OUTPUT_KEPT = 200;
  // Every lane row is this tall (app.css says the same): the list draws only
  // the rows in sight, placed by their index.
  const ROW_HEIGHT = 56;
  const ROWS_AROUND = 8; // drawn above and below the visible ones

  let csrf = "";
  let clockOffset = 0; // server time minus this browser's
  // The view as the server sent it, patched in place by each message.
  let view = { hosts: [], requests: [] };
  let epoch = null; // the server's run, and the version of the view held
  let version = null;
  const lanes = new Map(); // name -> the lane's facts
  let order = []; // every lane's name, in the hosts' order
  const events = new Map(); // id -> event line
  let listed = []; // the names the list shows: filtered, those needing you first
  const drawnRows = new Map(); // name -> its row in the DOM (only those in sight)
  let filter = "all";
  let search = "";
  let shownLane = null; // the lane whose output shows
  let selected = 0; // index of the selected request
  let feed = null; // the AbortController of the live feed
  let feedUp = false;
  const decidedHere = new Set(); // requests this page decided
  const TOKEN_KEY = "clowder-token";
  const token = takeToken();

  // The token of the address opened (`#token=`, or the older `?token=`),
  // else the one this tab kept; the address bar is left without it.
  function takeToken() {
    const given =
      new URLSearchParams(location.hash.slice(1)).get("token") ||
      new URLSearchParams(location.search).get("token");
    if (given) {
      sessionStorage.setItem(TOKEN_KEY, given);
      history.replaceState(null, "", "/");
    }
    return sessionStorage.getItem(TOKEN_KEY) || "";
  }

  function authorized(headers) {
    return { ...headers, Authorization: `Bearer ${token}` };
  }

  function el(tag, className, text) {
    const node = document.createElement(tag);
    if (className) node.className = className;
    if (text !== undefined && text !== null) node.textContent = String(text);
    return node;
  }

  function duration(secs) {
    secs = Math.max(0, Math.round(secs));
    if (secs < 60) return `${secs}s`;
    if (secs < 3600) return `${Math.floor(secs / 60)}m${String(secs % 60).padStart(2, "0")}s`;
    return `${Math.floor(secs / 3600)}h${String(Math.floor((secs % 3600) / 60)).padStart(2, "0")}m`;
  }

  function ageOf(timestamp) {
    return (Date.now() + clockOffset - Date.parse(timestamp)) / 1000;
  }

  function clock(timestamp) {
    const at = new Date(timestamp);
    return at.toTimeString().slice(0, 8);
  }

  function flash(text, isError) {
    const box = $("#flash");
    box.textContent = text;
    box.className = isError ? "level-error" : "";
  }

  // ---- drawing -------------------------------------------------------

  // A message of the server: the whole view, or what changed since the
  // version this page holds.
  function take(state) {
    clockOffset = Date.parse(state.now) - Date.now();
    const part = state.view;
    if (part.full) takeWhole(part);
    else patch(part);
    version = part.v;
    list();
    if (shownLane === null || !lanes.has(shownLane)) {
      const first = listed.find((name) => lanes.get(name).needs_you) || order[0];
      if (first) showLane(first);
    }
    draw(part.full || part.events.length > 0 || part.gone_events.length > 0);
    if (!document.body.dataset.ready) {
      document.body.dataset.ready = "1";
      performance.mark("clowder-drawn");
    }
  }

  function takeWhole(part) {
    epoch = part.epoch;
    lanes.clear();
    for (const lane of part.lanes) lanes.set(lane.name, lane);
    order = part.lanes.map((lane) => lane.name);
    view = { hosts: part.hosts, requests: part.requests };
    events.clear();
    for (const event of part.events) events.set(event.id, event);
  }

  // Only the facts that changed come: they go into the lane's object, and
  // its row (if in sight) is filled again in place.
  function patch(part) {
    for (const name of part.gone) lanes.delete(name);
    for (const facts of part.lanes) {
      const lane = lanes.get(facts.name);
      if (lane) Object.assign(lane, facts);
      else lanes.set(facts.name, facts);
    }
    if (part.order) order = part.order;
    if (part.hosts) view.hosts = part.hosts;
    if (part.requests) view.requests = part.requests;
    for (const id of part.gone_events) events.delete(id);
    for (const event of part.events) events.set(event.id, event);
  }

  function draw(eventsChanged) {
    drawHosts();
    drawRequests();
    drawLanes();
    if (eventsChanged) drawEvents();
    showConn();
    const waiting = view.requests.length;
    $("#summary").textContent =
      `${lanes.size.toLocaleString("en")} lane${lanes.size === 1 ? "" : "s"}` +
      (waiting ? ` · ${waiting} waiting` : "");
    document.title = waiting ? `(${waiting}) clowder inbox` : "clowder inbox";
  }

  function drawHosts() {
    const lost = view.hosts.filter((host) => host.lost);
    const box = $("#hosts");
    box.replaceChildren(
      ...lost.map((host) => el("div", null, `⚠ host ${host.name || "?"} unreachable: ${host.lost}`)),
    );
  }

  function drawRequests() {
    const box = $("#requests");
    const cards = new Map();
    for (const card of box.querySelectorAll(".request")) cards.set(card.dataset.id, card);
    const wanted = view.requests.map((request) => {
      const card = cards.get(request.id) || requestCard(request);
      cards.delete(request.id);
      fillRequest(card, request);
      return card;
    });
    for (const gone of cards.values()) {
      const typing =
        !decidedHere.has(gone.dataset.id) &&
        (gone.contains(document.activeElement) || gone.querySelector(".reason").value);
      if (typing) flash(`Request ${gone.dataset.id} was decided elsewhere: the events say by whom.`, true);
      gone.remove();
    }
    const inOrder = wanted.every((card, index) => box.children[index] === card);
    if (!inOrder) box.replaceChildren(...wanted);
    selected = Math.min(selected, Math.max(0, wanted.length - 1));
    wanted.forEach((card, index) => card.classList.toggle("selected", index === selected));
    $("#req-count").textContent = wanted.length ? `(${wanted.length})` : "";
    $("#no-requests").hidden = wanted.length > 0;
  }

  function requestCard(request) {
    const card = el("div", "request");
    card.dataset.id = request.id;
    const head = el("div", "req-head");
    head.append(el("span", "req-lane"), el("span", "req-tool"), el("span", "req-waited"));
    const subject = el("pre", "req-subject");
    const end = el("pre", "req-end");
    const body = el("pre", "req-body");
    const actions = el("div", "req-actions");
    const approve = el("button", "approve", "Approve");
    approve.type = "button";
    const reason = el("input", "reason");
    reason.placeholder = "Reason to reject";
    reason.title = "The agent is told the reason";
    reason.setAttribute("aria-label", "Reason to reject");
    const reject = el("button", "reject", "Reject");
    reject.type = "button";
    actions.append(approve, reason, reject);
    card.append(head, subject, end, body, actions);
    approve.addEventListener("click", () => decide(card.dataset.id, "approve", ""));
    reject.addEventListener("click", () => rejectFrom(card));
    reason.addEventListener("keydown", (event) => {
      if (event.key === "Enter") {
        event.preventDefault();
        rejectFrom(card);
      }
    });
    card.addEventListener("click", (event) => {
      const cardsNow = [...$("#requests").children];
      selected = Math.max(0, cardsNow.indexOf(card));
      cardsNow.forEach((other) => other.classList.toggle("selected", other === card));
      if (event.target === card || event.target.tagName === "PRE") {
        const lane = card.querySelector(".req-lane").textContent;
        if (lane && lane !== "—") showLane(lane);
      }
    });
    return card;
  }

  function fillRequest(card, request) {
    card.querySelector(".req-lane").textContent = request.lane || "—";
    card.querySelector(".req-tool").textContent =
      request.tool || (request.kind === "session" ? "session" : request.title);
    card.querySelector(".req-waited").textContent = `waiting ${duration(ageOf(request.created))}`;
    card.querySelector(".req-waited").dataset.since = request.created;
    card.querySelector(".req-subject").textContent = request.subject || request.title;
    // A subject too long to read whole: its length and how it ends, so that
    // what follows padding is seen before Approve.
    const end = card.querySelector(".req-end");
    end.textContent = request.subject_end
      ? `${request.subject_chars.toLocaleString("en")} characters; it ends: …${request.subject_end}`
      : "";
    end.hidden = !request.subject_end;
    const body = card.querySelector(".req-body");
    body.textContent = request.body || "";
    body.hidden = !request.body;
    card.classList.toggle("abandoned", request.abandoned);
  }

  // ---- the lane list: filtered, searched, and drawn as a window --------

  const FILTERS = {
    all: () => true,
    needs: (lane) => lane.needs_you,
    failed: (lane) => lane.state === "failed",
    running: (lane) => lane.state === "running",
  };

  // The names to list: those that pass the filter and the search, the ones
  // that need you first; and each filter's count on its chip.
  function list() {
    const words = search.toLowerCase();
    const counts = { all: 0, needs: 0, failed: 0, running: 0 };
    const needing = [];
    const others = [];
    for (const name of order) {
      const lane = lanes.get(name);
      if (!lane) continue;
      if (words && !name.toLowerCase().includes(words) && !String(lane.label).toLowerCase().includes(words)) continue;
      for (const key in FILTERS) if (FILTERS[key](lane)) counts[key] += 1;
      if (!FILTERS[filter](lane)) continue;
      (lane.needs_you ? needing : others).push(name);
    }
    listed = needing.concat(others);
    for (const chip of document.querySelectorAll("#lane-filters button")) {
      const key = chip.dataset.filter;
      chip.querySelector(".count").textContent = counts[key].toLocaleString("en");
      chip.setAttribute("aria-pressed", String(key === filter));
    }
    const count = listed.length === lanes.size ? "" : `${listed.length.toLocaleString("en")} of ${lanes.size.toLocaleString("en")}`;
    $("#lane-count").textContent = count;
    $("#no-lanes").hidden = listed.length > 0 || lanes.size === 0;
  }

  // Only the rows in sight (and a few around) are in the DOM; a row already
  // there is kept and filled in place.
  function drawLanes() {
    const box = $("#lanes");
    $("#lanes-spacer").style.height = `${listed.length * ROW_HEIGHT}px`;
    const first = Math.max(0, Math.floor(box.scrollTop / ROW_HEIGHT) - ROWS_AROUND);
    const last = Math.min(listed.length, Math.ceil((box.scrollTop + box.clientHeight) / ROW_HEIGHT) + ROWS_AROUND);
    const kept = new Map();
    for (let index = first; index < last; index += 1) {
      const name = listed[index];
      const row = drawnRows.get(name) || laneRow(name);
      fillLane(row, lanes.get(name));
      const top = `${index * ROW_HEIGHT}px`;
      if (row.style.top !== top) row.style.top = top;
      if (!row.isConnected) box.append(row);
      kept.set(name, row);
    }
    for (const [name, row] of drawnRows) if (!kept.has(name)) row.remove();
    drawnRows.clear();
    for (const [name, row] of kept) drawnRows.set(name, row);
  }

  let drawPending = false;
  function drawLanesSoon() {
    if (drawPending) return;
    drawPending = true;
    requestAnimationFrame(() => {
      drawPending = false;
      drawLanes();
    });
  }

  function relist() {
    list();
    $("#lanes").scrollTop = 0;
    drawLanes();
  }

  // A row is made once and then filled in place: a row replaced under the
  // pointer between press and release gets no click.
  function laneRow(name) {
    const row = el("div", "lane");
    row.dataset.lane = name;
    const facts = el("div", "facts");
    facts.append(el("span", "iteration"), el("span", "idle"), el("span", "cost"), el("span", "ahead"), el("span", "pending"), el("span", "ungated"));
    row.append(el("span", "glyph"), el("span", "name", name), el("span", "state"), facts);
    row.addEventListener("click", () => showLane(name));
    return row;
  }

  function fillLane(row, lane) {
    const set = (selector, text) => {
      const node = row.querySelector(selector);
      if (node.textContent !== text) node.textContent = text;
    };
    row.className = `lane state-${lane.state.replace(/ /g, "-")}`;
    row.classList.toggle("needs-you", lane.needs_you);
    row.classList.toggle("shown", lane.name === shownLane);
    set(".glyph", lane.glyph);
    set(".state", lane.state);
    set(".iteration", lane.iteration == null ? "" : `#${lane.iteration}${lane.max_iterations ? `/${lane.max_iterations}` : ""}`);
    set(".idle", idleText(lane));
    const idle = row.querySelector(".idle");
    idle.dataset.since = lane.idle_since || "";
    idle.dataset.limit = lane.stale_limit_secs || "";
    set(".cost", lane.cost_usd == null ? "" : `$${Number(lane.cost_usd).toFixed(2)}`);
    set(".ahead", lane.ahead ? `${lane.ahead} ahead` : "");
    set(".pending", lane.pending ? `${lane.pending} waiting` : "");
    // Its tool calls reach no gate: said on the row, the reason on hover.
    set(".ungated", lane.ungated ? "UNGATED" : "");
    row.querySelector(".ungated").title = lane.ungated || "";
  }

  function idleText(lane) {
    if (!lane.idle_since) return "";
    const limit = lane.stale_limit_secs ? ` of ${duration(lane.stale_limit_secs)}` : "";
    return `idle ${duration(ageOf(lane.idle_since))}${limit}`;
  }

  function drawEvents() {
    const box = $("#events");
    const atBottom = box.scrollTop + box.clientHeight >= box.scrollHeight - 4;
    const lines = [...events.values()].sort((a, b) => (a.at < b.at ? -1 : a.at > b.at ? 1 : a.id - b.id));
    const rows = lines.map((event) => {
      const row = el("div", `event level-${String(event.level).toLowerCase()}`);
      const time = el("time", null, clock(event.at));
      time.dateTime = event.at;
      row.append(time);
      if (event.lane) row.append(el("span", "ev-lane", event.lane));
      row.append(el("span", "ev-text", event.text));
      return row;
    });
    box.replaceChildren(...rows);
    if (atBottom) box.scrollTop = box.scrollHeight;
  }

  // Ages count on without a message from the server; a hidden page (a phone
  // in a pocket) draws nothing.
  function tick() {
    if (document.hidden) return;
    const put = (node, text) => {
      if (node.textContent !== text) node.textContent = text;
    };
    for (const waited of document.querySelectorAll(".req-waited")) {
      if (waited.dataset.since) put(waited, `waiting ${duration(ageOf(waited.dataset.since))}`);
    }
    for (const idle of document.querySelectorAll(".lane .idle")) {
      if (!idle.dataset.since) continue;
      const limit = idle.dataset.limit ? ` of ${duration(Number(idle.dataset.limit))}` : "";
      put(idle, `idle ${duration(ageOf(idle.dataset.since))}${limit}`);
    }
  }

  // ---- output of the shown lane ---------------------------------------

  function showLane(name) {
    if (name === shownLane) return;
    shownLane = name;
    $("#output-title").textContent = `Output: ${name}`;
    $("#output").replaceChildren();
    for (const row of document.querySelectorAll(".lane")) {
      row.classList.toggle("shown", row.dataset.lane === name);
    }
    connect();
  }

  function takeOutput(chunk) {
    if (chunk.lane !== shownLane) return;
    const box = $("#output");
    const atBottom = box.scrollTop + box.clientHeight >= box.scrollHeight - 4;
    if (chunk.reset) box.replaceChildren();
    for (const line of chunk.lines) {
      const row = el("div", `out-line kind-${line.kind}`);
      row.append(...coloured(line.text));
      if (line.is_error) row.classList.add("is-error");
      box.append(row);
    }
    while (box.children.length > OUTPUT_KEPT) box.firstChild.remove();
    if (atBottom || chunk.reset) box.scrollTop = box.scrollHeight;
  }

  // The host keeps colour codes (SGR) in output lines, as the room draws
  // them; here they become spans with a class each, the text still text.
  const SGR = /\x1b\[([0-9;:]*)m/g;

  function coloured(text) {
    const parts = [];
    let style = { fg: null, bold: false };
    let at = 0;
    for (const match of text.matchAll(SGR)) {
      if (match.index > at) parts.push(span(text.slice(at, match.index), style));
      style = applySgr(style, match[1]);
      at = match.index + match[0].length;
    }
    if (at < text.length) parts.push(span(text.slice(at), style));
    return parts;
  }

  function applySgr(style, codes) {
    const next = { ...style };
    for (const code of (codes || "0").split(/[;:]/).map(Number)) {
      if (code === 0) Object.assign(next, { fg: null, bold: false });
      else if (code === 1) next.bold = true;
      else if (code === 22) next.bold = false;
      else if (code === 39) next.fg = null;
      else if ((code >= 30 && code <= 37) || (code >= 90 && code <= 97)) next.fg = code;
    }
    return next;
  }

  function span(text, style) {
    const classes = [style.fg ? `sgr-${style.fg}` : "", style.bold ? "sgr-bold" : ""].join(" ").trim();
    return classes ? el("span", classes, text) : document.createTextNode(text);
  }

  // ---- the live feed --------------------------------------------------

  // EventSource cannot send a header: the feed is read with fetch, and its
  // `event:`/`data:` blocks parsed here.
  function connect() {
    if (feed) feed.abort();
    const controller = new AbortController();
    feed = controller;
    // The feed starts from the version this page holds: only what changed
    // since is sent.
    const query = new URLSearchParams();
    if (epoch !== null) query.set("epoch", epoch);
    if (version !== null) query.set("since", String(version));
    if (shownLane) query.set("lane", shownLane);
    const address = `/api/events?${query}`;
    follow(address, controller).catch(() => {}).finally(() => {
      if (feed !== controller) return;
      setConnected(false);
      setTimeout(() => feed === controller && start(), 2000);
    });
  }

  async function follow(address, controller) {
    const response = await fetch(address, { headers: authorized({}), signal: controller.signal });
    if (!response.ok) {
      if (response.status === 401) refused(response.status);
      return;
    }
    setConnected(true);
    const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
    let buffer = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done || feed !== controller) return;
      buffer += value;
      let end;
      while ((end = buffer.indexOf("\n\n")) >= 0) {
        dispatch(buffer.slice(0, end));
        buffer = buffer.slice(end + 2);
      }
    }
  }

  function dispatch(block) {
    let name = "message";
    const data = [];
    for (const line of block.split("\n")) {
      if (line.startsWith("event:")) name = line.slice(6).trim();
      else if (line.startsWith("data:")) data.push(line.slice(5).replace(/^ /, ""));
    }
    if (!data.length) return;
    if (name === "state") take(JSON.parse(data.join("\n")));
    else if (name === "output") takeOutput(JSON.parse(data.join("\n")));
  }

  function setConnected(up) {
    feedUp = up;
    showConn();
  }

  // The header says what is true now: this page's own link to `clowder
  // serve`, then each host's behind it.
  function showConn() {
    const conn = $("#conn");
    const gone = view.hosts.filter((host) => host.lost);
    let text = "live";
    if (!feedUp) text = "reconnecting…";
    else if (gone.length) {
      const named = view.hosts.length > 1 ? ` ${gone.map((host) => host.name || "?").join(", ")}` : "";
      text = gone.every((host) => host.folder === null) ? `reaching host${named}…` : `host${named} gone, retrying`;
    }
    if (conn.textContent !== text) conn.textContent = text;
    conn.className = text === "live" ? "conn-up" : "conn-down";
  }

  function refused(status) {
    flash(`Refused (${status}): open the address that \`clowder serve --http\` printed, with its #token=.`, true);
  }

  // ---- what the page may change -----------------------------------------

  async function post(path, body) {
    try {
      const response = await fetch(path, {
        method: "POST",
        headers: authorized({ "Content-Type": "application/json", "X-Clowder-Csrf": csrf }),
        body: JSON.stringify(body),
      });
      const answer = await response.json().catch(() => ({ ok: false, text: `HTTP ${response.status}` }));
      flash(answer.text, !answer.ok);
      return answer.ok;
    } catch (error) {
      flash(`not sent: ${error}`, true);
      return false;
    }
  }

  async function decide(id, decision, reason) {
    const card = document.querySelector(`.request[data-id="${CSS.escape(id)}"]`);
    const buttons = card ? card.querySelectorAll("button") : [];
    buttons.forEach((button) => (button.disabled = true));
    decidedHere.add(id);
    const done = await post("/api/decide", { id, decision, reason });
    if (!done) {
      decidedHere.delete(id);
      buttons.forEach((button) => (button.disabled = false));
    }
  }

  function rejectFrom(card) {
    const reason = card.querySelector(".reason");
    if (!reason.value.trim()) {
      flash("Say why in the reason field: the agent is told.", true);
      reason.focus();
      return;
    }
    decide(card.dataset.id, "reject", reason.value.trim());
  }

  async function tell(event) {
    event.preventDefault();
    const text = $("#tell-text").value.trim();
    if (!shownLane || !text) {
      flash(shownLane ? "Write the note first." : "Pick a lane first.", true);
      return;
    }
    if (await post("/api/tell", { lane: shownLane, text })) $("#tell-text").value = "";
  }

  // ---- keys ---------------------------------------------------------------

  function onKey(event) {
    const typing = ["INPUT", "TEXTAREA"].includes(event.target.tagName);
    if (typing) {
      if (event.key === "Escape") event.target.blur();
      return;
    }
    if (event.ctrlKey || event.metaKey || event.altKey) return;
    const cards = [...document.querySelectorAll("#requests .request")];
    const card = cards[selected];
    switch (event.key) {
      case "j":
      case "k":
        if (cards.length) {
          selected = Math.max(0, Math.min(cards.length - 1, selected + (event.key === "j" ? 1 : -1)));
          cards.forEach((other, index) => other.classList.toggle("selected", index === selected));
          cards[selected].scrollIntoView({ block: "nearest" });
        } else {
          moveLane(event.key === "j" ? 1 : -1);
        }
        break;
      case "a":
        if (card) decide(card.dataset.id, "approve", "");
        break;
      case "r":
        if (card) card.querySelector(".reason").focus();
        break;
      default:
        return;
    }
    event.preventDefault();
  }

  function moveLane(step) {
    const names = listed;
    if (!names.length) return;
    const next = Math.max(0, Math.min(names.length - 1, names.indexOf(shownLane) + step));
    showLane(names[next]);
  }

  // ---- start ----------------------------------------------------------------

  async function start() {
    if (!token) {
      refused(401);
      setConnected(false);
      return;
    }
    try {
      const response = await fetch("/api/state", { headers: authorized({}) });
      if (!response.ok) {
        refused(response.status);
        setConnected(false);
        // A restarted page has a new token; one with the same (--token-file) comes back.
        setTimeout(start, 3000);
        return;
      }
      const state = await response.json();
      csrf = state.csrf;
      take(state);
      connect();
    } catch (error) {
      setConnected(false);
      setTimeout(start, 3000);
    }
  }

  document.addEventListener("keydown", onKey);
  $("#tell").addEventListener("submit", tell);
  $("#tell-text").addEventListener("keydown", (event) => {
    if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) tell(event);
  });
  $("#lane-search").addEventListener("input", (event) => {
    search = event.target.value.trim();
    relist();
  });
  for (const chip of document.querySelectorAll("#lane-filters button")) {
    chip.addEventListener("click", () => {
      filter = chip.dataset.filter;
      relist();
    });
  }
  $("#lanes").addEventListener("scroll", drawLanesSoon, { passive: true });
  window.addEventListener("resize", drawLanesSoon);
  setInterval(tick, 1000);
  start();
})();
