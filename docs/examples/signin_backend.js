// A minimal app backend for ProfileEscrow's web sign-in, in Node.js (18 or later; no dependency).
//
// ProfileEscrow is the redirect URI registered with Apple. The "Sign in with Apple" button links to this backend's
// `/login`, which gives the browser a random sign-in cookie and sends it on to ProfileEscrow's start with `appState`,
// the SHA-256 of that cookie. ProfileEscrow sends the browser back to this backend's return URL,
// `/signed-in?ticket=…` (or `?error=…`). This backend then, server to server:
//   1. redeems the ticket once at ProfileEscrow (POST /v1/apple/signin/tickets/redeem, a token of scope `signin`),
//      and refuses it unless its `appState` is the hash of this browser's sign-in cookie (login CSRF: a ticket of a
//      sign-in another browser started, such as an attacker's own, sent to a victim);
//   2. exchanges the authorization code with Apple (POST https://appleid.apple.com/auth/token, with a client
//      secret: an ES256 JWT signed by your Sign in with Apple key);
//   3. reads the escrowed profile when there is one (POST /v1/escrows/{user}/replay, scope `replay`), creates the
//      account, and confirms the escrow (POST /v1/escrows/{user}/confirm, scope `confirm`), which purges it.
//
// Configuration, from the environment: ESCROW_URL, ESCROW_PUBLIC_URL (where browsers start a sign-in; default
// ESCROW_URL), ESCROW_TOKEN (scopes signin, replay, confirm), APPLE_TEAM_ID,
// APPLE_KEY_ID, APPLE_KEY_FILE (the .p8), SERVICES_ID (ProfileEscrow's --signin-client-id), REDIRECT_URI
// (ProfileEscrow's --signin-callback-url), APPLE_TOKEN_URL (default https://appleid.apple.com/auth/token), PORT
// (default 3000).
//
//   node signin_backend.js
"use strict";
const http = require("node:http");
const crypto = require("node:crypto");
const fs = require("node:fs");

const env = process.env;
const ESCROW_URL = (env.ESCROW_URL || "http://127.0.0.1:8080").replace(/\/$/, "");
const ESCROW_PUBLIC_URL = (env.ESCROW_PUBLIC_URL || ESCROW_URL).replace(/\/$/, "");
const APPLE_TOKEN_URL = env.APPLE_TOKEN_URL || "https://appleid.apple.com/auth/token";
const APPLE_KEY = crypto.createPrivateKey(fs.readFileSync(env.APPLE_KEY_FILE));

const users = new Map(); // your user table
const sessions = new Map(); // session id -> Apple user identifier

const b64url = (buffer) => Buffer.from(buffer).toString("base64url");

// Apple's client secret: an ES256 JWT from your team to Apple, about the Services ID (at most 6 months).
function clientSecret() {
  const now = Math.floor(Date.now() / 1000);
  const header = { alg: "ES256", kid: env.APPLE_KEY_ID };
  const claims = { iss: env.APPLE_TEAM_ID, iat: now, exp: now + 300, aud: "https://appleid.apple.com", sub: env.SERVICES_ID };
  const input = b64url(JSON.stringify(header)) + "." + b64url(JSON.stringify(claims));
  const signature = crypto.sign("sha256", Buffer.from(input), { key: APPLE_KEY, dsaEncoding: "ieee-p1363" });
  return input + "." + b64url(signature);
}

async function escrow(path, body) {
  const response = await fetch(ESCROW_URL + path, {
    method: "POST",
    headers: { Authorization: `Bearer ${env.ESCROW_TOKEN}`, "Content-Type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
    signal: AbortSignal.timeout(10000),
  });
  return [response.status, response.status === 200 ? await response.json() : {}];
}

// What this browser's sign-in passes through ProfileEscrow: a hash of its cookie, never the cookie itself.
const appState = (signinCookie) => b64url(crypto.createHash("sha256").update(signinCookie).digest());

// The Apple user identifier of a completed sign-in that this browser started; throws on any failure.
async function signIn(ticket, signinCookie) {
  const [status, result] = await escrow("/v1/apple/signin/tickets/redeem", { ticket });
  if (status !== 200) throw new Error("the ticket is unknown, used or expired"); // 410: sign in again
  // Login CSRF: the sign-in must be the one this browser started (its cookie's hash went through as appState).
  const expected = Buffer.from(appState(signinCookie || ""));
  const given = Buffer.from(String(result.appState || ""));
  if (!signinCookie || given.length !== expected.length || !crypto.timingSafeEqual(given, expected)) {
    throw new Error("this browser did not start that sign-in");
  }
  const user = result.userIdentifier;
  const exchange = await fetch(APPLE_TOKEN_URL, {
    method: "POST",
    headers: { "Content-Type": "application/x-www-form-urlencoded" },
    body: new URLSearchParams({
      client_id: env.SERVICES_ID, client_secret: clientSecret(), code: result.authorizationCode,
      grant_type: "authorization_code", redirect_uri: env.REDIRECT_URI,
    }),
    signal: AbortSignal.timeout(10000),
  });
  const tokens = exchange.status === 200 ? await exchange.json() : {};
  if (!tokens.id_token) throw new Error("Apple refused the authorization code");
  if (!users.has(user)) users.set(user, { email: result.email, appleRefreshToken: tokens.refresh_token });
  const account = users.get(user);
  if (result.escrowId) {
    // A first sign-in: the name (and the email Apple gave the browser) wait in the escrow.
    const path = `/v1/escrows/${encodeURIComponent(user)}`;
    const [replayed, profile] = await escrow(path + "/replay");
    if (replayed === 200) {
      account.name = profile.fullName;
      account.email = profile.email || account.email;
      await escrow(path + "/confirm"); // registered: purge it, with a receipt
    }
  }
  return user;
}

function page(response, status, text) {
  const escaped = text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
  response.writeHead(status, {
    "Content-Type": "text/html; charset=utf-8", "Cache-Control": "no-store", "Referrer-Policy": "no-referrer",
  });
  response.end(`<!doctype html><title>App</title><p>${escaped}</p>`);
}

http.createServer(async (request, response) => {
  const url = new URL(request.url, "http://localhost");
  const cookies = (request.headers.cookie || "").split(";").map((c) => c.trim().split("="));
  const cookie = (name) => (cookies.find(([key]) => key === name) || [])[1];
  if (url.pathname === "/login") {
    // The button's target: a fresh sign-in cookie for this browser, its hash through ProfileEscrow.
    const signin = crypto.randomBytes(32).toString("base64url");
    const start = `${ESCROW_PUBLIC_URL}/v1/apple/signin?` + new URLSearchParams({ return: "app", appState: appState(signin) });
    response.writeHead(303, { Location: start, "Set-Cookie": `signin=${signin}; Path=/; Max-Age=900; HttpOnly; Secure; SameSite=Lax` });
    return response.end();
  }
  if (url.pathname === "/signed-in") {
    const error = url.searchParams.get("error");
    if (error) return page(response, 200, `Sign-in did not complete (${error}). Please try again.`);
    let user;
    try {
      user = await signIn(url.searchParams.get("ticket") || "", cookie("signin"));
    } catch {
      return page(response, 400, "Sign-in failed. Please try again.");
    }
    const session = crypto.randomBytes(32).toString("base64url");
    sessions.set(session, user);
    // Away from the URL that carried the ticket; the sign-in cookie has served.
    response.writeHead(303, {
      Location: "/",
      "Set-Cookie": [
        `session=${session}; Path=/; HttpOnly; Secure; SameSite=Lax`,
        "signin=; Path=/; Max-Age=0; HttpOnly; Secure; SameSite=Lax",
      ],
    });
    return response.end();
  }
  if (url.pathname === "/") {
    const user = sessions.get(cookie("session"));
    if (!user) return page(response, 200, "Not signed in.");
    const name = (users.get(user).name || {}).givenName || "there";
    return page(response, 200, `Hello ${name}, you are signed in.`);
  }
  page(response, 404, "Not found.");
}).listen(Number(env.PORT || 3000), "127.0.0.1");
