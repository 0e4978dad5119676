// teamctl live view: when the event stream says the journal changed, fetch the server-rendered
// fragments and patch each panel by its rows' data-key (a row that stays is kept, never
// re-created: the text typed in it, the focus and the caret stay); post decisions and messages
// with the page's CSRF token; show every refusal (one JSON shape). No framework.
"use strict";
const csrf = document.querySelector('meta[name="csrf-token"]').content;
let conversationMember = null;
let taskShown = null;  // the task whose page is open (the board's links)
let traceShown = null;  // the message whose trace is open (the conversation's links)
let pending = null;
let refreshing = false;
let again = false;

function fragmentUrl(section) {
  let url = section.dataset.fragment;
  if (section.id === "conversation" && conversationMember) {
    url += "?member=" + encodeURIComponent(conversationMember);
  }
  if (section.id === "task" && taskShown) url += "?id=" + encodeURIComponent(taskShown);
  if (section.id === "trace" && traceShown) url += "?id=" + encodeURIComponent(traceShown);
  return url;
}

// -- patching a panel by keys ---------------------------------------------------------------

function keyOf(node) {
  return node.nodeType === Node.ELEMENT_NODE ? node.getAttribute("data-key") : null;
}

function sameKind(old, wanted) {  // an unkeyed node kept in place of the wanted one
  if (old.nodeType !== wanted.nodeType || old.nodeName !== wanted.nodeName) return false;
  if (old.nodeType !== Node.ELEMENT_NODE) return true;
  // a field is only ever itself: typed text never moves to a field of another name
  return old.getAttribute("name") === wanted.getAttribute("name") &&
    old.getAttribute("type") === wanted.getAttribute("type");
}

function morphAttributes(old, wanted) {
  for (const {name} of Array.from(old.attributes)) {
    if (!wanted.hasAttribute(name)) old.removeAttribute(name);
  }
  for (const {name, value} of Array.from(wanted.attributes)) {
    if (old.getAttribute(name) !== value) old.setAttribute(name, value);
  }
}

function morphNode(old, wanted) {
  if (old.nodeType !== Node.ELEMENT_NODE) {
    if (old.nodeValue !== wanted.nodeValue) old.nodeValue = wanted.nodeValue;
    return;
  }
  if (old.isEqualNode(wanted)) return;  // unchanged: untouched (a field's value is not compared)
  morphAttributes(old, wanted);
  if (old.nodeName !== "TEXTAREA") morphChildren(old, wanted);
}

function morphChildren(parent, wanted) {
  const keep = new Set();
  for (const child of wanted.childNodes) { const key = keyOf(child); if (key) keep.add(key); }
  const keyed = new Map();
  for (const child of Array.from(parent.childNodes)) {
    const key = keyOf(child);
    if (key && (!keep.has(key) || keyed.has(key))) parent.removeChild(child);  // gone rows
    else if (key) keyed.set(key, child);
  }
  let cursor = parent.firstChild;
  for (const next of Array.from(wanted.childNodes)) {
    const key = keyOf(next);
    let match = null;
    if (key) match = keyed.get(key) || null;
    else if (cursor && !keyOf(cursor) && sameKind(cursor, next)) match = cursor;
    if (!match) {
      parent.insertBefore(next, cursor);  // a new row
      continue;
    }
    keyed.delete(key);
    if (match === cursor) cursor = cursor.nextSibling;
    else parent.insertBefore(match, cursor);  // moved up (a reorder; focus is restored)
    morphNode(match, next);
  }
  while (cursor) { const rest = cursor.nextSibling; parent.removeChild(cursor); cursor = rest; }
}

function focusState() {
  const active = document.activeElement;
  if (!active || active === document.body) return null;
  const state = {element: active};
  if (typeof active.selectionStart === "number") {
    state.start = active.selectionStart;
    state.end = active.selectionEnd;
    state.direction = active.selectionDirection;
  }
  return state;
}

function restoreFocus(state) {  // a kept element moved in the DOM loses the focus: give it back
  if (!state || !state.element.isConnected || document.activeElement === state.element) return;
  state.element.focus({preventScroll: true});
  if (state.start !== undefined) {
    state.element.setSelectionRange(state.start, state.end, state.direction);
  }
}

function patch(section, html) {
  const template = document.createElement("template");
  template.innerHTML = html;
  const focus = focusState();
  morphChildren(section, template.content);
  restoreFocus(focus);
}

// -- refreshing ------------------------------------------------------------------------------

async function refresh() {
  const sections = Array.from(document.querySelectorAll("[data-fragment]"));
  const answers = await Promise.all(sections.map(async (section) => {
    const response = await fetch(fragmentUrl(section), {credentials: "same-origin"});
    return {section, response, text: await response.text()};
  }));
  for (const {section, response, text} of answers) {
    if (response.ok) patch(section, text);
    else showStreamError({ok: false, status: response.status, payload: parse(text)});
  }
}

async function refreshUntilCalm() {  // one refresh at a time; a change meanwhile runs another
  pending = null;
  if (refreshing) { again = true; return; }
  refreshing = true;
  try {
    do { again = false; await refresh(); } while (again);
  } catch (error) {  // the daemon is gone or restarting: the stream says when it is back
    indicator.dataset.state = "reconnecting";
    indicator.textContent = "reconnecting… (" + error.message + ")";
  } finally {
    refreshing = false;
  }
}

function scheduleRefresh() {  // coalesce bursts of changes into one refresh
  if (pending) return;
  pending = setTimeout(refreshUntilCalm, 50);
}

// -- requests and their refusals -------------------------------------------------------------

function parse(text) {
  try { return JSON.parse(text); } catch (error) { return null; }
}

async function post(url, body) {
  const response = await fetch(url, {method: "POST", body: body || new FormData(),
    headers: {"X-CSRF-Token": csrf}, credentials: "same-origin"});
  return {ok: response.ok, status: response.status, payload: parse(await response.text())};
}

function refusalNodes(result) {  // {"ok": false, "error": {code, message, retryable}, failures?}
  const error = result.payload && result.payload.error;
  const head = document.createElement("p");
  if (!error) {
    head.textContent = `the live view answered HTTP ${result.status}`;
    return [head];
  }
  const code = document.createElement("code");
  code.textContent = error.code;
  const failures = result.payload.failures || [];
  head.append(code);  // a refused send's message repeats its failures: they are listed
  if (!failures.length) head.append(" " + error.message + (error.retryable ? " (try again)" : ""));
  if (!failures.length) return [head];
  const list = document.createElement("ul");
  for (const failure of failures) {
    const item = document.createElement("li");
    const what = document.createElement("code");
    what.textContent = failure.code;
    item.append(what, " " + failure.message);
    list.append(item);
  }
  return [head, list];
}

function showRefusal(box, result) {
  box.replaceChildren(...refusalNodes(result));
  box.className = "refused";
}

function showStreamError(result) {
  const error = result.payload && result.payload.error;
  indicator.dataset.state = "refused";
  indicator.textContent = error ? error.message : `HTTP ${result.status}`;
}

function showResult(result) {
  const box = document.getElementById("send-result");
  if (!result.ok) { showRefusal(box, result); return; }
  const doc = result.payload;
  box.textContent = doc.attachments && doc.id === undefined
    ? "would send: " + doc.attachments.map(planned).join("; ")
    : "queued " + doc.id;
  box.className = "ok";
}

function planned(a) {  // one attachment of a preview: an image's variants, a document's route
  if ((a.kind || "image") === "image")
    return a.variants.map(v => `${v.mime} ${v.width}×${v.height}`).join(", ");
  const pages = a.pages === null || a.pages === undefined ? "" : `, ${a.pages} pages`;
  return `[Doc #${a.number}] ${a.name} — ${a.route}${pages}`;
}

function showAction(result) {  // an approval's answer: its refusal, or nothing
  const box = document.getElementById("action-result");
  if (result.ok) { box.replaceChildren(); box.className = ""; }
  else showRefusal(box, result);
}

document.addEventListener("click", async (event) => {
  const button = event.target.closest("[data-post]");
  if (button) {
    event.preventDefault();
    showAction(await post(button.dataset.post));
    scheduleRefresh();
    return;
  }
  const traceLink = event.target.closest("[data-trace-link]");
  if (traceLink) {
    traceShown = traceLink.dataset.traceLink;
    scheduleRefresh();
    return;
  }
  const taskLink = event.target.closest("[data-task-link]");
  if (taskLink) {
    taskShown = taskLink.dataset.taskLink;
    scheduleRefresh();
    return;
  }
  const link = event.target.closest("[data-member-link]");
  if (link) {
    conversationMember = link.dataset.memberLink;
    scheduleRefresh();
  }
});

document.addEventListener("submit", async (event) => {
  const form = event.target;
  if (form.dataset.action) {
    event.preventDefault();
    showAction(await post(form.dataset.action, new FormData(form)));
    scheduleRefresh();
  }
});

const pasted = [];
function formData(preview) {
  const data = new FormData(document.getElementById("send-form"));
  for (const file of pasted) data.append("files", file, file.name);
  if (preview) data.append("preview", "1");
  return data;
}

document.getElementById("send-form").addEventListener("submit", async (event) => {
  event.preventDefault();
  const result = await post("/send", formData(false));
  showResult(result);
  if (result.ok) {
    conversationMember = document.getElementById("send-member").value.split("/").pop();
    document.getElementById("send-text").value = "";
    document.getElementById("send-files").value = "";
    pasted.length = 0;
  }
  scheduleRefresh();
});

document.getElementById("preview-button").addEventListener("click", async () => {
  showResult(await post("/send", formData(true)));
});

// images, PDFs and text files (a file's type is the browser's guess from its name, often
// empty for Markdown or source: the daemon sniffs the bytes and refuses what it cannot send)
const TEXT_NAME = /\.(txt|md|markdown|csv|tsv|json|log|ya?ml|toml|xml|py|js|ts|go|rs|java|c|h|cpp|sh|sql|diff|patch)$/i;
function attachable(file) {
  return file.type.startsWith("image/") || file.type === "application/pdf" ||
    file.type.startsWith("text/") || file.type === "application/json" ||
    TEXT_NAME.test(file.name);
}

function takeFiles(items) {
  for (const item of items) {
    const file = item.getAsFile ? item.getAsFile() : item;
    if (file && attachable(file)) pasted.push(file);
  }
  document.getElementById("send-result").textContent =
    pasted.length ? `${pasted.length} file(s) attached` : "";
}
document.addEventListener("paste", (event) => takeFiles(event.clipboardData.items));
document.addEventListener("dragover", (event) => event.preventDefault());
document.addEventListener("drop", (event) => {
  event.preventDefault();
  takeFiles(event.dataTransfer.files);
});

// a quota account's countdown to its reset ticks between refreshes (data-until: epoch seconds)
function tick() {
  const now = Date.now() / 1000;
  for (const node of document.querySelectorAll("time[data-until]")) {
    const left = Math.max(Math.floor(Number(node.dataset.until) - now), 0);
    const hours = Math.floor(left / 3600), rest = left % 3600;
    node.textContent = "(in " + (hours ? `${hours}h ${Math.floor(rest / 60)}m`
      : `${Math.floor(rest / 60)}m ${rest % 60}s`) + ")";
  }
}
setInterval(tick, 1000);

const stream = new EventSource("/events");
const indicator = document.getElementById("stream");
stream.addEventListener("change", () => { indicator.dataset.state = "live";
  indicator.textContent = "live"; scheduleRefresh(); });
stream.onerror = () => { indicator.dataset.state = "reconnecting";
  indicator.textContent = "reconnecting…"; };
refreshUntilCalm();
