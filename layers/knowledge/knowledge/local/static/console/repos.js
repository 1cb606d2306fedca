// A scope's Git repositories: each with its last sync (commit, time, error, problems,
// files), sync now, its files, remove; and the form that registers one with a
// credential reference (never the secret).
// Routes: GET and POST .../repos, GET and DELETE .../repos/{name}, POST .../repos/{name}/sync,
// GET .../documents (the files mirrored under _repos/<name>/).
import { getJson, listDocuments, listScopes, postJson, repoRoute, request } from "./api.js";
import {
  $, confirmDialog, el, formatTime, pageUrl, params, say, scopeName, showServer,
} from "./ui.js";

const query = params();
const agent = query.get("agent") || "";
const context = query.get("context") || "";
const scope = { agent, context };
const NAME = /^[A-Za-z0-9_-][A-Za-z0-9._-]{0,63}$/;
const REFERENCE = /^(env:[A-Za-z_][A-Za-z0-9_]*|file:\/\S+|arn:aws[a-z-]*:secretsmanager:\S+)$/;
const CREDENTIAL_KINDS = { env: "environment variable", file: "file", arn: "Secrets Manager secret" };

function shortCommit(commit) {
  return commit ? commit.slice(0, 12) : "never synced";
}

function syncLine(status) {
  if (status.error) {
    return el("span", { class: "reason" },
      `${status.error.kind}: ${status.error.message} (the last good sync stays searchable)`);
  }
  return status.synced_at ? "ok" : "not synced yet";
}

function repoCard(repo) {
  const status = repo.status || {};
  const id = `repo-${repo.name.replace(/[^A-Za-z0-9_-]/g, "_")}`;
  const message = el("p", { class: "message", role: "status" });
  const files = el("ul", { class: "files", hidden: true, "aria-label": `Files of ${repo.name}` });
  const rows = [
    ["URL", el("code", {}, repo.url)],
    ["Branch", repo.branch],
    ["Folders", repo.paths && repo.paths.length ? repo.paths.join(", ") : "all"],
    ["Credential", repo.credential ? `a reference (${CREDENTIAL_KINDS[repo.credential] || repo.credential})` : "none"],
    ["Commit", el("code", { class: "commit", "data-commit": status.commit || "" }, shortCommit(status.commit))],
    ["Synced", formatTime(status.synced_at)],
    ["Last attempt", formatTime(status.attempted_at)],
    ["Result", syncLine(status)],
    ["Files", String(status.files ?? 0)],
  ];
  const problems = status.problems || [];
  const sync = el("button", { type: "button", "data-action": "sync", "aria-describedby": id }, "Sync now");
  const show = el("button", { type: "button", class: "secondary", "data-action": "files",
    "aria-expanded": "false" }, "Show files");
  const remove = el("button", { type: "button", class: "danger", "data-action": "remove" }, "Remove");
  const card = el("article", { class: "repo", "data-repo": repo.name, "aria-labelledby": id },
    el("h3", { id }, repo.name),
    el("dl", { class: "facts" }, rows.map(([k, v]) => [el("dt", {}, k), el("dd", {}, v)])),
    problems.length ? el("ul", { class: "problems" }, problems.map((p) =>
      el("li", {}, el("code", {}, p.path), " ", el("span", { class: "reason" }, p.reason)))) : null,
    el("div", { class: "actions" }, sync, show, remove),
    message, files);
  sync.addEventListener("click", () => syncRepo(repo, message, files, show));
  show.addEventListener("click", () => toggleFiles(repo, files, show, message));
  remove.addEventListener("click", () => removeRepo(repo, message));
  return card;
}

async function showRepos(focusName) {
  try {
    const body = await getJson(repoRoute(agent, context));
    const cards = body.repos.map(repoCard);
    $("repos").replaceChildren(...cards);
    say($("repos-message"), body.repos.length ? "" : "No repository is registered in this scope.");
    if (focusName) {
      const card = cards.find((c) => c.dataset.repo === focusName);
      if (card) return card;
    }
  } catch (error) {
    say($("repos-message"), error.message, "error");
  }
  return null;
}

// The repository's files as the index lists them: the documents under _repos/<name>/.
async function repoFiles(name) {
  const prefix = `_repos/${name}/`;
  const found = [];
  let cursor = null;
  for (let page = 0; page < 20; page++) {
    const answer = await listDocuments(agent, context, { limit: 1000, cursor });
    found.push(...answer.documents.filter((d) => d.path.startsWith(prefix)));
    cursor = answer.next_cursor;
    if (!cursor) break;
  }
  return found;
}

async function fillFiles(repo, list, button) {
  const docs = await repoFiles(repo.name);
  list.replaceChildren(...docs.map((doc) => el("li", { "data-path": doc.path },
    el("a", { href: pageUrl("document.html", { ...scope, path: doc.path }) },
      doc.path.slice(`_repos/${repo.name}/`.length)),
    ` · ${doc.chunk_count} chunks`, doc.problem ? el("span", { class: "reason" }, ` · ${doc.problem}`) : null)));
  if (!docs.length) list.append(el("li", {}, "No files indexed from it yet."));
  list.hidden = false;
  button.setAttribute("aria-expanded", "true");
  button.textContent = "Hide files";
}

async function toggleFiles(repo, list, button, message) {
  if (!list.hidden) {
    list.hidden = true;
    button.setAttribute("aria-expanded", "false");
    button.textContent = "Show files";
    return;
  }
  try {
    await fillFiles(repo, list, button);
  } catch (error) {
    say(message, error.message, "error");
  }
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

async function syncRepo(repo, message, list, button) {
  say(message, `Syncing ${repo.name}…`, "busy");
  try {
    const answer = await postJson(`${repoRoute(agent, context, repo.name)}/sync`, {}, "source");
    let report = answer.body;
    if (answer.status === 202) {
      // The deployed stack's sync function runs it: wait for a new attempt.
      say(message, "Accepted: the sync function is syncing it…", "busy");
      const before = repo.status && repo.status.attempted_at;
      for (let i = 0; i < 120; i++) {
        await sleep(1000);
        const now = await getJson(repoRoute(agent, context, repo.name));
        if (now.status.attempted_at !== before) {
          report = { commit: now.status.commit, error: now.status.error };
          break;
        }
      }
    }
    const card = await showRepos(repo.name);
    const target = card ? card.querySelector(".message") : message;
    if (report.error) {
      say(target, `Sync failed (${report.error.kind}): ${report.error.message}. The last ` +
        "good sync stays searchable.", "error");
    } else {
      const counts = report.written === undefined ? ""
        : `: ${report.written} written, ${report.deleted} deleted, ${report.unchanged} unchanged`;
      say(target, `Synced ${shortCommit(report.commit)}${counts}.`, "ok");
      if (card) {
        await fillFiles(repo, card.querySelector("ul.files"),
          card.querySelector("button[data-action=files]"));
      }
    }
    if (card) card.querySelector("button[data-action=sync]").focus();
  } catch (error) {
    say(message, error.message, "error");
  }
}

async function removeRepo(repo, message) {
  const yes = await confirmDialog({
    title: `Remove ${repo.name}?`,
    text: "The repository is unregistered and its files leave this scope (nothing else " +
      "of the scope is touched). The repository itself is not changed.",
    confirm: "Remove",
  });
  if (!yes) return;
  try {
    const answer = await request("DELETE", repoRoute(agent, context, repo.name), { kind: "source" });
    await showRepos();
    $("list-heading").focus(); // its card, which had the focus, is gone
    const files = answer.body && answer.body.deleted_files !== undefined
      ? ` and its ${answer.body.deleted_files} files` : "";
    say($("repos-message"), `Removed ${repo.name}${files}.`, "ok");
  } catch (error) {
    say(message, error.message, "error");
  }
}

function fieldError(id, text) {
  const input = $(id);
  input.setAttribute("aria-invalid", "true");
  input.focus();
  say($("register-message"), text, "error");
}

async function register(event) {
  event.preventDefault();
  for (const id of ["repo-name", "repo-url", "repo-credential"]) $(id).removeAttribute("aria-invalid");
  const name = $("repo-name").value.trim();
  const url = $("repo-url").value.trim();
  const credential = $("repo-credential").value.trim();
  if (!NAME.test(name)) {
    fieldError("repo-name", "Name: 1-64 letters, digits, '.', '_' or '-', not starting with '.'.");
    return;
  }
  if (!/^(https?|ssh):\/\/\S+$/i.test(url)) {
    fieldError("repo-url", "Clone URL: an https://, http:// or ssh:// URL.");
    return;
  }
  if (credential && !REFERENCE.test(credential)) {
    // Never sent: what was typed may be the secret itself.
    fieldError("repo-credential", "Credential: give a reference to the secret (env:NAME, " +
      "file:/absolute/path, or a Secrets Manager ARN), never the secret. Nothing was sent.");
    return;
  }
  const body = { name, url, branch: $("repo-branch").value.trim() || "main" };
  const paths = $("repo-paths").value.split("\n").map((p) => p.trim()).filter(Boolean);
  if (paths.length) body.paths = paths;
  if (credential) body.credential = credential;
  const username = $("repo-username").value.trim();
  if (username) body.username = username;
  const knownHosts = $("repo-known-hosts").value.trim();
  if (knownHosts) body.known_hosts = knownHosts;
  say($("register-message"), `Registering ${name}…`, "busy");
  try {
    const answer = await postJson(repoRoute(agent, context), body, "source");
    say($("register-message"), answer.status === 201
      ? `Registered ${name}: it syncs at the next interval, or now with "Sync now".`
      : `Updated ${name}.`, "ok");
    $("register-form").reset();
    const card = await showRepos(name);
    if (card) card.querySelector("button[data-action=sync]").focus();
  } catch (error) {
    say($("register-message"), error.message, "error");
  }
}

async function start() {
  if (!agent || !context) {
    say($("repos-message"), "Open a scope from the Scopes page.", "error");
    return;
  }
  document.title = `Repositories of ${scopeName(agent, context)} · knowledge console`;
  $("repos-title").textContent = `Repositories of ${scopeName(agent, context)}`;
  $("scope-link").textContent = scopeName(agent, context);
  $("scope-link").href = pageUrl("scope.html", scope);
  $("tab-documents").href = pageUrl("scope.html", scope);
  $("tab-repos").href = pageUrl("repos.html", scope);
  $("register-form").addEventListener("submit", register);
  await showRepos();
  showServer((await listScopes()).writes);
}

start();
