// One document: its record in the index (state, origin, format, size, chunks, version,
// hash, last indexed, problem), its chunks as indexed (a page at a time), the chunks a
// search finds in it, delete, and for a note the way back to the editor.
// Routes: GET and DELETE .../documents/{path}, GET .../documents/{path}/chunks,
// POST .../search (file_patterns: the path).
import {
  ApiError, deleteDocument, getDocument, listChunks, listScopes, search, waitGone,
} from "./api.js";
import { renderResults, renderTrace } from "./results.js";
import {
  $, citation, confirmDialog, el, formatBytes, formatTime, isShared, pageUrl, params, say,
  scopeName, showServer,
} from "./ui.js";

const query = params();
const agent = query.get("agent") || "";
const context = query.get("context") || "";
const path = query.get("path") || "";
const scope = { agent, context };

// fnmatch treats * ? [ as wildcards: each is matched as itself inside brackets.
const globEscape = (text) => text.replace(/[*?[]/g, (c) => `[${c}]`);

function recordView(doc) {
  let state = "indexed";
  if (doc.stale) state = "stale: an older version is searched";
  else if (!doc.indexed) state = "not indexed";
  const rows = [
    ["State", state],
    ["Origin", doc.origin || "–"],
    ["Format", doc.format || "–"],
    ["Size", formatBytes(doc.size)],
    ["Chunks", String(doc.chunk_count)],
    ["Last indexed", formatTime(doc.indexed_at)],
    ["Version", doc.version || "–"],
    ["Content hash", el("code", { class: "hash" }, doc.content_hash || "–")],
  ];
  if (doc.problem) rows.push(["Problem", el("span", { class: "reason" }, doc.problem)]);
  return el("dl", { class: "facts", "data-chunks": doc.chunk_count, "data-format": doc.format || "" },
    rows.map(([name, value]) => [el("dt", {}, name), el("dd", {}, value)]));
}

async function showRecord() {
  try {
    const doc = await getDocument(agent, context, path);
    $("record").replaceChildren(recordView(doc));
    $("chunks-note").textContent = `The index holds ${doc.chunk_count} chunk` +
      `${doc.chunk_count === 1 ? "" : "s"} of this document, in order below; a search ` +
      "limited to this document shows the ones it finds and why.";
    const edit = $("edit-note");
    edit.hidden = doc.origin !== "manual";
    edit.href = pageUrl("scope.html", { ...scope, edit: path });
    return doc;
  } catch (error) {
    say($("record-message"), error.message, "error");
    return null;
  }
}

const CHUNKS_PAGE = 20;
let nextChunks = null; // the cursor of the next page of chunks, null when all are shown

function chunkView(chunk) {
  const where = citation({ ...chunk.position, heading_path: chunk.heading_path });
  return el("li", { class: "result", "data-chunk": chunk.chunk_index },
    el("p", { class: "cite" }, `Chunk ${chunk.chunk_index}`,
      where ? el("span", { class: "where" }, where) : null),
    el("p", { class: "passage" }, chunk.content));
}

// The next page of the indexed chunks (the first when `first`), appended to the list.
async function showChunks(first = false) {
  say($("indexed-message"), "Reading the chunks…", "busy");
  try {
    const page = await listChunks(agent, context, path,
      { limit: CHUNKS_PAGE, cursor: first ? null : nextChunks });
    const items = page.chunks.map(chunkView);
    if (first) $("indexed-chunks").replaceChildren(...items);
    else $("indexed-chunks").append(...items);
    nextChunks = page.next_cursor;
    $("more-chunks").hidden = !nextChunks;
    const shown = $("indexed-chunks").children.length;
    say($("indexed-message"), shown ? `${shown} chunk${shown === 1 ? "" : "s"} shown` +
      `${nextChunks ? "; more below" : ""}.` : "This document has no chunks.", "ok");
  } catch (error) {
    $("more-chunks").hidden = true;
    // 404: no version of it is indexed (a problem only), as the record above says.
    say($("indexed-message"), error instanceof ApiError && error.status === 404
      ? "No version of this document is indexed, so it has no chunks." : error.message,
    error instanceof ApiError && error.status === 404 ? "" : "error");
  }
}

async function findChunks(event) {
  event.preventDefault();
  const text = $("chunk-query").value.trim();
  if (!text) return;
  const body = {
    query: text, max_results: 20, max_chunks_per_document: 20,
    file_patterns: [globEscape(path)], include_shared: false, // this document alone
  };
  if ($("chunk-explain").checked) body.explain = true;
  say($("chunks-message"), "Searching…", "busy");
  try {
    const answer = await search(agent, context, body);
    // A pattern without a folder also matches the name in any folder: keep this path.
    const own = answer.results.map((r, i) => [r, i]).filter(([r]) => r.document_path === path);
    const kept = { ...answer, results: own.map(([r]) => r) };
    if (answer.explain) {
      kept.explain = { ...answer.explain, results: own.map(([, i]) => answer.explain.results[i]) };
    }
    renderResults($("chunks"), kept, scope);
    renderTrace($("explain-trace"), $("trace-searches"), $("trace-json"), kept.explain);
    say($("chunks-message"), kept.results.length
      ? `${kept.results.length} chunk${kept.results.length === 1 ? "" : "s"} found.`
      : "No chunk of this document matches.", "ok");
  } catch (error) {
    say($("chunks-message"), error.message, "error");
  }
}

async function remove() {
  const yes = await confirmDialog({
    title: `Delete ${path}?`,
    text: "The file and its metadata are removed from this scope's source, and the " +
      "document leaves the index once the indexer has applied the delete.",
    confirm: "Delete",
  });
  if (!yes) return;
  say($("record-message"), `Deleting ${path}…`, "busy");
  try {
    await deleteDocument(agent, context, path);
    const gone = await waitGone(agent, context, path);
    say($("record-message"), gone ? `${path} is deleted and gone from the index.`
      : `${path} is deleted; the index has not applied it yet.`, gone ? "ok" : "error");
    if (gone) {
      $("record").replaceChildren();
      $("indexed-chunks").replaceChildren();
      $("more-chunks").hidden = true;
    }
  } catch (error) {
    say($("record-message"), error instanceof ApiError ? error.message : String(error), "error");
  }
}

async function start() {
  if (!agent || !context || !path) {
    say($("record-message"), "No document chosen: open one from a scope's page.", "error");
    return;
  }
  document.title = `${path} · ${scopeName(agent, context)} · knowledge console`;
  $("document-title").textContent = path;
  $("crumb").textContent = path;
  $("scope-link").textContent = scopeName(agent, context);
  $("scope-link").href = pageUrl("scope.html", scope);
  $("chunk-search").addEventListener("submit", findChunks);
  $("delete-document").addEventListener("click", remove);
  $("more-chunks").addEventListener("click", () => showChunks());
  if (isShared(agent)) $("delete-document").hidden = true;
  const doc = await showRecord();
  if (doc && doc.indexed) await showChunks(true);
  showServer((await listScopes()).writes);
}

start();
