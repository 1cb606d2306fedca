// The Scopes page: every scope with its counts and state, refreshed while any is indexing.
// Routes: the scope list (kb serve's GET /playground/scopes, or the Settings page's) and
// the signed-in token's agents claim name the agents; GET /v1/agents/{agent}/contexts lists each agent's contexts with their counts
// (one request an agent, and contexts the list does not name are added); a listed scope the
// index does not hold yet is read with GET .../status.
import { agentContexts, listScopes, scopeStatus } from "./api.js";
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

// `summary`: a context of the contexts route, or a scope's status (its problems listed,
// its repositories counted).
function fill(cells, scope, summary) {
  cells.state.replaceChildren(...[stateBadge(summary.state), progressView(summary.progress)]
    .filter(Boolean));
  cells.documents.textContent = String(summary.document_count);
  cells.chunks.textContent = String(summary.chunk_count);
  const problems = summary.problem_count ?? (summary.problems || []).length;
  cells.problems.replaceChildren(problems
    ? el("a", { href: pageUrl("scope.html", scope) + "#status-heading", class: "problem-count" },
      `${problems} not indexed`)
    : "none");
  cells.indexed.textContent = formatTime(summary.last_indexed_at);
  const repos = Array.isArray(summary.repos) ? summary.repos.length : null;
  let label = "repositories";
  if (repos !== null) label = repos ? `${repos} repositories` : "add one";
  cells.repos.replaceChildren(isShared(scope.agent) ? "–"
    : el("a", { href: pageUrl("repos.html", scope) }, label));
}

function failed(cells, error) {
  cells.state.replaceChildren(el("span", { class: "message error" }, error.message));
}

// One agent's rows: its contexts from the route, a listed scope it does not hold from its
// status. Resolves whether any of them is indexing.
async function refreshAgent(agent, listed) {
  let contexts;
  try {
    contexts = (await agentContexts(agent)).contexts;
  } catch (error) {
    for (const scope of listed) failed(row(scope), error);
    return false;
  }
  const held = new Map(contexts.map((c) => [c.context, c]));
  const scopes = [...listed];
  for (const summary of contexts) {
    if (!listed.some((s) => s.context === summary.context)) {
      scopes.push({ agent, context: summary.context });
    }
  }
  const states = await Promise.all(scopes.map(async (scope) => {
    const cells = row(scope);
    try {
      const summary = held.get(scope.context) || await scopeStatus(agent, scope.context);
      fill(cells, scope, summary);
      return summary.state;
    } catch (error) {
      failed(cells, error);
      return null;
    }
  }));
  return states.includes("INDEXING");
}

async function refresh() {
  const listing = await listScopes();
  showServer(listing.writes);
  if (!listing.scopes.length && !listing.agents.length) {
    say($("scopes-message"), listing.listed
      ? "This server has no scopes yet: add files under ROOT/<agent>/<context>/."
      : "This server does not list its scopes: name an agent's scopes on the Settings " +
        "page, and every context of that agent is listed.", "error");
    return false;
  }
  say($("scopes-message"), listing.listed ? "" : listing.agents.length
    ? "Scopes of the agents your sign-in may read."
    : "Scopes of the agents named on the Settings page (this server does not list its scopes).");
  for (const scope of listing.scopes) row(scope); // the list's order first
  const agents = [...new Set([...listing.scopes.map((s) => s.agent), ...listing.agents])];
  const indexing = await Promise.all(agents.map((agent) =>
    refreshAgent(agent, listing.scopes.filter((s) => s.agent === agent))));
  return indexing.includes(true);
}

async function loop() {
  clearTimeout(timer);
  const indexing = await refresh();
  timer = setTimeout(loop, indexing ? 1000 : 15000);
}

$("refresh").addEventListener("click", loop);
loop();
