// The redirect URI of the console's OAuth client: the issuer sends the browser here with
// a code (or an error); auth.js checks and trades it, then the page the sign-in started
// from opens again. A refused sign-in stays here with the reason.
import { completeSignIn } from "./auth.js";

const message = document.getElementById("signin-message");

try {
  const back = await completeSignIn(window.location.search);
  window.location.replace(back);
} catch (error) {
  message.textContent = error.message;
  message.className = "message error";
  message.dataset.kind = "error";
}
