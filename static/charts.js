// Dashboard charts: one candle chart per instrument card (.chart-card), with volume bars,
// the indicator lines of the caller's strategies, signal markers (by outcome) and fill
// markers. History comes from the server when the page opens and on every timeframe
// change (/dashboard/charts/<instrument>/history/, bucketed by the database); the live
// socket's price pushes continue the last candle. The socket is dashboard.js's: this
// module listens to the "dashboard:message" and "dashboard:open" events it dispatches.
// Prices stay the server's exact strings; Number() is for drawing only.
(function () {
  "use strict";
  const LW = window.LightweightCharts;
  const TIMEFRAMES = { "1s": 1, "5s": 5, "1m": 60, "5m": 300, "15m": 900, "1h": 3600 };
  const DEFAULT_TIMEFRAME = "1m";
  const HISTORY_BARS = 500;
  const BARS_KEPT = 2000;
  const OUTPUTS_KEPT = 5000;
  const SIGNALS_KEPT = 400;
  const SYNC_EVERY_MS = 10000; // closed candles are re-read from the database at most this often
  const INDICATOR_COLORS = ["#f5a623", "#b47cff", "#4dd0e1", "#ff7eb6", "#9ccc65"];
  // Output values drawn as lines: ema's fast/slow, volume_breakout's bar high/low
  // (the server sends only these in history; live outputs carry every value).
  const INDICATOR_NAMES = new Set(["fast", "slow", "high", "low"]);
  const UP = "#2fbf71";
  const DOWN = "#ef5350";
  const charts = new Map(); // "feed|symbol" -> chart state

  // ---- exact decimal strings (12 places, as the server's fixed point) ----------------
  const DIGITS = 12;
  const SCALE = 10n ** BigInt(DIGITS);
  function toFixed(text) {
    const negative = text.startsWith("-");
    const [whole, frac = ""] = text.replace(/^[-+]/, "").split(".");
    const value = BigInt(whole || "0") * SCALE + BigInt(frac.padEnd(DIGITS, "0").slice(0, DIGITS) || "0");
    return negative ? -value : value;
  }
  function fixedToText(value) {
    const negative = value < 0n;
    const abs = negative ? -value : value;
    const frac = (abs % SCALE).toString().padStart(DIGITS, "0").replace(/0+$/, "");
    return (negative ? "-" : "") + (abs / SCALE).toString() + (frac ? "." + frac : "");
  }
  function decimalAdd(a, b) { return fixedToText(toFixed(a) + toFixed(b)); }
  function decimalMax(a, b) { return toFixed(a) >= toFixed(b) ? a : b; }
  function decimalMin(a, b) { return toFixed(a) <= toFixed(b) ? a : b; }

  // ---- creation -----------------------------------------------------------------------
  function priceFormat(tickSize) {
    const minMove = Number(tickSize);
    if (!(minMove > 0)) return { type: "price", precision: 2, minMove: 0.01 };
    const text = minMove.toString();
    const exponent = text.includes("e-") ? Number(text.split("e-")[1]) : 0;
    const mantissa = text.split("e")[0];
    const precision = exponent + (mantissa.includes(".") ? mantissa.split(".")[1].length : 0);
    return { type: "price", precision, minMove };
  }

  function savedTimeframe(key) {
    try {
      const name = localStorage.getItem("chart-timeframe:" + key);
      return name in TIMEFRAMES ? name : DEFAULT_TIMEFRAME;
    } catch (_) { return DEFAULT_TIMEFRAME; }
  }

  function createChart(card) {
    const key = card.dataset.feed + "|" + card.dataset.symbol;
    const box = card.querySelector(".chart");
    const chart = LW.createChart(box, {
      height: 260,
      autoSize: true,
      layout: { background: { color: "#161d26" }, textColor: "#8393a5", attributionLogo: true },
      grid: { vertLines: { color: "#1f2935" }, horzLines: { color: "#1f2935" } },
      timeScale: { timeVisible: true, secondsVisible: true, borderColor: "#263241", rightOffset: 3 },
      // One label on the axis (the last price); names and values go in the legend, so
      // nothing stacks on the scale. Candles keep the top, volume the bottom fifth.
      rightPriceScale: { borderColor: "#263241", minimumWidth: 72, entireTextOnly: true, scaleMargins: { top: 0.08, bottom: 0.24 } },
      crosshair: { mode: LW.CrosshairMode ? LW.CrosshairMode.Normal : 0 },
    });
    const candles = chart.addSeries(LW.CandlestickSeries, {
      upColor: UP, downColor: DOWN, borderVisible: false, wickUpColor: UP, wickDownColor: DOWN,
      priceFormat: priceFormat(card.dataset.tickSize), priceLineVisible: true, lastValueVisible: true, title: "",
    });
    const volume = chart.addSeries(LW.HistogramSeries, {
      priceScaleId: "volume", priceFormat: { type: "volume" }, lastValueVisible: false, priceLineVisible: false, title: "",
    });
    chart.priceScale("volume").applyOptions({ scaleMargins: { top: 0.8, bottom: 0 } });
    const state = {
      key, card, box, chart, candles, volume,
      feed: card.dataset.feed, symbol: card.dataset.symbol, instrumentId: card.dataset.instrument,
      signalMarkers: LW.createSeriesMarkers(candles, []),
      fillMarkers: LW.createSeriesMarkers(candles, []),
      legend: card.querySelector(".chart-legend"),
      timeframe: savedTimeframe(key),
      bars: [], barIndex: new Map(), lines: new Map(), outputs: [], signals: new Map(), fills: new Map(),
      lastVolume: null, loading: null, queued: [], lastSync: Date.now(), syncTimer: null, hovered: null, points: 0,
    };
    charts.set(key, state);
    chart.subscribeCrosshairMove((param) => {
      state.hovered = param && param.time !== undefined ? state.barIndex.get(param.time) || null : null;
      drawLegend(state);
    });
    card.querySelectorAll(".timeframes button").forEach((button) => {
      button.addEventListener("click", () => setTimeframe(state, button.dataset.timeframe));
    });
    markTimeframe(state);
    return state;
  }

  function chartFor(feed, symbol) { return charts.get(feed + "|" + symbol) || null; }
  function seconds(state) { return TIMEFRAMES[state.timeframe]; }
  function bucketOf(state, ms) { const tf = seconds(state); return Math.floor(ms / 1000 / tf) * tf; }

  function markTimeframe(state) {
    state.card.querySelectorAll(".timeframes button").forEach((button) => {
      button.setAttribute("aria-pressed", String(button.dataset.timeframe === state.timeframe));
    });
    state.box.dataset.timeframe = state.timeframe;
  }

  function setTimeframe(state, name) {
    if (!(name in TIMEFRAMES) || name === state.timeframe) return;
    state.timeframe = name;
    try { localStorage.setItem("chart-timeframe:" + state.key, name); } catch (_) { /* private mode */ }
    markTimeframe(state);
    loadHistory(state);
  }

  // ---- drawing --------------------------------------------------------------------------
  function candle(bar) {
    return { time: bar.time, open: Number(bar.open), high: Number(bar.high), low: Number(bar.low), close: Number(bar.close) };
  }
  function volumeBar(bar) {
    return { time: bar.time, value: Number(bar.volume), color: toFixed(bar.close) >= toFixed(bar.open) ? "rgba(47,191,113,.45)" : "rgba(239,83,80,.45)" };
  }

  function drawAll(state) {
    state.candles.setData(state.bars.map(candle));
    state.volume.setData(state.bars.map(volumeBar));
    state.lines.forEach((line) => line.series.setData([]));
    state.lines.forEach((line) => line.points.clear());
    state.outputs.forEach((row) => foldOutput(state, row, false));
    const first = state.bars.length ? state.bars[0].time : Infinity;
    state.lines.forEach((line) => {
      const points = [...line.points.entries()].filter(([t]) => t >= first).sort((a, b) => a[0] - b[0]);
      line.series.setData(points.map(([time, value]) => ({ time, value })));
      line.last = points.length ? points[points.length - 1][0] : 0;
    });
    drawSignalMarkers(state);
    drawFillMarkers(state);
    updateCounts(state);
    drawLegend(state);
  }

  function updateCounts(state) {
    state.box.dataset.bars = String(state.bars.length);
    state.box.dataset.points = String(state.points);
  }

  function setBar(state, bar) {
    if (state.barIndex.has(bar.time)) {
      const index = state.bars.findIndex((b) => b.time === bar.time);
      state.bars[index] = bar;
    } else {
      state.bars.push(bar);
      state.bars.sort((a, b) => a.time - b.time);
      if (state.bars.length > BARS_KEPT) state.bars.splice(0, state.bars.length - BARS_KEPT).forEach((b) => state.barIndex.delete(b.time));
    }
    state.barIndex.set(bar.time, bar);
  }

  // ---- history ------------------------------------------------------------------------
  async function fetchHistory(state, bars) {
    const url = `/dashboard/charts/${encodeURIComponent(state.instrumentId)}/history/?timeframe=${state.timeframe}&bars=${bars}`;
    const response = await fetch(url, { credentials: "same-origin", headers: { Accept: "application/json" } });
    if (!response.ok) throw new Error(`chart history ${state.key}: HTTP ${response.status}`);
    return response.json();
  }

  function loadHistory(state) {
    const timeframe = state.timeframe;
    state.box.dataset.history = "loading";
    const loading = fetchHistory(state, HISTORY_BARS).then((body) => {
      if (state.loading !== loading || timeframe !== state.timeframe) return; // a newer load took over
      state.bars = body.bars.map((bar) => ({ ...bar, volume: bar.volume }));
      state.barIndex = new Map(state.bars.map((bar) => [bar.time, bar]));
      state.points = state.bars.reduce((sum, bar) => sum + bar.trades, 0);
      // History outputs, then the live ones it cannot hold yet.
      state.outputs = body.outputs.concat(state.outputs.filter((row) => row.occurrence_time_ms >= body.end_ms)).slice(-OUTPUTS_KEPT);
      body.fills.forEach((fill) => state.fills.set(fill.id, fill));
      state.lastSync = Date.now();
      drawAll(state);
      state.loading = null;
      // Pushes that arrived while loading: those after the history's end continue it.
      state.queued.splice(0).forEach((q) => { if (q.ms >= body.end_ms) foldPrice(state, q.ms, q.price, q.volume); });
      state.box.dataset.history = "loaded";
      state.box.dataset.historyLoads = String(Number(state.box.dataset.historyLoads || 0) + 1);
    }).catch(() => {
      if (state.loading !== loading) return;
      state.loading = null;
      state.box.dataset.history = "failed";
      state.queued.splice(0).forEach((q) => foldPrice(state, q.ms, q.price, q.volume));
    });
    state.loading = loading;
  }

  // Live pushes see only the latest trade of each interval, so a closed candle's high,
  // low and volume may miss trades in between: re-read closed candles from the database.
  function scheduleSync(state) {
    if (state.syncTimer || Date.now() - state.lastSync < SYNC_EVERY_MS) return;
    state.syncTimer = setTimeout(() => {
      state.syncTimer = null;
      syncRecent(state);
    }, 1500);
  }

  async function syncRecent(state) {
    if (state.loading) return;
    const timeframe = state.timeframe;
    const bars = Math.min(HISTORY_BARS, Math.ceil((Date.now() - state.lastSync) / 1000 / seconds(state)) + 2);
    state.lastSync = Date.now();
    let body;
    try { body = await fetchHistory(state, bars); } catch (_) { return; }
    if (state.loading || timeframe !== state.timeframe) return;
    const last = state.bars.length ? state.bars[state.bars.length - 1].time : Infinity;
    body.bars.filter((bar) => bar.time < last).forEach((bar) => setBar(state, bar));
    body.fills.forEach((fill) => state.fills.set(fill.id, fill));
    state.candles.setData(state.bars.map(candle));
    state.volume.setData(state.bars.map(volumeBar));
    drawSignalMarkers(state);
    drawFillMarkers(state);
    updateCounts(state);
    drawLegend(state);
  }

  // ---- live prices ----------------------------------------------------------------------
  function applyPrice(update) {
    const state = chartFor(update.feed, update.symbol);
    if (!state) return;
    // The push carries the volume traded since the publisher started: the difference
    // between two pushes is what traded in between (a smaller figure: it restarted).
    let traded = "0";
    if (state.lastVolume !== null && toFixed(update.volume) >= toFixed(state.lastVolume)) traded = fixedToText(toFixed(update.volume) - toFixed(state.lastVolume));
    state.lastVolume = update.volume;
    if (state.loading) { state.queued.push({ ms: update.ts_ms, price: update.price, volume: traded }); return; }
    foldPrice(state, update.ts_ms, update.price, traded);
  }

  function foldPrice(state, ms, price, traded) {
    const time = bucketOf(state, ms);
    const last = state.bars.length ? state.bars[state.bars.length - 1] : null;
    let bar;
    if (!last || time > last.time) {
      bar = { time, open: price, high: price, low: price, close: price, volume: traded, trades: 1 };
      if (last) scheduleSync(state);
      setBar(state, bar);
    } else {
      // Same bucket, or a push older than the last candle (it cannot reopen a closed one).
      bar = last;
      bar.high = decimalMax(bar.high, price);
      bar.low = decimalMin(bar.low, price);
      bar.close = price;
      bar.volume = decimalAdd(bar.volume, traded);
      bar.trades += 1;
    }
    state.candles.update(candle(bar));
    state.volume.update(volumeBar(bar));
    state.points += 1;
    updateCounts(state);
    if (!state.hovered) drawLegend(state);
  }

  // ---- indicator lines ----------------------------------------------------------------
  function lineFor(state, row, name) {
    const lineKey = `${row.strategy_id}:${name}`;
    let line = state.lines.get(lineKey);
    if (!line) {
      const color = INDICATOR_COLORS[state.lines.size % INDICATOR_COLORS.length];
      line = {
        label: `${row.strategy} ${name}`, color, points: new Map(), last: 0,
        series: state.chart.addSeries(LW.LineSeries, { color, lineWidth: 1, title: "", priceLineVisible: false, lastValueVisible: false, crosshairMarkerVisible: false }),
      };
      state.lines.set(lineKey, line);
    }
    return line;
  }

  function foldOutput(state, row, live) {
    const time = bucketOf(state, row.occurrence_time_ms);
    Object.keys(row.values).filter((name) => INDICATOR_NAMES.has(name)).forEach((name) => {
      const value = row.values[name];
      if (value === null || value === undefined || value === "" || !Number.isFinite(Number(value))) return;
      const line = lineFor(state, row, name);
      line.points.set(time, Number(value));
      if (live && time >= line.last && state.barIndex.has(time)) {
        line.last = time;
        line.series.update({ time, value: Number(value) });
      }
    });
  }

  function applyOutput(row) {
    const state = chartFor(row.feed, row.symbol);
    if (!state) return;
    const drawn = { strategy_id: row.strategy_id, strategy: row.strategy, occurrence_time_ms: row.occurrence_time_ms, values: row.values };
    state.outputs.push(drawn);
    if (state.outputs.length > OUTPUTS_KEPT) state.outputs.splice(0, state.outputs.length - OUTPUTS_KEPT);
    if (!state.loading) foldOutput(state, drawn, true);
  }

  // ---- signal markers: traded, not traded (and why), pending ---------------------------
  // A signal is (strategy, output, kind); its outcomes (one per account) may arrive
  // before or after it. Traded on any of the caller's accounts counts as traded.
  function outcomeState(outcome) { return outcome.traded ? "traded" : outcome.settled ? "not-traded" : "pending"; }
  function signalState(entry) {
    const states = [...entry.outcomes.values()].map(outcomeState);
    if (states.includes("traded")) return "traded";
    if (!states.length || states.includes("pending")) return "pending";
    return "not-traded";
  }
  const pendingOutcomes = new Map(); // signal key -> outcomes that came before their signal
  function signalKey(row) { return `${row.strategy_id}|${row.output_id}|${row.kind}`; }
  function accountKey(outcome) { return outcome.account === null ? "" : String(outcome.account); }

  function signalMarker(state, entry) {
    const signal = entry.signal;
    const entryKind = signal.kind.startsWith("ENTRY");
    const long = signal.kind.endsWith("LONG");
    const label = signal.kind.replace("_", " ").toLowerCase();
    const outcome = signalState(entry);
    const marker = { time: bucketOf(state, signal.occurrence_time_ms), position: entryKind === long ? "belowBar" : "aboveBar", id: entry.key, state: outcome };
    if (outcome === "traded") return { ...marker, shape: entryKind === long ? "arrowUp" : "arrowDown", color: entryKind ? UP : DOWN, text: label };
    if (outcome === "pending") return { ...marker, shape: "square", color: "#e0c050", text: `${label} (pending)` };
    const first = [...entry.outcomes.values()][0];
    const why = first.reason || first.outcome_label;
    return { ...marker, shape: "circle", color: "#8393a5", text: `${label}: not traded, ${why.length > 40 ? why.slice(0, 39) + "…" : why}` };
  }

  // Several markers on one candle would stack their texts into a column over the chart:
  // there only the shapes are drawn (the signal table and the fills table name them).
  function withoutStackedText(markers) {
    const perBar = new Map();
    markers.forEach((m) => perBar.set(m.time, (perBar.get(m.time) || 0) + 1));
    return markers.map((m) => (perBar.get(m.time) > 1 ? { ...m, text: "" } : m));
  }

  function drawSignalMarkers(state) {
    const markers = [...state.signals.values()].filter((e) => e.signal).map((e) => signalMarker(state, e))
      .filter((m) => state.barIndex.has(m.time)).sort((a, b) => a.time - b.time);
    state.signalMarkers.setMarkers(withoutStackedText(markers).map(({ state: _s, ...marker }) => marker));
    state.box.dataset.markers = String(markers.length);
    state.box.dataset.markersTraded = String(markers.filter((m) => m.state === "traded").length);
    state.box.dataset.markersNotTraded = String(markers.filter((m) => m.state === "not-traded").length);
    state.box.dataset.markersPending = String(markers.filter((m) => m.state === "pending").length);
  }

  function signalEntry(state, row) {
    const key = signalKey(row);
    let entry = state.signals.get(key);
    if (!entry) {
      entry = { key, signal: null, outcomes: pendingOutcomes.get(key) || new Map() };
      pendingOutcomes.delete(key);
      state.signals.set(key, entry);
      if (state.signals.size > SIGNALS_KEPT) state.signals.delete(state.signals.keys().next().value);
    }
    return entry;
  }

  function applySignal(signal, outcomes) {
    const state = chartFor(signal.feed, signal.symbol);
    if (!state) return;
    const entry = signalEntry(state, signal);
    entry.signal = signal;
    (outcomes || []).forEach((outcome) => entry.outcomes.set(accountKey(outcome), outcome));
    // The marker needs a candle at its time: a signal ahead of the last push opens it.
    const last = state.bars.length ? state.bars[state.bars.length - 1].time : -Infinity;
    if (!state.loading && bucketOf(state, signal.occurrence_time_ms) > last) foldPrice(state, signal.occurrence_time_ms, signal.price, "0");
    drawSignalMarkers(state);
  }

  function applyOutcome(outcome) {
    const key = signalKey({ strategy_id: outcome.strategy_id, output_id: outcome.output_id, kind: outcome.kind });
    for (const state of charts.values()) {
      const entry = state.signals.get(key);
      if (entry) {
        entry.outcomes.set(accountKey(outcome), outcome);
        drawSignalMarkers(state);
        return;
      }
    }
    if (!pendingOutcomes.has(key)) pendingOutcomes.set(key, new Map());
    pendingOutcomes.get(key).set(accountKey(outcome), outcome);
    if (pendingOutcomes.size > SIGNALS_KEPT) pendingOutcomes.delete(pendingOutcomes.keys().next().value);
  }

  function applyStoredSignals(rows) { rows.forEach((row) => applySignal(row, row.outcomes)); }

  // ---- fill markers: the caller's executions, at their price ---------------------------
  function drawFillMarkers(state) {
    const markers = [...state.fills.values()].map((fill) => ({
      time: bucketOf(state, fill.time_ms),
      position: "atPriceMiddle",
      price: Number(fill.price),
      shape: "circle",
      size: 0.6,
      color: fill.side === "BUY" ? "#4dd0e1" : "#ffb74d",
      text: `${fill.side === "BUY" ? "B" : "S"} ${fill.quantity}`,
      id: `fill-${fill.id}`,
    })).filter((m) => state.barIndex.has(m.time)).sort((a, b) => a.time - b.time);
    state.fillMarkers.setMarkers(withoutStackedText(markers));
    state.box.dataset.fillMarkers = String(markers.length);
  }

  let fillSyncTimer = null;
  function fillsChanged() {
    // A fill event names no instrument: re-read recent history of every chart, once a second at most.
    if (fillSyncTimer) return;
    fillSyncTimer = setTimeout(() => {
      fillSyncTimer = null;
      charts.forEach((state) => { state.lastSync = Math.min(state.lastSync, Date.now() - 60000); syncRecent(state); });
    }, 1000);
  }

  // ---- legend (instead of labels on the price scale) ----------------------------------
  function drawLegend(state) {
    if (!state.legend) return;
    const bar = state.hovered || (state.bars.length ? state.bars[state.bars.length - 1] : null);
    const parts = [];
    const add = (text, className, color) => {
      const span = document.createElement("span");
      span.textContent = text;
      if (className) span.className = className;
      if (color) span.style.color = color;
      parts.push(span);
    };
    add(`${state.symbol} · ${state.timeframe}`, "legend-title");
    if (bar) {
      for (const [name, value] of [["O", bar.open], ["H", bar.high], ["L", bar.low], ["C", bar.close], ["V", bar.volume]]) {
        add(`${name} ${value}`, "legend-" + name.toLowerCase());
      }
    } else add("no trades recorded in this range", "legend-empty");
    state.lines.forEach((line) => {
      const value = bar ? line.points.get(bar.time) : undefined;
      add(`${line.label}${value === undefined ? "" : " " + value.toFixed(2)}`, "legend-line", line.color);
    });
    state.legend.replaceChildren(...parts);
    if (bar) state.legend.dataset.time = String(bar.time);
  }

  // ---- socket events (dashboard.js owns the socket) ------------------------------------
  let opened = 0;
  async function resync() {
    charts.forEach(loadHistory);
    // Signals pushed while the socket was down: the prices panel carries the stored ones.
    try {
      const response = await fetch("/dashboard/panels/prices/", { credentials: "same-origin", headers: { Accept: "text/html" } });
      if (!response.ok) return;
      const html = new DOMParser().parseFromString(await response.text(), "text/html");
      const script = html.getElementById("chart-signals");
      if (script) applyStoredSignals(JSON.parse(script.textContent));
    } catch (_) { /* the next reconnect tries again */ }
  }
  window.addEventListener("dashboard:open", () => { opened += 1; if (opened > 1) resync(); });
  window.addEventListener("dashboard:message", (message) => {
    const event = message.detail;
    if (event.type === "prices") event.prices.forEach(applyPrice);
    else if (event.type === "strategy.output") event.outputs.forEach(applyOutput);
    else if (event.type === "strategy.signal") event.signals.forEach((signal) => applySignal(signal, []));
    else if (event.type === "signal.outcome") applyOutcome(event);
    else if (event.type === "trade" && event.event === "fill") fillsChanged();
  });

  // Read-only view of each chart for scripts and the browser tests.
  window.DashboardCharts = {
    state(feed, symbol) {
      const state = chartFor(feed, symbol);
      if (!state) return null;
      return {
        timeframe: state.timeframe,
        bars: state.bars.map((bar) => ({ ...bar })),
        fills: [...state.fills.values()],
        lines: [...state.lines.values()].map((line) => line.label),
        // Series that put a label on the right-hand price scale (only the candles).
        axisLabels: [state.candles, state.volume, ...[...state.lines.values()].map((l) => l.series)]
          .filter((series) => series.options().lastValueVisible && (series.options().priceScaleId || "right") === "right").length,
      };
    },
    setTimeframe(feed, symbol, name) { const state = chartFor(feed, symbol); if (state) setTimeframe(state, name); },
    // Where a candle's time sits on the chart (px from the chart's left edge), or null.
    x(feed, symbol, time) { const state = chartFor(feed, symbol); return state ? state.chart.timeScale().timeToCoordinate(time) : null; },
  };

  if (!LW) return;
  document.querySelectorAll(".chart-card[data-instrument]").forEach((card) => loadHistory(createChart(card)));
  const stored = document.getElementById("chart-signals");
  if (stored) applyStoredSignals(JSON.parse(stored.textContent));
})();
