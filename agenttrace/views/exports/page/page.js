(function () {
  "use strict";
  var root = document.documentElement;
  var errors = [];
  function recordError(message) {
    errors.push(String(message));
    root.setAttribute("data-errors", errors.join("\n"));
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
  function has(object, key) { return Object.prototype.hasOwnProperty.call(object, key); }
  function compactJson(value) {
    try {
      var json = JSON.stringify(value);
      return json === undefined ? String(value) : json;
    } catch (e) { return String(value); }
  }

  // --- message content, by the rules of agenttrace/formats/content.py (content_text) -----------
  var TEXT_TYPES = { text: 1, input_text: 1, output_text: 1 };
  var PLACEHOLDERS = {
    image: "image", image_url: "image", input_image: "image",
    audio: "audio", input_audio: "audio", video: "video", video_url: "video",
    file: "file", input_file: "file", document: "file"
  };
  var TOOL_CALLS = { tool_use: 1, server_tool_use: 1, function_call: 1, tool_call: 1 };
  var TOOL_RESULTS = { tool_result: 1, function_call_output: 1, tool_call_output: 1 };
  var THINKING = { thinking: 1, redacted_thinking: 1, reasoning: 1 };
  var MAX_TYPE = 40;
  function isObject(value) {
    return value !== null && typeof value === "object" && !Array.isArray(value);
  }
  function contentText(content) {
    if (content === undefined || content === null) return "";
    if (typeof content === "string") return content;
    if (Array.isArray(content)) return content.map(partText).join("\n");
    if (isObject(content)) return partText(content);
    return compactJson(content);
  }
  function partText(part) {
    if (!isObject(part)) return contentText(part);
    var kind = part.type;
    if (typeof kind !== "string") return compactJson(part);
    if (has(TEXT_TYPES, kind) && typeof part.text === "string") return part.text;
    if (kind === "refusal" && typeof part.refusal === "string") return part.refusal;
    if (has(PLACEHOLDERS, kind)) {
      var name = fileName(part);
      return "[" + PLACEHOLDERS[kind] + (name ? " " + name : "") + "]";
    }
    if (has(TOOL_CALLS, kind)) {
      return typeof part.name === "string" && part.name ? "[tool call " + part.name + "]" :
        "[tool call]";
    }
    if (has(TOOL_RESULTS, kind)) {
      var result = contentText(has(part, "content") ? part.content : part.output);
      return result ? "[tool result] " + result : "[tool result]";
    }
    if (has(THINKING, kind)) return "[thinking]";
    return "[" + Array.from(kind).slice(0, MAX_TYPE).join("") + "]";  // by code point, as Python
  }
  function fileName(part) {
    var holders = [isObject(part.file) ? part.file : {}, part];
    for (var i = 0; i < holders.length; i++) {
      var name = holders[i].filename;
      if (typeof name === "string" && name) return name;
    }
    return "";
  }

  function capped(value, limit) {
    var s = text(value);
    return s.length > limit ? s.slice(0, limit) + "\u2026 (" + (s.length - limit) +
      " more characters)" : s;
  }

  // --- totals -------------------------------------------------------------------------------
  function emptyTotals() {
    return { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, cost: 0, costs: 0, unknown: 0,
      llm: 0 };
  }
  function hasUsage(entry) {
    var tokens = entry.tokens;
    return isObject(tokens) && (isNumber(tokens.inputTokens) || isNumber(tokens.outputTokens));
  }
  // As agenttrace.formats.session.optree.cost_unknown: an LLM call without a price (its model is not in
  // litellm's price map) is unknown, never free; a failed attempt without usage has no price.
  function costUnknown(entry) {
    if (entry.type !== "llm" || isNumber(entry.costUsd)) return false;
    return entry.status !== "failed" || hasUsage(entry);
  }
  function addOp(totals, op) {
    (Array.isArray(op.accounting) ? op.accounting : []).forEach(function (entry) {
      if (!isObject(entry)) return;
      var tokens = entry.tokens;
      if (isObject(tokens)) {
        if (isNumber(tokens.inputTokens)) totals.input += tokens.inputTokens;
        if (isNumber(tokens.outputTokens)) totals.output += tokens.outputTokens;
        if (isNumber(tokens.cacheReadInputTokens)) totals.cacheRead += tokens.cacheReadInputTokens;
        if (isNumber(tokens.cacheWriteInputTokens)) {
          totals.cacheWrite += tokens.cacheWriteInputTokens;
        }
      }
      if (isNumber(entry.costUsd)) { totals.cost += entry.costUsd; totals.costs += 1; }
      if (costUnknown(entry)) totals.unknown += 1;
      if (entry.type === "llm") totals.llm += 1;
    });
  }
  // The cost as agenttrace.formats.session.totals.cost_text words it: a sum over calls of unknown price
  // is "at least" what is known; one call without a price is "cost unknown".
  function costText(totals, isTotal) {
    if (!totals.unknown) return totals.costs ? formatCost(totals.cost) : "";
    if (!isTotal) return "cost unknown";
    var calls = totals.unknown + " call" + (totals.unknown === 1 ? "" : "s") + " of unknown cost";
    return totals.cost > 0 ? "at least " + formatCost(totals.cost) + " (" + calls + ")" :
      "unknown (" + calls + ")";
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
    // Several runs: childSessions; one: childSession (earlier releases wrote both, the first
    // run twice), as agenttrace/formats/session/optree.py hosted_sessions reads them.
    if (Array.isArray(op.childSessions) && op.childSessions.length) return op.childSessions;
    return op.childSession ? [op.childSession] : [];
  }
  function metrics(totals, latency, isTotal) {
    var box = el("span", "metrics");
    if (totals.input || totals.output) {
      var tokens = "in " + totals.input + " \u00b7 out " + totals.output;
      // Reads and writes: a write is billed above plain input, a read below it.
      if (totals.cacheRead || totals.cacheWrite) {
        tokens += " \u00b7 cache r " + totals.cacheRead + " w " + totals.cacheWrite;
      }
      box.appendChild(el("span", isTotal ? "total" : "", (isTotal ? "\u03a3 " : "") + tokens));
    }
    var cost = costText(totals, isTotal);
    if (cost) box.appendChild(el("span", (isTotal ? "total " : "") + "cost", cost));
    if (isNumber(latency)) box.appendChild(el("span", "", formatMs(latency)));
    return box;
  }
  function statusBadge(status) {
    return el("span", "status status-" + status, status);
  }
  // Live (agenttrace serve): the session's process still runs. ``now`` is the server's clock
  // (ms) when it read the files; a node without an end has run since its startedAt.
  var live = { running: false, now: null };
  // A node whose process is gone (``agenttrace.process_gone``: a later process wrote a run of
  // the session since) is interrupted even while the session runs: it will never end.
  function unfinishedStatus(node) {
    var attributes = isObject(node.attributes) ? node.attributes : {};
    if (attributes["agenttrace.process_gone"] === true) return "interrupted";
    if (live.running) return "running";
    return attributes["agenttrace.interrupted"] === true ? "interrupted" : "unfinished";
  }
  // A running node's badge and how long it has run: ``data-since`` lets the live page count on
  // between two updates without drawing the tree again.
  function addUnfinished(summary, node) {
    var status = unfinishedStatus(node);
    var attributes = isObject(node.attributes) ? node.attributes : {};
    var doubt = attributes["agenttrace.in_doubt"];
    if (typeof doubt === "string") {
      // A tool call a kill cut short that may have had its effect (agenttrace doubts).
      summary.appendChild(el("span", "status status-interrupted", "in doubt (" + doubt + ")"));
      return;
    }
    summary.appendChild(statusBadge(status));
    if (status !== "running" || !isNumber(node.startedAt) || !isNumber(live.now)) return;
    var since = el("span", "since", "for " + formatMs(Math.max(0, live.now - node.startedAt)));
    since.setAttribute("data-since", String(node.startedAt));
    summary.appendChild(since);
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
    if (session.endedAt == null) addUnfinished(shell.summary, session);
    else shell.summary.appendChild(statusBadge(session.success === false ? "failed" : "ok"));
    shell.summary.appendChild(metrics(sessionTotals(session, emptyTotals()),
      session.latencyMs, true));
    var facts = [];
    if (session.callPath) facts.push("call path " + session.callPath);
    if (session.txnId) facts.push("txn " + session.txnId);
    if (isNumber(session.startedAt)) facts.push("started " + formatTime(session.startedAt));
    var ingress = session.attributes && session.attributes.ingress;
    if (ingress && ingress.source) facts.push("ingress " + ingress.source);
    if (facts.length) shell.body.appendChild(el("div", "facts", facts.join(" \u00b7 ")));
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
    if (turn.endedAt == null) addUnfinished(shell.summary, turn);
    var duration = isNumber(turn.endedAt) && isNumber(turn.startedAt) ?
      turn.endedAt - turn.startedAt : null;
    shell.summary.appendChild(metrics(turnTotals(turn, emptyTotals()), duration, true));
    var list = childList(shell.body);
    var ops = Array.isArray(turn.ops) ? turn.ops : [];
    var parents = opParents(ops);
    var called = ops.map(function () { return []; });
    ops.forEach(function (op, index) {
      if (parents[index] !== null) called[parents[index]].push(index);
    });
    // An op another op of the turn ran (a tool a tool called, a code agent's code) goes under
    // it, as its span is under that op's span.
    function render(index) {
      return renderOp(ops[index], called[index].map(render));
    }
    ops.forEach(function (op, index) {
      if (parents[index] === null) list.appendChild(render(index));
    });
    return li;
  }
  // As agenttrace.formats.session.optree.op_parents: for each op, the index of the earlier op of the turn
  // whose span is its span's parent, at most MAX_OP_NESTING deep; else null.
  var MAX_OP_NESTING = 32;
  function opParents(ops) {
    var indexOf = Object.create(null);
    var depth = [];
    return ops.map(function (op, index) {
      var span = isObject(op) ? op.span : null;
      var parentId = isObject(span) ? span.parentSpanId : null;
      var parent = typeof parentId === "string" && parentId in indexOf ? indexOf[parentId] : null;
      if (parent !== null && depth[parent] >= MAX_OP_NESTING) parent = null;
      depth.push(parent === null ? 0 : depth[parent] + 1);
      if (isObject(op) && typeof op.opId === "string" && !(op.opId in indexOf)) {
        indexOf[op.opId] = index;
      }
      return parent;
    });
  }
  function renderOp(op, calledOps) {
    var li = el("li");
    var children = childSessions(op);
    var kind = op.kind || "tool";
    var shell = nodeShell(kind, children.length > 0 || calledOps.length > 0);
    li.appendChild(shell.details);
    li.setAttribute("data-path", op.path || "");
    addRow(shell.summary, op.path || "", kind, op.name || kind);
    if (op.endedAt == null) addUnfinished(shell.summary, op);
    else shell.summary.appendChild(statusBadge(op.status || "ok"));
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
    if (last.type === "llm" && !hasUsage(last)) facts.push("no usage");
    if (isNumber(last.charactersIn)) facts.push("chars in " + last.charactersIn);
    if (isNumber(last.charactersOut)) facts.push("chars out " + last.charactersOut);
    if (facts.length) shell.body.appendChild(el("div", "facts", facts.join(" \u00b7 ")));
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
    var summary = op.reasoning && op.reasoning.final;
    if (typeof summary === "string" && summary) {
      addPayload(shell.body, "reasoning summary", { payload: summary });
    }
    if (children.length || calledOps.length) {
      var list = childList(shell.body);
      calledOps.forEach(function (item) { list.appendChild(item); });
      children.forEach(function (child) { list.appendChild(renderSession(child)); });
    }
    return li;
  }
  // A request or response as recorded is JSON text of the messages: shown as role and content
  // (content by contentText); anything else (a capped payload, a tool's arguments) as it is.
  function describeMessages(payload) {
    var messages = payload;
    if (typeof payload === "string") {
      try { messages = JSON.parse(payload); } catch (e) { return payload; }
    }
    if (!Array.isArray(messages) || !messages.length ||
        !messages.every(function (m) { return isObject(m) && typeof m.role === "string"; })) {
      return text(payload);
    }
    return messages.map(function (message) {
      var line = message.role + ": " + contentText(message.content);
      (Array.isArray(message.tool_calls) ? message.tool_calls : []).forEach(function (call) {
        var fn = (call && call.function) || {};
        line += "\n  \u2192 " + (fn.name || "?") + "(" + text(fn.arguments) + ")";
      });
      return line;
    }).join("\n");
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
    tree.textContent = "";
    var runs = Array.isArray(data.runs) ? data.runs : [];
    if (!runs.length) {
      tree.appendChild(el("p", "empty", data.fileKind === "stream" ?
        "An event stream has no opTree: export the session file (.json.gz) to see it." :
        "No runs in this session."));
      return;
    }
    runs.forEach(function (run, index) {
      var title = "run " + (index + 1);
      if (run.traceId) title += " \u00b7 trace " + run.traceId;
      tree.appendChild(el("div", "run-title", title));
      var list = el("ul");
      list.appendChild(renderSession(run));
      markRun(list, String(index));
      tree.appendChild(list);
    });
  }
  function markRun(list, run) {
    var items = list.querySelectorAll("li");
    for (var i = 0; i < items.length; i++) items[i].setAttribute("data-run", run);
  }
  function setAll(open) {
    var nodes = document.querySelectorAll("details.node");
    for (var i = 0; i < nodes.length; i++) nodes[i].open = open;
  }

  // --- dialog and perspectives ----------------------------------------------------------------
  function renderDialog(data) {
    var list = document.getElementById("dialog-list");
    list.textContent = "";
    var dialog = Array.isArray(data.dialog) ? data.dialog : [];
    if (!dialog.length) { list.appendChild(el("li", "empty", "No messages.")); return; }
    dialog.forEach(function (message) {
      var role = message.role || "text";
      var item = el("li", "msg role-" + role.replace(/[^a-z]/g, ""));
      var who = message.speaker || message.agent_id || "?";
      // As format_dialog words it: instructions, a rewritten history, a text handed to all,
      // or a message.
      var label = role === "system" ? who + "\u2019s instructions" :
        role === "reset" ? who + "\u2019s history" :
        role === "text" || role === "assistant" ? who : who + " (" + role + ")";
      item.appendChild(el("div", "who", label));
      item.appendChild(el("div", "content", contentText(message.content)));
      list.appendChild(item);
    });
  }
  var TAGS = ["System", "Heard", "Action", "Said", "Received", "Reset"];
  function perspectiveLines(perspective) {
    var lines = [];
    String(perspective || "").split("\n").forEach(function (raw) {
      var match = /^\[(System|Heard|Action|Said|Received|Reset)\]: ?([\s\S]*)$/.exec(raw);
      if (match) lines.push({ tag: match[1], text: match[2] });
      else if (lines.length) lines[lines.length - 1].text += "\n" + raw;
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
  var shownAgents = [];
  function setupPerspectives(data, wanted) {
    var select = document.getElementById("agent-select");
    var agents = Array.isArray(data.agents) ? data.agents : [];
    shownAgents = agents;
    select.textContent = "";
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
    renderPerspective(agents[chosen]);
  }
  function selectedAgentId() {
    var select = document.getElementById("agent-select");
    var agent = shownAgents[Number(select.value)];
    return agent ? agent.id : null;
  }

  // --- header and fragment --------------------------------------------------------------------
  function renderSummary(data) {
    var summary = document.getElementById("summary");
    summary.textContent = "";
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
      add("tokens", "in " + totals.input + " \u00b7 out " + totals.output);
    }
    add("cost", costText(totals, true));
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

  // The open or closed state of each node, by run and path label: a page that is drawn again
  // (a live update) keeps what the reader opened and closed.
  function nodeKey(details) {
    var item = details.parentNode;
    return (item && item.getAttribute("data-run") || "") + "|" +
      (item && item.getAttribute("data-path") || "");
  }
  function openStates() {
    var states = Object.create(null);
    var nodes = document.querySelectorAll("details.node");
    for (var i = 0; i < nodes.length; i++) states[nodeKey(nodes[i])] = nodes[i].open;
    return states;
  }
  function restoreOpen(states) {
    var nodes = document.querySelectorAll("details.node");
    for (var i = 0; i < nodes.length; i++) {
      var key = nodeKey(nodes[i]);
      if (key in states) nodes[i].open = states[key];
    }
  }
  var rendered = false;
  // Draws (or draws again) the whole page from ``data``: the export's embedded session, or a
  // live session as agenttrace serve sends it (``status``, ``now``).
  function render(data) {
    // agenttrace serve's JSON names the runs and the dialog as the specification's API does.
    if (!Array.isArray(data.runs) && Array.isArray(data.tree)) data.runs = data.tree;
    if (!Array.isArray(data.dialog) && Array.isArray(data.conversation)) {
      data.dialog = data.conversation;
    }
    live.running = data.status === "running";
    live.now = isNumber(data.now) ? data.now : null;
    var states = rendered ? openStates() : null;
    var agent = rendered ? selectedAgentId() : null;
    renderSummary(data);
    renderTree(data);
    renderDialog(data);
    var params = rendered ? {} : applyFragment();
    setupPerspectives(data, agent || params.agent);
    if (states) restoreOpen(states);
    rendered = true;
    root.setAttribute("data-ready", "1");
  }
  function start() {
    document.getElementById("expand-all").addEventListener("click", function () {
      setAll(true);
    });
    document.getElementById("collapse-all").addEventListener("click", function () {
      setAll(false);
    });
    document.getElementById("agent-select").addEventListener("change", function () {
      var select = document.getElementById("agent-select");
      renderPerspective(shownAgents[Number(select.value)]);
    });
    window.addEventListener("hashchange", applyFragment);
    var embedded = document.getElementById("agenttrace-data");
    if (embedded) render(JSON.parse(embedded.textContent));
  }

  window.agenttracePage = { render: render, formatMs: formatMs, recordError: recordError };
  try {
    start();
  } catch (error) {
    recordError((error && error.stack) || error);
  }
})();
