// co's browser view: sessions listed, searched, read, renamed, moved to the trash and back, and a box to continue
// one (streamed, and stopped). Every text shown comes from transcripts and is set with textContent; an answer's
// Markdown comes as a tree of elements (parsed by the server), built here with createElement: nothing from the
// server is parsed as HTML.
"use strict";

const $ = (id) => document.getElementById(id);
const state = { current: null, title: null, sending: false, streaming: null, searchTimer: null, listToken: 0, welcome: null };

function el(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined && text !== null) node.textContent = String(text);
  return node;
}

function clear(node) {
  while (node.firstChild) node.removeChild(node.firstChild);
}

// --- signing in: the browser key lives in this origin's localStorage and goes as a header, never a cookie ----

const KEY_NAME = "co-serve-key";

function withKey(headers) {
  const key = localStorage.getItem(KEY_NAME);
  return key ? { ...headers, Authorization: `Bearer ${key}` } : headers;
}

function errorOf(response, body) {
  const message = body && body.error ? body.error.message : `${response.status} ${response.statusText}`;
  const error = new Error(message);
  error.status = response.status;
  if (response.status === 401) signOut("This browser's sign-in has ended (co serve may have restarted).");
  return error;
}

async function getJSON(url, method = "GET", data = undefined) {
  const headers = { Accept: "application/json" };
  if (data !== undefined) headers["Content-Type"] = "application/json";
  const body = data === undefined ? undefined : JSON.stringify(data);
  const response = await fetch(url, { method, body, credentials: "omit", headers: withKey(headers) });
  const answer = await response.json().catch(() => null);
  if (!response.ok) throw errorOf(response, answer);
  return answer;
}

async function exchange(credential) {
  // A one-time code from co serve's link, or the token pasted: either becomes this browser's key.
  const response = await fetch("/api/sign-in", {
    method: "POST",
    credentials: "omit",
    headers: { "Content-Type": "application/json", Accept: "application/json" },
    body: JSON.stringify(credential),
  });
  const body = await response.json().catch(() => null);
  if (!response.ok) {
    const message = body && body.error ? body.error.message : `${response.status} ${response.statusText}`;
    throw new Error(message);
  }
  localStorage.setItem(KEY_NAME, body.key);
}

async function signInFromAddress() {
  // The link's code is in the fragment (never sent to a server); it leaves the address bar at once, and is spent.
  const code = location.hash.match(/^#code=([A-Za-z0-9_-]+)$/);
  const oldForm = new URLSearchParams(location.search).has("token");
  if (code || oldForm) history.replaceState(null, "", "/");
  if (oldForm) return "Addresses with ?token= are not used: open the sign-in link co serve printed.";
  if (!code) return localStorage.getItem(KEY_NAME) ? null : "This browser is not signed in to co serve yet.";
  try {
    await exchange({ code: code[1] });
    return null;
  } catch (error) {
    return `${error.message.charAt(0).toUpperCase()}${error.message.slice(1)}.`;
  }
}

function signOut(reason) {
  localStorage.removeItem(KEY_NAME);
  $("sign-in-reason").textContent = reason;
  document.body.classList.add("signed-out");
  $("sign-in").hidden = false;
  $("sign-in-token").focus();
}

function signedIn() {
  document.body.classList.remove("signed-out");
  $("sign-in").hidden = true;
  $("sign-in-token").value = "";
  loadSessions().catch(showListError);
  route();
}

async function onSignIn(event) {
  event.preventDefault();
  const token = $("sign-in-token").value.trim();
  if (!token) return;
  try {
    await exchange({ token });
    signedIn();
  } catch (error) {
    $("sign-in-reason").textContent = `${error.message.charAt(0).toUpperCase()}${error.message.slice(1)}.`;
  }
}

// --- formatting ---------------------------------------------------------------------------------------------

function age(seconds) {
  const delta = Math.max(0, Date.now() / 1000 - seconds);
  if (delta < 60) return "just now";
  const steps = [[60, "min"], [3600, "h"], [86400, "d"], [86400 * 30, "mo"], [86400 * 365, "y"]];
  let shown = `${Math.floor(delta / 60)} min`;
  for (let i = 1; i < steps.length; i++) {
    if (delta >= steps[i][0]) shown = `${Math.floor(delta / steps[i][0])} ${steps[i][1]}`;
  }
  return `${shown} ago`;
}

function when(seconds) {
  const date = new Date(seconds * 1000);
  const options = { month: "short", day: "numeric", hour: "numeric", minute: "2-digit" };
  if (date.getFullYear() !== new Date().getFullYear()) options.year = "numeric";
  return date.toLocaleString(undefined, options);
}

function counted(n, word) {
  return `${n.toLocaleString()} ${n === 1 ? word : `${word}${word.endsWith("ch") ? "es" : "s"}`}`;
}

function tokens(n) {
  return n >= 10000 ? `${(n / 1000).toFixed(n >= 100000 ? 0 : 1)}k` : n.toLocaleString();
}

function cost(usd) {
  if (usd === null || usd === undefined) return "cost unknown";
  if (usd === 0) return "$0";
  return usd < 0.01 ? `$${usd.toFixed(4)}` : `$${usd.toFixed(2)}`;
}

function originBadge(origin) {
  return el("span", `badge ${origin === "serve" ? "serve" : "terminal"}`, origin === "serve" ? "serve" : "terminal");
}

// --- the session list and search --------------------------------------------------------------------------

function listItem(id, title, metaParts, snippet, marks, seq) {
  const li = el("li");
  li.dataset.session = id;
  if (id === state.current) li.classList.add("current");
  const link = el("a");
  link.href = `#/s/${encodeURIComponent(id)}${seq === undefined ? "" : `/${seq}`}`;
  link.appendChild(el("div", "item-title", title || "untitled"));
  const meta = el("div", "item-meta");
  for (const part of metaParts) meta.appendChild(typeof part === "string" ? el("span", null, part) : part);
  link.appendChild(meta);
  if (snippet) link.appendChild(snippetNode(snippet, marks));
  li.appendChild(link);
  return li;
}

function snippetNode(snippet, marks) {
  // The search marks matched words between two characters; each piece is set as text, the matches in <mark>.
  const node = el("div", "item-snippet");
  let rest = snippet;
  while (rest.length) {
    const open = rest.indexOf(marks.open);
    if (open < 0) { node.appendChild(document.createTextNode(rest)); break; }
    node.appendChild(document.createTextNode(rest.slice(0, open)));
    const close = rest.indexOf(marks.close, open + marks.open.length);
    const end = close < 0 ? rest.length : close;
    node.appendChild(el("mark", null, rest.slice(open + marks.open.length, end)));
    rest = close < 0 ? "" : rest.slice(close + marks.close.length);
  }
  return node;
}

async function loadSessions() {
  const token = ++state.listToken;
  const data = await getJSON("/api/sessions");
  if (token !== state.listToken) return;
  const list = $("session-list");
  clear(list);
  $("list-head").textContent = data.total > data.sessions.length
    ? `Sessions · ${data.sessions.length} of ${data.total}` : `Sessions · ${data.total}`;
  if (!data.sessions.length) {
    list.appendChild(el("li", "list-note", "No saved sessions yet. Start one below, or with co chat."));
  }
  for (const s of data.sessions) {
    list.appendChild(listItem(s.id, s.title, [
      el("span", "id", s.short_id), age(s.updated_at), originBadge(s.origin), counted(s.message_count, "msg"),
    ]));
  }
}

async function runSearch(query) {
  const token = ++state.listToken;
  const data = await getJSON(`/api/search?q=${encodeURIComponent(query)}`);
  if (token !== state.listToken) return;
  const list = $("session-list");
  clear(list);
  const sessions = new Set(data.hits.map((h) => h.session_id));
  $("list-head").textContent = `Search · ${counted(data.hits.length, "match")} in ${counted(sessions.size, "session")}`;
  if (!data.hits.length) list.appendChild(el("li", "list-note", `Nothing matches “${query}”.`));
  for (const hit of data.hits) {
    list.appendChild(listItem(hit.session_id, hit.title, [
      el("span", "id", hit.short_id), `#${hit.seq} ${hit.kind}`, age(hit.created_at),
    ], hit.snippet, data, hit.seq));
  }
}

function onSearchInput() {
  clearTimeout(state.searchTimer);
  state.searchTimer = setTimeout(() => {
    const query = $("search").value.trim();
    (query ? runSearch(query) : loadSessions()).catch(showListError);
  }, 180);
}

function showListError(error) {
  const list = $("session-list");
  clear(list);
  list.appendChild(el("li", "list-note", `Could not load: ${error.message}`));
}

function markCurrent() {
  for (const li of $("session-list").children) li.classList.toggle("current", li.dataset.session === state.current);
}

// --- one session --------------------------------------------------------------------------------------------

const ROLE_NAMES = { user: "You", assistant: "co", "tool-call": "co", "tool-return": "Tool result", summary: "Summary", system: "System" };

function textBlocks(text) {
  // Fenced code as <pre>, the rest as wrapped text; both as plain text.
  const frag = document.createDocumentFragment();
  const pieces = text.split(/^```[^\n]*\n?/m);
  pieces.forEach((piece, i) => {
    if (!piece) return;
    if (i % 2 === 1) frag.appendChild(el("pre", null, piece.replace(/\n$/, "")));
    else if (piece.trim()) frag.appendChild(el("div", "text", piece.replace(/^\n+|\n+$/g, "")));
  });
  return frag;
}

const MARKDOWN_TAGS = new Set([
  "p", "h1", "h2", "h3", "h4", "h5", "h6", "ul", "ol", "li", "blockquote", "em", "strong", "s", "code", "pre",
  "table", "thead", "tbody", "tr", "th", "td", "br", "hr", "a",
]);

function safeLink(href) {
  try {
    return ["http:", "https:", "mailto:"].includes(new URL(href).protocol);
  } catch (error) {
    return false;
  }
}

function markdownNodes(nodes, parent) {
  // The server's tree of an answer's Markdown: known tags only, a link only to the web or mail, text as text.
  for (const node of nodes) {
    if (typeof node === "string") { parent.appendChild(document.createTextNode(node)); continue; }
    const href = node.a && node.a.href;
    if (!MARKDOWN_TAGS.has(node.t) || (node.t === "a" && !safeLink(href))) {
      markdownNodes(node.c || [], parent);
      continue;
    }
    const child = document.createElement(node.t);
    if (node.t === "a") {
      child.href = href;
      child.rel = "noopener noreferrer";
      child.target = "_blank";
    }
    if (node.t === "ol" && node.a && Number.isInteger(node.a.start)) child.start = node.a.start;
    markdownNodes(node.c || [], child);
    parent.appendChild(child);
  }
}

function partNode(part) {
  if (part.kind === "text" && part.markdown) {
    const box = el("div", "md");
    markdownNodes(part.markdown, box);
    return box;
  }
  if (part.kind === "user" || part.kind === "text") return textBlocks(part.text);
  if (part.kind === "thinking") return el("div", "thinking", part.text);
  const details = el("details", "tool");
  const summary = el("summary");
  const label = { "tool-call": "called", "tool-return": "result of", retry: "retry for", system: "system", compaction: "compaction" }[part.kind] || part.kind;
  summary.appendChild(document.createTextNode(`${label} `));
  if (part.tool_name) summary.appendChild(el("span", "name", part.tool_name));
  if (part.outcome && part.outcome !== "success") summary.appendChild(el("span", "badge bad", part.outcome));
  details.appendChild(summary);
  details.appendChild(el("pre", null, part.text));
  if (part.cut) details.appendChild(el("div", "cut", `shown ${part.text.length.toLocaleString()} of ${part.chars.toLocaleString()} characters`));
  return details;
}

function messageNode(item) {
  const role = item.kind === "user" ? "user" : (item.kind === "tool-return" ? "tool" : "assistant");
  const node = el("article", `msg ${role} kind-${item.kind} ${item.status}`);
  node.dataset.seq = item.seq;
  const head = el("div", "msg-head");
  head.appendChild(el("span", "role", ROLE_NAMES[item.kind] || item.kind));
  head.appendChild(el("span", "seq", `#${item.seq}`));
  head.appendChild(el("span", null, when(item.created_at)));
  if (item.status !== "ok") head.appendChild(el("span", "badge bad", item.status === "cancelled" ? "cut off" : item.status));
  node.appendChild(head);
  const body = el("div", "msg-body");
  for (const part of item.parts) body.appendChild(partNode(part));
  node.appendChild(body);
  if (item.error) node.appendChild(el("div", "msg-error", item.error)); // why the turn failed, as co said it
  return node;
}

function compactionNode(item) {
  const node = el("details", `compaction${item.undone ? " undone" : ""}`);
  node.appendChild(el("summary", null, `⟲ ${item.description}`));
  node.appendChild(el("div", "summary-text", item.summary));
  return node;
}

function memoriesNode(item) {
  // The memories the turn's requests were sent, folded under its prompt.
  const node = el("details", "memories");
  node.dataset.seq = item.seq;
  node.appendChild(el("summary", null, `memories used: ${item.memories.length}`));
  const list = el("ul");
  for (const memory of item.memories) {
    const li = el("li", "memory");
    li.appendChild(el("span", "kind", memory.kind));
    li.appendChild(el("span", "text", memory.text));
    li.appendChild(el("span", "id", `#${memory.id}`));
    list.appendChild(li);
  }
  node.appendChild(list);
  return node;
}

function usageNode(item) {
  const node = el("div", "usage");
  if (item.role !== "chat") node.appendChild(el("span", "role", `${item.role} · `));
  const cache = item.cache_read_tokens ? ` (cache read ${tokens(item.cache_read_tokens)})` : "";
  node.appendChild(document.createTextNode(
    `${item.model} · ${counted(item.requests, "request")} · ${tokens(item.input_tokens)} in${cache} · ` +
    `${tokens(item.output_tokens)} out · ${cost(item.cost_usd)}`));
  return node;
}

function usageTotals(items) {
  const total = { input: 0, output: 0, cost: 0, unpriced: 0 };
  for (const item of items) {
    if (item.type !== "usage") continue;
    total.input += item.input_tokens;
    total.output += item.output_tokens;
    if (item.cost_usd === null) total.unpriced += 1; else total.cost += item.cost_usd;
  }
  return total;
}

function renderHead(session) {
  $("session-head").hidden = false;
  endRename();
  $("session-title").textContent = session.title || "untitled";
  const meta = $("session-meta");
  clear(meta);
  meta.appendChild(el("span", "id", session.short_id));
  meta.appendChild(originBadge(session.origin));
  meta.appendChild(el("span", null, session.model || "model unknown"));
  meta.appendChild(el("span", null, counted(session.message_count, "message")));
  meta.appendChild(el("span", null, `updated ${age(session.updated_at)}`));
}

function renderRail(record) {
  const session = record.session;
  const facts = $("facts");
  clear(facts);
  const total = usageTotals(record.items);
  const spent = total.unpriced ? `${cost(total.cost)} + ${total.unpriced} unpriced` : cost(total.cost);
  const rows = [
    ["Resume", `co chat --resume ${session.short_id}`, "mono"],
    ["Started", when(session.created_at)],
    ["Updated", when(session.updated_at)],
    ["Model", session.model || "unknown"],
    ["Directory", session.cwd || "unknown", "mono"],
    ["Tokens", `${tokens(total.input)} in · ${tokens(total.output)} out`],
    ["Cost", spent],
    ["Compactions", String(session.compaction_count)],
  ];
  if (session.parent_id) rows.push(["Forked from", `${session.parent_id.slice(0, 8)} at #${session.fork_seq}`, "mono"]);
  for (const [name, value, cls] of rows) {
    facts.appendChild(el("dt", null, name));
    facts.appendChild(el("dd", cls, value));
  }
  const pins = $("pins");
  clear(pins);
  for (const pin of record.pins) {
    const li = el("li", "pin", pin.text);
    if (pin.source !== "user") li.appendChild(el("span", "source", `found by a ${pin.source}`));
    pins.appendChild(li);
  }
  $("pins-panel").hidden = !record.pins.length;
  const tasks = $("tasks");
  clear(tasks);
  const items = record.tasks ? record.tasks.items : [];
  const marks = { done: "[x]", in_progress: "[>]", pending: "[ ]" };
  for (const task of items) {
    const li = el("li", `task ${task.status}`);
    li.appendChild(el("span", "mark", marks[task.status] || "[?]"));
    li.appendChild(el("span", "text", task.text));
    tasks.appendChild(li);
  }
  $("tasks-panel").hidden = !items.length;
  $("rail").hidden = false;
}

function renderTranscript(record) {
  const box = $("transcript");
  clear(box);
  const builders = { message: messageNode, compaction: compactionNode, usage: usageNode, memories: memoriesNode };
  for (const item of record.items) box.appendChild(builders[item.type](item));
  if (!record.items.length) box.appendChild(el("div", "empty", "No messages yet."));
  box.scrollTop = box.scrollHeight;
}

async function openSession(id, seq) {
  const record = await getJSON(`/api/sessions/${encodeURIComponent(id)}`);
  state.current = record.session.id;
  state.title = record.session.title;
  $("trash-link").classList.remove("current");
  document.title = `${record.session.title || "untitled"} · co`;
  renderHead(record.session);
  renderRail(record);
  renderTranscript(record);
  const found = seq === undefined ? null : $("transcript").querySelector(`article[data-seq="${Number(seq)}"]`);
  if (found) {
    found.scrollIntoView({ block: "center" });
    found.classList.add("found");
  }
  $("prompt").placeholder = "Continue this conversation…";
  markCurrent();
}

function showHome() {
  state.current = null;
  state.title = null;
  $("trash-link").classList.remove("current");
  document.title = "co";
  $("session-head").hidden = true;
  $("rail").hidden = true;
  const box = $("transcript");
  clear(box);
  box.appendChild(state.welcome.cloneNode(true));
  $("prompt").placeholder = "Start a new conversation…";
  markCurrent();
}

function route() {
  showNotice(null);
  if (location.hash === "#/trash") { showTrash().catch((error) => showNotice(`Could not load the trash: ${error.message}`)); return; }
  const match = location.hash.match(/^#\/s\/([^/]+)(?:\/(\d+))?$/);
  if (!match) { showHome(); return; }
  openSession(decodeURIComponent(match[1]), match[2]).catch((error) => {
    showHome();
    $("transcript").prepend(el("div", "error-line", error.message));
  });
}

// --- renaming, the trash ------------------------------------------------------------------------------------

function showNotice(text, action) {
  // One line above the transcript (what was just done, or why it could not be), with a button to undo it.
  const notice = $("notice");
  clear(notice);
  notice.hidden = !text;
  if (!text) return;
  notice.appendChild(el("span", null, text));
  if (action) {
    const button = el("button", "quiet", action.label);
    button.type = "button";
    button.addEventListener("click", action.run);
    notice.appendChild(button);
  }
}

function startRename() {
  if (!state.current) return;
  $("rename-input").value = state.title || "";
  $("session-title").hidden = true;
  $("head-actions").hidden = true;
  $("rename-form").hidden = false;
  $("rename-input").focus();
  $("rename-input").select();
}

function endRename() {
  $("rename-form").hidden = true;
  $("session-title").hidden = false;
  $("head-actions").hidden = false;
}

async function onRename(event) {
  event.preventDefault();
  const title = $("rename-input").value.trim();
  if (!title || !state.current) return;
  try {
    const session = await getJSON(`/api/sessions/${encodeURIComponent(state.current)}`, "PATCH", { title });
    state.title = session.title;
    renderHead(session);
    document.title = `${session.title} · co`;
    if (!$("search").value.trim()) await loadSessions();
  } catch (error) {
    showNotice(`Not renamed: ${error.message}`);
  }
}

async function onDelete() {
  const id = state.current;
  if (!id) return;
  const title = state.title || "untitled";
  try {
    await getJSON(`/api/sessions/${encodeURIComponent(id)}`, "DELETE");
  } catch (error) {
    showNotice(`Not moved to the trash: ${error.message}`);
    return;
  }
  history.pushState(null, "", "/");
  showHome();
  showNotice(`Moved “${title}” to the trash.`, { label: "Restore", run: () => restore(id) });
  await loadSessions().catch(showListError);
}

async function restore(id) {
  try {
    await getJSON(`/api/trash/${encodeURIComponent(id)}/restore`, "POST");
  } catch (error) {
    showNotice(`Not restored: ${error.message}`);
    return;
  }
  location.hash = `#/s/${id}`;
  await loadSessions().catch(showListError);
}

async function showTrash() {
  const data = await getJSON("/api/trash");
  showHome();
  document.title = "Trash · co";
  $("trash-link").classList.add("current");
  const box = $("transcript");
  clear(box);
  const section = el("section", "trash");
  section.appendChild(el("h1", null, "Trash"));
  section.appendChild(el("p", "trash-note", data.sessions.length
    ? "Sessions moved to the trash, most recently first. Restore brings one back unchanged."
    : "The trash is empty."));
  const list = el("ol", "trash-list");
  for (const s of data.sessions) {
    const li = el("li");
    li.dataset.session = s.id;
    const text = el("div", "trash-item");
    text.appendChild(el("div", "item-title", s.title || "untitled"));
    const meta = el("div", "item-meta");
    meta.appendChild(el("span", "id", s.short_id));
    meta.appendChild(el("span", null, `deleted ${age(s.deleted_at)}`));
    meta.appendChild(el("span", null, counted(s.message_count, "msg")));
    text.appendChild(meta);
    li.appendChild(text);
    const button = el("button", "quiet", "Restore");
    button.type = "button";
    button.addEventListener("click", () => restore(s.id));
    li.appendChild(button);
    list.appendChild(li);
  }
  section.appendChild(list);
  box.appendChild(section);
}

// --- continuing a conversation: the server's own chat-completions API, streamed -----------------------------

async function* sseData(response) {
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += decoder.decode(value, { stream: true });
    let cut;
    while ((cut = buffer.indexOf("\n\n")) >= 0) {
      const event = buffer.slice(0, cut);
      buffer = buffer.slice(cut + 2);
      const data = event.split("\n").filter((l) => l.startsWith("data:")).map((l) => l.slice(5).trimStart()).join("\n");
      if (data) yield data;
    }
  }
}

async function send(text) {
  const box = $("transcript");
  if (!state.current) clear(box);
  const mine = messageNode({ kind: "user", seq: "…", created_at: Date.now() / 1000, status: "ok", parts: [{ kind: "user", text }] });
  box.appendChild(mine);
  const answer = messageNode({ kind: "assistant", seq: "…", created_at: Date.now() / 1000, status: "ok", parts: [] });
  answer.classList.add("streaming");
  const body = answer.querySelector(".msg-body");
  const live = el("div", "text cursor");
  body.appendChild(live);
  box.appendChild(answer);
  box.scrollTop = box.scrollHeight;

  const headers = { "Content-Type": "application/json", Accept: "text/event-stream" };
  if (state.current) headers["X-Co-Session"] = state.current;
  const response = await fetch("/v1/chat/completions", {
    method: "POST",
    credentials: "omit",
    headers: withKey(headers),
    body: JSON.stringify({ model: "co", stream: true, messages: [{ role: "user", content: text }] }),
  });
  if (!response.ok) {
    // Refused before anything was saved (the session is open in a terminal, say): what was shown goes.
    mine.remove();
    answer.remove();
    const refused = errorOf(response, await response.json().catch(() => null));
    refused.refused = true;
    throw refused;
  }
  const sessionId = response.headers.get("X-Co-Session");
  streaming(sessionId);
  let failure = null;
  for await (const data of sseData(response)) {
    if (data === "[DONE]") break;
    const chunk = JSON.parse(data);
    if (chunk.error && chunk.error.code === "cancelled") break; // stopped: the saved turn says so
    if (chunk.error) { failure = chunk.error.message; break; }
    const delta = chunk.choices && chunk.choices[0] && chunk.choices[0].delta;
    if (delta && delta.content) {
      live.textContent += delta.content;
      box.scrollTop = box.scrollHeight;
    }
  }
  live.classList.remove("cursor");
  answer.classList.remove("streaming");
  if (failure) throw new Error(failure);
  return sessionId;
}

function streaming(sessionId) {
  // While an answer streams, Stop (or Esc) takes Send's place; null: the answer has ended.
  state.streaming = sessionId;
  $("send").hidden = Boolean(sessionId);
  $("stop").hidden = !sessionId;
  $("stop").disabled = false;
  $("stop").textContent = "Stop";
  $("composer-note").textContent = sessionId ? "Esc or Stop ends the answer here; what came of it is kept"
    : "Enter sends · Shift+Enter for a new line";
}

async function stopAnswer() {
  // As Esc in the terminal: the turn ends interrupted, and what was answered so far is saved.
  if (!state.streaming || $("stop").disabled) return;
  $("stop").disabled = true;
  $("stop").textContent = "Stopping…";
  const url = `/api/sessions/${encodeURIComponent(state.streaming)}/stop`;
  await fetch(url, { method: "POST", credentials: "omit", headers: withKey({ Accept: "application/json" }) })
    .catch(() => {});
}

async function onSubmit(event) {
  event.preventDefault();
  const input = $("prompt");
  const text = input.value.trim();
  if (!text || state.sending) return;
  state.sending = true;
  $("send").disabled = true;
  input.value = "";
  autosize();
  let sessionId = state.current;
  let failure = null;
  try {
    sessionId = await send(text) || sessionId;
  } catch (error) {
    failure = error;
  } finally {
    state.sending = false;
    streaming(null);
    $("send").disabled = false;
    input.focus();
  }
  if (failure && failure.refused) {
    input.value = text; // nothing was saved: the message is kept to send again
    autosize();
  } else if (sessionId) {
    // The saved turn (its numbers, usage and any compaction, or how it failed) replaces what was streamed.
    if (location.hash !== `#/s/${sessionId}`) history.pushState(null, "", `#/s/${sessionId}`);
    await openSession(sessionId).catch(() => {});
  }
  // An error the saved turn does not show already (a refusal, a takeover) is said under the transcript.
  const shown = [...$("transcript").querySelectorAll(".msg-error")].some((node) => failure && failure.message.includes(node.textContent));
  if (failure && !shown) $("transcript").appendChild(el("div", "error-line", failure.message));
  $("transcript").scrollTop = $("transcript").scrollHeight;
  if (!$("search").value.trim()) await loadSessions().catch(showListError);
}

function autosize() {
  const input = $("prompt");
  input.style.height = "auto";
  input.style.height = `${Math.min(input.scrollHeight + 2, 200)}px`;
}

function start() {
  state.welcome = $("transcript").firstElementChild.cloneNode(true); // the page's own welcome, shown again at home
  $("search").addEventListener("input", onSearchInput);
  $("search-form").addEventListener("submit", (event) => { event.preventDefault(); onSearchInput(); });
  $("composer").addEventListener("submit", onSubmit);
  $("prompt").addEventListener("input", autosize);
  $("prompt").addEventListener("keydown", (event) => {
    if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
      event.preventDefault();
      $("composer").requestSubmit();
    }
  });
  $("new-chat").addEventListener("click", () => {
    if (location.hash) location.hash = ""; else showHome();
    $("prompt").focus();
  });
  $("stop").addEventListener("click", stopAnswer);
  $("rename").addEventListener("click", startRename);
  $("rename-form").addEventListener("submit", onRename);
  $("rename-cancel").addEventListener("click", endRename);
  $("rename-input").addEventListener("keydown", (event) => { if (event.key === "Escape") endRename(); });
  $("delete").addEventListener("click", onDelete);
  document.addEventListener("keydown", (event) => {
    if (event.key === "Escape" && state.streaming) stopAnswer();
  });
  $("sign-in-form").addEventListener("submit", onSignIn);
  // Links to #/s/…, Back and Forward (not pushState); a sign-in link opened on the page already shown.
  window.addEventListener("popstate", () => (location.hash.startsWith("#code=") ? signIn() : route()));
  // Sessions saved meanwhile (in a terminal, by another client) appear when the page is looked at again.
  window.addEventListener("focus", () => {
    if (!document.body.classList.contains("signed-out") && !$("search").value.trim()) {
      loadSessions().catch(showListError);
    }
  });
  signIn();
}

function signIn() {
  signInFromAddress().then((problem) => (problem ? signOut(problem) : signedIn()));
}

document.addEventListener("DOMContentLoaded", start);
