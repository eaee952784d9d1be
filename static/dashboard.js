// Live dashboard: one websocket (jittered reconnect), batches acknowledged so the server
// can tell a stalled tab; prices and charts update in place; other panels are
// re-rendered by the server (/dashboard/panels/<name>/) when a pushed event says they
// changed. After a reconnect every panel is re-synced from the server (pushes of the gap
// are lost: a web process restarted, or the network dropped). Numbers stay the server's
// exact strings; Number() is for drawing only.
(function () {
  "use strict";
  const badge = document.getElementById("connection");
  const body = document.querySelector("#prices tbody");
  const charts = new Map(); // "feed|symbol" -> chart state
  const LW = window.LightweightCharts;
  const INDICATOR_COLORS = ["#f5a623", "#b47cff", "#4dd0e1", "#ff7eb6", "#9ccc65"];
  // Output values drawn as lines on the price chart: ema's fast/slow, volume_breakout's
  // bar high/low; open/close/volume would only repeat the price line.
  const INDICATOR_NAMES = new Set(["fast", "slow", "high", "low"]);
  let attempt = 0;

  function setState(state, text) {
    if (!badge) return;
    badge.dataset.state = state;
    badge.textContent = text;
    badge.className = "badge badge-" + (state === "live" ? "ok" : state === "closed" ? "bad" : "wait");
  }

  // ---- charts -------------------------------------------------------------------
  function chartFor(feed, symbol) {
    const key = feed + "|" + symbol;
    if (charts.has(key)) return charts.get(key);
    const card = document.querySelector(`.chart-card[data-feed="${CSS.escape(feed)}"][data-symbol="${CSS.escape(symbol)}"]`);
    if (!card || !LW) return null;
    const box = card.querySelector(".chart");
    const chart = LW.createChart(box, {
      height: 220,
      autoSize: true,
      layout: { background: { color: "#161d26" }, textColor: "#8393a5", attributionLogo: true },
      grid: { vertLines: { color: "#1f2935" }, horzLines: { color: "#1f2935" } },
      timeScale: { timeVisible: true, secondsVisible: true, borderColor: "#263241" },
      rightPriceScale: { borderColor: "#263241" },
    });
    const price = chart.addSeries(LW.LineSeries, { color: "#4da3ff", lineWidth: 2, priceLineVisible: true, title: symbol });
    const state = { key, box, chart, price, markersApi: LW.createSeriesMarkers(price, []), markers: [], lines: new Map(), lastTime: 0, points: 0 };
    charts.set(key, state);
    return state;
  }

  function monotonic(state, seconds) {
    // The chart needs non-decreasing times; conflated pushes can share a second.
    const t = Math.max(state.lastTime, Math.floor(seconds));
    state.lastTime = t;
    return t;
  }

  function addPricePoint(state, seconds, value) {
    state.price.update({ time: monotonic(state, seconds), value: Number(value) });
    state.points += 1;
    state.box.dataset.points = String(state.points);
  }

  function applyOutput(row) {
    const state = chartFor(row.feed, row.symbol);
    if (!state) return;
    Object.keys(row.values).filter((name) => INDICATOR_NAMES.has(name)).forEach((name) => {
      const value = row.values[name];
      if (value === null || value === undefined || value === "") return;
      const lineKey = row.strategy + ":" + name;
      let line = state.lines.get(lineKey);
      if (!line) {
        line = { series: state.chart.addSeries(LW.LineSeries, { color: INDICATOR_COLORS[state.lines.size % INDICATOR_COLORS.length], lineWidth: 1, title: `${row.strategy} ${name}`, priceLineVisible: false, lastValueVisible: false }), last: 0 };
        state.lines.set(lineKey, line);
      }
      const t = Math.max(line.last, Math.floor(row.occurrence_time_ms / 1000));
      line.last = t;
      line.series.update({ time: t, value: Number(value) });
    });
  }

  // ---- signals and their outcomes -------------------------------------------------
  // A signal is (strategy, output, kind): a reversal emits two signals from one output.
  // Its outcomes (one per account) may arrive before or after the signal itself.
  const signals = new Map(); // signal key -> { signal, outcomes: Map(account -> outcome) }
  const SIGNALS_KEPT = 2000;
  function signalKey(row) { return `${row.strategy_id}|${row.output_id}|${row.kind}`; }
  function signalEntry(row) {
    const key = signalKey(row);
    let entry = signals.get(key);
    if (!entry) {
      entry = { key, link: { strategy_id: row.strategy_id, output_id: row.output_id, kind: row.kind }, signal: null, outcomes: new Map() };
      signals.set(key, entry);
      if (signals.size > SIGNALS_KEPT) signals.delete(signals.keys().next().value);
    }
    return entry;
  }
  function accountKey(outcome) { return outcome.account === null ? "" : String(outcome.account); }
  function outcomeState(outcome) {
    return outcome.traded ? "traded" : outcome.settled ? "not-traded" : "pending";
  }
  // One summary per signal for its marker: traded on any account wins, then still pending.
  function signalState(entry) {
    const states = [...entry.outcomes.values()].map(outcomeState);
    if (states.includes("traded")) return "traded";
    if (!states.length || states.includes("pending")) return "pending";
    return "not-traded";
  }

  function markerFor(entry) {
    const signal = entry.signal;
    const entryKind = signal.kind.startsWith("ENTRY");
    const long = signal.kind.endsWith("LONG");
    const label = signal.kind.replace("_", " ").toLowerCase();
    const state = signalState(entry);
    const marker = { position: entryKind === long ? "belowBar" : "aboveBar", id: entry.key, state };
    if (state === "traded") {
      return { ...marker, shape: entryKind === long ? "arrowUp" : "arrowDown", color: entryKind ? "#2fbf71" : "#ef5350", text: label };
    }
    if (state === "pending") return { ...marker, shape: "square", color: "#e0c050", text: `${label} (pending)` };
    const first = [...entry.outcomes.values()][0];
    const why = first.reason || first.outcome_label;
    return { ...marker, shape: "circle", color: "#8393a5", text: `${label}: not traded, ${why.length > 40 ? why.slice(0, 39) + "…" : why}` };
  }

  function drawMarkers(state) {
    state.markersApi.setMarkers(state.markers.map(({ state: _s, ...marker }) => marker));
    state.box.dataset.markers = String(state.markers.length);
    for (const name of ["traded", "not-traded", "pending"]) {
      state.box.dataset[{ traded: "markersTraded", "not-traded": "markersNotTraded", pending: "markersPending" }[name]] =
        String(state.markers.filter((m) => m.state === name).length);
    }
  }

  function applySignalMarker(signal) {
    const state = chartFor(signal.feed, signal.symbol);
    if (!state) return;
    const entry = signalEntry(signal);
    entry.signal = signal;
    if (state.markers.some((m) => m.id === entry.key)) return;
    // The marker needs a bar at its time: put the signal's own price there.
    const seconds = signal.occurrence_time_ms / 1000;
    if (Math.floor(seconds) >= state.lastTime) addPricePoint(state, seconds, signal.price);
    state.markers.push({ time: Math.min(state.lastTime, Math.floor(seconds)), ...markerFor(entry) });
    state.markers.sort((a, b) => a.time - b.time);
    if (state.markers.length > 200) state.markers.splice(0, state.markers.length - 200);
    drawMarkers(state);
  }

  function redrawSignalMarker(entry) {
    if (!entry.signal) return;
    const state = chartFor(entry.signal.feed, entry.signal.symbol);
    const index = state ? state.markers.findIndex((m) => m.id === entry.key) : -1;
    if (index < 0) return;
    state.markers[index] = { time: state.markers[index].time, ...markerFor(entry) };
    drawMarkers(state);
  }

  // ---- prices table -------------------------------------------------------------
  function rowFor(update) {
    let row = body.querySelector(`tr[data-feed="${CSS.escape(update.feed)}"][data-symbol="${CSS.escape(update.symbol)}"]`);
    if (!row) {
      const empty = body.querySelector("tr.empty");
      if (empty) empty.remove();
      row = document.createElement("tr");
      row.dataset.feed = update.feed;
      row.dataset.symbol = update.symbol;
      for (const cls of ["sym", "feed", "num price", "num change", "num volume", "num ticks", "time"]) {
        const cell = document.createElement("td");
        cell.className = cls;
        row.appendChild(cell);
      }
      row.children[0].textContent = update.symbol;
      row.children[1].textContent = update.feed;
      body.appendChild(row);
    }
    return row;
  }

  function applyPrice(update) {
    const row = rowFor(update);
    const priceCell = row.querySelector(".price");
    const previous = priceCell.textContent;
    priceCell.textContent = update.price;
    const change = (Number(update.price) / Number(update.open) - 1) * 100;
    const changeCell = row.querySelector(".change");
    changeCell.textContent = (change >= 0 ? "+" : "") + change.toFixed(2) + "%";
    changeCell.classList.toggle("up", change > 0);
    changeCell.classList.toggle("down", change < 0);
    row.querySelector(".volume").textContent = update.volume;
    row.querySelector(".ticks").textContent = update.ticks;
    row.querySelector(".time").textContent = window.siteTime.clock(update.ts_ms, { millis: true });
    if (previous !== update.price) {
      row.classList.remove("flash");
      void row.offsetWidth;
      row.classList.add("flash");
    }
    const state = chartFor(update.feed, update.symbol);
    if (state) addPricePoint(state, update.ts_ms / 1000, update.price);
    markPositions(update);
  }

  // ---- live mark-to-market of open positions ---------------------------------------
  // Exact like the server: decimal strings to fixed-point BigInt (x 10^SCALE_DIGITS,
  // the server's feeds.market.SCALE_DIGITS), notional rounded half-even once, as
  // orders.money.notional does. The server sends at most SCALE_DIGITS places.
  const SCALE_DIGITS = 12;
  const SCALE = 10n ** BigInt(SCALE_DIGITS);
  function toFixed(text) {
    const negative = text.startsWith("-");
    const [whole, frac = ""] = text.replace(/^[-+]/, "").split(".");
    const value = BigInt(whole || "0") * SCALE + BigInt(frac.padEnd(SCALE_DIGITS, "0").slice(0, SCALE_DIGITS));
    return negative ? -value : value;
  }
  function fixedToText(value) {
    const negative = value < 0n;
    const abs = negative ? -value : value;
    const frac = (abs % SCALE).toString().padStart(SCALE_DIGITS, "0").replace(/0+$/, "");
    return (negative ? "-" : "") + (abs / SCALE).toString() + (frac ? "." + frac : "");
  }
  function divideHalfEven(numerator, divisor) {
    const negative = numerator < 0n;
    const abs = negative ? -numerator : numerator;
    let quotient = abs / divisor;
    const twice = 2n * (abs % divisor);
    if (twice > divisor || (twice === divisor && quotient % 2n === 1n)) quotient += 1n;
    return negative ? -quotient : quotient;
  }
  function markPositions(update) {
    const rows = document.querySelectorAll(`#positions tr[data-feed="${CSS.escape(update.feed)}"][data-symbol="${CSS.escape(update.symbol)}"]`);
    rows.forEach((row) => {
      const value = divideHalfEven(toFixed(row.dataset.quantity) * toFixed(update.price) * toFixed(row.dataset.multiplier), SCALE * SCALE);
      let pnl = value - toFixed(row.dataset.cost);
      if (row.dataset.side === "SHORT") pnl = -pnl;
      row.querySelector(".last").textContent = update.price;
      const cell = row.querySelector(".unrealized");
      cell.textContent = fixedToText(pnl);
      cell.classList.toggle("up", pnl > 0n);
      cell.classList.toggle("down", pnl < 0n);
    });
  }

  // ---- signals table ------------------------------------------------------------
  function signalRowFor(row) {
    return document.querySelector(
      `#signals tbody tr[data-signal="${CSS.escape(row.output_id)}"][data-kind="${CSS.escape(row.kind)}"][data-strategy="${CSS.escape(String(row.strategy_id))}"]`
    );
  }

  function outcomeBadge(outcome) {
    const badge = document.createElement("span");
    badge.className = "outcome " + outcomeState(outcome);
    badge.dataset.outcome = outcome.outcome;
    badge.dataset.account = accountKey(outcome);
    badge.title = (outcome.account_name ? outcome.account_name + ": " : "") + (outcome.reason || outcome.outcome_label);
    badge.textContent = outcome.outcome_label;
    if (outcome.client_order_id) {
      const code = document.createElement("code");
      code.className = "order-id";
      code.textContent = outcome.client_order_id;
      badge.append(" ", code);
    }
    return badge;
  }

  // Replace this account's badge (or the "pending" placeholder); other accounts' badges,
  // server-rendered or pushed, stay.
  function renderOutcome(entry, outcome) {
    const row = signalRowFor(entry.link);
    const cell = row && row.querySelector(".outcomes");
    if (!cell) return;
    cell.querySelectorAll('.outcome[data-outcome=""]').forEach((placeholder) => placeholder.remove());
    const badge = outcomeBadge(outcome);
    const previous = [...cell.querySelectorAll(".outcome")].find((b) => b.dataset.account === accountKey(outcome));
    if (previous) previous.replaceWith(badge);
    else cell.appendChild(badge);
  }

  function applySignalRow(signal) {
    const table = document.querySelector("#signals tbody");
    if (!table || signalRowFor(signal)) return;
    const empty = table.querySelector("tr.empty");
    if (empty) empty.remove();
    const row = document.createElement("tr");
    row.dataset.signal = signal.output_id;
    row.dataset.kind = signal.kind;
    row.dataset.strategy = String(signal.strategy_id);
    row.className = "new";
    const cells = [window.siteTime.clock(signal.emitted_ms), signal.strategy, signal.symbol, null, signal.price];
    cells.forEach((text, i) => {
      const cell = document.createElement("td");
      if (i === 0) cell.className = "time";
      if (i === 4) cell.className = "num";
      if (text === null) {
        const tag = document.createElement("span");
        tag.className = "signal-kind " + signal.kind.toLowerCase();
        tag.textContent = signal.kind;
        cell.appendChild(tag);
      } else cell.textContent = text;
      row.appendChild(cell);
    });
    const outcomes = document.createElement("td");
    outcomes.className = "outcomes";
    outcomes.appendChild(outcomeBadge({ outcome: "", outcome_label: "pending", reason: "No outcome recorded yet", account: null, settled: false, traded: false }));
    row.appendChild(outcomes);
    table.prepend(row);
    while (table.children.length > 50) table.lastElementChild.remove();
    const entry = signalEntry(signal);
    entry.outcomes.forEach((outcome) => renderOutcome(entry, outcome));
  }

  function applySignal(signal) {
    signalEntry(signal).signal = signal;
    applySignalRow(signal);
    applySignalMarker(signal);
  }

  // A pushed outcome (orders.outcomes): the latest decision per (signal, account) wins.
  function applyOutcome(outcome) {
    const entry = signalEntry(outcome);
    entry.outcomes.set(accountKey(outcome), outcome);
    renderOutcome(entry, outcome);
    redrawSignalMarker(entry);
  }

  // A stored signal with its outcomes (the page's, or the prices panel's after a reconnect).
  function applyStoredSignal(signal) {
    const entry = signalEntry(signal);
    entry.signal = signal;
    signal.outcomes.forEach((outcome) => entry.outcomes.set(accountKey(outcome), outcome));
    applySignalMarker(signal);
    redrawSignalMarker(entry);
  }

  // Markers as they were before a reload: the page carries recent signals with their outcomes.
  function drawInitialSignals() {
    const script = document.getElementById("chart-signals");
    if (!script) return;
    JSON.parse(script.textContent).forEach(applyStoredSignal);
  }

  // ---- server-rendered panels ---------------------------------------------------
  const refreshTimers = new Map();
  function fetchPanel(name) {
    return fetch(`/dashboard/panels/${name}/`, { credentials: "same-origin", headers: { Accept: "text/html" } });
  }
  async function loadPanel(section) {
    const response = await fetchPanel(section.dataset.panel);
    if (!response.ok) throw new Error(`panel ${section.dataset.panel}: HTTP ${response.status}`);
    section.innerHTML = await response.text();
    section.dataset.refreshed = String(Number(section.dataset.refreshed || 0) + 1);
  }
  function refreshPanel(section) {
    const name = section.dataset.panel;
    if (refreshTimers.has(name)) return; // at most one refresh per panel per second
    refreshTimers.set(name, setTimeout(() => {
      refreshTimers.delete(name);
      loadPanel(section).catch(() => {});
    }, 1000));
  }

  // ---- re-sync after a reconnect --------------------------------------------------
  // What was pushed while the socket was down is gone: re-render every server-rendered
  // panel (signals with their outcomes, orders, positions, accounts, controls, health),
  // and redraw the charts' signal markers from the prices panel's stored signals. The
  // prices panel itself stays (it is live state); its next push brings each price.
  async function resyncCharts() {
    const response = await fetchPanel("prices");
    if (!response.ok) throw new Error(`panel prices: HTTP ${response.status}`);
    const html = new DOMParser().parseFromString(await response.text(), "text/html");
    const script = html.getElementById("chart-signals");
    if (script) JSON.parse(script.textContent).forEach(applyStoredSignal);
  }
  async function resync() {
    const sections = [...document.querySelectorAll("[data-panel]")].filter((s) => s.dataset.panel !== "prices");
    const results = await Promise.allSettled([...sections.map(loadPanel), resyncCharts()]);
    const failed = results.filter((r) => r.status === "rejected").length;
    // Read by the browser tests; a failed part is retried on the next reconnect.
    document.body.dataset.resyncs = String(Number(document.body.dataset.resyncs || 0) + 1);
    document.body.dataset.resyncFailed = String(failed);
  }
  function refreshPanelsFor(type) {
    document.querySelectorAll("[data-refresh-on]").forEach((section) => {
      if (section.dataset.refreshOn.split(" ").includes(type)) refreshPanel(section);
    });
  }
  document.querySelectorAll("[data-refresh-every]").forEach((section) => {
    setInterval(() => refreshPanel(section), Number(section.dataset.refreshEvery) * 1000);
  });

  // ---- controls: confirm, then POST -----------------------------------------------
  const dialog = document.getElementById("confirm-dialog");
  document.addEventListener("submit", (event) => {
    const form = event.target.closest("form.control");
    if (!form || !dialog) return;
    event.preventDefault();
    dialog.querySelector(".question").textContent = form.dataset.confirm;
    dialog.querySelector("input[name=reason]").value = "";
    dialog.onclose = async () => {
      if (dialog.returnValue !== "confirm") return;
      const data = new FormData(form);
      data.set("confirm", "yes");
      data.set("reason", dialog.querySelector("input[name=reason]").value);
      const response = await fetch(form.action, {
        method: "POST", body: data, credentials: "same-origin",
        headers: { Accept: "application/json", "X-CSRFToken": data.get("csrfmiddlewaretoken") || "" },
      });
      const result = await response.json().catch(() => ({ ok: false, message: `HTTP ${response.status}` }));
      toast(result.message, result.ok);
      const section = form.closest("[data-panel]");
      if (section) refreshPanel(section);
      if ([...form.classList].some((c) => c.startsWith("kill-"))) refreshPanelsFor("dashboard.controls");
    };
    dialog.showModal();
  }, true);

  function toast(text, ok) {
    const note = document.createElement("p");
    note.className = "toast " + (ok ? "ok" : "bad");
    note.textContent = text;
    document.body.appendChild(note);
    setTimeout(() => note.remove(), 4000);
  }

  // ---- socket ---------------------------------------------------------------------
  let opened = 0;
  let goingAway = false;
  function connect() {
    const scheme = location.protocol === "https:" ? "wss" : "ws";
    const socket = new WebSocket(`${scheme}://${location.host}/ws/dashboard/`);
    let acked = 0;
    socket.onopen = () => {
      attempt = 0;
      goingAway = false;
      opened += 1;
      setState("live", "live");
      if (opened > 1) resync();
      // Other panels (static/recovery.js) listen to the socket through DOM events.
      window.dispatchEvent(new CustomEvent("dashboard:open"));
    };
    socket.onmessage = (message) => {
      const event = JSON.parse(message.data);
      try {
        window.dispatchEvent(new CustomEvent("dashboard:message", { detail: event }));
        if (event.type === "prices") event.prices.forEach(applyPrice);
        else if (event.type === "strategy.output") event.outputs.forEach(applyOutput);
        else if (event.type === "strategy.signal") event.signals.forEach(applySignal);
        else if (event.type === "signal.outcome") applyOutcome(event);
        else refreshPanelsFor(event.type);
      } finally {
        // Acknowledge each batch once handled: the server stops a tab that never does.
        if (event.seq && event.seq > acked && socket.readyState === WebSocket.OPEN) {
          acked = event.seq;
          socket.send(JSON.stringify({ type: "ack", seq: acked }));
        }
      }
    };
    socket.onclose = (event) => {
      if (event.code === 4401) { setState("closed", "logged out"); location.reload(); return; }
      attempt += 1;
      // 1001: the web process is restarting (the proxy routes the next socket to another
      // one, or it is back within seconds): keep retrying every few seconds instead of
      // backing off to half a minute, so the page is live and re-synced soon after.
      if (event.code === 1001) goingAway = true;
      const delay = Math.random() * Math.min(goingAway ? 4000 : 30000, 500 * 2 ** attempt);
      setState("wait", `reconnecting in ${(delay / 1000).toFixed(1)}s`);
      setTimeout(connect, delay);
    };
  }
  if (!LW) setState("closed", "chart library missing: run npm ci");
  else drawInitialSignals();
  connect();
})();
