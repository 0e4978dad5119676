// teamctl live view: refresh the server-rendered fragments when the event stream says the
// journal changed; post decisions and messages with the page's CSRF token. No framework.
"use strict";
const csrf = document.querySelector('meta[name="csrf-token"]').content;
let conversationMember = null;
let pending = null;

function fragmentUrl(section) {
  let url = section.dataset.fragment;
  if (section.id === "conversation" && conversationMember) {
    url += "?member=" + encodeURIComponent(conversationMember);
  }
  return url;
}

async function refresh() {
  for (const section of document.querySelectorAll("[data-fragment]")) {
    const response = await fetch(fragmentUrl(section), {credentials: "same-origin"});
    if (response.ok) section.innerHTML = await response.text();
  }
}

function scheduleRefresh() {  // coalesce bursts of changes into one refresh
  if (pending) return;
  pending = setTimeout(async () => { pending = null; await refresh(); }, 50);
}

async function post(url, body) {
  const response = await fetch(url, {method: "POST", body: body || new FormData(),
    headers: {"X-CSRF-Token": csrf}, credentials: "same-origin"});
  const type = response.headers.get("content-type") || "";
  const payload = type.includes("json") ? await response.json() : await response.text();
  return {ok: response.ok, status: response.status, payload};
}

function showResult(result) {
  const box = document.getElementById("send-result");
  if (result.ok) {
    const doc = result.payload;
    box.textContent = doc.attachments && doc.id === undefined
      ? "would send: " + doc.attachments.map(a => a.variants.map(
          v => `${v.mime} ${v.width}×${v.height}`).join(", ")).join("; ")
      : "queued " + doc.id;
    box.className = "ok";
  } else if (typeof result.payload === "string") {
    box.innerHTML = result.payload;  // the server-rendered, escaped refusal lines
    box.className = "refused";
  } else {
    box.textContent = result.payload.error;
    box.className = "refused";
  }
}

document.addEventListener("click", async (event) => {
  const button = event.target.closest("[data-post]");
  if (button) {
    event.preventDefault();
    await post(button.dataset.post);
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
    await post(form.dataset.action, new FormData(form));
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

function takeImages(items) {
  for (const item of items) {
    const file = item.getAsFile ? item.getAsFile() : item;
    if (file && file.type.startsWith("image/")) pasted.push(file);
  }
  document.getElementById("send-result").textContent =
    pasted.length ? `${pasted.length} image(s) attached` : "";
}
document.addEventListener("paste", (event) => takeImages(event.clipboardData.items));
document.addEventListener("dragover", (event) => event.preventDefault());
document.addEventListener("drop", (event) => {
  event.preventDefault();
  takeImages(event.dataTransfer.files);
});

const stream = new EventSource("/events");
const indicator = document.getElementById("stream");
stream.addEventListener("change", () => { indicator.dataset.state = "live";
  indicator.textContent = "live"; scheduleRefresh(); });
stream.onerror = () => { indicator.dataset.state = "reconnecting";
  indicator.textContent = "reconnecting…"; };
refresh();
