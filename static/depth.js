// Depth view: refresh the bids/asks ladder from /api/order-books/<pk>/ every
// data-refresh-ms. The levels are the server's exact decimal strings, set as text (never
// parsed as numbers, never as HTML). A stale book empties the ladder and says why.
(function () {
  "use strict";
  const card = document.getElementById("depth");
  if (!card) return;
  const url = card.dataset.apiUrl;
  const every = Math.max(200, Number(card.dataset.refreshMs) || 1000);
  const state = document.getElementById("depth-state");
  const reason = document.getElementById("depth-reason");

  function setText(id, value) {
    const node = document.getElementById(id);
    if (node) node.textContent = value === null || value === undefined ? "-" : String(value);
  }

  function fill(tableId, levels, priceClass) {
    const body = document.querySelector("#" + tableId + " tbody");
    if (!body) return;
    const rows = [];
    for (const level of levels || []) {
      const row = document.createElement("tr");
      const price = document.createElement("td");
      price.className = "num " + priceClass;
      price.textContent = level[0];
      const size = document.createElement("td");
      size.className = "num";
      size.textContent = level[1];
      row.append(price, size);
      rows.push(row);
    }
    body.replaceChildren(...rows);
  }

  function show(book) {
    if (book.fresh) {
      state.textContent = book.source + " " + book.status;
      state.className = "badge " + (book.source === "REST" ? "badge-wait" : "badge-ok");
      reason.textContent = book.status_reason || "";
    } else {
      state.textContent = "stale";
      state.className = "badge badge-bad";
      reason.textContent = book.reason;
    }
    fill("depth-bids", book.bids, "up");
    fill("depth-asks", book.asks, "down");
    setText("depth-sequence", book.sequence);
    setText("depth-seq", book.publish_seq);
  }

  async function refresh() {
    try {
      const response = await fetch(url, { headers: { Accept: "application/json" }, credentials: "same-origin" });
      if (response.ok) show(await response.json());
      else reason.textContent = "the API answered HTTP " + response.status;
    } catch (error) {
      reason.textContent = "the API is unreachable: " + error;
    }
    window.setTimeout(refresh, every);
  }
  window.setTimeout(refresh, every);
})();
