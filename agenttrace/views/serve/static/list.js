// agenttrace serve's first page: the sessions of its directory, newest first, every 2 s.
(function () {
  "use strict";
  var root = document.documentElement;
  function el(tag, className, text) {
    var node = document.createElement(tag);
    if (className) node.className = className;
    if (text !== undefined && text !== null) node.textContent = String(text);
    return node;
  }
  function cell(row, text, className) { row.appendChild(el("td", className || "", text)); }
  function show(data) {
    document.getElementById("directory").textContent = data.directory + " \u00b7 " +
      data.total + " session" + (data.total === 1 ? "" : "s");
    var body = document.querySelector("#sessions tbody");
    body.textContent = "";
    (data.runs || []).forEach(function (run) {
      var row = el("tr", run.live ? "live" : "");
      row.setAttribute("data-session", run.session_id);
      var name = el("td");
      var link = el("a", "", run.session_id);
      link.href = "/session/" + encodeURIComponent(run.session_id);
      name.appendChild(link);
      row.appendChild(name);
      cell(row, run.started ? run.started.replace("T", " ").replace("Z", "") : "");
      cell(row, run.live ? "\u25cf running" : run.status, "status-cell status-" + run.status);
      cell(row, run.agents == null ? "-" : run.agents, "number");
      cell(row, run.runs == null ? "-" : run.runs, "number");
      cell(row, run.tokens == null ? "-" : run.tokens, "number");
      cell(row, run.error ? run.error : run.cost, run.error ? "error" : "number");
      body.appendChild(row);
    });
    root.setAttribute("data-ready", "1");
  }
  function load() {
    fetch("/api/runs", { credentials: "same-origin" })
      .then(function (response) {
        if (!response.ok) throw new Error("HTTP " + response.status);
        return response.json();
      })
      .then(show)
      .catch(function (error) { root.setAttribute("data-errors", String(error)); });
  }
  load();
  window.setInterval(load, 2000);
})();
