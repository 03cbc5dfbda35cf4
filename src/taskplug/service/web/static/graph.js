// The workflow graph of an execution page (a script file: the page's policy runs no inline one).
// - The live stream's "graph" message carries every node's phase (data-phases): set here as attributes of the
//   drawn nodes, so nothing the user may be clicking is replaced.
// - A node with children (sub-workflow, branch, dynamic) opens its children's graph when clicked.
// - A gate's form posts its value as JSON to the API's signal route (same origin: the browser sends Origin).
(() => {
  "use strict";

  function applyPhases() {
    const holder = document.querySelector("#graph-live [data-phases]");
    if (!holder) return;
    let phases;
    try {
      phases = JSON.parse(holder.getAttribute("data-phases"));
    } catch (_) {
      return;
    }
    for (const node of document.querySelectorAll("g.node[data-node]")) {
      const entry = phases[node.getAttribute("data-node")];
      if (!entry) continue;
      node.classList.toggle("taken", entry[2] === 1);
      if (node.getAttribute("data-phase") === entry[0]) continue;
      node.setAttribute("data-phase", entry[0]);
      node.setAttribute("data-group", entry[1]);
      const text = node.querySelector(".phase-text");
      if (text) text.textContent = entry[0];
    }
  }

  document.addEventListener("htmx:sseMessage", (event) => {
    const target = event.target;
    if (target instanceof Element && target.id === "graph-live") applyPhases();
  });

  document.addEventListener("click", (event) => {
    const target = event.target;
    const opener = target instanceof Element ? target.closest("[data-expand]") : null;
    if (!opener) return;
    const sub = document.getElementById(opener.getAttribute("data-expand"));
    if (!(sub instanceof HTMLDetailsElement)) return;
    sub.open = true;
    if (opener instanceof HTMLButtonElement) sub.scrollIntoView({ block: "nearest" });
  });

  document.addEventListener("submit", async (event) => {
    const form = event.target;
    if (!(form instanceof HTMLFormElement) || !form.classList.contains("gate-form")) return;
    event.preventDefault();
    const submitter = event.submitter;
    const result = form.querySelector(".gate-result");
    let value;
    if (form.getAttribute("data-gate") === "approve") {
      value = submitter instanceof HTMLButtonElement && submitter.value === "true";
    } else {
      const text = new FormData(form).get("value");
      try {
        value = JSON.parse(String(text));
      } catch (_) {
        value = String(text);
      }
    }
    for (const button of form.querySelectorAll("button")) button.disabled = true;
    try {
      const response = await fetch(form.action, {
        method: "POST",
        headers: { "Content-Type": "application/json", Accept: "application/json" },
        body: JSON.stringify({ value: value }),
        credentials: "same-origin",
      });
      let message = response.ok ? "Sent." : `Refused (${response.status}).`;
      if (!response.ok) {
        try {
          const body = await response.json();
          const detail = body && body.error && body.error.message;
          if (typeof detail === "string") message = `Refused: ${detail}`;
        } catch (_) {
          // not JSON: the status says enough
        }
      }
      if (result) result.textContent = message;
    } catch (_) {
      if (result) result.textContent = "Not sent: the server did not answer.";
    } finally {
      for (const button of form.querySelectorAll("button")) button.disabled = false;
    }
  });
})();
