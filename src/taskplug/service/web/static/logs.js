// The log panes of an execution page (a script file: the page's policy runs no inline one).
// - A single task's attempts (the "attempts" section; not a map's) each get a pane under "Logs", streamed from
//   /executions/{key}/logs/stream?attempt=N: what the attempt prints while it runs, then its kept log.
// - A map task's elements each get a closed pane under "Logs" (from the "elements" section's rows), and a
//   workflow node's panel has one: each streams that node's logs once opened.
// The text is appended as text nodes: a log is never parsed as HTML.
(() => {
  "use strict";

  const streams = new WeakMap(); // pane -> the AbortController of its open stream

  function stream(pane, query) {
    if (pane.getAttribute("data-state")) return;
    pane.setAttribute("data-state", "opening");
    const text = pane.querySelector("pre.log-text");
    text.textContent = "";
    const key = encodeURI(pane.getAttribute("data-execution") || "");
    const controller = new AbortController();
    streams.set(pane, controller);
    fetch(`/executions/${key}/logs/stream?${query}`, {
      headers: { Accept: "text/plain" },
      signal: controller.signal,
    })
      .then(async (response) => {
        if (!response.ok || !response.body) {
          pane.setAttribute("data-state", "unavailable");
          return;
        }
        pane.setAttribute("data-state", "streaming");
        if (response.headers.get("X-Taskplug-Log-Source") === "kept-only") {
          // This server reaches no cluster: a running attempt's log shows once the attempt has ended.
          text.setAttribute("data-note", "Shown once the attempt ends (this server reads no cluster).");
        }
        const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
        for (;;) {
          const { value, done } = await reader.read();
          if (done) break;
          const atEnd = text.scrollTop + text.clientHeight >= text.scrollHeight - 4;
          text.append(document.createTextNode(value));
          if (atEnd) text.scrollTop = text.scrollHeight;
        }
        pane.setAttribute("data-state", text.textContent ? "ended" : "empty");
      })
      .catch(() => {
        if (!controller.signal.aborted) pane.setAttribute("data-state", "unavailable");
      });
  }

  // A pane closed stops its stream (a browser keeps few connections to one server); opened again, it
  // starts over.
  function stop(pane) {
    const controller = streams.get(pane);
    if (!controller) return;
    streams.delete(pane);
    controller.abort();
    pane.removeAttribute("data-state");
  }

  function attemptPanes() {
    const holder = document.getElementById("logs");
    // A map's attempt holds every element's pods: its elements' panes show them one by one instead.
    if (!holder || holder.hasAttribute("data-map")) return;
    for (const card of document.querySelectorAll("#attempts .attempt[id^='attempt-']")) {
      const attempt = card.id.slice("attempt-".length);
      if (!/^\d+$/.test(attempt) || holder.querySelector(`.log-pane[data-attempt="${attempt}"]`)) continue;
      const pane = document.createElement("details");
      pane.className = "log-pane";
      pane.open = true;
      pane.setAttribute("data-attempt", attempt);
      pane.setAttribute("data-execution", holder.getAttribute("data-execution") || "");
      const summary = document.createElement("summary");
      summary.textContent = `Attempt ${attempt}`;
      const text = document.createElement("pre");
      text.className = "log-text";
      pane.append(summary, text);
      holder.insertBefore(pane, holder.querySelector(".log-pane[data-element]")); // attempts first
      stream(pane, `attempt=${attempt}`);
    }
  }

  function elementPanes() {
    const holder = document.getElementById("logs");
    if (!holder) return;
    for (const cell of document.querySelectorAll("#elements tr.element td[data-log-node]")) {
      const node = cell.getAttribute("data-log-node");
      const index = cell.closest("tr")?.getAttribute("data-index");
      if (!node || holder.querySelector(`.log-pane[data-element="${CSS.escape(index || "")}"]`)) continue;
      const pane = document.createElement("details");
      pane.className = "log-pane";
      pane.setAttribute("data-element", index || "");
      pane.setAttribute("data-node", node);
      pane.setAttribute("data-execution", holder.getAttribute("data-execution") || "");
      const summary = document.createElement("summary");
      summary.textContent = `Element ${index}`;
      const text = document.createElement("pre");
      text.className = "log-text";
      pane.append(summary, text);
      holder.append(pane);
    }
  }

  document.addEventListener("DOMContentLoaded", () => {
    attemptPanes();
    elementPanes();
  });
  document.addEventListener("htmx:sseMessage", (event) => {
    const target = event.target;
    if (!(target instanceof Element)) return;
    if (target.id === "attempts") attemptPanes();
    if (target.id === "elements") elementPanes();
  });
  // A node's or element's pane streams once opened, any pane stops when closed ("toggle" does not bubble:
  // caught on the way down).
  document.addEventListener(
    "toggle",
    (event) => {
      const pane = event.target;
      if (!(pane instanceof HTMLDetailsElement) || !pane.classList.contains("log-pane")) return;
      if (!pane.open) {
        stop(pane);
        return;
      }
      const node = pane.getAttribute("data-node");
      const attempt = pane.getAttribute("data-attempt");
      if (node) stream(pane, `node=${encodeURIComponent(node)}`);
      else if (attempt) stream(pane, `attempt=${attempt}`);
    },
    true,
  );
})();
