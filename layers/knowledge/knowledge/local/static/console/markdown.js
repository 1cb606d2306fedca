// A small Markdown preview for the note editor: headings, paragraphs, lists, quotes,
// fenced code, inline code, emphasis and links. It builds DOM nodes from text (never
// HTML from strings), so a note cannot run script in the console; a link is kept only
// when it is http(s) or mailto. The indexer reads the note itself, not this preview.

const INLINE = /(`[^`]+`)|(\*\*[^*]+\*\*)|(\*[^*\s][^*]*\*|_[^_\s][^_]*_)|(\[[^\]]+\]\([^)\s]+\))/;

function inline(text) {
  const nodes = [];
  let rest = text;
  while (rest) {
    const match = INLINE.exec(rest);
    if (!match) {
      nodes.push(document.createTextNode(rest));
      break;
    }
    if (match.index) nodes.push(document.createTextNode(rest.slice(0, match.index)));
    const token = match[0];
    if (match[1]) {
      nodes.push(wrap("code", [document.createTextNode(token.slice(1, -1))]));
    } else if (match[2]) {
      nodes.push(wrap("strong", inline(token.slice(2, -2))));
    } else if (match[3]) {
      nodes.push(wrap("em", inline(token.slice(1, -1))));
    } else {
      const [, label, href] = /^\[([^\]]+)\]\(([^)\s]+)\)$/.exec(token);
      if (/^(https?:|mailto:)/i.test(href)) {
        const link = wrap("a", inline(label));
        link.href = href;
        link.rel = "noopener noreferrer";
        nodes.push(link);
      } else {
        nodes.push(...inline(label));
      }
    }
    rest = rest.slice(match.index + token.length);
  }
  return nodes;
}

function wrap(tag, children) {
  const node = document.createElement(tag);
  node.append(...children);
  return node;
}

// The preview of `source` as a fragment of block elements.
export function renderMarkdown(source) {
  const out = document.createDocumentFragment();
  const lines = source.replace(/\r\n?/g, "\n").split("\n");
  let paragraph = [];
  let list = null;
  const flush = () => {
    if (paragraph.length) out.append(wrap("p", inline(paragraph.join(" "))));
    paragraph = [];
    list = null;
  };
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i];
    const fence = /^```/.exec(line);
    if (fence) {
      flush();
      const code = [];
      for (i += 1; i < lines.length && !/^```/.test(lines[i]); i++) code.push(lines[i]);
      out.append(wrap("pre", [wrap("code", [document.createTextNode(code.join("\n"))])]));
      continue;
    }
    const heading = /^(#{1,6})\s+(.*)$/.exec(line);
    const bullet = /^\s*[-*+]\s+(.*)$/.exec(line);
    const numbered = /^\s*\d+[.)]\s+(.*)$/.exec(line);
    const quote = /^>\s?(.*)$/.exec(line);
    if (!line.trim()) {
      flush();
    } else if (heading) {
      flush();
      out.append(wrap(`h${heading[1].length}`, inline(heading[2])));
    } else if (bullet || numbered) {
      const tag = bullet ? "ul" : "ol";
      if (paragraph.length) flush();
      if (!list || list.tagName.toLowerCase() !== tag) {
        list = document.createElement(tag);
        out.append(list);
      }
      list.append(wrap("li", inline((bullet || numbered)[1])));
    } else if (quote) {
      flush();
      out.append(wrap("blockquote", [wrap("p", inline(quote[1]))]));
    } else {
      list = null;
      paragraph.push(line.trim());
    }
  }
  flush();
  return out;
}
