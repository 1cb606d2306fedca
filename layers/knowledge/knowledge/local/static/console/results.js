// Search results and the explain trace (docs/ranking.md, "Explain"), as the scope page
// and the document page show them.
import { citation, el, pageUrl } from "./ui.js";

const num = (value) => (typeof value === "number" ? Number(value.toPrecision(4)).toString() : "–");

function sideText(name, side) {
  if (!side) return null;
  let text = `${name}: ${side.candidates} candidates, raw ${num(side.min)} to ${num(side.max)}`;
  if (side.found !== undefined) text += `, ${side.below_floor} below the floor ${num(side.floor)}`;
  if (side.confidence !== undefined) text += `, confidence ${num(side.confidence)}`;
  if (side.effective_weight !== undefined) {
    text += `, weight ${num(side.weight)} → ${num(side.effective_weight)}`;
  }
  return el("li", { "data-side": name }, text);
}

function synonymsText(synonyms) {
  if (!synonyms || !synonyms.matches || !synonyms.matches.length) return null;
  return el("p", { class: "synonyms" }, "Synonyms: ",
    synonyms.matches.map((m) => `${m.from.join(" ")} → ${m.adds.join(" ")}`).join("; "),
    ` (added terms weigh ${num(synonyms.weight)})`);
}

function searchRecord(search) {
  const weights = search.weights || {};
  const origins = Object.entries(weights.origins || {}).map(([k, v]) => `${k} ${num(v)}`);
  const libraries = search.libraries && search.libraries.length
    ? ` · with ${search.libraries.join(", ")}` : "";
  return el("div", { class: "trace-search", "data-search": search.search,
    "data-libraries": (search.libraries || []).join(",") },
  el("p", { class: "trace-title" },
    `Search ${search.search}: ${search.scope} · ${search.mode}${libraries}`),
  el("p", {}, "Terms after analysis: ",
    ...search.query.terms.map((term) => el("code", { class: "term" }, term))),
  synonymsText(search.query.synonyms),
  el("ul", {},
    sideText("keyword", search.keyword),
    sideText("vector", search.vector),
    el("li", {}, `fusion: ${search.fusion.method}, ${search.fusion.candidates} candidates`),
    el("li", {}, `weights: ${origins.join(", ") || "none"}; lesson ${num(weights.lesson)}`),
    el("li", {}, `min_score ${num(search.min_score.value)}: ${search.min_score.dropped} dropped; ` +
      `at most ${search.cap.max_chunks_per_document} chunks a document: ` +
      `${search.cap.dropped} passed over`)));
}

// The trace's summary into `box` (its list of searches) and the whole trace as JSON.
export function renderTrace(section, searchesBox, jsonBox, trace) {
  if (!trace) {
    section.hidden = true;
    searchesBox.replaceChildren();
    jsonBox.textContent = "";
    return;
  }
  section.hidden = false;
  searchesBox.replaceChildren(...trace.searches.map(searchRecord));
  if (trace.rerank) {
    searchesBox.append(el("p", {}, `Reranked by ${trace.rerank.reranker}.`));
  }
  jsonBox.textContent = JSON.stringify(trace, null, 2);
}

function explainLine(entry, trace) {
  if (!entry) return null;
  const search = trace.searches[entry.search];
  const parts = [];
  for (const name of ["keyword", "vector"]) {
    const own = entry[name];
    if (!own) continue;
    parts.push(own.raw === null ? `${name} –`
      : `${name} ${num(own.raw)} (#${own.rank})` +
        (search && search.fusion.method === "weighted" ? ` → ${num(own.normalised)}` : ""));
  }
  parts.push(`fused ${num(entry.fused)} × origin ${num(entry.origin_weight)} × lesson ` +
    `${num(entry.lesson_weight)} = ${num(entry.searched)}`);
  return el("p", { class: "explain-line", "data-fused": entry.fused,
    "data-searched": entry.searched }, parts.join(" · "));
}

// Parts of one line with a space between them (read aloud and copied as words).
function spaced(...parts) {
  return parts.filter(Boolean).flatMap((part, i) => (i ? [" ", part] : [part]));
}

// One list item per hit: where it is (a link to the document's page), its passage, its
// scores, and with a trace how its score was made.
export function renderResults(list, body, scope) {
  list.replaceChildren(...body.results.map((result, i) => {
    const where = citation(result.metadata || {});
    const library = result.metadata && result.metadata.shared_library;
    const owner = library ? { agent: "_shared", context: library.split("/")[1] } : scope;
    const link = el("a", { href: pageUrl("document.html", { ...owner, path: result.document_path }) },
      `[${i + 1}] ${result.document_path}`);
    return el("li", { class: "result", "data-path": result.document_path,
      "data-chunk": result.chunk_index },
    el("p", { class: "cite" }, ...spaced(link,
      where ? el("span", { class: "where" }, where) : null,
      el("span", { class: "where" }, `chunk ${result.chunk_index}`),
      result.origin ? el("span", { class: `badge origin-${result.origin}` }, result.origin) : null,
      el("span", { class: "badge" }, result.strength),
      el("span", { class: "where" }, `score ${num(result.score)}`))),
    body.explain ? explainLine(body.explain.results[i], body.explain) : null,
    el("p", { class: "passage" }, result.content));
  }));
}
