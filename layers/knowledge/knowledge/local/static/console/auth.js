// Signing in to the deployed stack's JWT mode: OAuth 2.0 authorization code with PKCE
// (S256) against the issuer config.json names, as a public client (no secret).
//
// signIn() finds the issuer's endpoints in its OpenID discovery document, keeps a fresh
// state, nonce and code verifier in sessionStorage, and sends the browser to the
// authorize endpoint; the issuer sends it back to signin.html, whose completeSignIn()
// checks the state, trades the code and the verifier for tokens at the token endpoint,
// checks the ID token's issuer, audience, expiry and nonce (it came straight from the
// token endpoint over TLS, so its signature is the API's to check, with the access
// token's), and keeps the access token in sessionStorage (config.js) until it expires.
// api.js sends it as "Authorization: Bearer". Importing this module puts a line into the
// page's header: who is signed in, and the button to sign in or out; in IAM mode it says
// that a browser cannot sign the API's requests.
import { published, session, setSession } from "./config.js";

const PENDING_KEY = "kb-console.signin-pending";

export class SignInError extends Error {
  constructor(message) {
    super(message);
    this.name = "SignInError";
  }
}

function base64url(bytes) {
  let text = "";
  for (const byte of bytes) text += String.fromCharCode(byte);
  return btoa(text).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}

function randomText(bytes = 32) {
  return base64url(crypto.getRandomValues(new Uint8Array(bytes)));
}

async function s256(verifier) {
  const digest = await crypto.subtle.digest("SHA-256", new TextEncoder().encode(verifier));
  return base64url(new Uint8Array(digest));
}

// A JWT's claims, unverified (the signature is not the browser's to check), or null.
export function claimsOf(jwt) {
  try {
    const part = jwt.split(".")[1].replace(/-/g, "+").replace(/_/g, "/");
    const padded = part + "=".repeat((4 - (part.length % 4)) % 4);
    const bytes = Uint8Array.from(atob(padded), (c) => c.charCodeAt(0));
    const claims = JSON.parse(new TextDecoder().decode(bytes));
    return claims && typeof claims === "object" ? claims : null;
  } catch (_) {
    return null;
  }
}

// The agents the signed-in session's access token may read: its `agents_claim` claim
// (config.json) as the API reads it, a JSON array or names separated by spaces or commas
// (API Gateway hands an array claim on as "[a b]"). Empty when not signed in.
export function tokenAgents() {
  const current = session();
  const name = published.agents_claim;
  if (!current || !name || sessionState() !== "fresh") return [];
  const value = (claimsOf(current.accessToken) || {})[name];
  const names = Array.isArray(value) ? value
    : typeof value === "string" ? value.replace(/^\[|\]$/g, "").split(/[\s,]+/) : [];
  return [...new Set(names.filter((n) => typeof n === "string" && n))];
}

function issuer() {
  return published.issuer.replace(/\/+$/, "");
}

// The pages' folder's signin.html: the redirect URI registered for the console's client.
export function redirectUri() {
  return new URL("signin.html", import.meta.url).href;
}

async function discovery() {
  let answer;
  try {
    answer = await fetch(`${issuer()}/.well-known/openid-configuration`);
  } catch (_) {
    throw new SignInError(`The token issuer ${issuer()} does not answer.`);
  }
  if (!answer.ok) {
    throw new SignInError(`The token issuer has no discovery document (HTTP ${answer.status}).`);
  }
  const doc = await answer.json();
  if (doc.issuer !== issuer() || !doc.authorization_endpoint || !doc.token_endpoint) {
    throw new SignInError("The issuer's discovery document names another issuer or no " +
      "authorize and token endpoints.");
  }
  const methods = doc.code_challenge_methods_supported;
  if (Array.isArray(methods) && !methods.includes("S256")) {
    throw new SignInError("The token issuer does not support PKCE with S256.");
  }
  return doc;
}

function wantsIdToken() {
  return published.scopes.split(/\s+/).includes("openid");
}

function onSignInPage() {
  return new URL(window.location.href).pathname === new URL(redirectUri()).pathname;
}

export async function signIn() {
  const doc = await discovery();
  const pending = {
    state: randomText(),
    nonce: randomText(),
    verifier: randomText(48),
    // Back to this page afterwards (not to signin.html: its code is spent).
    returnTo: onSignInPage() ? new URL("index.html", window.location.href).href
      : window.location.href,
  };
  sessionStorage.setItem(PENDING_KEY, JSON.stringify(pending));
  const query = new URLSearchParams({
    response_type: "code",
    client_id: published.client_id,
    redirect_uri: redirectUri(),
    scope: published.scopes,
    state: pending.state,
    code_challenge: await s256(pending.verifier),
    code_challenge_method: "S256",
  });
  if (wantsIdToken()) query.set("nonce", pending.nonce);
  window.location.assign(`${doc.authorization_endpoint}?${query}`);
}

function checkIdToken(idToken, pending) {
  const claims = claimsOf(idToken || "");
  if (!claims) throw new SignInError("The issuer sent no readable ID token.");
  const audiences = Array.isArray(claims.aud) ? claims.aud : [claims.aud];
  if (claims.iss !== issuer()) throw new SignInError("The ID token names another issuer.");
  if (!audiences.includes(published.client_id)) {
    throw new SignInError("The ID token is not for this console's client.");
  }
  if (typeof claims.exp !== "number" || claims.exp * 1000 <= Date.now()) {
    throw new SignInError("The ID token has expired.");
  }
  if (claims.nonce !== pending.nonce) {
    throw new SignInError("The ID token's nonce is not this sign-in's: start again.");
  }
  return claims;
}

// signin.html: trade the code the issuer sent back for tokens. Resolves the same-origin
// address to go back to; throws SignInError with the reason in words.
export async function completeSignIn(search) {
  const query = new URLSearchParams(search);
  const pending = JSON.parse(sessionStorage.getItem(PENDING_KEY) || "null");
  sessionStorage.removeItem(PENDING_KEY); // one use, whatever happens next
  if (query.get("error")) {
    const why = query.get("error_description") || query.get("error");
    throw new SignInError(`The issuer did not sign you in: ${why}`);
  }
  if (!pending || !query.get("state") || query.get("state") !== pending.state) {
    throw new SignInError("This sign-in was not started here (its state does not match): " +
      "start again from the console.");
  }
  const code = query.get("code");
  if (!code) throw new SignInError("The issuer sent no authorization code.");
  const doc = await discovery();
  let answer;
  try {
    answer = await fetch(doc.token_endpoint, {
      method: "POST",
      headers: { "Content-Type": "application/x-www-form-urlencoded" },
      body: new URLSearchParams({
        grant_type: "authorization_code",
        code,
        redirect_uri: redirectUri(),
        client_id: published.client_id,
        code_verifier: pending.verifier,
      }),
    });
  } catch (_) {
    throw new SignInError("The issuer's token endpoint does not answer this page.");
  }
  const tokens = await answer.json().catch(() => ({}));
  if (!answer.ok || typeof tokens.access_token !== "string") {
    const why = tokens.error_description || tokens.error || `HTTP ${answer.status}`;
    throw new SignInError(`The issuer refused the code: ${why}`);
  }
  const idClaims = wantsIdToken() ? checkIdToken(tokens.id_token, pending) : {};
  const accessClaims = claimsOf(tokens.access_token) || {};
  const ends = [];
  if (Number.isFinite(tokens.expires_in)) ends.push(Date.now() + tokens.expires_in * 1000);
  if (typeof accessClaims.exp === "number") ends.push(accessClaims.exp * 1000);
  setSession({
    accessToken: tokens.access_token,
    expiresAt: ends.length ? Math.min(...ends) : null,
    name: idClaims.preferred_username || idClaims.email || idClaims.sub ||
      accessClaims.username || accessClaims.sub || "",
  });
  const back = new URL(pending.returnTo || "index.html", window.location.href);
  return back.origin === window.location.origin ? back.href : new URL("index.html",
    window.location.href).href;
}

export function signOut() {
  setSession(null);
}

// "none" (no session), "fresh" or "expired".
export function sessionState() {
  const current = session();
  if (!current) return "none";
  return current.expiresAt && current.expiresAt <= Date.now() ? "expired" : "fresh";
}

function clock(ms) {
  return `${new Date(ms).toISOString().slice(11, 16)} UTC`;
}

// What a request refused for want of a token means, in words (api.js).
export function signInAdvice() {
  if (published.auth === "iam") return iamNotice();
  const current = session();
  if (current && sessionState() === "expired") {
    return `Your sign-in expired at ${clock(current.expiresAt)}: sign in again (top of the page).`;
  }
  if (published.auth === "jwt") {
    return current ? "The API did not accept your sign-in: sign in again (top of the page)."
      : "Not signed in: sign in (top of the page).";
  }
  return "Not signed in: the API wants a bearer token (Settings).";
}

export function iamNotice() {
  return "This stack's API takes SigV4-signed requests only (IAM auth): a browser cannot " +
    "sign them without AWS credentials, so this console cannot call it. Use kb or the " +
    "Python client with credentials, or deploy with ApiAuthMode=jwt to sign in here.";
}

function button(id, text, onClick) {
  const node = document.createElement("button");
  node.type = "button";
  node.id = id;
  node.className = "secondary";
  node.textContent = text;
  node.addEventListener("click", onClick);
  return node;
}

// The header's sign-in line (module comment); nothing when the server needs no sign-in.
export function showSignIn() {
  const header = document.querySelector("header.top");
  if (!header || published.auth === "none" || onSignInPage()) return;
  let line = document.getElementById("auth-line");
  if (!line) {
    line = document.createElement("p");
    line.id = "auth-line";
    line.className = "server-line";
    line.setAttribute("role", "status");
    header.append(line);
  }
  const text = document.createElement("span");
  line.replaceChildren(text);
  line.dataset.state = published.auth === "iam" ? "iam" : sessionState();
  if (published.auth === "iam") {
    text.textContent = iamNotice();
    return;
  }
  const start = () => signIn().catch((error) => {
    text.textContent = error.message;
  });
  const current = session();
  if (line.dataset.state === "fresh") {
    const until = current.expiresAt ? ` until ${clock(current.expiresAt)}` : "";
    text.textContent = `Signed in${current.name ? ` as ${current.name}` : ""}${until}. `;
    line.append(button("sign-out", "Sign out", () => {
      signOut();
      showSignIn();
    }));
  } else if (line.dataset.state === "expired") {
    text.textContent = `Your sign-in expired at ${clock(current.expiresAt)}. `;
    line.append(button("sign-in", "Sign in again", start));
  } else {
    text.textContent = "Not signed in. ";
    line.append(button("sign-in", "Sign in", start));
  }
}

// The playground is kb serve's page; a deployed stack has none to link to.
if (published.auth !== "none") {
  for (const link of document.querySelectorAll("nav a[href='../']")) link.closest("li").remove();
}

showSignIn();
