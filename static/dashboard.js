// Live dashboard: one websocket (jittered reconnect), batches acknowledged so the server
// can tell a stalled tab; prices update in place (the charts are static/charts.js, fed
// by the "dashboard:message" events dispatched here); other panels are
// re-rendered by the server (/dashboard/panels/<name>/) when a pushed event says they
// changed. After a reconnect every panel is re-synced from the server (pushes of the gap
// are lost: a web process restarted, or the network dropped). Numbers stay the server's
// exact strings; Number() is for drawing only.
(function () {
  "use strict";
  const badge = document.getElementById("connection");
  const body = document.querySelector("#prices tbody");
  const LW = window.LightweightCharts;
  let attempt = 0;

  function setState(state, text) {
    if (!badge) return;
    badge.dataset.state = state;
    badge.textContent = text;
    badge.className = "badge badge-" + (state === "live" ? "ok" : state === "closed" ? "bad" : "wait");
  }

  // ---- signals and their outcomes (the table; static/charts.js draws the markers) -------
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
  }

  // A pushed outcome (orders.outcomes): the latest decision per (signal, account) wins.
  function applyOutcome(outcome) {
    const entry = signalEntry(outcome);
    entry.outcomes.set(accountKey(outcome), outcome);
    renderOutcome(entry, outcome);
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
  // panel (signals with their outcomes, orders, positions, accounts, controls, health).
  // The prices panel itself stays (it is live state); its next push brings each price,
  // and static/charts.js reloads the charts' history and markers on the same event.
  async function resync() {
    const sections = [...document.querySelectorAll("[data-panel]")].filter((s) => s.dataset.panel !== "prices");
    const results = await Promise.allSettled(sections.map(loadPanel));
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
  connect();
})();
