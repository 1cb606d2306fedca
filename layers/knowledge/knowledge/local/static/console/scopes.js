// The Scopes page: every scope with its status, refreshed while any is indexing.
// Routes: the scope list (kb serve's GET /playground/scopes, or the Settings page's),
// GET .../status per scope.
import { listScopes, scopeStatus } from "./api.js";
import {
  $, el, formatTime, isShared, pageUrl, progressView, say, scopeName, showServer, stateBadge,
} from "./ui.js";

const rows = new Map(); // "agent/context" -> the row's cells
let timer = null;

function row(scope) {
  const key = `${scope.agent}/${scope.context}`;
  if (rows.has(key)) return rows.get(key);
  const cell = (label) => el("td", { "data-label": label });
  const cells = {
    state: cell("State"),
    documents: cell("Documents"),
    chunks: cell("Chunks"),
    problems: cell("Problems"),
    indexed: cell("Last indexed"),
    repos: cell("Repositories"),
  };
  const link = el("a", { href: pageUrl("scope.html", scope) }, scopeName(scope.agent, scope.context));
  const name = el("th", { scope: "row", "data-label": "Scope" }, link,
    isShared(scope.agent) ? el("span", { class: "badge shared" }, "shared library") : null);
  const tr = el("tr", { "data-scope": key }, name, ...Object.values(cells));
  $("scopes").append(tr);
  rows.set(key, cells);
  return cells;
}

function fill(cells, scope, status) {
  cells.state.replaceChildren(...[stateBadge(status.state), progressView(status.progress)]
    .filter(Boolean));
  cells.documents.textContent = String(status.document_count);
  cells.chunks.textContent = String(status.chunk_count);
  const problems = (status.problems || []).length;
  cells.problems.replaceChildren(problems
    ? el("a", { href: pageUrl("scope.html", scope) + "#status-heading", class: "problem-count" },
      `${problems} not indexed`)
    : "none");
  cells.indexed.textContent = formatTime(status.last_indexed_at);
  const repos = Array.isArray(status.repos) ? status.repos.length : 0;
  cells.repos.replaceChildren(isShared(scope.agent) ? "–" : el("a",
    { href: pageUrl("repos.html", scope) }, repos ? `${repos} repositories` : "add one"));
}

async function refresh() {
  const listing = await listScopes();
  showServer(listing.writes);
  if (!listing.scopes.length) {
    say($("scopes-message"), listing.listed
      ? "This server has no scopes yet: add files under ROOT/<agent>/<context>/."
      : "This server does not list its scopes (the API has no scope list): name the " +
        "scopes to manage on the Settings page.", "error");
    return false;
  }
  say($("scopes-message"), listing.listed ? "" :
    "Scopes from the Settings page (this server does not list its scopes).");
  let indexing = false;
  await Promise.all(listing.scopes.map(async (scope) => {
    const cells = row(scope);
    try {
      const status = await scopeStatus(scope.agent, scope.context);
      fill(cells, scope, status);
      indexing = indexing || status.state === "INDEXING";
    } catch (error) {
      cells.state.replaceChildren(el("span", { class: "message error" }, error.message));
    }
  }));
  return indexing;
}

async function loop() {
  clearTimeout(timer);
  const indexing = await refresh();
  timer = setTimeout(loop, indexing ? 1000 : 15000);
}

$("refresh").addEventListener("click", loop);
loop();
