// What every console page shares: building elements, messages, the confirmation dialog,
// and how a scope's status reads. No page writes HTML from strings: text goes in as text.
import { apiBase, token } from "./config.js";

export const $ = (id) => document.getElementById(id);

export function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (name === "class") node.className = value;
    else if (name === "text") node.textContent = value;
    else node.setAttribute(name, value === true ? "" : String(value));
  }
  for (const child of children.flat(Infinity)) {
    if (child !== null && child !== undefined && child !== false) node.append(child);
  }
  return node;
}

export function params() {
  return new URLSearchParams(window.location.search);
}

export function pageUrl(page, values) {
  const query = new URLSearchParams();
  for (const [name, value] of Object.entries(values)) {
    if (value !== null && value !== undefined && value !== "") query.set(name, value);
  }
  const text = query.toString();
  return text ? `${page}?${text}` : page;
}

// A message line (role=status, so screen readers hear it); kind "error", "ok" or "busy".
export function say(node, text, kind = "") {
  node.textContent = text;
  node.className = `message ${kind}`.trim();
  node.dataset.kind = kind;
}

export function scopeName(agent, context) {
  return `${agent} / ${context}`;
}

export const isShared = (agent) => agent.toLowerCase() === "_shared";

export function formatBytes(value) {
  if (typeof value !== "number") return "–";
  if (value < 1024) return `${value} B`;
  if (value < 1024 * 1024) return `${(value / 1024).toFixed(1)} KiB`;
  return `${(value / (1024 * 1024)).toFixed(1)} MiB`;
}

// Times in UTC, to the minute: the same on every operator's screen.
export function formatTime(iso) {
  if (!iso) return "never";
  const date = new Date(iso);
  if (Number.isNaN(date.getTime())) return String(iso);
  return `${date.toISOString().slice(0, 16).replace("T", " ")} UTC`;
}

export function stateBadge(state) {
  return el("span", { class: `badge state state-${String(state).toLowerCase()}`, "data-state": state },
    state);
}

// "writing big.md: 12 of about 40 chunks", files done of the change, files queued.
export function progressView(progress) {
  if (!progress) return null;
  const parts = [];
  const total = progress.documents_total || 0;
  if (total) parts.push(`${progress.documents_done} of ${total} files done`);
  if (progress.document) {
    const about = progress.chunks_estimated === null || progress.chunks_estimated === undefined
      ? "" : ` of about ${progress.chunks_estimated}`;
    parts.push(`writing ${progress.document} (${formatBytes(progress.document_bytes)}): ` +
      `${progress.chunks_done || 0}${about} chunks`);
  }
  if (progress.queued_files) parts.push(`${progress.queued_files} changed files queued`);
  const bar = el("progress", {
    max: total || 1,
    value: total ? progress.documents_done : 0,
    "aria-label": "files indexed",
  });
  return el("div", {
    class: "progress",
    "data-document": progress.document || "",
    "data-chunks-done": progress.chunks_done ?? "",
    "data-queued": progress.queued_files ?? 0,
  }, bar, el("span", { class: "progress-text" }, parts.join("; ") || "starting"));
}

function unreadText(unread) {
  const entries = Object.entries(unread || {}).sort((a, b) => b[1] - a[1]);
  if (!entries.length) return null;
  const total = entries.reduce((sum, [, n]) => sum + n, 0);
  return `${total} (${entries.map(([ext, n]) => `${ext} ${n}`).join(", ")})`;
}

// The status route's answer as a definition list, its problems, and its progress.
export function statusView(status) {
  const rows = [
    ["State", stateBadge(status.state)],
    ["Documents", String(status.document_count)],
    ["Chunks", String(status.chunk_count)],
    ["Last indexed", formatTime(status.last_indexed_at)],
  ];
  if (typeof status.embedded_chunks === "number") {
    rows.push(["Vectors", `${status.embedded_chunks} embedded, ${status.reused_chunks} reused`]);
  }
  if (status.message) rows.push(["Message", status.message]);
  const unread = unreadText(status.unread_files);
  if (unread) rows.push(["Not read", unread]);
  if (Array.isArray(status.repos) && status.repos.length) {
    rows.push(["Repositories", status.repos.map((r) => r.name).join(", ")]);
  }
  const list = el("dl", { class: "facts" },
    rows.map(([name, value]) => [el("dt", {}, name), el("dd", {}, value)]));
  const problems = status.problems || [];
  return el("div", { class: "status", "data-state": status.state },
    list,
    progressView(status.progress),
    problems.length ? el("h3", {}, `Not indexed (${problems.length})`) : null,
    problems.length ? el("ul", { class: "problems" }, problems.map((p) =>
      el("li", {}, el("code", {}, p.document_path), " ", el("span", { class: "reason" }, p.reason))))
      : null);
}

// A modal confirmation (the native <dialog>: focus stays inside, Escape cancels).
// Resolves true only when the confirming button is pressed.
export function confirmDialog({ title, text, confirm }) {
  return new Promise((resolve) => {
    const yes = el("button", { type: "button", class: "danger", value: "confirm" }, confirm);
    const no = el("button", { type: "button", class: "secondary", value: "cancel" }, "Cancel");
    const titleId = `dialog-title-${Date.now()}`;
    const dialog = el("dialog", { class: "confirm", "aria-labelledby": titleId },
      el("h2", { id: titleId }, title),
      el("p", {}, text),
      el("div", { class: "actions" }, no, yes));
    const opener = document.activeElement;
    const close = (answer) => {
      dialog.close();
      dialog.remove();
      if (opener && typeof opener.focus === "function" && opener.isConnected) opener.focus();
      resolve(answer);
    };
    yes.addEventListener("click", () => close(true));
    no.addEventListener("click", () => close(false));
    dialog.addEventListener("cancel", (event) => {
      event.preventDefault();
      close(false);
    });
    document.body.append(dialog);
    dialog.showModal();
    no.focus(); // the safe choice has the focus
  });
}

// The header's line about the API: which server, signed in or not, writes on or off.
export function showServer(writes) {
  const line = $("server-line");
  if (!line) return;
  const where = apiBase() ? `API ${apiBase()}` : "API: this server";
  const auth = token() ? " · bearer token set" : "";
  let mode = "";
  if (writes === true) mode = " · writes on";
  if (writes === false) mode = " · writes off";
  line.textContent = `${where}${auth}${mode}`;
  line.dataset.writes = writes === null || writes === undefined ? "unknown" : String(writes);
}

// A search hit's place in its document: heading path, page(s), slide, sheet and rows.
export function citation(metadata) {
  const parts = [];
  const heading = metadata.heading_path;
  if (Array.isArray(heading) && heading.length) parts.push(heading.join(" › "));
  else if (typeof heading === "string" && heading) parts.push(heading);
  if (metadata.page !== undefined && metadata.page !== null) {
    const end = metadata.page_end;
    parts.push(end !== undefined && end !== null && end !== metadata.page
      ? `pp. ${metadata.page}-${end}` : `p. ${metadata.page}`);
  }
  if (metadata.slide !== undefined && metadata.slide !== null) parts.push(`slide ${metadata.slide}`);
  if (metadata.sheet) parts.push(`sheet ${metadata.sheet}`);
  return parts.join(" · ");
}
