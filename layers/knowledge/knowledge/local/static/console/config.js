// The console's one place for where the API is and how to authenticate to it. Nothing
// else in the console names a server or a credential: api.js asks here on every request.
//
// `published` is the server's config.json next to the pages, read once before any page
// script runs: kb serve ships one without sign-in; the deployed stack generates its own
// (auth "jwt": sign in at the issuer, auth.js; "iam": SigV4, which a browser cannot sign;
// uploads "presigned": files go to the bucket through the API's presigned POST).
// DEFAULTS holds where no config.json answers. The Settings page lets an operator
// override the base URL (localStorage) and paste a token (sessionStorage, gone with the
// tab, unless "remember" is ticked); a signed-in session's token lives in sessionStorage
// only and is preferred.
export const DEFAULTS = Object.freeze({
  // "" is the server that served these pages: every route is same-origin.
  apiBase: "",
  // kb serve's list of the scopes it serves. Not part of the public API: where it does not
  // answer, the console uses the scopes listed by hand on the Settings page.
  scopeListPath: "/playground/scopes",
  auth: "none",
  issuer: "",
  client_id: "",
  scopes: "openid",
  uploads: "put",
  // The access token's claim naming the agents it may read (the stack's JwtAgentsClaim):
  // the scope list's agents when signed in.
  agents_claim: "",
});

async function loadPublished() {
  try {
    const answer = await fetch(new URL("config.json", import.meta.url), { cache: "no-cache" });
    if (!answer.ok) return DEFAULTS;
    const body = await answer.json();
    const known = {};
    for (const name of ["auth", "issuer", "client_id", "scopes", "uploads", "agents_claim"]) {
      if (typeof body[name] === "string") known[name] = body[name];
    }
    return Object.freeze({ ...DEFAULTS, ...known });
  } catch (_) {
    return DEFAULTS; // no config.json: the pages' server, no sign-in
  }
}

export const published = await loadPublished();

const BASE_KEY = "kb-console.api-base";
const TOKEN_KEY = "kb-console.token";
const SCOPES_KEY = "kb-console.scopes";
const SESSION_KEY = "kb-console.session";

function stored(storage, key) {
  try {
    return storage.getItem(key);
  } catch (_) {
    return null; // storage refused (a privacy mode): the defaults hold
  }
}

export function apiBase() {
  const value = stored(localStorage, BASE_KEY);
  return (value === null ? DEFAULTS.apiBase : value).trim().replace(/\/+$/, "");
}

export function setApiBase(value) {
  const clean = (value || "").trim();
  if (clean) localStorage.setItem(BASE_KEY, clean);
  else localStorage.removeItem(BASE_KEY);
}

// The token pasted on the Settings page (never the signed-in session's: that one is not
// shown there, so it cannot be saved into localStorage by "remember").
export function token() {
  return stored(sessionStorage, TOKEN_KEY) || stored(localStorage, TOKEN_KEY) || null;
}

// What api.js sends as the bearer: the signed-in session's token, else the pasted one.
export function bearer() {
  const signed = session();
  return signed ? signed.accessToken : token();
}

// The signed-in session (auth.js): { accessToken, expiresAt (ms), name }, or null. In
// sessionStorage only: it dies with the tab and is never written to localStorage.
export function session() {
  try {
    const value = JSON.parse(stored(sessionStorage, SESSION_KEY) || "null");
    return value && typeof value.accessToken === "string" ? value : null;
  } catch (_) {
    return null;
  }
}

export function setSession(value) {
  if (value) sessionStorage.setItem(SESSION_KEY, JSON.stringify(value));
  else sessionStorage.removeItem(SESSION_KEY);
}

export function tokenRemembered() {
  return Boolean(stored(localStorage, TOKEN_KEY));
}

export function setToken(value, remember) {
  const clean = (value || "").trim();
  sessionStorage.removeItem(TOKEN_KEY);
  localStorage.removeItem(TOKEN_KEY);
  if (clean) (remember ? localStorage : sessionStorage).setItem(TOKEN_KEY, clean);
}

export function scopeListPath() {
  return DEFAULTS.scopeListPath;
}

// Scopes typed on the Settings page, "agent/context" each.
export function handScopes() {
  const raw = stored(localStorage, SCOPES_KEY) || "";
  return raw.split(/\s+/).filter(Boolean).map((item) => {
    const [agent, context] = item.split("/");
    return { agent, context };
  }).filter((s) => s.agent && s.context);
}

export function handScopesText() {
  return (stored(localStorage, SCOPES_KEY) || "").split(/\s+/).filter(Boolean).join("\n");
}

export function setHandScopes(text) {
  const items = (text || "").split(/\s+/).filter(Boolean);
  if (items.length) localStorage.setItem(SCOPES_KEY, items.join(" "));
  else localStorage.removeItem(SCOPES_KEY);
}
