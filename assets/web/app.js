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
  let view = { hosts: [], requests: [], plans: [] };
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
  let reachable = true; // false: the last try could not reach `clowder serve` at all
  let tab = "output"; // the lane's pane shown: "output" or "work"
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
    if (laneToShow !== null && lanes.has(laneToShow)) {
      showLane(laneToShow);
      laneToShow = null;
    }
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
    view = { hosts: part.hosts, requests: part.requests, plans: part.plans || [] };
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
    if (part.plans) view.plans = part.plans;
    for (const id of part.gone_events) events.delete(id);
    for (const event of part.events) events.set(event.id, event);
  }

  function draw(eventsChanged) {
    drawHosts();
    drawRequests();
    drawLanes();
    drawActions();
    drawPlans();
    markStaleWork();
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
    facts.append(el("span", "iteration"), el("span", "idle"), el("span", "cost"), el("span", "ahead"), el("span", "pending"), el("span", "stopping"), el("span", "ungated"));
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
    set(".stopping", lane.stop_pending ? "stops after this session" : "");
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
    $("#output-title").textContent = `Lane ${name}`;
    $("#output").replaceChildren();
    for (const row of document.querySelectorAll(".lane")) {
      row.classList.toggle("shown", row.dataset.lane === name);
    }
    actionsKey = "";
    drawActions();
    // What the host said of another lane goes, unless that lane went (a
    // removal's answer stays to be read).
    if (saidOf !== null && saidOf !== name && lanes.has(saidOf)) {
      $("#act-result").textContent = "";
      saidOf = null;
    }
    clearWork();
    if (tab === "work") loadWork();
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
    follow(address, controller).catch((error) => {
      // A fetch that throws (not an abort) reached no server at all.
      if (error && error.name !== "AbortError" && feed === controller) reachable = false;
    }).finally(() => {
      if (feed !== controller) return;
      setConnected(false);
      setTimeout(() => feed === controller && start(), 2000);
    });
  }

  async function follow(address, controller) {
    const response = await fetch(address, { headers: authorized({}), signal: controller.signal });
    reachable = true;
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
    if (!feedUp) text = reachable ? "reconnecting…" : "offline: cannot reach clowder serve";
    else if (gone.length) {
      const named = view.hosts.length > 1 ? ` ${gone.map((host) => host.name || "?").join(", ")}` : "";
      text = gone.every((host) => host.folder === null) ? `reaching host${named}…` : `host${named} gone, retrying`;
    }
    if (conn.textContent !== text) conn.textContent = text;
    conn.className = text === "live" ? "conn-up" : reachable ? "conn-down" : "conn-off";
  }

  function refused(status) {
    flash(`Refused (${status}): open the address that \`clowder serve --http\` printed, with its #token=.`, true);
  }

  // ---- what the page may change -----------------------------------------

  // A POST of the page: its answer `{ok, text}`, whatever went wrong said
  // in the same shape (a server that cannot be reached, an answer not JSON).
  async function send(path, body) {
    try {
      const response = await fetch(path, {
        method: "POST",
        headers: authorized({ "Content-Type": "application/json", "X-Clowder-Csrf": csrf }),
        body: JSON.stringify(body),
      });
      const answer = await response.json().catch(() => ({ ok: false, text: `HTTP ${response.status}` }));
      return { ok: response.ok && Boolean(answer.ok), text: String(answer.text || `HTTP ${response.status}`) };
    } catch (error) {
      return { ok: false, text: `not sent: cannot reach clowder serve (${error.message || error})` };
    }
  }

  // A GET of the API: `{ok, …}` as the server answered, or `{ok: false, text}`.
  async function getJson(path) {
    try {
      const response = await fetch(path, { headers: authorized({}) });
      const answer = await response.json().catch(() => ({ ok: false, text: `HTTP ${response.status}` }));
      if (!response.ok) return { ok: false, text: String(answer.text || `HTTP ${response.status}`) };
      return { ok: true, ...answer };
    } catch (error) {
      return { ok: false, text: "cannot reach clowder serve" };
    }
  }

  async function post(path, body) {
    const answer = await send(path, body);
    flash(answer.text, !answer.ok);
    return answer.ok;
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

  // ---- the shown lane's actions ---------------------------------------------

  // The room's actions on a lane, in its words, those that make sense in the
  // lane's state. `confirm` is what a second press does, for those that lose
  // work or cannot be undone: said in full, as the room's popups say it.
  function laneActions(lane) {
    const name = lane.name;
    const running = Boolean(lane.running);
    const actions = [];
    if (lane.base) {
      actions.push({ action: "merge", label: "Merge", confirm: `Merge ${name} into ${lane.base}?` });
      actions.push({ action: "push", label: "Push", confirm: `Push ${name}'s branch to its remote?` });
    }
    // The room's p resumes a held loop too; a lane paused between sessions
    // says so only in its state.
    if (lane.paused || lane.state === "held" || lane.state === "paused") actions.push({ action: "resume", label: "Resume" });
    else if (running && !lane.task) actions.push({ action: "pause", label: "Pause" });
    if (running && lane.task) {
      // A task lane stops through its task's state, as the room's s does it.
      actions.push({ action: "stop", label: "Stop the task" });
    } else if (running) {
      actions.push({ action: "stop", label: lane.stop_pending ? "Cancel stop" : "Stop after this session" });
      actions.push({ action: "stop_now", label: "Stop now", confirm: `Stop ${name} now, ending its session?` });
      const session = lane.iteration == null ? "the session" : `session ${lane.iteration}`;
      actions.push({ action: "kill", label: "Kill session", confirm: `Kill ${session} of ${name}?` });
    } else {
      actions.push({ action: "restart", label: "Run again" });
      actions.push({ action: "remove", label: "Remove", confirm: `Remove lane ${name}?` });
    }
    return actions;
  }

  let actionsKey = ""; // what the buttons were drawn for: redrawn only when it changes
  const inFlight = new Set(); // "lane action" sent and not yet answered

  function drawActions() {
    const lane = shownLane === null ? null : lanes.get(shownLane);
    const actions = lane ? laneActions(lane) : [];
    const key = JSON.stringify([shownLane, actions]);
    if (key === actionsKey) return;
    actionsKey = key;
    $("#lane-actions").replaceChildren(...actions.map((item) => actionButton(lane.name, item)));
  }

  // The first press of a risky action turns the button into its question;
  // the second one does it. Left alone, or Esc, it goes back.
  function actionButton(name, item) {
    const button = el("button", `act act-${item.action}`, item.label);
    button.type = "button";
    button.dataset.action = item.action;
    button.disabled = inFlight.has(`${name} ${item.action}`);
    if (item.confirm) button.classList.add("risky");
    let armed = null;
    const disarm = () => {
      clearTimeout(armed);
      armed = null;
      button.textContent = item.label;
      button.classList.remove("confirm");
    };
    button.addEventListener("click", () => {
      if (item.confirm && armed === null) {
        for (const other of document.querySelectorAll("#lane-actions .confirm")) other.dispatchEvent(new Event("disarm"));
        button.textContent = item.confirm;
        button.classList.add("confirm");
        armed = setTimeout(disarm, 8000);
        return;
      }
      disarm();
      act(name, item.action, button);
    });
    button.addEventListener("disarm", disarm);
    button.addEventListener("keydown", (event) => {
      if (event.key === "Escape" && armed !== null) {
        event.stopPropagation();
        disarm();
      }
    });
    return button;
  }

  async function act(name, action, button) {
    const key = `${name} ${action}`;
    inFlight.add(key);
    button.disabled = true;
    const answer = await send("/api/act", { lane: name, action });
    inFlight.delete(key);
    for (const same of document.querySelectorAll(`#lane-actions button[data-action="${action}"]`)) {
      if (shownLane === name) same.disabled = false;
    }
    said(answer, name);
    if (answer.ok && ["merge", "push", "restart"].includes(action) && tab === "work" && shownLane === name) loadWork();
  }

  // What the host answered, under the actions and in the flash: a refusal
  // is its reason, as it said it.
  let saidOf = null; // the lane the line under the actions speaks of

  function said(answer, name) {
    saidOf = name;
    const line = $("#act-result");
    line.textContent = answer.text;
    line.className = answer.ok ? "said-ok" : "said-error";
    flash(answer.text, !answer.ok);
  }

  // ---- the shown lane's panes: output, work ---------------------------------

  function showTab(name) {
    tab = name;
    for (const button of document.querySelectorAll("#lane-tabs [role=tab]")) {
      const chosen = button.dataset.tab === name;
      button.setAttribute("aria-selected", String(chosen));
      button.tabIndex = chosen ? 0 : -1;
    }
    $("#pane-output").hidden = name !== "output";
    $("#pane-work").hidden = name !== "work";
    if (name === "work" && (work === null || work.lane !== shownLane)) loadWork();
  }

  const FOLD = 200; // lines of a file's patch shown at first
  const MORE = 1000; // lines each "show more" adds
  let work = null; // { lane, data } shown in the Work pane
  let workAsked = 0; // only the last request's answer is drawn
  let file = null; // { index, lines, shown } of the file whose patch shows

  function clearWork() {
    work = null;
    file = null;
    workAsked += 1;
    $("#work-summary").textContent = "";
    $("#work-summary").className = "";
    $("#work-cut").hidden = true;
    $("#work-uncommitted").hidden = true;
    $("#work-chart").replaceChildren();
    $("#work-commits").replaceChildren();
    $("#work-commits-title").hidden = true;
    $("#work-stat-box").hidden = true;
    $("#work-files").hidden = true;
    $("#diff").replaceChildren();
  }

  async function loadWork() {
    const name = shownLane;
    if (name === null) return;
    workAsked += 1;
    const asked = workAsked;
    const summary = $("#work-summary");
    if (work === null) summary.textContent = `Reading the work of ${name}…`;
    const started = performance.now();
    const answer = await getJson(`/api/work?lane=${encodeURIComponent(name)}`);
    if (asked !== workAsked || name !== shownLane) return;
    const fetched = performance.now();
    if (!answer.ok) {
      clearWork();
      summary.textContent = answer.text;
      summary.className = "said-error";
      return;
    }
    const lane = lanes.get(name);
    work = { lane: name, data: answer.work, ahead: lane ? lane.ahead : undefined };
    drawWork();
    $("#work-refresh").textContent = "Refresh";
    $("#work-refresh").classList.remove("stale");
    // Reading a size makes the browser lay the pane out: the time includes it.
    void $("#pane-work").offsetHeight;
    const pane = $("#pane-work");
    pane.dataset.fetchMs = (fetched - started).toFixed(1);
    pane.dataset.renderMs = (performance.now() - fetched).toFixed(1);
    pane.dataset.lane = name;
  }

  // A lane that commits while its work is read: said on the Refresh button,
  // not redrawn under the reader.
  function markStaleWork() {
    if (work === null || work.lane !== shownLane) return;
    const lane = lanes.get(shownLane);
    if (!lane || lane.ahead === work.ahead) return;
    const button = $("#work-refresh");
    if (button.classList.contains("stale")) return;
    button.textContent = "Refresh: new commits";
    button.classList.add("stale");
  }

  function plural(count, word) {
    return `${count.toLocaleString("en")} ${word}${count === 1 ? "" : "s"}`;
  }

  function drawWork() {
    const data = work.data;
    const commits = data.commits || [];
    const files = data.files || [];
    const ahead = commits.length + (data.commits_more || 0);
    const summary = $("#work-summary");
    summary.className = "";
    summary.textContent =
      `${plural(ahead, "commit")} on ${data.branch} not in ${data.base} · ` +
      `${plural(files.length, "file")} · ${plural(data.lines || 0, "line")} of diff`;
    const cut = $("#work-cut");
    cut.hidden = !data.cut;
    cut.textContent = data.cut ? `⚠ Not all of it is shown: ${data.cut}` : "";
    const uncommitted = $("#work-uncommitted");
    uncommitted.hidden = !data.uncommitted;
    uncommitted.textContent = data.uncommitted
      ? `${plural(data.uncommitted, "file")} changed in the lane's worktree ${data.uncommitted === 1 ? "is" : "are"} not committed: a merge or a push leaves ${data.uncommitted === 1 ? "it" : "them"} out.`
      : "";
    $("#work-chart").replaceChildren(laneChart(data));
    drawCommits(commits, data.commits_more || 0);
    $("#work-stat-box").hidden = !data.stat;
    $("#work-stat").textContent = data.stat || "";
    const pick = $("#file-pick");
    pick.replaceChildren(
      ...files.map((each, index) => {
        const option = el("option", null, `${each.path} (+${each.added} −${each.removed})`);
        option.value = String(index);
        return option;
      }),
    );
    $("#work-files").hidden = files.length === 0;
    if (files.length) showFile(0);
  }

  function drawCommits(commits, more) {
    $("#work-commits-title").hidden = false;
    const rows = commits.map((commit) => {
      const row = el("li", "commit");
      const meta = el("span", "commit-meta");
      const sha = el("code", "sha", commit.sha);
      const time = el("time", null, `${duration(ageOf(commit.at))} ago`);
      time.dateTime = commit.at;
      meta.append(sha, ` · ${commit.author} · `, time);
      row.append(el("span", "commit-subject", commit.subject), meta);
      return row;
    });
    if (!commits.length) rows.push(el("li", "empty", "No commit ahead."));
    if (more) rows.push(el("li", "empty", `… and ${plural(more, "older commit")}`));
    $("#work-commits").replaceChildren(...rows);
  }

  // One file's patch at a time, folded: a 5,000-line diff puts 200 lines in
  // the DOM until more are asked for.
  function showFile(index) {
    const files = work.data.files;
    index = Math.max(0, Math.min(files.length - 1, index));
    const each = files[index];
    const lines = each.patch ? each.patch.split("\n") : [];
    if (lines.length && lines[lines.length - 1] === "") lines.pop();
    file = { index, lines, shown: 0 };
    $("#file-pick").value = String(index);
    $("#file-prev").disabled = index === 0;
    $("#file-next").disabled = index === files.length - 1;
    const facts = [`${each.path}`, `+${each.added} −${each.removed}`, `file ${index + 1} of ${files.length}`];
    if (each.binary) facts.push("binary: no patch to show");
    if (each.cut) facts.push("its patch is cut: see the note above");
    $("#file-head").textContent = facts.join(" · ");
    $("#diff").replaceChildren();
    $("#diff").scrollTop = 0;
    moreLines(FOLD);
  }

  function moreLines(count) {
    const box = $("#diff");
    const end = Math.min(file.lines.length, file.shown + count);
    const fragment = document.createDocumentFragment();
    for (let at = file.shown; at < end; at += 1) {
      const line = file.lines[at];
      const first = line.charAt(0);
      const kind = first === "+" ? "d-add" : first === "-" ? "d-del" : first === "@" ? "d-hunk" : first === "\\" ? "d-note" : "d-ctx";
      const row = document.createElement("div");
      row.className = `dl ${kind}`;
      row.textContent = line;
      fragment.append(row);
    }
    box.append(fragment);
    file.shown = end;
    const left = file.lines.length - end;
    const button = $("#diff-more");
    button.hidden = left === 0;
    button.textContent = left > MORE ? `Show ${MORE.toLocaleString("en")} more lines (${left.toLocaleString("en")} not shown)` : `Show ${plural(left, "more line")}`;
  }

  // ---- charts ----------------------------------------------------------------

  const SVG = "http://www.w3.org/2000/svg";
  const CHART_WIDTH = 600;
  const CHART_HEIGHT = 120;

  function svg(tag, attributes, className) {
    const node = document.createElementNS(SVG, tag);
    for (const [key, value] of Object.entries(attributes)) node.setAttribute(key, String(value));
    if (className) node.setAttribute("class", className);
    return node;
  }

  function money(usd) {
    return `$${Number(usd).toFixed(2)}`;
  }

  // Sessions (`at` their end, `label` what names one) as bars over time,
  // each as tall as its cost; rate-limit waits as shaded bands.
  function costChart(title, sessions, waits) {
    const figure = el("figure", "chart");
    const summary = costSummary(sessions, waits);
    const spans = sessions
      .map((session) => {
        const end = Date.parse(session.at);
        return { session, start: end - (session.duration_secs || 0) * 1000, end };
      })
      .filter((span) => Number.isFinite(span.end));
    const bands = waits
      .map((wait) => {
        const start = Date.parse(wait.at);
        return { wait, start, end: start + (wait.secs || 0) * 1000 };
      })
      .filter((band) => Number.isFinite(band.start));
    const times = spans.concat(bands).flatMap((span) => [span.start, span.end]);
    if (times.length) {
      // Some room either side, so that one short session is a bar in the
      // middle, not a line at the edge or the whole width.
      const span = Math.max(...times) - Math.min(...times);
      const pad = Math.max(span * 0.04, 30000);
      const first = Math.min(...times) - pad;
      const length = span + 2 * pad;
      const x = (at) => ((at - first) / length) * CHART_WIDTH;
      const narrowest = Math.min(10, (0.8 * CHART_WIDTH) / Math.max(1, spans.length));
      const picture = svg("svg", { viewBox: `0 0 ${CHART_WIDTH} ${CHART_HEIGHT}`, preserveAspectRatio: "none", role: "img", "aria-label": `${title}: ${summary}` }, "chart-svg");
      for (const band of bands) {
        const rect = svg("rect", { x: x(band.start), y: 0, width: Math.max(2, x(band.end) - x(band.start)), height: CHART_HEIGHT }, "rl-band");
        rect.append(svg("title", {}));
        rect.lastChild.textContent = `rate-limit wait of ${duration(band.wait.secs)} from ${clock(band.wait.at)}`;
        picture.append(rect);
      }
      const most = Math.max(0, ...sessions.map((session) => session.cost_usd || 0)) || 1;
      for (const span of spans) {
        const cost = span.session.cost_usd;
        const tall = cost == null ? 3 : Math.max(1.5, (cost / most) * (CHART_HEIGHT - 6));
        const wide = Math.max(narrowest, x(span.end) - x(span.start));
        const left = Math.min(CHART_WIDTH - wide, Math.max(0, (x(span.start) + x(span.end) - wide) / 2));
        const kind = cost == null ? "bar bar-unknown" : span.session.productive === false ? "bar bar-idle" : "bar";
        const rect = svg("rect", { x: left, y: CHART_HEIGHT - tall, width: wide, height: tall }, kind);
        rect.append(svg("title", {}));
        rect.lastChild.textContent = `${span.session.label}: ${cost == null ? "cost not reported" : money(cost)}, ${duration(span.session.duration_secs || 0)}, ended ${clock(span.session.at)}`;
        picture.append(rect);
      }
      picture.append(svg("line", { x1: 0, y1: CHART_HEIGHT - 0.5, x2: CHART_WIDTH, y2: CHART_HEIGHT - 0.5 }, "axis"));
      figure.append(picture);
    }
    const caption = el("figcaption", "chart-summary", summary);
    figure.append(caption);
    return figure;
  }

  // The chart's figures in words: what a screen reader says, and what a
  // glance at the chart gives.
  function costSummary(sessions, waits) {
    if (!sessions.length && !waits.length) return "No session has ended yet.";
    const known = sessions.filter((session) => session.cost_usd != null);
    let text = plural(sessions.length, "session");
    if (known.length) {
      const total = known.reduce((sum, session) => sum + session.cost_usd, 0);
      const top = known.reduce((best, session) => (session.cost_usd > best.cost_usd ? session : best));
      text += `, ${money(total)} in all, most ${money(top.cost_usd)} (${top.label})`;
    } else if (sessions.length) {
      text += ", cost not reported";
    }
    const waited = waits.reduce((sum, wait) => sum + (wait.secs || 0), 0);
    text += waits.length ? `; ${plural(waits.length, "rate-limit wait")}, ${duration(waited)} in all` : "; no rate-limit wait";
    return text;
  }

  // A table a screen reader can walk, out of sight: the same figures.
  function figuresTable(caption, head, rows) {
    const table = el("table", "visually-hidden");
    table.append(el("caption", null, caption));
    const top = el("tr");
    for (const name of head) top.append(el("th", null, name));
    const header = el("thead");
    header.append(top);
    const body = el("tbody");
    for (const cells of rows) {
      const row = el("tr");
      for (const cell of cells) row.append(el("td", null, cell));
      body.append(row);
    }
    table.append(header, body);
    return table;
  }

  function laneChart(data) {
    const sessions = (data.sessions || []).map((session) => ({ ...session, label: `session ${session.iteration}` }));
    const waits = data.rate_limits || [];
    const box = el("div", "lane-chart");
    box.append(el("h3", null, "Cost per session"), costChart(`Cost per session of ${data.lane}`, sessions, waits));
    box.append(
      figuresTable(
        `Sessions of ${data.lane}`,
        ["Session", "Ended", "Cost", "Duration", "Productive"],
        sessions.map((s) => [String(s.iteration), clock(s.at), s.cost_usd == null ? "not reported" : money(s.cost_usd), duration(s.duration_secs || 0), s.productive === false ? "no" : "yes"]),
      ),
      figuresTable(
        `Rate-limit waits of ${data.lane}`,
        ["Started", "Length"],
        waits.map((wait) => [clock(wait.at), duration(wait.secs || 0)]),
      ),
    );
    return box;
  }

  // ---- the fleet's cost -------------------------------------------------------

  let costTimer = null;

  async function loadChart() {
    if (document.hidden || !$("#cost").open) return;
    const answer = await getJson("/api/chart");
    const box = $("#fleet-chart");
    if (!answer.ok) {
      // The last chart stays; what went wrong is said under it.
      const error = box.querySelector(".chart-error") || el("p", "chart-error said-error");
      error.textContent = `Not refreshed: ${answer.text}`;
      box.append(error);
      return;
    }
    const sessions = (answer.sessions || []).map((session) => ({ ...session, label: session.iteration ? `${session.lane} session ${session.iteration}` : `${session.lane}, ended ${clock(session.at)}` }));
    const waits = answer.rate_limits || [];
    const byLane = new Map();
    for (const session of sessions) {
      const sum = byLane.get(session.lane) || { sessions: 0, cost: 0, waits: 0, known: false };
      sum.sessions += 1;
      sum.cost += session.cost_usd || 0;
      sum.known = sum.known || session.cost_usd != null;
      byLane.set(session.lane, sum);
    }
    for (const wait of waits) {
      const sum = byLane.get(wait.lane) || { sessions: 0, cost: 0, waits: 0, known: false };
      sum.waits += 1;
      byLane.set(wait.lane, sum);
    }
    const ranked = [...byLane].sort((a, b) => b[1].cost - a[1].cost);
    const lanesLine = el("p", "chart-lanes");
    lanesLine.textContent = ranked.length
      ? `${plural(ranked.length, "lane")}: ` + ranked.slice(0, 6).map(([lane, sum]) => `${lane} ${sum.known ? money(sum.cost) : "cost not reported"}`).join(" · ") + (ranked.length > 6 ? " · …" : "")
      : "";
    box.replaceChildren(
      costChart("Cost per session of the fleet", sessions, waits),
      lanesLine,
      figuresTable(
        "Cost of the fleet per lane",
        ["Lane", "Sessions", "Cost", "Rate-limit waits"],
        ranked.map(([lane, sum]) => [lane, String(sum.sessions), sum.known ? money(sum.cost) : "not reported", String(sum.waits)]),
      ),
    );
    box.dataset.loaded = String(Date.now());
  }

  function costToggled() {
    clearInterval(costTimer);
    costTimer = null;
    if (!$("#cost").open) return;
    loadChart();
    costTimer = setInterval(loadChart, 30000);
  }

  // ---- plans -------------------------------------------------------------------

  const STEP_GLYPHS = {
    pending: "·",
    "waiting for approval": "⏸",
    ready: "○",
    running: "▶",
    done: "✓",
    failed: "✗",
    blocked: "⊘",
    merged: "✔",
    "needs review": "⚑",
  };
  let plansKey = "";
  const planAnswers = new Map(); // plan address -> the host's answer to a retry

  function drawPlans() {
    const plans = view.plans || [];
    const key = JSON.stringify([plans, [...planAnswers]]);
    if (key === plansKey) return;
    plansKey = key;
    $("#plans-pane").hidden = plans.length === 0;
    $("#plans").replaceChildren(...plans.map(planCard));
  }

  // Steps in the plan's order (its merge order), each indented below the
  // steps it waits for.
  function planCard(plan) {
    const card = el("div", `plan plan-${String(plan.status).replace(/ /g, "-")}`);
    card.dataset.plan = plan.address;
    const head = el("div", "plan-head");
    head.append(el("span", "plan-name", plan.name), el("span", "plan-status", plan.status));
    if (plan.base) head.append(el("span", "plan-base", `onto ${plan.base}`));
    if (plan.host) head.append(el("span", "plan-host", `on ${plan.host}`));
    if (plan.status === "failed") {
      const retry = el("button", "plan-retry", "Retry");
      retry.type = "button";
      retry.title = "Start its failed and blocked steps again from fresh branches";
      retry.addEventListener("click", () => retryPlan(plan.address, retry));
      head.append(retry);
    }
    card.append(head);
    const depth = new Map();
    const ids = new Map(plan.steps.map((step) => [step.id, step]));
    const depthOf = (step, seen) => {
      if (depth.has(step.id)) return depth.get(step.id);
      if (seen.has(step.id)) return 0;
      seen.add(step.id);
      const below = (step.depends_on || []).map((id) => (ids.has(id) ? depthOf(ids.get(id), seen) + 1 : 0));
      const found = Math.max(0, ...below);
      depth.set(step.id, found);
      return found;
    };
    const steps = el("ol", "steps");
    plan.steps.forEach((step, index) => {
      const state = String(step.state);
      const row = el("li", `step step-${state.replace(/ /g, "-")} depth-${Math.min(6, depthOf(step, new Set()))}`);
      row.dataset.step = step.id;
      row.append(
        el("span", "step-glyph", STEP_GLYPHS[state] || "·"),
        el("span", "step-order", `${index + 1}.`),
        el("span", "step-id", step.id),
        el("span", "step-state", state),
      );
      if (step.depends_on && step.depends_on.length) row.append(el("span", "step-after", `after ${step.depends_on.join(", ")}`));
      if (step.lane && lanes.has(step.lane)) {
        const go = el("button", "step-lane", step.lane);
        go.type = "button";
        go.title = `Show lane ${step.lane}`;
        go.addEventListener("click", () => showLane(step.lane));
        row.append(go);
      }
      steps.append(row);
    });
    card.append(steps);
    const answer = planAnswers.get(plan.address);
    if (answer) card.append(el("p", `plan-said ${answer.ok ? "said-ok" : "said-error"}`, answer.text));
    return card;
  }

  async function retryPlan(address, button) {
    button.disabled = true;
    const answer = await send("/api/plans/retry", { plan: address });
    button.disabled = false;
    planAnswers.set(address, answer);
    flash(answer.text, !answer.ok);
    drawPlans();
  }

  // ---- a new lane -------------------------------------------------------------------

  let laneToShow = null; // a lane added here, shown once the view has it

  function openNewLane(open) {
    $("#new-lane").hidden = !open;
    $("#new-lane-open").setAttribute("aria-expanded", String(open));
    if (!open) return;
    fillHosts();
    $("#new-name").focus();
  }

  function fillHosts() {
    const several = view.hosts.length > 1;
    $("#new-host-label").hidden = !several;
    const select = $("#new-host");
    const chosen = select.value;
    select.replaceChildren(
      ...view.hosts
        .filter((host) => host.name)
        .map((host) => {
          const option = el("option", null, host.lost ? `${host.name} (unreachable)` : host.name);
          option.value = host.name;
          return option;
        }),
    );
    if (chosen) select.value = chosen;
  }

  async function addLane(event) {
    event.preventDefault();
    const error = $("#new-lane-error");
    const name = $("#new-name").value.trim();
    const prompt = $("#new-prompt").value;
    const promptFile = $("#new-prompt-file").value.trim();
    const base = $("#new-base").value.trim();
    if (!name) {
      error.textContent = "Give the lane a name.";
      $("#new-name").focus();
      return;
    }
    if (prompt.trim() && promptFile) {
      error.textContent = "Give a prompt or a prompt file, not both.";
      return;
    }
    const several = view.hosts.length > 1;
    const body = {
      name,
      prompt: prompt.trim() ? prompt : null,
      prompt_file: promptFile || null,
      base: base || null,
      host: several ? $("#new-host").value || null : null,
    };
    const button = $("#new-lane-add");
    button.disabled = true;
    error.textContent = "";
    const answer = await send("/api/lanes", body);
    button.disabled = false;
    if (!answer.ok) {
      // What was typed stays, to be mended and sent again.
      error.textContent = answer.text;
      return;
    }
    $("#new-lane").reset();
    openNewLane(false);
    flash(answer.text || `Lane ${name} added.`, false);
    laneToShow = several && body.host ? `${body.host}/${name}` : name;
    if (lanes.has(laneToShow)) showLane(laneToShow);
    else if (lanes.has(name)) showLane(name);
  }

  // ---- keys ---------------------------------------------------------------

  function onKey(event) {
    const typing = ["INPUT", "TEXTAREA", "SELECT"].includes(event.target.tagName);
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
      case "o":
        showTab("output");
        break;
      case "w":
        showTab("work");
        break;
      case "n":
        openNewLane(true);
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
      reachable = true;
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
      // What the page shows stays: it is the last the server said.
      reachable = false;
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
  for (const button of document.querySelectorAll("#lane-tabs [role=tab]")) {
    button.addEventListener("click", () => showTab(button.dataset.tab));
    button.addEventListener("keydown", (event) => {
      if (event.key !== "ArrowLeft" && event.key !== "ArrowRight") return;
      event.preventDefault();
      const next = tab === "output" ? "work" : "output";
      showTab(next);
      $(`#tab-${next}`).focus();
    });
  }
  $("#work-refresh").addEventListener("click", loadWork);
  $("#file-pick").addEventListener("change", (event) => showFile(Number(event.target.value)));
  $("#file-prev").addEventListener("click", () => file && showFile(file.index - 1));
  $("#file-next").addEventListener("click", () => file && showFile(file.index + 1));
  $("#diff-more").addEventListener("click", () => file && moreLines(MORE));
  $("#cost").addEventListener("toggle", costToggled);
  $("#new-lane-open").addEventListener("click", () => openNewLane($("#new-lane").hidden));
  $("#new-lane-cancel").addEventListener("click", () => openNewLane(false));
  $("#new-lane").addEventListener("submit", addLane);
  // Installed, the page opens without its server and says it cannot reach
  // it. Only a secure context has a service worker: a page over plain http
  // from another machine goes without.
  if ("serviceWorker" in navigator) navigator.serviceWorker.register("/sw.js").catch(() => {});
  window.addEventListener("resize", drawLanesSoon);
  setInterval(tick, 1000);
  start();
})();
