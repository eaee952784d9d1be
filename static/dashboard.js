// Live dashboard: one websocket, reconnecting with jittered backoff; rows update in place.
(function () {
  "use strict";
  const badge = document.getElementById("connection");
  const body = document.querySelector("#prices tbody");
  let attempt = 0;

  function setState(state, text) {
    badge.dataset.state = state;
    badge.textContent = text;
    badge.className = "badge badge-" + (state === "live" ? "ok" : state === "closed" ? "bad" : "wait");
  }

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
    // Display only: the numbers stay exact strings; float is fine for a percentage.
    const change = (Number(update.price) / Number(update.open) - 1) * 100;
    const changeCell = row.querySelector(".change");
    changeCell.textContent = (change >= 0 ? "+" : "") + change.toFixed(2) + "%";
    changeCell.classList.toggle("up", change > 0);
    changeCell.classList.toggle("down", change < 0);
    row.querySelector(".volume").textContent = update.volume;
    row.querySelector(".ticks").textContent = update.ticks;
    row.querySelector(".time").textContent = new Date(update.ts_ms).toISOString().slice(11, 23);
    if (previous !== update.price) {
      row.classList.remove("flash");
      void row.offsetWidth;
      row.classList.add("flash");
    }
  }

  function connect() {
    const scheme = location.protocol === "https:" ? "wss" : "ws";
    const socket = new WebSocket(`${scheme}://${location.host}/ws/dashboard/`);
    socket.onopen = () => {
      attempt = 0;
      setState("live", "live");
      // Other panels (static/recovery.js) listen to the socket through DOM events.
      window.dispatchEvent(new CustomEvent("dashboard:open"));
    };
    socket.onmessage = (message) => {
      const event = JSON.parse(message.data);
      window.dispatchEvent(new CustomEvent("dashboard:message", { detail: event }));
      if (event.type === "prices") event.prices.forEach(applyPrice);
    };
    socket.onclose = (event) => {
      if (event.code === 4401) { setState("closed", "logged out"); location.reload(); return; }
      attempt += 1;
      const delay = Math.random() * Math.min(30000, 500 * 2 ** attempt);
      setState("wait", `reconnecting in ${(delay / 1000).toFixed(1)}s`);
      setTimeout(connect, delay);
    };
  }
  connect();
})();
