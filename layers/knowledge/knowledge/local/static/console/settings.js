// The Settings page: the API base URL, the bearer token and scopes named by hand, all in
// config.js's keeping; "Check the API" asks GET /v1/health with them.
import { health } from "./api.js";
import {
  apiBase, handScopesText, setApiBase, setHandScopes, setToken, token, tokenRemembered,
} from "./config.js";
import { $, say, showServer } from "./ui.js";

const SEGMENT = /^[A-Za-z0-9._-]{1,64}$/;

function badScope(line) {
  const parts = line.split("/");
  return parts.length !== 2 || !parts.every((p) => SEGMENT.test(p) && p !== "." && p !== "..");
}

function load() {
  $("api-base").value = apiBase();
  $("token").value = token() || "";
  $("remember-token").checked = tokenRemembered();
  $("hand-scopes").value = handScopesText();
  showServer(null);
}

function save(event) {
  event.preventDefault();
  const base = $("api-base").value.trim();
  if (base && !/^https?:\/\/[^\s/]+/i.test(base)) {
    $("api-base").setAttribute("aria-invalid", "true");
    say($("settings-message"), "API base URL: an http(s) address, or empty for this server.", "error");
    $("api-base").focus();
    return;
  }
  $("api-base").removeAttribute("aria-invalid");
  const scopes = $("hand-scopes").value.split(/\s+/).filter(Boolean);
  const wrong = scopes.find(badScope);
  if (wrong) {
    $("hand-scopes").setAttribute("aria-invalid", "true");
    say($("settings-message"), `Scopes: '${wrong}' is not agent/context (each 1-64 of ` +
      "letters, digits, '.', '_', '-').", "error");
    $("hand-scopes").focus();
    return;
  }
  $("hand-scopes").removeAttribute("aria-invalid");
  setApiBase(base);
  setToken($("token").value, $("remember-token").checked);
  setHandScopes(scopes.join("\n"));
  load();
  say($("settings-message"), "Saved.", "ok");
}

async function check() {
  say($("settings-message"), "Asking the API…", "busy");
  try {
    const answer = await health();
    say($("settings-message"), `The API answers: ${answer.status}, store ${answer.store}.`, "ok");
  } catch (error) {
    say($("settings-message"), error.message, "error");
  }
}

$("settings-form").addEventListener("submit", save);
$("check-api").addEventListener("click", check);
load();
