// The clowder web inbox. Everything the fleet says is put on the page as
// text (textContent), never as HTML: agent output and commands stay inert.
"use strict";

(() => {
  const $ = (selector) => document.querySelector(selector);
  const OUTPUT_KEPT = 200;

  let csrf = "";
  let clockOffset = 0; // server time minus this browser's
  let view = { hosts: [], lanes: [], requests: [], events: [] };
  let shownLane = null; // the lane whose output shows
  let selected = 0; // index of the selected request
  let source = null;
  const decidedHere = new Set(); // requests this page decided

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

  function take(state) {
    clockOffset = Date.parse(state.now) - Date.now();
    view = state.view;
    if (shownLane === null || !view.lanes.some((lane) => lane.name === shownLane)) {
      const first = view.lanes.find((lane) => lane.needs_you) || view.lanes[0];
      if (first) showLane(first.name);
    }
    draw();
    document.body.dataset.ready = "1";
  }

  function draw() {
    drawHosts();
    drawRequests();
    drawLanes();
    drawEvents();
    const waiting = view.requests.length;
    $("#summary").textContent =
      `${view.lanes.length} lane${view.lanes.length === 1 ? "" : "s"}` +
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
    card.append(head, subject, body, actions);
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
    const body = card.querySelector(".req-body");
    body.textContent = request.body || "";
    body.hidden = !request.body;
    card.classList.toggle("abandoned", request.abandoned);
  }

  function drawLanes() {
    const box = $("#lanes");
    const old = new Map([...box.children].map((row) => [row.dataset.lane, row]));
    const rows = view.lanes.map((lane) => {
      const row = old.get(lane.name) || laneRow(lane.name);
      fillLane(row, lane);
      return row;
    });
    const inOrder = rows.length === box.children.length && rows.every((row, index) => box.children[index] === row);
    if (!inOrder) box.replaceChildren(...rows);
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
    set(".iteration", lane.iteration === null ? "" : `#${lane.iteration}${lane.max_iterations ? `/${lane.max_iterations}` : ""}`);
    set(".idle", idleText(lane));
    const idle = row.querySelector(".idle");
    idle.dataset.since = lane.idle_since || "";
    idle.dataset.limit = lane.stale_limit_secs || "";
    set(".cost", lane.cost_usd === null || lane.cost_usd === undefined ? "" : `$${Number(lane.cost_usd).toFixed(2)}`);
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
    const rows = view.events.map((event) => {
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

  function connect() {
    if (source) source.close();
    const address = shownLane ? `/api/events?lane=${encodeURIComponent(shownLane)}` : "/api/events";
    source = new EventSource(address);
    const current = source;
    source.addEventListener("open", () => setConnected(true));
    source.addEventListener("state", (message) => take(JSON.parse(message.data)));
    source.addEventListener("output", (message) => takeOutput(JSON.parse(message.data)));
    source.addEventListener("error", () => {
      if (current !== source) return;
      setConnected(false);
      if (current.readyState === EventSource.CLOSED) {
        // Refused (a restarted server has a new token): ask again later.
        setTimeout(() => current === source && start(), 3000);
      }
    });
  }

  function setConnected(up) {
    const conn = $("#conn");
    conn.textContent = up ? "live" : "reconnecting…";
    conn.className = up ? "conn-up" : "conn-down";
  }

  // ---- what the page may change -----------------------------------------

  async function post(path, body) {
    try {
      const response = await fetch(path, {
        method: "POST",
        headers: { "Content-Type": "application/json", "X-Clowder-Csrf": csrf },
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
    const names = view.lanes.map((lane) => lane.name);
    if (!names.length) return;
    const next = Math.max(0, Math.min(names.length - 1, names.indexOf(shownLane) + step));
    showLane(names[next]);
  }

  // ---- start ----------------------------------------------------------------

  async function start() {
    try {
      const response = await fetch("/api/state");
      if (!response.ok) {
        flash(`Refused (${response.status}): open the address that \`clowder serve --http\` printed.`, true);
        setConnected(false);
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
  setInterval(tick, 1000);
  start();
})();
