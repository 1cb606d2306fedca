// The shared library, read-only: each _shared/<context> library with its status, and which
// libraries each agent's searches include.
// Routes: the scope list, GET .../status of each library, POST /v1/agents/{agent}/search
// (keyword, explained: the trace names the libraries searched). The API has no grants route.
import { listScopes, scopeStatus, search } from "./api.js";
import { $, el, formatTime, isShared, pageUrl, say, showServer, stateBadge } from "./ui.js";

async function libraryRow(scope) {
  const cell = (label, ...children) => el("td", { "data-label": label }, ...children);
  const name = el("th", { scope: "row", "data-label": "Library" },
    el("a", { href: pageUrl("scope.html", scope) }, scope.context));
  try {
    const status = await scopeStatus(scope.agent, scope.context);
    return el("tr", { "data-library": scope.context }, name,
      cell("State", stateBadge(status.state)),
      cell("Documents", String(status.document_count)),
      cell("Chunks", String(status.chunk_count)),
      cell("Last indexed", formatTime(status.last_indexed_at)));
  } catch (error) {
    return el("tr", { "data-library": scope.context }, name,
      el("td", { colspan: 4, class: "reason" }, error.message));
  }
}

// One explained keyword search of the agent (every context, cheap: no embedding).
async function grantedTo(agent) {
  const answer = await search(agent, null,
    { query: "shared library grant", mode: "keyword", max_results: 1, explain: true });
  const libraries = new Set();
  for (const record of answer.explain.searches) {
    for (const library of record.libraries || []) libraries.add(library.replace(/^_shared\//i, ""));
  }
  return [...libraries].sort();
}

async function grantRow(agent) {
  const name = el("th", { scope: "row", "data-label": "Agent" }, agent);
  const cell = el("td", { "data-label": "Libraries" });
  const row = el("tr", { "data-agent": agent }, name, cell);
  try {
    const libraries = await grantedTo(agent);
    row.dataset.libraries = libraries.join(",");
    cell.replaceChildren(libraries.length
      ? el("ul", { class: "inline" }, libraries.map((lib) => el("li", {},
        el("a", { href: pageUrl("scope.html", { agent: "_shared", context: lib }) }, lib))))
      : "none");
  } catch (error) {
    cell.replaceChildren(el("span", { class: "reason" }, error.message));
  }
  return row;
}

async function start() {
  const listing = await listScopes();
  showServer(listing.writes);
  const libraries = listing.scopes.filter((s) => isShared(s.agent));
  $("libraries").replaceChildren(...await Promise.all(libraries.map(libraryRow)));
  say($("libraries-message"), libraries.length ? "" : listing.listed
    ? "No shared library: put documents under ROOT/_shared/<library>/ (the bucket's _shared/)."
    : "This server does not list its scopes: add _shared/<library> scopes on the Settings page.");
  const agents = [...new Set(listing.scopes.filter((s) => !isShared(s.agent)).map((s) => s.agent))];
  $("grants").replaceChildren(...await Promise.all(agents.map(grantRow)));
  say($("grants-message"), agents.length ? "" : "No agent to ask.");
}

start();
