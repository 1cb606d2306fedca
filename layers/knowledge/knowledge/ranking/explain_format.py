"""The text form of an explain trace (``format_trace``: ``kb search --explain``, the MCP
tool's explained answer): each search's stages, then each result's numbers."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["format_trace"]


def _number(value: object) -> str:
    return f"{value:.4g}" if isinstance(value, float) else str(value)


def _side_line(name: str, side: Mapping[str, Any] | None) -> str | None:
    if side is None:
        return None
    text = f"  {name}: {side['candidates']} candidates"
    if "found" in side:
        text += f" ({side['found']} found, {side['below_floor']} below floor {side['floor']})"
    text += f", raw {_number(side['min'])}..{_number(side['max'])}"
    if "page_weight" in side:
        text += (
            f" (chunk / {_number(side['chunk_max'])} + {_number(side['page_weight'])}"
            f" x page / {_number(side['page_max'])})"
        )
    if "confidence" in side:
        text += f", confidence {_number(side['confidence'])}, weight {_number(side['weight'])}"
        if "effective_weight" in side:
            text += f" -> {_number(side['effective_weight'])}"
    return text


def _entry_side(name: str, entry: Mapping[str, Any] | None, search: Mapping[str, Any]) -> str:
    """One side of a result's line, as its score is computed from it: keyword mode
    divides the raw score by the side's maximum, vector mode takes the unit score as it
    is, a weighted hybrid min-max normalises (``-> n``), RRF uses the rank alone. A
    keyword side shows its two parts (``ranking.page_signal``) where the trace has them."""
    if entry is None:
        return ""
    if entry["raw"] is None:
        return f" {name} -"
    parts = (
        f" [chunk {_number(entry['chunk'])}, page {_number(entry['page'])}]"
        if "page" in entry
        else ""
    )
    own = f" {name} {_number(entry['raw'])}{parts} (#{entry['rank']}"
    method = search["fusion"]["method"]
    if method == "keyword":
        return f"{own}) / max {_number(search['keyword']['max'])}:"
    if method == "vector":
        return f"{own}, unit score):"
    if method == "rrf":
        return f"{own})"
    return f"{own}) -> {_number(entry['normalised'])}"


def format_trace(trace: Mapping[str, Any], results: Sequence[Mapping[str, Any]]) -> str:
    """The trace as text (``kb search --explain``): each search's stages, then each
    result's numbers, in result order."""
    lines = [line for search in trace["searches"] for line in _search_lines(search)]
    lines += _rerank_lines(trace.get("rerank"))
    lines += _budget_lines(trace.get("budget"))
    for index, (entry, result) in enumerate(zip(trace["results"], results, strict=False), 1):
        if entry is not None:  # a result no store explained
            lines.append(_result_line(index, entry, result, trace["searches"][entry["search"]]))
    return "\n".join(lines)


def _search_lines(search: Mapping[str, Any]) -> list[str]:
    """One search's stages, in the order they ran: what was searched, the query's terms
    and synonyms, each side, fusion, the weights, ``min_score`` and the per-document cap,
    the relevance floor."""
    query = search["query"]
    libraries = search.get("libraries") or ()
    shared = f" + {', '.join(libraries)}" if libraries else ""
    lines = [
        f"search {search['search']}: {search['store']} {search['scope']}{shared} ({search['mode']})"
    ]
    if search.get("vector_side"):  # the vector side not used (ranking.vector_side)
        lines.append(f"  vector side: {search['vector_side']}")
    lines.append(f"  terms: {', '.join(query['terms']) or '(none)'}  [{query['analysis']}]")
    synonyms = query.get("synonyms")
    if synonyms:
        added = ", ".join(synonyms["expanded"])
        matched = "; ".join(
            f"{' '.join(m['from'])} -> {' '.join(m['adds'])}" for m in synonyms["matches"]
        )
        lines.append(
            f"  synonyms: + {added} (weight {_number(synonyms['weight'])} each): {matched}"
        )
    for name in ("keyword", "vector"):
        line = _side_line(name, search[name])
        if line:
            lines.append(line)
    fusion = search["fusion"]
    divisor = fusion.get("divisor")
    lines.append(
        f"  fusion: {fusion['method']}, {fusion['candidates']} candidates"
        + ("" if divisor is None else f", divisor {_number(divisor)}")
    )
    weights = search["weights"]
    origins = " ".join(f"{k}={_number(v)}" for k, v in weights["origins"].items())
    lines.append(
        f"  weights: {origins} lesson={_number(weights['lesson'])}"
        f" (extra {weights['extra_lessons']}); {weights['weighted']} weighted,"
        f" {weights['lessons']} lessons, divisor {_number(weights['divisor'])}"
    )
    cap = search["cap"]
    value = search["min_score"]["value"]
    lines.append(
        f"  min_score {'default' if value is None else _number(value)}: "
        f"{search['min_score']['dropped']} dropped; per-document cap "
        f"{cap['max_chunks_per_document']}: {cap['dropped']} passed over"
    )
    relevance = search.get("relevance")
    if relevance is not None:
        lines.append(
            f"  relevance: best {_number(relevance['best'])}, evidence floor "
            f"{_number(relevance['evidence_floor'])}"
            + (" (nothing answered)" if relevance["abstained"] else "")
            + f", result floor {_number(relevance['result_floor'])}; calibration "
            f"{relevance['calibration']['family']}"
            + (f" ({script} script)" if (script := relevance.get("script")) else "")
            + f", {relevance['terms']['chunks']} chunks"
        )
    return lines


def _rerank_lines(rerank: Mapping[str, Any] | None) -> list[str]:
    """The reranking stage, where one ran."""
    if rerank is None:
        return []
    return [
        f"rerank: {rerank['reranker']}, {rerank['candidates']} candidates, "
        f"{len(rerank['moves'])} moved"
    ]


def _budget_lines(budget: Mapping[str, Any] | None) -> list[str]:
    """A token budget's cut (a route with one: the prompt context), each passage it
    dropped on a line of its own."""
    if budget is None:
        return []
    lines = [
        f"budget: {budget['used_tokens']} of {budget['max_tokens']} tokens, "
        f"{budget['kept']} passages kept, {len(budget['dropped'])} dropped"
        + (", the first cut" if budget.get("cut") else "")
    ]
    for dropped in budget["dropped"]:
        lines.append(
            f"  dropped {dropped['document_path']}#{dropped['chunks']} "
            f"(score {_number(float(dropped['score']))}, {dropped['tokens']} tokens)"
        )
    return lines


def _result_line(
    index: int, entry: Mapping[str, Any], result: Mapping[str, Any], search: Mapping[str, Any]
) -> str:
    """Result ``index``'s numbers as its score was made: each side, the fused score and
    its weights, a reranker's move, then the absolute score and its evidence."""
    where = f"{result['document_path']}#{result['chunk_index']}"
    text = f"[{index}] {where} (search {entry['search']}):"
    text += _entry_side("kw", entry["keyword"], search)
    text += _entry_side("vec", entry["vector"], search)
    text += (
        f" fused {_number(entry['fused'])} x{_number(entry['origin_weight'])}"
        f" x{_number(entry['lesson_weight'])} = {_number(entry['searched'])}"
    )
    if entry.get("rerank"):
        move = entry["rerank"]
        text += f"; rerank #{move['from_rank']} -> #{move['to_rank']}"
    if entry["extra"]:
        text += " (extra lesson)"
    text += f"; rank_score {_number(float(result.get('rank_score') or 0.0))}"
    evidence = entry.get("relevance")
    if evidence is not None:
        vector = evidence["vector"]
        text += (
            f"; coverage {_number(evidence['coverage'])}"
            + ("" if vector is None else f", vector {_number(vector)}")
            + f" -> score {_number(float(result['score']))} ({evidence['strength']})"
        )
    else:
        text += f"; score {_number(float(result['score']))}"
    return text
