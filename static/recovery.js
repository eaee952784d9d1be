// Auth prompts on the dashboard: live open/clear events from the dashboard socket
// (relayed by dashboard.js as "dashboard:message" DOM events), a re-sync after every
// (re)connect, and the paste-the-code form submitted in place. Text only, never innerHTML.
(function () {
  "use strict";
  const panel = document.getElementById("recovery-prompts");
  const template = document.getElementById("recovery-prompt-template");
  if (!panel || !template) return;
  const csrf = () => (document.getElementById("recovery-csrf") || {}).value || "";
  // The answer to this browser's own last code submission, per prompt: a re-render from
  // a push or a re-sync computed before that answer must not wipe it.
  const submitErrors = new Map();
  // Prompts this browser resolved: a late push or re-sync must not bring them back.
  const resolved = new Set();

  function cardFor(token) {
    return panel.querySelector(`[data-recovery-token="${CSS.escape(token)}"]`);
  }

  function render(prompt) {
    const card = template.content.firstElementChild.cloneNode(true);
    card.dataset.recoveryToken = prompt.recovery_token;
    card.classList.toggle("terminal", prompt.terminal);
    card.querySelector(".prompt-broker").textContent = prompt.broker.charAt(0).toUpperCase() + prompt.broker.slice(1);
    card.querySelector(".prompt-title").textContent = prompt.terminal ? "login failed" : "login needed";
    const badge = card.querySelector(".badge");
    badge.className = "badge " + (prompt.terminal ? "badge-bad" : "badge-wait");
    badge.textContent = prompt.terminal ? "action needed: configuration" : "awaiting login";
    card.querySelector(".prompt-message").textContent = prompt.message;
    card.querySelector(".prompt-error").textContent = prompt.last_error || submitErrors.get(prompt.recovery_token) || "";
    const actions = card.querySelector(".prompt-actions");
    actions.hidden = prompt.terminal;
    card.querySelector(".prompt-login").href = prompt.login_url || "#";
    card.querySelector(".prompt-code-form").action = prompt.submit_url || "";
    card.querySelector("input[name=csrfmiddlewaretoken]").value = csrf();
    return card;
  }

  function open(prompt) {
    if (resolved.has(prompt.recovery_token)) return;
    const card = render(prompt);
    const existing = cardFor(prompt.recovery_token);
    if (existing) existing.replaceWith(card); else panel.appendChild(card);
  }

  function clear(token) {
    const card = cardFor(token);
    if (card) card.remove();
  }

  async function resync() {
    const response = await fetch(panel.dataset.promptsUrl, { headers: { Accept: "application/json" }, credentials: "same-origin" });
    if (!response.ok) return;
    const body = await response.json();
    const live = new Set(body.prompts.map((p) => p.recovery_token));
    panel.querySelectorAll("[data-recovery-token]").forEach((card) => { if (!live.has(card.dataset.recoveryToken)) card.remove(); });
    body.prompts.forEach(open);
  }

  window.addEventListener("dashboard:message", (event) => {
    const message = event.detail;
    if (message.type !== "prompt") return;
    if (message.action === "open") open(message.prompt);
    else if (message.action === "clear") clear(message.recovery_token);
  });
  window.addEventListener("dashboard:open", () => { resync().catch(() => {}); });

  // A successful login says so where the prompt was, and stays until dismissed by a reload.
  function confirmLogin(text) {
    const note = document.createElement("p");
    note.className = "flash success login-confirmed";
    note.setAttribute("role", "status");
    note.textContent = `${text} (${window.siteTime ? window.siteTime.clock(Date.now()) : ""})`;
    panel.prepend(note);
  }

  panel.addEventListener("submit", async (event) => {
    const form = event.target.closest(".prompt-code-form");
    if (!form) return;
    event.preventDefault();
    const token = form.closest("[data-recovery-token]").dataset.recoveryToken;
    const button = form.querySelector("button");
    button.disabled = true;
    try {
      const response = await fetch(form.action, {
        method: "POST", body: new FormData(form), credentials: "same-origin",
        headers: { Accept: "application/json", "X-CSRFToken": csrf() },
      });
      const body = await response.json().catch(() => ({ ok: false, message: `HTTP ${response.status}` }));
      if (body.ok) {
        submitErrors.delete(token);
        resolved.add(token);
      } else {
        submitErrors.set(token, body.message);
      }
      // The card may have been re-rendered while the request was in flight: use the current one.
      const card = cardFor(token);
      if (card) {
        card.querySelector(".prompt-error").textContent = body.ok ? "" : body.message;
        if (body.ok) card.remove();
      }
      if (body.ok) confirmLogin(body.message);
    } finally {
      button.disabled = false;
    }
  });
})();
