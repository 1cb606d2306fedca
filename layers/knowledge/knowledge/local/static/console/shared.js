// The shared library, read-only: each _shared/<context> library with its counts and state,
// and which libraries each agent's searches include (the server's grants).
// Routes: the scope list (which agents to ask), GET /v1/agents/{agent}/shared for each agent
// (its granted libraries, each with its counts), GET /v1/agents/_shared/contexts (every
// library, where the caller may read the shared owner's routes), GET .../status of a listed
// library neither names.
import { agentContexts, listScopes, scopeStatus, sharedLibraries } from "./api.js";
import { $, el, formatTime, isShared, pageUrl, say, showServer, stateBadge } from "./ui.js";

const cell = (label, ...children) => el("td", { "data-label": label }, ...children);

function libraryRow(context, summary) {
  const scope = { agent: "_shared", context };
  const name = el("th", { scope: "row", "data-label": "Library" },
    el("a", { href: pageUrl("scope.html", scope) }, context));
  if (summary instanceof Error) {
    return el("tr", { "data-library": context }, name,
      el("td", { colspan: 4, class: "reason" }, summary.message));
  }
  return el("tr", { "data-library": context }, name,
    cell("State", stateBadge(summary.state)),
    cell("Documents", String(summary.document_count)),
    cell("Chunks", String(summary.chunk_count)),
    cell("Last indexed", formatTime(summary.last_indexed_at)));
}

function grantRow(agent, answer) {
  const row = el("tr", { "data-agent": agent },
    el("th", { scope: "row", "data-label": "Agent" }, agent));
  if (answer instanceof Error) {
    row.append(cell("Libraries", el("span", { class: "reason" }, answer.message)));
    return row;
  }
  const names = answer.libraries.map((lib) => lib.context);
  row.dataset.libraries = names.join(",");
  row.append(cell("Libraries", names.length
    ? el("ul", { class: "inline" }, names.map((lib) => el("li", {},
      el("a", { href: pageUrl("scope.html", { agent: "_shared", context: lib }) }, lib))))
    : "none"));
  return row;
}

const settled = (promise) => promise.catch((error) => error);

async function start() {
  const listing = await listScopes();
  showServer(listing.writes);
  const named = [...listing.scopes.map((s) => s.agent), ...listing.agents];
  const agents = [...new Set(named.filter((agent) => !isShared(agent)))];
  const [answers, owner] = await Promise.all([
    Promise.all(agents.map((agent) => settled(sharedLibraries(agent)))),
    settled(agentContexts("_shared")),
  ]);
  $("grants").replaceChildren(...agents.map((agent, i) => grantRow(agent, answers[i])));
  say($("grants-message"), agents.length ? "" : "No agent to ask.");

  // Every library with its counts: the owner's contexts, else what the grants say of them.
  const libraries = new Map();
  for (const summary of owner instanceof Error ? [] : owner.contexts) {
    libraries.set(summary.context, summary);
  }
  for (const answer of answers) {
    if (answer instanceof Error) continue;
    for (const library of answer.libraries) {
      if (!libraries.has(library.context)) libraries.set(library.context, library);
    }
  }
  const unnamed = listing.scopes.filter((s) => isShared(s.agent) && !libraries.has(s.context));
  await Promise.all(unnamed.map(async (scope) => {
    libraries.set(scope.context, await settled(scopeStatus(scope.agent, scope.context)));
  }));
  const names = [...libraries.keys()].sort();
  $("libraries").replaceChildren(...names.map((name) => libraryRow(name, libraries.get(name))));
  say($("libraries-message"), names.length ? "" : listing.listed
    ? "No shared library: put documents under ROOT/_shared/<library>/ (the bucket's _shared/)."
    : "No shared library is granted to the agents named on the Settings page.");
}

start();
