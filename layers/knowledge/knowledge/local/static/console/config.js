// The console's one place for where the API is and how to authenticate to it. Nothing
// else in the console names a server or a credential: api.js asks here on every request.
//
// DEFAULTS is what a published copy edits (the deployed stack's API URL; its JWT comes
// from the operator's sign-in). The Settings page lets an operator override both in this
// browser: the base URL in localStorage; the token in sessionStorage (gone with the tab)
// unless "remember" is ticked.
export const DEFAULTS = Object.freeze({
  // "" is the server that served these pages (kb serve): every route is same-origin.
  apiBase: "",
  // kb serve's list of the scopes it serves. Not part of the public API: where it does not
  // answer, the console uses the scopes listed by hand on the Settings page.
  scopeListPath: "/playground/scopes",
});

const BASE_KEY = "kb-console.api-base";
const TOKEN_KEY = "kb-console.token";
const SCOPES_KEY = "kb-console.scopes";

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

export function token() {
  return stored(sessionStorage, TOKEN_KEY) || stored(localStorage, TOKEN_KEY) || null;
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
