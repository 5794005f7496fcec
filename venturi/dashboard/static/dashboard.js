// Live updates: pages whose <main> carries data-live re-read themselves every few seconds
// (only the main region, asked for with the X-Venturi-Partial header) until paused.
(function () {
  "use strict";
  var main = document.getElementById("live");
  var toggle = document.getElementById("live-toggle");
  var state = document.getElementById("live-state");
  if (!main || !toggle || main.getAttribute("data-live") !== "1") {
    return;
  }
  var every = parseInt(toggle.getAttribute("data-refresh-ms"), 10) || 5000;
  var paused = false;
  var timer = null;

  function schedule() {
    timer = window.setTimeout(refresh, every);
  }

  function refresh() {
    if (paused) {
      return;
    }
    window.fetch(window.location.href, {
      headers: { "X-Venturi-Partial": "1" },
      credentials: "same-origin",
      cache: "no-store"
    }).then(function (response) {
      if (!response.ok) {
        throw new Error("HTTP " + response.status);
      }
      return response.text();
    }).then(function (html) {
      if (!paused) {
        main.innerHTML = html;
        main.setAttribute("data-refreshed", String(Date.now()));
        state.textContent = "Updated " + new Date().toLocaleTimeString();
      }
    }).catch(function (error) {
      state.textContent = "Update failed (" + error.message + "); retrying";
    }).then(schedule);
  }

  toggle.addEventListener("click", function () {
    paused = !paused;
    toggle.setAttribute("aria-pressed", paused ? "true" : "false");
    toggle.textContent = paused ? "Resume live updates" : "Pause live updates";
    state.textContent = paused ? "Live updates paused" : "Updating";
    if (!paused) {
      window.clearTimeout(timer);
      refresh();
    }
  });
  schedule();
}());
