"""A session file as one self-contained HTML page: the opTree, the dialog and each agent's view.

The page loads nothing: its CSS and JavaScript are inline, and a Content-Security-Policy allows
only those two (by hash) and no network at all, so it can be mailed, attached to a bug or opened
from a disk with nothing to fetch. The session is embedded as JSON in a
``<script type="application/json">`` element, with ``<``, ``>`` and ``&`` written as JSON
escapes so that no text in the session (``</script>``, ``<!--``) can end that element early;
the script builds the page from it with ``textContent`` only, so no text is read as markup.

The URL fragment steers the page, e.g. for a headless browser: ``#expand=all`` opens every
node of the tree, ``#collapse=all`` closes them, ``#agent=Jill`` picks the perspective shown
(parts join with ``&``).
"""

from __future__ import annotations

import base64
import hashlib
import html
import json
import math
from typing import Any

from agenttrace._version import __version__
from agenttrace.views.exports._spans import Source, load
from agenttrace.views.viewer import SessionViewer

DATA_ELEMENT_ID = "agenttrace-data"


def to_html(source: Source) -> str:
    """The session as one HTML page that needs no network.

    ``source``: a :class:`~agenttrace.record.session_files.LoadedFile` or a session file path (read
    with :func:`~agenttrace.record.session_files.read_session_file`, which raises
    :class:`~agenttrace.record.session_files.SessionFileError`). An event stream has no opTree: its
    page shows the dialog and the perspectives only.
    """
    loaded = load(source)
    viewer = SessionViewer(loaded.events)
    agents = viewer.list_agents()
    # The dialog is the conversation between the named agents (the sub-agents a run created);
    # with none named, it is everything every agent exchanged.
    named = [
        event["agent_id"]
        for event in viewer.events
        if event.get("event_type") == "agent_created" and event.get("name")
    ]
    dialog = viewer.extract_dialog(named or list(agents))
    data = {
        "sessionId": loaded.session_id,
        "file": loaded.path.name,
        "fileKind": loaded.kind,
        "meta": loaded.meta,
        "runs": loaded.runs,
        "agents": [
            {
                "id": agent_id,
                "name": name,
                "named": agent_id in named,
                "perspective": viewer.extract_agent_perspective(agent_id),
            }
            for agent_id, name in agents.items()
        ],
        "dialog": [
            {key: message.get(key) for key in ("speaker", "agent_id", "role", "content")}
            for message in dialog
        ],
        "generator": f"agenttrace {__version__}",
    }
    title = f"agenttrace session {loaded.session_id or loaded.path.name}"
    policy = "; ".join(
        (
            "default-src 'none'",
            f"script-src '{_csp_hash(_SCRIPT)}'",
            f"style-src '{_csp_hash(_STYLE)}'",
            "img-src 'none'",
            "base-uri 'none'",
            "form-action 'none'",
        )
    )
    return _PAGE.format(
        # Readable quotes in the policy: only ``"`` would end the attribute.
        policy=html.escape(policy, quote=False).replace('"', "&quot;"),
        title=html.escape(title),
        style=_STYLE,
        data_id=DATA_ELEMENT_ID,
        data=script_json(data),
        script=_SCRIPT,
    )


def script_json(value: Any) -> str:
    """``value`` as JSON that is safe as the text of a ``<script>`` element.

    ``<``, ``>`` and ``&`` only occur inside JSON strings, where their ``\\u`` escapes mean the
    same, so ``</script>`` and ``<!--`` cannot appear; U+2028/2029 are escaped for old parsers.
    """
    try:
        text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    except ValueError:  # NaN or infinity somewhere: JSON.parse would refuse them
        text = json.dumps(_finite(value), ensure_ascii=False, separators=(",", ":"))
    return (
        text.replace("&", "\\u0026")
        .replace("<", "\\u003c")
        .replace(">", "\\u003e")
        .replace("\u2028", "\\u2028")
        .replace("\u2029", "\\u2029")
    )


def _finite(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {key: _finite(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(item) for item in value]
    return value


def _csp_hash(text: str) -> str:
    digest = hashlib.sha256(text.encode("utf-8")).digest()
    return "sha256-" + base64.b64encode(digest).decode("ascii")


_PAGE = """<!DOCTYPE html>
<html lang="en" data-ready="0" data-errors="">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="{policy}">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="no-referrer">
<title>{title}</title>
<style>{style}</style>
</head>
<body>
<header class="page-header">
  <h1 id="title">{title}</h1>
  <dl id="summary" class="summary"></dl>
</header>
<main id="main">
  <section id="optree" class="panel" aria-labelledby="optree-heading">
    <div class="panel-head">
      <h2 id="optree-heading">opTree</h2>
      <div class="tools">
        <button type="button" id="expand-all">Expand all</button>
        <button type="button" id="collapse-all">Collapse all</button>
      </div>
    </div>
    <div id="tree" class="tree"></div>
  </section>
  <div class="side">
    <section id="dialog" class="panel" aria-labelledby="dialog-heading">
      <h2 id="dialog-heading">Dialog</h2>
      <p class="hint">What the agents said to each other, each message once.</p>
      <ol id="dialog-list" class="dialog"></ol>
    </section>
    <section id="perspective" class="panel" aria-labelledby="perspective-heading">
      <div class="panel-head">
        <h2 id="perspective-heading">Perspective</h2>
        <label class="tools">Agent <select id="agent-select"></select></label>
      </div>
      <p class="hint">What one agent heard, did, said and received.</p>
      <ol id="perspective-list" class="perspective"></ol>
    </section>
  </div>
</main>
<noscript><p class="noscript">This page needs JavaScript to show the session.</p></noscript>
<script type="application/json" id="{data_id}">{data}</script>
<script>{script}</script>
</body>
</html>
"""

_STYLE = """
:root {
  --bg: #f6f7f9; --panel: #ffffff; --text: #1d2330; --muted: #5f6b7a; --line: #dde2e8;
  --session: #6b4fbb; --turn: #5f6b7a; --llm: #1f6feb; --tool: #1a7f37;
  --ok: #1a7f37; --ok-bg: #dafbe1; --failed: #cf222e; --failed-bg: #ffebe9;
  --running: #9a6700; --running-bg: #fff8c5; --code-bg: #f3f4f6;
  color-scheme: light dark;
}
@media (prefers-color-scheme: dark) {
  :root {
    --bg: #0d1117; --panel: #161b22; --text: #e6edf3; --muted: #8d96a0; --line: #30363d;
    --session: #a371f7; --turn: #8d96a0; --llm: #4493f8; --tool: #3fb950;
    --ok: #3fb950; --ok-bg: #12261e; --failed: #f85149; --failed-bg: #2d1214;
    --running: #d29922; --running-bg: #2b2111; --code-bg: #0d1117;
  }
}
* { box-sizing: border-box; }
body {
  margin: 0; padding: 16px 20px 32px; background: var(--bg); color: var(--text);
  font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, "DejaVu Sans", sans-serif;
}
h1 { font-size: 20px; margin: 0 0 6px; font-weight: 600; word-break: break-all; }
h2 { font-size: 16px; margin: 0; font-weight: 600; }
code, pre, .mono, .path { font-family: ui-monospace, "SFMono-Regular", Menlo, "DejaVu Sans Mono",
  monospace; }
.summary { display: flex; flex-wrap: wrap; gap: 4px 18px; margin: 0; color: var(--muted); }
.summary div { display: flex; gap: 6px; }
.summary dt { font-weight: 600; }
.summary dd { margin: 0; color: var(--text); }
main { display: grid; grid-template-columns: minmax(0, 2fr) minmax(0, 1fr); gap: 16px;
  margin-top: 14px; align-items: start; }
@media (max-width: 900px) { main { grid-template-columns: minmax(0, 1fr); } }
.side { display: grid; gap: 16px; }
.panel { background: var(--panel); border: 1px solid var(--line); border-radius: 8px;
  padding: 12px 14px; min-width: 0; }
.panel-head { display: flex; align-items: center; justify-content: space-between; gap: 8px;
  margin-bottom: 8px; flex-wrap: wrap; }
.tools { display: flex; gap: 6px; align-items: center; color: var(--muted); }
button, select { font: inherit; font-size: 13px; color: var(--text); background: var(--bg);
  border: 1px solid var(--line); border-radius: 6px; padding: 3px 10px; cursor: pointer; }
button:hover, select:hover { border-color: var(--muted); }
button:focus-visible, select:focus-visible, summary:focus-visible {
  outline: 2px solid var(--llm); outline-offset: 1px; }
.hint { margin: 2px 0 8px; color: var(--muted); font-size: 12px; }
.empty { color: var(--muted); font-style: italic; }
.run-title { margin: 10px 0 4px; font-size: 13px; color: var(--muted); font-weight: 600; }
.run-title:first-child { margin-top: 0; }
.tree ul { list-style: none; margin: 0; padding: 0 0 0 12px; border-left: 1px dashed var(--line);
  margin-left: 6px; }
.tree > ul { padding-left: 0; border-left: 0; margin-left: 0; }
.tree li { margin: 1px 0; }
details.node > summary { list-style: none; cursor: pointer; border-radius: 5px;
  padding: 2px 4px; display: flex; align-items: baseline; gap: 8px; min-width: 0; }
details.node > summary > * { flex: none; }
details.node > summary::-webkit-details-marker { display: none; }
details.node > summary::before { content: "\\25B8"; color: var(--muted); width: 10px;
  flex: none; }
details.node[open] > summary::before { content: "\\25BE"; }
details.node > summary:hover { background: var(--bg); }
.path { color: var(--muted); font-size: 12px; }
.kind { font-size: 11px; font-weight: 600; text-transform: uppercase; letter-spacing: .03em;
  padding: 0 6px; border-radius: 4px; border: 1px solid currentColor; }
.kind-session { color: var(--session); }
.kind-turn { color: var(--turn); }
.kind-llm { color: var(--llm); }
.kind-tool { color: var(--tool); }
details.node > summary > .name { flex: 0 1 auto; min-width: 1em; overflow: hidden;
  text-overflow: ellipsis; white-space: nowrap; font-weight: 600; }
.agent-id { color: var(--muted); font-size: 12px; }
.status { font-size: 11px; font-weight: 600; padding: 0 6px; border-radius: 9px; }
.status-ok { color: var(--ok); background: var(--ok-bg); }
.status-failed { color: var(--failed); background: var(--failed-bg); }
.status-unfinished { color: var(--running); background: var(--running-bg); }
details.node > summary > .metrics { margin-left: auto; display: flex; gap: 10px;
  color: var(--muted); font-size: 12px; font-variant-numeric: tabular-nums;
  white-space: nowrap; }
.metrics .total { font-style: italic; }
.body { padding: 2px 0 4px 14px; }
.facts { margin: 2px 0 4px; color: var(--muted); font-size: 12px; }
.error { color: var(--failed); background: var(--failed-bg); border-radius: 5px;
  padding: 4px 8px; margin: 4px 0; white-space: pre-wrap; word-break: break-word; }
.payload { margin: 4px 0; }
.payload > summary { cursor: pointer; color: var(--muted); font-size: 12px; }
pre { background: var(--code-bg); border: 1px solid var(--line); border-radius: 5px;
  padding: 6px 8px; margin: 4px 0; font-size: 12px; white-space: pre-wrap;
  word-break: break-word; max-height: 320px; overflow: auto; }
.logs { margin: 4px 0; padding-left: 18px; font-size: 12px; }
.dialog, .perspective { list-style: none; margin: 0; padding: 0; display: grid; gap: 8px; }
.msg { border: 1px solid var(--line); border-radius: 8px; padding: 6px 10px; }
.msg .who { font-weight: 600; font-size: 12px; margin-bottom: 2px; }
.msg .content { white-space: pre-wrap; word-break: break-word; }
.msg.role-system, .msg.role-text, .msg.role-user { background: var(--bg); }
.msg.role-system .who, .msg.role-text .who, .msg.role-user .who { color: var(--muted); }
.line { display: grid; grid-template-columns: 6.5em minmax(0, 1fr); gap: 8px; }
.line .tag { font-weight: 600; font-size: 12px; color: var(--muted); }
.line .text { white-space: pre-wrap; word-break: break-word; }
.tag-said, .tag-action { color: var(--llm) !important; }
.tag-received { color: var(--tool) !important; }
.noscript { color: var(--failed); }
"""

_SCRIPT = """
(function () {
  "use strict";
  var root = document.documentElement;
  var errors = [];
  function recordError(message) {
    errors.push(String(message));
    root.setAttribute("data-errors", errors.join("\\n"));
  }
  window.addEventListener("error", function (event) {
    recordError(event.message || event.error || "error");
  });

  function el(tag, className, text) {
    var node = document.createElement(tag);
    if (className) node.className = className;
    if (text !== undefined && text !== null) node.textContent = String(text);
    return node;
  }
  function isNumber(value) { return typeof value === "number" && isFinite(value); }
  function formatMs(ms) {
    if (!isNumber(ms)) return "";
    if (ms < 1) return ms.toFixed(2) + " ms";
    if (ms < 1000) return Math.round(ms) + " ms";
    return (ms / 1000).toFixed(ms < 10000 ? 2 : 1) + " s";
  }
  function formatCost(usd) {
    if (!isNumber(usd)) return "";
    return "$" + usd.toFixed(usd !== 0 && usd < 0.01 ? 6 : 4);
  }
  function formatTime(ms) {
    if (!isNumber(ms)) return "";
    try { return new Date(ms).toISOString().replace("T", " ").replace("Z", " UTC"); }
    catch (e) { return String(ms); }
  }
  function text(value) {
    if (value === undefined || value === null) return "";
    if (typeof value === "string") return value;
    try { return JSON.stringify(value, null, 2); } catch (e) { return String(value); }
  }
  function capped(value, limit) {
    var s = text(value);
    return s.length > limit ? s.slice(0, limit) + "\\u2026 (" + (s.length - limit) +
      " more characters)" : s;
  }

  // --- totals -------------------------------------------------------------------------------
  function emptyTotals() { return { input: 0, output: 0, cache: 0, cost: 0, costs: 0, llm: 0 }; }
  function addOp(totals, op) {
    (op.accounting || []).forEach(function (entry) {
      var tokens = entry && entry.tokens;
      if (tokens) {
        if (isNumber(tokens.inputTokens)) totals.input += tokens.inputTokens;
        if (isNumber(tokens.outputTokens)) totals.output += tokens.outputTokens;
        if (isNumber(tokens.cacheReadInputTokens)) totals.cache += tokens.cacheReadInputTokens;
      }
      if (entry && isNumber(entry.costUsd)) { totals.cost += entry.costUsd; totals.costs += 1; }
      if (entry && entry.type === "llm") totals.llm += 1;
    });
  }
  function sessionTotals(session, totals) {
    (session.turns || []).forEach(function (turn) { turnTotals(turn, totals); });
    return totals;
  }
  function turnTotals(turn, totals) {
    (turn.ops || []).forEach(function (op) {
      addOp(totals, op);
      childSessions(op).forEach(function (child) { sessionTotals(child, totals); });
    });
    return totals;
  }
  function childSessions(op) {
    if (Array.isArray(op.childSessions) && op.childSessions.length) return op.childSessions;
    return op.childSession ? [op.childSession] : [];
  }
  function metrics(totals, latency, isTotal) {
    var box = el("span", "metrics");
    if (totals.input || totals.output) {
      var tokens = "in " + totals.input + " \\u00b7 out " + totals.output;
      if (totals.cache) tokens += " \\u00b7 cache " + totals.cache;
      box.appendChild(el("span", isTotal ? "total" : "", (isTotal ? "\\u03a3 " : "") + tokens));
    }
    if (totals.costs) box.appendChild(el("span", isTotal ? "total" : "", formatCost(totals.cost)));
    if (isNumber(latency)) box.appendChild(el("span", "", formatMs(latency)));
    return box;
  }
  function statusBadge(status) {
    return el("span", "status status-" + status, status);
  }

  // --- the tree -----------------------------------------------------------------------------
  function nodeShell(kind, open) {
    var details = el("details", "node node-" + kind);
    if (open) details.open = true;
    var summary = el("summary");
    details.appendChild(summary);
    var body = el("div", "body");
    details.appendChild(body);
    return { details: details, summary: summary, body: body };
  }
  function childList(parent) {
    var list = el("ul");
    parent.appendChild(list);
    return list;
  }
  function addRow(summary, path, kind, name) {
    summary.appendChild(el("span", "path", path));
    summary.appendChild(el("span", "kind kind-" + kind, kind));
    var label = el("span", "name", name);
    label.title = String(name);  // the whole name, when the row cuts it short
    summary.appendChild(label);
  }
  function renderSession(session) {
    var li = el("li");
    var shell = nodeShell("session", true);
    li.appendChild(shell.details);
    li.setAttribute("data-path", session.path || "0");
    addRow(shell.summary, session.path || "0", "session", session.agentName || "agent");
    if (session.agentId) shell.summary.appendChild(el("span", "agent-id", session.agentId));
    var status = session.endedAt == null ? "unfinished" :
      session.success === false ? "failed" : "ok";
    shell.summary.appendChild(statusBadge(status));
    shell.summary.appendChild(metrics(sessionTotals(session, emptyTotals()),
      session.latencyMs, true));
    var facts = [];
    if (session.callPath) facts.push("call path " + session.callPath);
    if (session.txnId) facts.push("txn " + session.txnId);
    if (isNumber(session.startedAt)) facts.push("started " + formatTime(session.startedAt));
    var ingress = session.attributes && session.attributes.ingress;
    if (ingress && ingress.source) facts.push("ingress " + ingress.source);
    if (facts.length) shell.body.appendChild(el("div", "facts", facts.join(" \\u00b7 ")));
    if (session.error) shell.body.appendChild(el("div", "error", session.error));
    var list = childList(shell.body);
    (session.turns || []).forEach(function (turn) { list.appendChild(renderTurn(turn)); });
    return li;
  }
  function renderTurn(turn) {
    var li = el("li");
    var shell = nodeShell("turn", true);
    li.appendChild(shell.details);
    li.setAttribute("data-path", turn.path || "");
    var index = turn.index == null ? "?" : turn.index;
    addRow(shell.summary, turn.path || "", "turn", "turn " + index);
    if (turn.endedAt == null) shell.summary.appendChild(statusBadge("unfinished"));
    var duration = isNumber(turn.endedAt) && isNumber(turn.startedAt) ?
      turn.endedAt - turn.startedAt : null;
    shell.summary.appendChild(metrics(turnTotals(turn, emptyTotals()), duration, true));
    var list = childList(shell.body);
    (turn.ops || []).forEach(function (op) { list.appendChild(renderOp(op)); });
    return li;
  }
  function renderOp(op) {
    var li = el("li");
    var children = childSessions(op);
    var kind = op.kind || "tool";
    var shell = nodeShell(kind, children.length > 0);
    li.appendChild(shell.details);
    li.setAttribute("data-path", op.path || "");
    addRow(shell.summary, op.path || "", kind, op.name || kind);
    shell.summary.appendChild(statusBadge(op.endedAt == null ? "unfinished" : op.status || "ok"));
    var totals = emptyTotals();
    addOp(totals, op);
    shell.summary.appendChild(metrics(totals, op.latencyMs, false));
    var last = (op.accounting || [])[(op.accounting || []).length - 1] || {};
    var facts = [];
    if (last.provider) facts.push(last.provider);
    if (last.actualModel && last.actualModel !== op.name) {
      facts.push("answered by " + last.actualModel);
    }
    if (isNumber(last.attempt) && last.attempt > 1) facts.push("attempt " + last.attempt);
    if (isNumber(last.charactersIn)) facts.push("chars in " + last.charactersIn);
    if (isNumber(last.charactersOut)) facts.push("chars out " + last.charactersOut);
    if (facts.length) shell.body.appendChild(el("div", "facts", facts.join(" \\u00b7 ")));
    if (op.error) shell.body.appendChild(el("div", "error", op.error));
    addPayload(shell.body, "request", op.request);
    addPayload(shell.body, "response", op.response);
    var logs = op.logs || [];
    if (logs.length) {
      var logList = el("ul", "logs");
      logs.forEach(function (entry) {
        logList.appendChild(el("li", "", "[" + (entry.level || "?") + "] " + text(entry.message)));
      });
      shell.body.appendChild(logList);
    }
    var chunks = op.reasoning && op.reasoning.chunks;
    if (chunks && chunks.length) {
      addPayload(shell.body, "reasoning", {
        payload: chunks.map(function (c) { return c.text || ""; }).join("")
      });
    }
    if (children.length) {
      var list = childList(shell.body);
      children.forEach(function (child) { list.appendChild(renderSession(child)); });
    }
    return li;
  }
  function describeMessages(payload) {
    if (!Array.isArray(payload) || !payload.every(function (m) { return m && m.role; })) {
      return text(payload);
    }
    return payload.map(function (message) {
      var line = message.role + ": " + (message.content == null ? "" : text(message.content));
      (message.tool_calls || []).forEach(function (call) {
        var fn = (call && call.function) || {};
        line += "\\n  \\u2192 " + (fn.name || "?") + "(" + text(fn.arguments) + ")";
      });
      return line;
    }).join("\\n");
  }
  function addPayload(parent, label, entry) {
    if (!entry || entry.payload === undefined) return;
    var box = el("details", "payload");
    var size = isNumber(entry.size) ? " (" + entry.size + " chars)" : "";
    box.appendChild(el("summary", "", label + size));
    box.appendChild(el("pre", "", capped(describeMessages(entry.payload), 4000)));
    parent.appendChild(box);
  }
  function renderTree(data) {
    var tree = document.getElementById("tree");
    var runs = Array.isArray(data.runs) ? data.runs : [];
    if (!runs.length) {
      tree.appendChild(el("p", "empty", data.fileKind === "stream" ?
        "An event stream has no opTree: export the session file (.json.gz) to see it." :
        "No runs in this session."));
      return;
    }
    runs.forEach(function (run, index) {
      var title = "run " + (index + 1);
      if (run.traceId) title += " \\u00b7 trace " + run.traceId;
      tree.appendChild(el("div", "run-title", title));
      var list = el("ul");
      list.appendChild(renderSession(run));
      tree.appendChild(list);
    });
  }
  function setAll(open) {
    var nodes = document.querySelectorAll("details.node");
    for (var i = 0; i < nodes.length; i++) nodes[i].open = open;
  }

  // --- dialog and perspectives ----------------------------------------------------------------
  function renderDialog(data) {
    var list = document.getElementById("dialog-list");
    var dialog = Array.isArray(data.dialog) ? data.dialog : [];
    if (!dialog.length) { list.appendChild(el("li", "empty", "No messages.")); return; }
    dialog.forEach(function (message) {
      var role = message.role || "text";
      var item = el("li", "msg role-" + role.replace(/[^a-z]/g, ""));
      var who = message.speaker || message.agent_id || "?";
      // As format_dialog words it: instructions, a text handed to all, or a message.
      var label = role === "system" ? who + "\\u2019s instructions" :
        role === "text" || role === "assistant" ? who : who + " (" + role + ")";
      item.appendChild(el("div", "who", label));
      item.appendChild(el("div", "content", text(message.content)));
      list.appendChild(item);
    });
  }
  var TAGS = ["System", "Heard", "Action", "Said", "Received"];
  function perspectiveLines(perspective) {
    var lines = [];
    String(perspective || "").split("\\n").forEach(function (raw) {
      var match = /^\\[(System|Heard|Action|Said|Received)\\]: ?([\\s\\S]*)$/.exec(raw);
      if (match) lines.push({ tag: match[1], text: match[2] });
      else if (lines.length) lines[lines.length - 1].text += "\\n" + raw;
      else if (raw) lines.push({ tag: "", text: raw });
    });
    return lines;
  }
  function renderPerspective(agent) {
    var list = document.getElementById("perspective-list");
    list.textContent = "";
    list.setAttribute("data-agent", agent ? agent.id : "");
    var lines = agent ? perspectiveLines(agent.perspective) : [];
    if (!lines.length) { list.appendChild(el("li", "empty", "Nothing recorded.")); return; }
    lines.forEach(function (line) {
      var item = el("li", "line");
      var tag = TAGS.indexOf(line.tag) >= 0 ? line.tag : "";
      item.appendChild(el("span", "tag tag-" + tag.toLowerCase(), tag));
      item.appendChild(el("span", "text", line.text));
      list.appendChild(item);
    });
  }
  function setupPerspectives(data, wanted) {
    var select = document.getElementById("agent-select");
    var agents = Array.isArray(data.agents) ? data.agents : [];
    var chosen = 0;
    agents.forEach(function (agent, index) {
      var label = agent.name && agent.name !== agent.id ? agent.name + " (" + agent.id + ")" :
        agent.id;
      var option = el("option", "", label);
      option.value = String(index);
      select.appendChild(option);
      if (wanted && (agent.name === wanted || agent.id === wanted)) chosen = index;
    });
    // The attribute too (not only the value), so a saved or dumped page shows the choice.
    if (agents.length) select.options[chosen].defaultSelected = true;
    select.disabled = !agents.length;
    select.value = String(chosen);
    select.addEventListener("change", function () {
      renderPerspective(agents[Number(select.value)]);
    });
    renderPerspective(agents[chosen]);
  }

  // --- header and fragment --------------------------------------------------------------------
  function renderSummary(data) {
    var summary = document.getElementById("summary");
    function add(label, value) {
      if (value === undefined || value === null || value === "") return;
      var row = el("div");
      row.appendChild(el("dt", "", label));
      row.appendChild(el("dd", "", value));
      summary.appendChild(row);
    }
    var meta = data.meta || {};
    var runs = Array.isArray(data.runs) ? data.runs : [];
    var totals = emptyTotals();
    runs.forEach(function (run) { sessionTotals(run, totals); });
    add("file", data.file);
    add("created", formatTime(meta.createdAt));
    add("updated", formatTime(meta.updatedAt));
    if (meta.result && typeof meta.result.success === "boolean") {
      add("result", meta.result.success ? "success" :
        "failed" + (meta.result.error ? ": " + text(meta.result.error) : ""));
    }
    add("runs", String(runs.length));
    add("agents", String((data.agents || []).length));
    if (totals.input || totals.output) {
      add("tokens", "in " + totals.input + " \\u00b7 out " + totals.output);
    }
    if (totals.costs) add("cost", formatCost(totals.cost));
  }
  function fragment() {
    var params = {};
    var hash = (window.location.hash || "").replace(/^#/, "");
    hash.split("&").forEach(function (part) {
      var at = part.indexOf("=");
      if (at > 0) {
        try { params[part.slice(0, at)] = decodeURIComponent(part.slice(at + 1)); }
        catch (e) { params[part.slice(0, at)] = part.slice(at + 1); }
      }
    });
    return params;
  }
  function applyFragment() {
    var params = fragment();
    if (params.expand === "all") setAll(true);
    if (params.collapse === "all") setAll(false);
    return params;
  }

  try {
    var data = JSON.parse(document.getElementById("agenttrace-data").textContent);
    renderSummary(data);
    renderTree(data);
    renderDialog(data);
    var params = applyFragment();
    setupPerspectives(data, params.agent);
    document.getElementById("expand-all").addEventListener("click", function () {
      setAll(true);
    });
    document.getElementById("collapse-all").addEventListener("click", function () {
      setAll(false);
    });
    window.addEventListener("hashchange", applyFragment);
    root.setAttribute("data-ready", "1");
  } catch (error) {
    recordError((error && error.stack) || error);
  }
})();
"""
