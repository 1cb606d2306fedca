// The kb serve playground: plain JS, no build step, no third-party code.
// It only calls the HTTP API (and /playground/scopes, which lists the server's scopes).
"use strict";

const $ = (id) => document.getElementById(id);

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs || {})) {
    if (name === "class") node.className = value;
    else node.setAttribute(name, value);
  }
  for (const child of children) {
    if (child !== null && child !== undefined) node.append(child);
  }
  return node;
}

function setMessage(text, isError) {
  const message = $("message");
  message.textContent = text;
  message.className = isError ? "error" : "";
}

async function getJson(url, options) {
  const response = await fetch(url, options);
  let body = null;
  try {
    body = await response.json();
  } catch (_) {
    body = { error: `HTTP ${response.status}` };
  }
  if (!response.ok) {
    const field = body && body.field ? ` (${body.field})` : "";
    throw new Error(`${(body && body.error) || "HTTP " + response.status}${field}`);
  }
  return body;
}

function selectedScope() {
  const [agent, context] = $("scope").value.split("/");
  return { agent, context };
}

function selectedMode() {
  const checked = document.querySelector("input[name=mode]:checked");
  return checked ? checked.value : "hybrid";
}

// Where in the document a chunk came from: heading path, page(s), slide, sheet and rows.
function citation(metadata) {
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
  if (metadata.sheet) {
    const rows = metadata.row_start !== undefined && metadata.row_start !== null
      ? ` rows ${metadata.row_start}-${metadata.row_end}` : "";
    parts.push(`sheet ${metadata.sheet}${rows}`);
  }
  return parts.join(" · ");
}

function bar(kind, label, value) {
  const known = typeof value === "number";
  const width = known ? Math.max(0, Math.min(1, value)) * 100 : 0;
  const fill = el("span", {});
  fill.style.width = `${width.toFixed(1)}%`; // CSSOM, which the page's CSP allows
  return [
    el("span", { class: "label" }, label),
    el("div", { class: `bar ${kind}`, "data-kind": kind, "data-value": known ? value : "" }, fill),
    el("span", { class: known ? "value" : "value na" }, known ? value.toFixed(2) : "n/a"),
  ];
}

// The hit's origin (upload, repo, manual, shared) as a badge; its url, when it is an
// http(s) link (the server checks sidecar urls too), opens the document at its source.
function originBadge(result) {
  if (!result.origin) return null;
  return el("span", { class: `badge origin-${result.origin}`, "data-origin": result.origin },
    result.format ? `${result.origin} · ${result.format}` : result.origin);
}

function sourceLink(result) {
  const url = typeof result.url === "string" ? result.url : "";
  if (!/^https?:\/\//i.test(url)) return null;
  return el("a", { class: "source-link", href: url, target: "_blank", rel: "noopener noreferrer" },
    "open");
}

// "explain the ranking": the trace (docs/ranking.md, "Explain") beside the results.
const num = (value) => (typeof value === "number" ? Number(value.toPrecision(4)).toString() : "-");

function sideText(name, side) {
  if (!side) return null;
  let text = `${name}: ${side.candidates} candidates, raw ${num(side.min)}..${num(side.max)}`;
  if (side.found !== undefined) text += `, ${side.below_floor} below floor ${num(side.floor)}`;
  if (side.confidence !== undefined) text += `, confidence ${num(side.confidence)}`;
  if (side.effective_weight !== undefined) {
    text += `, weight ${num(side.weight)} → ${num(side.effective_weight)}`;
  }
  return el("li", { "data-side": name, "data-min": side.min, "data-max": side.max }, text);
}

// The scope's synonyms that fired (docs/ranking.md, 5a): each rule's typed terms, the
// terms it added and their weight (an added term counts less than a typed one).
function synonymsBlock(synonyms) {
  if (!synonyms || !synonyms.matches || !synonyms.matches.length) return null;
  const weight = num(synonyms.weight);
  return el("div", { class: "synonyms" },
    `synonyms (added: ${synonyms.expanded.join(", ")})`,
    el("ul", {}, ...synonyms.matches.map((match) => {
      const from = match.from.join(" ");
      const adds = match.adds.join(" ");
      return el("li", { "data-from": from, "data-adds": adds, "data-weight": synonyms.weight },
        el("code", { class: "term" }, from), " → ", el("code", { class: "term" }, adds),
        ` × ${weight}`);
    })));
}

function renderExplainSummary(trace) {
  const box = $("explain-summary");
  if (!trace) {
    box.hidden = true;
    box.replaceChildren();
    return;
  }
  box.hidden = false;
  box.replaceChildren(...trace.searches.map((search) => {
    const weights = search.weights;
    const origins = Object.entries(weights.origins).map(([k, v]) => `${k} ${num(v)}`).join(", ");
    return el("div", { class: "explain-search", "data-search": search.search },
      el("div", { class: "explain-title" }, `search ${search.search}: ${search.scope} · ${search.mode}`),
      el("div", { class: "terms" }, "terms after analysis: ",
        ...search.query.terms.map((term) => el("code", { class: "term" }, term))),
      synonymsBlock(search.query.synonyms),
      el("ul", {},
        sideText("keyword", search.keyword),
        sideText("vector", search.vector),
        el("li", {}, `fusion: ${search.fusion.method}, ${search.fusion.candidates} candidates` +
          (search.fusion.divisor !== undefined ? `, divisor ${num(search.fusion.divisor)}` : "")),
        el("li", {}, `weights: ${origins}; lesson ${num(weights.lesson)}; divisor ${num(weights.divisor)}`),
        el("li", {}, `min_score ${num(search.min_score.value)}: ${search.min_score.dropped} dropped; ` +
          `per-document cap ${search.cap.max_chunks_per_document}: ${search.cap.dropped} passed over`)));
  }));
  if (trace.rerank) {
    box.append(el("div", { class: "explain-rerank" },
      `rerank: ${trace.rerank.reranker}, ${trace.rerank.moves.length} reranked`));
  }
}

// A side as the score is computed from it: keyword mode divides the raw score by the
// side's maximum, vector mode takes the unit score as it is, a weighted hybrid min-max
// normalises it (→), RRF uses the rank alone (knowledge.ranking.explain.recompute).
function sidePart(name, own, search) {
  if (!own) return null;
  if (own.raw === null) return `${name} -`;
  const text = `${name} ${num(own.raw)} (#${own.rank}`;
  const method = search ? search.fusion.method : "";
  if (method === "keyword") return `${text}) / max ${num(search.keyword.max)}`;
  if (method === "vector") return `${text}, unit score)`;
  if (method === "rrf") return `${text})`;
  return `${text}) → ${num(own.normalised)}`;
}

function explainEntry(entry, trace) {
  if (!entry) return null;
  const search = trace.searches[entry.search];
  const parts = [sidePart("keyword", entry.keyword, search),
    sidePart("vector", entry.vector, search)].filter(Boolean);
  parts.push(`fused ${num(entry.fused)} × origin ${num(entry.origin_weight)} × lesson ` +
    `${num(entry.lesson_weight)} = ${num(entry.searched)}`);
  if (entry.rerank) {
    parts.push(`rerank #${entry.rerank.from_rank} → #${entry.rerank.to_rank}` +
      (entry.rerank.rerank_score === null ? "" : ` (${num(entry.rerank.rerank_score)})`));
  }
  return el("div", {
    class: "explain", "data-fused": entry.fused, "data-origin-weight": entry.origin_weight,
    "data-lesson-weight": entry.lesson_weight, "data-searched": entry.searched,
    "data-keyword-raw": entry.keyword && entry.keyword.raw !== null ? entry.keyword.raw : "",
  }, parts.join(" · "));
}

function renderResults(body) {
  renderExplainSummary(body.explain);
  const list = $("results");
  list.replaceChildren();
  const heading = $("results-heading");
  heading.hidden = false;
  const count = body.results.length;
  heading.textContent = count
    ? `${count} result${count === 1 ? "" : "s"} · best evidence: ${body.evidence} · ${body.mode} · ${body.took_ms} ms`
    : `No relevant documents found for: ${body.query}`;
  body.results.forEach((result, i) => {
    const where = citation(result.metadata || {});
    list.append(el("li", { class: "result", "data-path": result.document_path },
      el("div", { class: "cite" },
        `[${i + 1}] ${result.document_path}`,
        originBadge(result),
        where ? el("span", { class: "where" }, where) : null,
        el("span", { class: "where" }, `chunk ${result.chunk_index}`),
        el("span", { class: `badge strength ${result.strength}` }, result.strength),
        result.extra ? el("span", { class: "badge extra" }, "lesson · extra") : null,
        sourceLink(result)),
      el("div", { class: "bars" },
        ...bar("score", "score", result.score),
        ...bar("rank", "rank", result.rank_score),
        ...bar("keyword", "keyword", result.keyword_score),
        ...bar("vector", "vector", result.vector_score)),
      body.explain ? explainEntry(body.explain.results[i], body.explain) : null,
      el("pre", {}, result.content)));
  });
}

function renderStatus(status) {
  const rows = [
    ["state", status.state],
    ["documents", status.document_count],
    ["chunks", status.chunk_count],
    ["last indexed", status.last_indexed_at || "never"],
  ];
  if (status.message) rows.push(["message", status.message]);
  const unread = Object.entries(status.unread_files || {}).sort((a, b) => b[1] - a[1]);
  if (unread.length) {
    const total = unread.reduce((sum, [, n]) => sum + n, 0);
    rows.push(["not read", `${total} (${unread.map(([ext, n]) => `${ext} ${n}`).join(", ")})`]);
  }
  $("status").replaceChildren(...rows.flatMap(([k, v]) => [el("dt", {}, k), el("dd", {}, String(v))]));
  const problems = status.problems || [];
  $("problems-heading").hidden = problems.length === 0;
  $("problems").replaceChildren(...problems.map((p) =>
    el("li", {}, el("code", {}, p.document_path), " ", el("span", { class: "reason" }, p.reason))));
}

async function loadStatus() {
  const { agent, context } = selectedScope();
  if (!agent) return;
  try {
    renderStatus(await getJson(`/v1/agents/${agent}/contexts/${context}/status`));
  } catch (error) {
    $("status").replaceChildren(el("dt", {}, "error"), el("dd", {}, error.message));
  }
}

async function search(event) {
  if (event) event.preventDefault();
  const query = $("query").value.trim();
  if (!query) {
    setMessage("Type a query first.", true);
    return;
  }
  const { agent, context } = selectedScope();
  const cross = $("cross-context").checked;
  const url = cross ? `/v1/agents/${agent}/search`
    : `/v1/agents/${agent}/contexts/${context}/search`;
  const request = { query, mode: selectedMode(), max_results: Number($("max-results").value) || 5 };
  if ($("explain").checked) request.explain = true;
  setMessage("Searching…", false);
  try {
    const body = await getJson(url, {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify(request),
    });
    setMessage("", false);
    renderResults(body);
  } catch (error) {
    setMessage(error.message, true);
    $("results").replaceChildren();
    $("results-heading").hidden = true;
  }
}

// Writes (kb serve --allow-writes only): PUT the file or the note; the answer is 202 and
// the watcher indexes it, so the status is refreshed until the document is indexed.
function writeMessage(text, isError) {
  $("write-message").textContent = text;
  $("write-message").className = isError ? "error" : "";
}

async function putDocument(path, body, contentType, origin) {
  const { agent, context } = selectedScope();
  const query = origin ? `?origin=${origin}` : "";
  const route = `/v1/agents/${agent}/contexts/${context}/documents/${encodeURIComponent(path)}`;
  writeMessage(`Sending ${path}…`, false);
  try {
    const answer = await getJson(route + query,
      { method: "PUT", headers: { "Content-Type": contentType }, body });
    writeMessage(`Accepted ${answer.path}; indexing…`, false);
    for (let i = 0; i < 60; i++) {
      const doc = await fetch(route).then((r) => (r.ok ? r.json() : null));
      if (doc && doc.indexed && doc.content_hash === answer.content_hash) {
        writeMessage(`${answer.path} is searchable.`, false);
        await loadStatus();
        return;
      }
      await new Promise((resolve) => setTimeout(resolve, 250));
    }
    writeMessage(`${answer.path} was accepted but is not indexed yet; see the status.`, false);
  } catch (error) {
    writeMessage(error.message, true);
  }
}

$("upload-form").addEventListener("submit", (event) => {
  event.preventDefault();
  const file = $("upload-file").files[0];
  if (!file) return;
  const path = $("upload-path").value.trim() || file.name;
  putDocument(path, file, file.type || "application/octet-stream", null);
});
$("note-form").addEventListener("submit", (event) => {
  event.preventDefault();
  putDocument($("note-path").value.trim(), $("note-text").value, "text/markdown", "manual");
});

async function loadScopes() {
  try {
    const body = await getJson("/playground/scopes");
    const select = $("scope");
    select.replaceChildren(...body.scopes.map((s) =>
      el("option", { value: `${s.agent}/${s.context}` }, `${s.agent} / ${s.context}`)));
    $("write-panel").hidden = !body.writes;
    if (!body.scopes.length) setMessage("This server has no scopes yet: add files under ROOT/<agent>/<context>/.", true);
    await loadStatus();
  } catch (error) {
    setMessage(`Cannot list scopes: ${error.message}`, true);
  }
}

$("search-form").addEventListener("submit", search);
$("scope").addEventListener("change", () => { loadStatus(); if ($("query").value.trim()) search(); });
$("explain").addEventListener("change", () => { if ($("query").value.trim()) search(); });
for (const radio of document.querySelectorAll("input[name=mode]")) {
  radio.addEventListener("change", () => { if ($("query").value.trim()) search(); });
}
loadScopes();
