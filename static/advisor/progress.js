// Job page: poll the status endpoint about once a second and move the bar;
// on a final state, reload so the server renders the report (or the reason).
(function () {
  "use strict";
  const box = document.querySelector("[data-status-url]");
  if (!box) return;
  const bar = box.querySelector(".bar");
  const fill = box.querySelector(".bar-fill");
  const phase = box.querySelector("[data-phase]");
  const state = box.querySelector("[data-state]");
  const percentText = box.querySelector("[data-percent]");
  const etaText = box.querySelector("[data-eta]");

  function duration(seconds) {
    if (seconds < 90) return Math.max(1, Math.round(seconds)) + " s";
    return Math.round(seconds / 60) + " min";
  }

  function show(status) {
    const percent = Math.round(status.progress * 100);
    fill.style.width = percent + "%";
    bar.setAttribute("aria-valuenow", String(percent));
    state.textContent = status.state_label;
    percentText.textContent = percent + " %";
    phase.textContent = [status.phase, status.message].filter(Boolean).join(" — ") || "waiting for a worker";
    if (etaText) {
      etaText.textContent = status.eta_seconds == null ? "" :
        "about " + duration(status.eta_seconds) + " left (" + duration(status.elapsed_seconds) + " so far)";
    }
  }

  async function tick() {
    try {
      const response = await fetch(box.dataset.statusUrl, { cache: "no-store", headers: { Accept: "application/json" } });
      if (response.ok) {
        const status = await response.json();
        show(status);
        if (status.final) { window.location.reload(); return; }
      }
    } catch (err) {
      // A dropped request (server restart, flaky Wi-Fi) just waits for the next tick.
    }
    window.setTimeout(tick, 1000);
  }
  window.setTimeout(tick, 1000);
})();
