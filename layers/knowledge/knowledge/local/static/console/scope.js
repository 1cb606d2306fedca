// A scope's page: its status (with progress while indexing), a search with the explain
// trace, its documents page by page (delete, edit a note), uploads by drag and drop or
// file picker, and the note editor.
// Routes: GET .../status, POST .../search, GET .../documents (cursor), GET, PUT and
// DELETE .../documents/{path} (or, on the deployed stack, POST .../uploads and the
// bucket's presigned POST); the scope list for whether writes are on.
import {
  ApiError, deleteDocument, getDocument, listDocuments, listScopes, putDocument, scopeStatus,
  search, uploadFile, waitGone, waitIndexed, waitUploaded,
} from "./api.js";
import { apiBase } from "./config.js";
import { renderMarkdown } from "./markdown.js";
import { renderResults, renderTrace } from "./results.js";
import {
  $, confirmDialog, el, formatBytes, formatTime, isShared, pageUrl, params, say, scopeName,
  showServer, statusView,
} from "./ui.js";

const query = params();
const agent = query.get("agent") || "";
const context = query.get("context") || "";
const scope = { agent, context };
const PAGE_SIZE = 50;

// --- status -------------------------------------------------------------------------------

let statusTimer = null;

async function refreshStatus() {
  clearTimeout(statusTimer);
  let indexing = false;
  try {
    const status = await scopeStatus(agent, context);
    $("status").replaceChildren(statusView(status));
    say($("status-message"), "");
    indexing = status.state === "INDEXING";
  } catch (error) {
    say($("status-message"), error.message, "error");
  }
  statusTimer = setTimeout(refreshStatus, indexing ? 1000 : 10000);
}

// --- search -------------------------------------------------------------------------------

async function runSearch(event) {
  if (event) event.preventDefault();
  const text = $("query").value.trim();
  if (!text) {
    say($("search-message"), "Type a query first.", "error");
    return;
  }
  const body = { query: text, max_results: Number($("max-results").value) || 5 };
  const mode = document.querySelector("input[name=mode]:checked");
  if (mode && mode.value) body.mode = mode.value;
  if ($("explain").checked) body.explain = true;
  say($("search-message"), "Searching…", "busy");
  try {
    const answer = await search(agent, context, body);
    const count = answer.results.length;
    say($("search-message"), count
      ? `${count} result${count === 1 ? "" : "s"} · ${answer.mode} · best evidence ${answer.evidence} · ${answer.took_ms} ms`
      : `No relevant documents found for: ${answer.query}`, "ok");
    renderResults($("results"), answer, scope);
    renderTrace($("explain-trace"), $("trace-searches"), $("trace-json"), answer.explain);
  } catch (error) {
    say($("search-message"), error.message, "error");
    $("results").replaceChildren();
    renderTrace($("explain-trace"), $("trace-searches"), $("trace-json"), null);
  }
}

// --- documents ----------------------------------------------------------------------------

const cursors = [null]; // the cursor of each page shown so far; the last is the current one
let nextCursor = null;

function documentState(doc) {
  if (doc.stale) return ["stale", "stale: an older version is searched"];
  if (doc.indexed) return ["indexed", "indexed"];
  return ["problem", "not indexed"];
}

function documentRow(doc) {
  const [state, label] = documentState(doc);
  const cell = (name, ...children) => el("td", { "data-label": name }, ...children);
  const link = el("a", { href: pageUrl("document.html", { ...scope, path: doc.path }) }, doc.path);
  const actions = [];
  if (doc.origin === "manual") {
    const edit = el("button", { type: "button", class: "secondary small", "data-action": "edit",
      "aria-label": `Edit note ${doc.path}` }, "Edit");
    edit.addEventListener("click", () => editNote(doc.path));
    actions.push(edit);
  }
  if (!isShared(agent)) {
    const remove = el("button", { type: "button", class: "danger small", "data-action": "delete",
      "aria-label": `Delete ${doc.path}` }, "Delete");
    remove.addEventListener("click", () => removeDocument(doc.path));
    actions.push(remove);
  }
  return el("tr", { "data-path": doc.path, "data-state": state },
    el("th", { scope: "row", "data-label": "Path" }, link,
      doc.problem ? el("p", { class: "reason" }, doc.problem) : null),
    cell("State", el("span", { class: `badge doc-${state}` }, label)),
    cell("Origin", doc.origin || "–"),
    cell("Format", doc.format || "–"),
    cell("Size", formatBytes(doc.size)),
    cell("Chunks", String(doc.chunk_count)),
    cell("Last indexed", formatTime(doc.indexed_at)),
    cell("Actions", actions.length ? el("div", { class: "row-actions" }, actions) : "–"));
}

async function showDocuments() {
  const cursor = cursors[cursors.length - 1];
  try {
    const page = await listDocuments(agent, context, { limit: PAGE_SIZE, cursor });
    nextCursor = page.next_cursor;
    $("documents").replaceChildren(...page.documents.map(documentRow));
    const number = cursors.length;
    $("documents-caption").textContent =
      `Documents of ${scopeName(agent, context)}, page ${number}` +
      (page.documents.length ? ` (${page.documents.length} shown)` : " (none)");
    if (!page.documents.length && number === 1) {
      say($("documents-message"),
        "No documents yet: drop files below, write a note, or register a repository.");
    }
  } catch (error) {
    say($("documents-message"), error.message, "error");
  }
  $("next-page").disabled = !nextCursor;
  $("previous-page").disabled = cursors.length < 2;
  $("first-page").disabled = cursors.length < 2;
}

async function removeDocument(path) {
  const yes = await confirmDialog({
    title: `Delete ${path}?`,
    text: "The file and its metadata are removed from this scope's source, and the " +
      "document leaves the index once the indexer has applied the delete. The console " +
      "cannot bring it back.",
    confirm: "Delete",
  });
  if (!yes) {
    say($("documents-message"), `Kept ${path}.`);
    return;
  }
  say($("documents-message"), `Deleting ${path}…`, "busy");
  try {
    await deleteDocument(agent, context, path);
    forgetNote(path);
    say($("documents-message"), `Deleted ${path}; waiting for the index…`, "busy");
    const gone = await waitGone(agent, context, path);
    await showDocuments();
    $("documents-heading").focus(); // its row, which had the focus, is gone
    refreshStatus();
    say($("documents-message"), gone ? `${path} is deleted and gone from the index.`
      : `${path} is deleted; the index has not applied it yet.`, gone ? "ok" : "error");
  } catch (error) {
    say($("documents-message"), error.message, "error");
  }
}

// --- uploads ------------------------------------------------------------------------------

const TYPES = {
  md: "text/markdown", markdown: "text/markdown", txt: "text/plain", text: "text/plain",
  rst: "text/plain", adoc: "text/plain", pdf: "application/pdf", html: "text/html",
  htm: "text/html", csv: "text/csv", json: "application/json", yaml: "application/yaml",
  yml: "application/yaml",
  docx: "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
  pptx: "application/vnd.openxmlformats-officedocument.presentationml.presentation",
  xlsx: "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
};

// The content type the path's extension says (the API refuses a type that contradicts it).
function contentTypeOf(path, browserType) {
  const extension = path.includes(".") ? path.split(".").pop().toLowerCase() : "";
  return TYPES[extension] || browserType || "application/octet-stream";
}

function folderPrefix() {
  const folder = $("folder").value.trim().replace(/^\/+/, "");
  return folder && !folder.endsWith("/") ? `${folder}/` : folder;
}

async function uploadOne(file) {
  const path = folderPrefix() + file.name;
  const bar = el("progress", { max: file.size || 1, value: 0, "aria-label": `${path}: bytes sent` });
  const text = el("span", { class: "message busy" }, "Sending…");
  const item = el("li", { "data-path": path, "data-state": "sending" },
    el("code", {}, path), el("span", { class: "size" }, formatBytes(file.size)), bar, text);
  $("uploads").prepend(item);
  try {
    const answer = await uploadFile(agent, context, path, file, contentTypeOf(path, file.type), {
      onProgress: (sent, total) => {
        bar.max = total;
        bar.value = sent;
      },
    });
    bar.value = bar.max;
    item.dataset.state = "accepted";
    say(text, `Accepted (${answer.status}); indexing…`, "busy");
    const done = await waitUploaded(agent, context, path, answer, {
      onWait: (record) => {
        if (record && record.problem) say(text, `Not indexed yet: ${record.problem}`, "busy");
      },
    });
    if (done.indexed) {
      item.dataset.state = "indexed";
      say(text, `Searchable: ${done.record.format}, ${done.record.chunk_count} chunks.`, "ok");
    } else {
      item.dataset.state = "waiting";
      const why = done.record && done.record.problem ? `: ${done.record.problem}` : "";
      say(text, `Accepted but not indexed yet${why}. The status says more.`, "error");
    }
    showDocuments();
    refreshStatus();
  } catch (error) {
    item.dataset.state = "refused";
    item.dataset.status = String(error instanceof ApiError ? error.status : "");
    say(text, error.message, "error");
  }
}

async function uploadFiles(files) {
  for (const file of files) await uploadOne(file); // one at a time: the write quota counts each
}

function setUpDropZone() {
  const zone = $("drop-zone");
  const over = (event) => {
    event.preventDefault();
    zone.classList.add("over");
  };
  zone.addEventListener("dragenter", over);
  zone.addEventListener("dragover", over);
  zone.addEventListener("dragleave", () => zone.classList.remove("over"));
  zone.addEventListener("drop", (event) => {
    event.preventDefault();
    zone.classList.remove("over");
    const files = [...(event.dataTransfer ? event.dataTransfer.files : [])];
    if (files.length) uploadFiles(files);
  });
  // A file dropped beside the zone must not replace the console with the file.
  window.addEventListener("dragover", (event) => event.preventDefault());
  window.addEventListener("drop", (event) => event.preventDefault());
  $("upload-button").addEventListener("click", () => {
    const files = [...$("file-input").files];
    if (!files.length) {
      say($("documents-message"), "Choose files first.", "error");
      $("file-input").focus();
      return;
    }
    uploadFiles(files).then(() => {
      $("file-input").value = "";
    });
  });
}

// --- notes --------------------------------------------------------------------------------
// The API does not return a document's text, so the console keeps the text of each note it
// saved, with the content hash the write answered. Editing loads it only while the index
// holds that very version (same hash); another version is not shown as if it were current.

const noteKey = (path) => `kb-console.note:${apiBase()}|${agent}/${context}|${path}`;

function keepNote(path, hash, text) {
  try {
    localStorage.setItem(noteKey(path), JSON.stringify({ hash, text }));
  } catch (_) { /* storage full or refused: editing starts empty */ }
}

function keptNote(path) {
  try {
    return JSON.parse(localStorage.getItem(noteKey(path)) || "null");
  } catch (_) {
    return null;
  }
}

function forgetNote(path) {
  try {
    localStorage.removeItem(noteKey(path));
  } catch (_) { /* nothing kept */ }
}

async function editNote(path) {
  $("note-path").value = path;
  $("note-text").value = "";
  updatePreview();
  $("note-heading").scrollIntoView({ block: "start" });
  $("note-text").focus();
  try {
    const record = await getDocument(agent, context, path);
    const kept = keptNote(path);
    if (kept && kept.hash === record.content_hash) {
      $("note-text").value = kept.text;
      updatePreview();
      say($("note-message"), `Editing ${path}, the version the index holds.`, "ok");
    } else {
      say($("note-message"), `The API does not return a note's text, and this browser has ` +
        `no copy of the version indexed: write ${path} anew; saving replaces it.`, "error");
    }
  } catch (error) {
    say($("note-message"), error.message, "error");
  }
}

function updatePreview() {
  const preview = $("note-preview");
  if (!preview.hidden) preview.replaceChildren(renderMarkdown($("note-text").value));
}

async function saveNote(event) {
  event.preventDefault();
  const path = $("note-path").value.trim();
  const text = $("note-text").value;
  if (!path || !text.trim()) {
    say($("note-message"), "A note needs a path and some text.", "error");
    return;
  }
  say($("note-message"), `Saving ${path}…`, "busy");
  try {
    const answer = await putDocument(agent, context, path, text, "text/markdown",
      { origin: "manual" });
    keepNote(path, answer.body.content_hash, text);
    say($("note-message"), `Saved ${path}; indexing…`, "busy");
    const done = await waitIndexed(agent, context, path, answer.body.content_hash);
    say($("note-message"), done.indexed ? `${path} is saved and searchable.`
      : `${path} is saved; not indexed yet.`, done.indexed ? "ok" : "error");
    showDocuments();
    refreshStatus();
  } catch (error) {
    say($("note-message"), error.message, "error");
  }
}

function setUpNotes() {
  $("note-form").addEventListener("submit", saveNote);
  $("preview-button").addEventListener("click", () => {
    const preview = $("note-preview");
    preview.hidden = !preview.hidden;
    $("preview-button").setAttribute("aria-pressed", String(!preview.hidden));
    updatePreview();
  });
  $("note-text").addEventListener("input", updatePreview);
  $("new-note").addEventListener("click", () => {
    $("note-path").value = "notes/note.md";
    $("note-text").value = "";
    updatePreview();
    say($("note-message"), "");
    $("note-path").focus();
  });
}

// --- the page -----------------------------------------------------------------------------

async function start() {
  if (!agent || !context) {
    $("scope-title").textContent = "No scope chosen";
    say($("status-message"), "Open a scope from the Scopes page.", "error");
    return;
  }
  document.title = `${scopeName(agent, context)} · knowledge console`;
  $("scope-title").textContent = scopeName(agent, context);
  $("crumb").textContent = scopeName(agent, context);
  $("tab-documents").href = pageUrl("scope.html", scope);
  $("tab-repos").href = pageUrl("repos.html", scope);
  $("search-form").addEventListener("submit", runSearch);
  $("first-page").addEventListener("click", () => {
    cursors.length = 1;
    showDocuments();
  });
  $("previous-page").addEventListener("click", () => {
    if (cursors.length > 1) cursors.pop();
    showDocuments();
  });
  $("next-page").addEventListener("click", () => {
    if (!nextCursor) return;
    cursors.push(nextCursor);
    showDocuments();
  });
  setUpDropZone();
  setUpNotes();
  refreshStatus();
  await showDocuments();
  const listing = await listScopes();
  showServer(listing.writes);
  const notice = $("write-notice");
  if (isShared(agent)) {
    notice.textContent = "The shared library is read-only through the API: change its " +
      "files where it is stored. Uploads and notes here will be refused.";
    notice.hidden = false;
    $("tab-repos").parentElement.hidden = true;
  } else if (listing.writes === false) {
    notice.textContent = "Writes are off on this server (kb serve was started without " +
      "--allow-writes): uploads, notes and deletes will be refused.";
    notice.hidden = false;
  }
  const edit = query.get("edit");
  if (edit) editNote(edit);
}

start();
