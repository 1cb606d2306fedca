// Every request the console makes goes through this module: the public HTTP API
// (docs/openapi.yaml), at config.js's base URL, with its bearer token when one is set
// (the signed-in session's, auth.js, else the one pasted on the Settings page). An
// answer that is not a success becomes an ApiError whose message says in words what
// happened and what to do about it; a request is not sent once the sign-in expired.
// Files go up through the API's PUT (kb serve) or, where config.json says "presigned"
// (the deployed stack), through the presigned POST the API hands out, straight to the
// documents bucket.
import { iamNotice, sessionState, signInAdvice, tokenAgents } from "./auth.js";
import { apiBase, bearer, handScopes, published, scopeListPath } from "./config.js";

export class ApiError extends Error {
  constructor(status, body, retryAfter, message) {
    super(message);
    this.name = "ApiError";
    this.status = status;
    this.body = body;
    this.retryAfter = retryAfter;
  }
}

export function scopeRoute(agent, context) {
  return `/v1/agents/${encodeURIComponent(agent)}/contexts/${encodeURIComponent(context)}`;
}

// A document path travels as one segment: "guides/setup.md" is "guides%2Fsetup.md".
export function documentRoute(agent, context, path) {
  return `${scopeRoute(agent, context)}/documents/${encodeURIComponent(path)}`;
}

export function repoRoute(agent, context, name) {
  const base = `${scopeRoute(agent, context)}/repos`;
  return name === undefined ? base : `${base}/${encodeURIComponent(name)}`;
}

function headers(contentType) {
  const list = {};
  if (contentType) list["Content-Type"] = contentType;
  const sent = bearer();
  if (sent) list.Authorization = `Bearer ${sent}`;
  return list;
}

// A signed-in session past its expiry: refuse before sending (the API would answer 401).
function expiredSignIn() {
  return sessionState() === "expired"
    ? new ApiError(401, null, null, signInAdvice()) : null;
}

function retryAfterOf(header, body) {
  const seconds = Number.parseInt(header || "", 10);
  if (Number.isFinite(seconds) && seconds > 0) return seconds;
  return body && Number.isInteger(body.retry_after) ? body.retry_after : null;
}

// What a refusal means, in words. `kind` is what was asked: "write" (a document or a
// note), "source" (a repository) or "read".
export function explainFailure(status, body, retryAfter, kind = "read") {
  const said = body && typeof body.error === "string" ? body.error : "";
  const field = body && body.field ? ` (field: ${body.field})` : "";
  const where = apiBase() || "this server";
  if (status === 0) {
    const size = kind === "write"
      ? " A server may also close the connection on a body larger than it takes (kb serve: 4 MiB)."
      : "";
    return `No answer from ${where}: is it running, and may this page reach it?${size}`;
  }
  if (status === 401) {
    return `${signInAdvice()}${said ? ` It said: ${said}` : ""}`;
  }
  if (status === 403 && published.auth === "iam" && !said) return iamNotice();
  if (status === 403) {
    if (body && body.field === "operation") {
      return `Refused: ${said || "writes are off"}. kb serve answers uploads, ` +
        "notes and deletes only when started with --allow-writes; the deployed API only " +
        "for a caller with the write grant (agents_write).";
    }
    if (body && body.field === "agent" && /shared/i.test(said)) {
      return `Refused: ${said}. Change the shared library's files where it is stored ` +
        "(the bucket's _shared/ prefix, or ROOT/_shared/ for kb serve).";
    }
    if (body && body.field === "Origin") {
      return `Refused: ${said}. Open the console from the server's own address.`;
    }
    return `Refused (403): ${said || "this caller may not do this"}. The token may not be ` +
      `granted this agent${kind === "write" ? ", or writes" : ""}.`;
  }
  if (status === 413) {
    return `Too large: ${said}${field}. Larger files go into the served folder (kb serve) ` +
      "or through the deployed API's presigned upload.";
  }
  if (status === 429) {
    const retry = body && body.retryable === false
      ? "Waiting does not help: delete documents of this scope first."
      : `Retry after ${retryAfter || 60} s.`;
    return `Write limit reached: ${said} ${retry}`;
  }
  if (status === 404) return said || "Not found.";
  if (status >= 500) {
    const id = body && body.request_id ? ` (request id ${body.request_id})` : "";
    return `The server failed (${status}): ${said || "no detail"}${id}.`;
  }
  return `${said || `HTTP ${status}`}${field}`;
}

function parse(text) {
  try {
    return text ? JSON.parse(text) : null;
  } catch (_) {
    return null;
  }
}

export async function request(method, route, { body, contentType, kind } = {}) {
  const expired = expiredSignIn();
  if (expired) throw expired;
  let response;
  try {
    response = await fetch(apiBase() + route, { method, headers: headers(contentType), body });
  } catch (_) {
    throw new ApiError(0, null, null, explainFailure(0, null, null, kind));
  }
  const data = parse(await response.text());
  if (!response.ok) {
    const retry = retryAfterOf(response.headers.get("Retry-After"), data);
    throw new ApiError(response.status, data, retry,
      explainFailure(response.status, data, retry, kind));
  }
  return { status: response.status, body: data };
}

export async function getJson(route) {
  return (await request("GET", route)).body;
}

export async function postJson(route, value, kind = "read") {
  return request("POST", route,
    { body: JSON.stringify(value), contentType: "application/json", kind });
}

// The scopes to show: the server's list where it has one (kb serve), else the scopes
// listed by hand on the Settings page. `writes` is null when the server does not say.
// `agents`: the agents the signed-in token may read (auth.js), whose contexts the scope
// list asks the API for, named in any list or not.
export async function listScopes() {
  const byHand = handScopes();
  const agents = tokenAgents();
  try {
    const body = await getJson(scopeListPath());
    const seen = new Set(body.scopes.map((s) => `${s.agent}/${s.context}`));
    const extra = byHand.filter((s) => !seen.has(`${s.agent}/${s.context}`));
    return { scopes: [...body.scopes, ...extra], agents, writes: Boolean(body.writes),
      listed: true };
  } catch (error) {
    return { scopes: byHand, agents, writes: null, listed: false, error };
  }
}

export async function scopeStatus(agent, context) {
  return getJson(`${scopeRoute(agent, context)}/status`);
}

export async function listDocuments(agent, context, { limit = 50, cursor = null } = {}) {
  const query = new URLSearchParams({ limit: String(limit) });
  if (cursor) query.set("cursor", cursor);
  return getJson(`${scopeRoute(agent, context)}/documents?${query}`);
}

export async function getDocument(agent, context, path) {
  return getJson(documentRoute(agent, context, path));
}

export async function search(agent, context, requestBody) {
  const route = context ? `${scopeRoute(agent, context)}/search`
    : `/v1/agents/${encodeURIComponent(agent)}/search`;
  return (await postJson(route, requestBody)).body;
}

// PUT a document's bytes (XMLHttpRequest: fetch reports no upload progress).
// `onProgress(sent, total)` follows the body; the promise is the API's 202 answer.
export function putDocument(agent, context, path, data, contentType,
  { origin = null, onProgress = null } = {}) {
  const query = origin ? `?origin=${encodeURIComponent(origin)}` : "";
  const expired = expiredSignIn();
  if (expired) return Promise.reject(expired);
  return new Promise((resolve, reject) => {
    const xhr = new XMLHttpRequest();
    xhr.open("PUT", apiBase() + documentRoute(agent, context, path) + query);
    for (const [name, value] of Object.entries(headers(contentType))) {
      xhr.setRequestHeader(name, value);
    }
    if (onProgress) {
      xhr.upload.addEventListener("progress", (event) => {
        if (event.lengthComputable) onProgress(event.loaded, event.total);
      });
    }
    xhr.addEventListener("load", () => {
      const body = parse(xhr.responseText);
      if (xhr.status >= 200 && xhr.status < 300) {
        resolve({ status: xhr.status, body });
        return;
      }
      const retry = retryAfterOf(xhr.getResponseHeader("Retry-After"), body);
      reject(new ApiError(xhr.status, body, retry,
        explainFailure(xhr.status, body, retry, "write")));
    });
    xhr.addEventListener("error", () => {
      reject(new ApiError(0, null, null, explainFailure(0, null, null, "write")));
    });
    xhr.send(data);
  });
}

// S3's refusal of a form post, in words: its XML <Code> and <Message>.
function bucketRefusal(status, text) {
  const doc = new DOMParser().parseFromString(text || "<Error/>", "application/xml");
  const code = doc.querySelector("Code")?.textContent || `HTTP ${status}`;
  const said = doc.querySelector("Message")?.textContent || "";
  const hint = code === "EntityTooLarge" ? " The file is larger than the upload grant."
    : code === "AccessDenied" && /expired/i.test(said) ? " The grant expired: try again." : "";
  return `The bucket refused the upload: ${code}${said ? ` (${said})` : ""}.${hint}`;
}

// POST a presigned upload's form to the bucket (XMLHttpRequest: progress, as PUT).
function postToBucket(grant, file, onProgress) {
  return new Promise((resolve, reject) => {
    const form = new FormData();
    for (const [name, value] of Object.entries(grant.fields)) form.append(name, value);
    form.append("file", file); // S3 reads the fields before the file: it goes last
    const xhr = new XMLHttpRequest();
    xhr.open(grant.method || "POST", grant.url);
    if (onProgress) {
      xhr.upload.addEventListener("progress", (event) => {
        if (event.lengthComputable) onProgress(event.loaded, event.total);
      });
    }
    xhr.addEventListener("load", () => {
      if (xhr.status >= 200 && xhr.status < 300) resolve(xhr.status);
      else reject(new ApiError(xhr.status, null, null, bucketRefusal(xhr.status, xhr.responseText)));
    });
    xhr.addEventListener("error", () => {
      reject(new ApiError(0, null, null, "No answer from the documents bucket: its CORS " +
        "rules must allow this page's origin (docs/deploy.md, \"The console\")."));
    });
    xhr.send(form);
  });
}

// Upload a file as the server wants it (config.json's "uploads"): through the API's PUT,
// or by asking POST .../uploads for a presigned POST and posting the file to the bucket.
// Resolves { status, body, before }: `before` is the document's record before the upload
// (null when it had none), which waitUploaded compares against.
export async function uploadFile(agent, context, path, file, contentType,
  { onProgress = null } = {}) {
  if (published.uploads !== "presigned") {
    const answer = await putDocument(agent, context, path, file, contentType, { onProgress });
    return { ...answer, before: null };
  }
  let before = null;
  try {
    before = await getDocument(agent, context, path);
  } catch (error) {
    if (!(error instanceof ApiError) || error.status !== 404) throw error;
  }
  const grant = (await postJson(`${scopeRoute(agent, context)}/uploads`,
    { path, size: Math.max(file.size, 1) }, "write")).body;
  const status = await postToBucket(grant, file, onProgress);
  return { status, body: { path, size: file.size, presigned: true }, before };
}

// Wait until an upload is indexed: the content hash the PUT answered, or (a presigned
// upload, which answers none) a record indexed again since `before`.
export async function waitUploaded(agent, context, path, answer, options = {}) {
  if (answer.body && answer.body.content_hash) {
    return waitIndexed(agent, context, path, answer.body.content_hash, options);
  }
  const { seconds = 60, onWait = null } = options;
  const before = answer.before;
  const deadline = Date.now() + seconds * 1000;
  let record = null;
  while (Date.now() < deadline) {
    try {
      record = await getDocument(agent, context, path);
      const changed = !before || record.content_hash !== before.content_hash ||
        record.indexed_at !== before.indexed_at;
      if (record.indexed && changed) return { indexed: true, record };
    } catch (error) {
      if (!(error instanceof ApiError) || error.status !== 404) throw error;
    }
    if (onWait) onWait(record);
    await sleep(300);
  }
  return { indexed: false, record };
}

export async function deleteDocument(agent, context, path) {
  return (await request("DELETE", documentRoute(agent, context, path), { kind: "write" })).body;
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

// Poll the document route until it answers this version indexed (`content_hash`),
// as the write route's answer says to. `onWait(record)` sees each answer on the way.
// Resolves { indexed: true, record } or { indexed: false, record } at the deadline.
export async function waitIndexed(agent, context, path, contentHash,
  { seconds = 60, onWait = null } = {}) {
  const deadline = Date.now() + seconds * 1000;
  let record = null;
  while (Date.now() < deadline) {
    try {
      record = await getDocument(agent, context, path);
      if (record.indexed && record.content_hash === contentHash) return { indexed: true, record };
    } catch (error) {
      if (!(error instanceof ApiError) || error.status !== 404) throw error;
    }
    if (onWait) onWait(record);
    await sleep(300);
  }
  return { indexed: false, record };
}

// Poll until the document route answers 404: the delete has reached the index.
export async function waitGone(agent, context, path, { seconds = 60 } = {}) {
  const deadline = Date.now() + seconds * 1000;
  while (Date.now() < deadline) {
    try {
      await getDocument(agent, context, path);
    } catch (error) {
      if (error instanceof ApiError && error.status === 404) return true;
      throw error;
    }
    await sleep(300);
  }
  return false;
}

export async function health() {
  return getJson("/v1/health");
}

// One page of a document's chunks as indexed (GET .../documents/{path}/chunks).
export async function listChunks(agent, context, path, { limit = 50, cursor = null } = {}) {
  const query = new URLSearchParams({ limit: String(limit) });
  if (cursor) query.set("cursor", cursor);
  return getJson(`${documentRoute(agent, context, path)}/chunks?${query}`);
}

// The agent's contexts, each with its counts, state and last indexed time.
export async function agentContexts(agent) {
  return getJson(`/v1/agents/${encodeURIComponent(agent)}/contexts`);
}

// The shared libraries granted to the agent, read-only, each with its counts and state.
export async function sharedLibraries(agent) {
  return getJson(`/v1/agents/${encodeURIComponent(agent)}/shared`);
}
