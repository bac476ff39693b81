// agenttrace serve's session page: the session's tree as server-sent events, drawn by the
// HTML export's renderer (page.js, window.agenttracePage) each time it changes.
(function () {
  "use strict";
  var page = window.agenttracePage;
  var root = document.documentElement;
  var status = document.getElementById("live-status");
  var parts = window.location.pathname.split("/");
  var id = decodeURIComponent(parts[parts.length - 1]);
  var offset = 0;  // the server's clock less this one's, so a running node counts on
  var running = false;
  var updates = 0;
  document.title = "agenttrace session " + id;
  document.getElementById("title").textContent = "agenttrace session " + id;

  function show(data) {
    offset = typeof data.now === "number" ? data.now - Date.now() : 0;
    running = data.status === "running";
    page.render(data);
    updates += 1;
    root.setAttribute("data-status", String(data.status || ""));
    root.setAttribute("data-updates", String(updates));
    status.textContent = running ? "live: running" : String(data.status || "");
    status.className = "live-status" + (running ? " running" : "");
  }
  // Between two updates, each running node's time goes on from when it was first seen.
  function tick() {
    if (!running) return;
    var nodes = document.querySelectorAll(".since[data-since]");
    var now = Date.now() + offset;
    for (var i = 0; i < nodes.length; i++) {
      var since = Number(nodes[i].getAttribute("data-since"));
      nodes[i].textContent = "for " + page.formatMs(Math.max(0, now - since));
    }
  }
  try {
    var source = new EventSource("/api/runs/" + encodeURIComponent(id) + "/events");
    source.addEventListener("tree", function (event) {
      try { show(JSON.parse(event.data)); } catch (error) {
        page.recordError((error && error.stack) || error);
      }
    });
    source.addEventListener("failure", function (event) {
      var message = event.data;
      try { message = JSON.parse(event.data).error; } catch (e) { /* shown as sent */ }
      status.textContent = "cannot read the session now: " + message;
    });
    source.addEventListener("error", function () {
      status.textContent = "disconnected: reconnecting";
    });
    window.setInterval(tick, 1000);
  } catch (error) {
    page.recordError((error && error.stack) || error);
  }
})();
