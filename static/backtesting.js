// Backtest pages: live progress over ws/backtests/ (jittered reconnect, the state re-read
// after each connect), the report's equity curve and candles with fill markers, the pick
// of two runs to compare. Money stays the server's exact strings; Number() is for drawing.
(function () {
  "use strict";
  const LW = window.LightweightCharts;
  const CHART_OPTIONS = {
    autoSize: true,
    layout: { background: { color: "#161d26" }, textColor: "#8393a5", attributionLogo: true },
    grid: { vertLines: { color: "#1f2935" }, horzLines: { color: "#1f2935" } },
    timeScale: { timeVisible: true, secondsVisible: true, borderColor: "#263241" },
    rightPriceScale: { borderColor: "#263241" },
  };

  function readJson(id) {
    const node = document.getElementById(id);
    return node ? JSON.parse(node.textContent) : null;
  }

  function seconds(ns) {
    return Math.floor(Number(ns) / 1e9);
  }

  function equityPoints(curve) {
    // One point per second: several exits in one second keep the last equity.
    const bySecond = new Map();
    for (const [at, equity] of curve || []) bySecond.set(seconds(at), Number(equity));
    return [...bySecond.entries()].sort((a, b) => a[0] - b[0]).map(([time, value]) => ({ time, value }));
  }

  function drawEquity(box, curve, color) {
    if (!box || !LW) return;
    const chart = LW.createChart(box, CHART_OPTIONS);
    const series = chart.addSeries(LW.LineSeries, { color: color || "#4da3ff", lineWidth: 2 });
    const points = equityPoints(curve);
    series.setData(points);
    chart.timeScale().fitContent();
    box.dataset.points = String(points.length);
  }

  function drawCandles(box, candles, trades) {
    if (!box || !LW) return;
    const chart = LW.createChart(box, CHART_OPTIONS);
    const series = chart.addSeries(LW.CandlestickSeries, {
      upColor: "#2fbf71", downColor: "#ef5350", borderVisible: false, wickUpColor: "#2fbf71", wickDownColor: "#ef5350",
    });
    series.setData(candles || []);
    const markers = [];
    for (const trade of trades || []) {
      const long = trade.side === "long";
      markers.push({ time: seconds(trade.entry_time_ns), position: long ? "belowBar" : "aboveBar", color: long ? "#2fbf71" : "#ef5350", shape: long ? "arrowUp" : "arrowDown", text: `${long ? "buy" : "sell"} ${trade.entry_price}` });
      markers.push({ time: seconds(trade.exit_time_ns), position: long ? "aboveBar" : "belowBar", color: "#f5a623", shape: "circle", text: `exit ${trade.exit_price} (${trade.exit_reason})` });
    }
    // Markers must be in time order; a candle width wider than a second snaps them to its candle.
    markers.sort((a, b) => a.time - b.time);
    const width = candles && candles.length > 1 ? candles[1].time - candles[0].time : 1;
    const snapped = markers.map((m) => ({ ...m, time: m.time - (((m.time % width) + width) % width) }));
    LW.createSeriesMarkers(series, snapped);
    chart.timeScale().fitContent();
    box.dataset.candles = String((candles || []).length);
    box.dataset.markers = String(snapped.length);
  }

  function drawResult() {
    drawEquity(document.getElementById("equity-chart"), readJson("equity-data"));
    drawCandles(document.getElementById("candle-chart"), readJson("candle-data"), readJson("trade-data"));
  }

  // ---- one run: progress ---------------------------------------------------------
  const runCard = document.getElementById("run");
  let finished = false;

  function showState(state) {
    if (!runCard || String(state.id) !== runCard.dataset.run) return;
    const badge = document.getElementById("run-status");
    badge.dataset.status = state.status;
    badge.textContent = state.status.charAt(0).toUpperCase() + state.status.slice(1);
    badge.className = `badge run-status status-${state.status}`;
    document.getElementById("run-progress").value = state.progress;
    document.getElementById("run-ticks").textContent = `${state.ticks_done} / ${state.ticks_total} ticks`;
    document.getElementById("run-error").textContent = state.error || "";
    if (state.status === "done" && !finished) loadResult();
  }

  async function loadResult() {
    // The report is rendered by the server: fetch the page and swap its result part in.
    finished = true;
    const response = await fetch(window.location.pathname, { credentials: "same-origin" });
    if (!response.ok) { finished = false; return; }
    const page = new DOMParser().parseFromString(await response.text(), "text/html");
    const fresh = page.getElementById("run-result");
    if (fresh) {
      document.getElementById("run-result").replaceWith(document.adoptNode(fresh));
      drawResult();
    }
  }

  async function refreshState() {
    const response = await fetch(runCard.dataset.stateUrl, { credentials: "same-origin" });
    if (response.ok) showState(await response.json());
  }

  function connect(attempt) {
    const scheme = window.location.protocol === "https:" ? "wss" : "ws";
    const socket = new WebSocket(`${scheme}://${window.location.host}/ws/backtests/`);
    socket.addEventListener("open", () => {
      runCard.dataset.socket = "live";
      attempt = 0;
      refreshState(); // pushes sent before this socket joined are not replayed
    });
    socket.addEventListener("message", (event) => {
      const message = JSON.parse(event.data);
      if (message.type === "backtest.progress") showState(message.run);
    });
    socket.addEventListener("close", (event) => {
      runCard.dataset.socket = "closed";
      if (event.code === 4401 || finished) return;
      const delay = Math.min(30000, 500 * 2 ** attempt) * (0.5 + Math.random() / 2);
      setTimeout(() => connect(attempt + 1), delay);
    });
  }

  if (runCard) {
    const status = document.getElementById("run-status").dataset.status;
    if (status === "done") { finished = true; drawResult(); }
    else if (status !== "failed") connect(0);
  }

  // ---- one sweep: progress, then the table ---------------------------------------
  const sweepCard = document.getElementById("sweep");
  let sweepFinished = false;

  function showSweep(state) {
    if (!sweepCard || String(state.id) !== sweepCard.dataset.sweep) return;
    const badge = document.getElementById("sweep-status");
    badge.dataset.status = state.status;
    badge.textContent = state.status.charAt(0).toUpperCase() + state.status.slice(1);
    badge.className = `badge run-status status-${state.status}`;
    document.getElementById("sweep-progress").value = state.progress;
    document.getElementById("sweep-points").textContent = `${state.points_done} / ${state.points_total} points`;
    document.getElementById("sweep-error").textContent = state.error || "";
    if (state.status === "done" && !sweepFinished) loadSweepResult();
  }

  async function loadSweepResult() {
    // The table is rendered by the server: fetch the page and swap its result part in.
    sweepFinished = true;
    const response = await fetch(window.location.pathname, { credentials: "same-origin" });
    if (!response.ok) { sweepFinished = false; return; }
    const page = new DOMParser().parseFromString(await response.text(), "text/html");
    const fresh = page.getElementById("sweep-result");
    if (fresh) document.getElementById("sweep-result").replaceWith(document.adoptNode(fresh));
  }

  function connectSweep(attempt) {
    const scheme = window.location.protocol === "https:" ? "wss" : "ws";
    const socket = new WebSocket(`${scheme}://${window.location.host}/ws/backtests/`);
    socket.addEventListener("open", async () => {
      sweepCard.dataset.socket = "live";
      attempt = 0;
      // Pushes sent before this socket joined are not replayed: read the state once.
      const response = await fetch(sweepCard.dataset.stateUrl, { credentials: "same-origin" });
      if (response.ok) showSweep(await response.json());
    });
    socket.addEventListener("message", (event) => {
      const message = JSON.parse(event.data);
      if (message.type === "backtest.sweep") {
        sweepCard.dataset.pushes = String(Number(sweepCard.dataset.pushes || 0) + 1);
        showSweep(message.sweep);
      }
    });
    socket.addEventListener("close", (event) => {
      sweepCard.dataset.socket = "closed";
      if (event.code === 4401 || sweepFinished) return;
      const delay = Math.min(30000, 500 * 2 ** attempt) * (0.5 + Math.random() / 2);
      setTimeout(() => connectSweep(attempt + 1), delay);
    });
  }

  if (sweepCard) {
    const status = document.getElementById("sweep-status").dataset.status;
    if (status === "done") sweepFinished = true;
    else if (status !== "failed") connectSweep(0);
  }

  // ---- comparison ----------------------------------------------------------------
  const colors = ["#4da3ff", "#f5a623"];
  document.querySelectorAll(".compare-equity").forEach((box, n) => drawEquity(box, readJson(box.dataset.source), colors[n % 2]));

  const compareForm = document.getElementById("compare-form");
  if (compareForm) {
    const button = document.getElementById("compare-button");
    const picks = () => [...compareForm.querySelectorAll(".compare-pick:checked")].map((box) => box.value);
    compareForm.addEventListener("change", () => {
      const chosen = picks();
      button.disabled = chosen.length !== 2;
      document.getElementById("compare-a").value = chosen[0] || "";
      document.getElementById("compare-b").value = chosen[1] || "";
    });
  }
})();
