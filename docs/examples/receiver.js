// A registration endpoint that receives ProfileEscrow replays (docs/replay.md). Node built-ins only.
//
//     PROFILE_ESCROW_WEBHOOK_SECRET=whsec_... PORT=8000 node receiver.js
//
// PROFILE_ESCROW_WEBHOOK_SECRET holds one or more whsec_ secrets, space-separated (several during a
// rotation). Answers 401 when the Standard Webhooks signature or timestamp does not check out, 200
// after registering. It registers nobody: put your registration where the comment says.
'use strict';
const http = require('node:http');
const crypto = require('node:crypto');

const TOLERANCE = 5 * 60; // seconds between webhook-timestamp and this machine's clock, either way
const MAX_BODY = 64 * 1024; // a replay body is a few hundred bytes

function fail(message) {
  console.error(`PROFILE_ESCROW_WEBHOOK_SECRET: ${message}`);
  process.exit(1);
}

// The HMAC keys of `whsec_<base64>` secrets, space-separated.
function loadKeys(text) {
  const keys = text.split(/\s+/).filter((s) => s !== '').map((secret) => {
    if (!secret.startsWith('whsec_')) fail('every secret must start with whsec_');
    const encoded = secret.slice('whsec_'.length);
    // Buffer.from ignores invalid characters: check the alphabet first.
    if (!/^[A-Za-z0-9+/]+={0,2}$/.test(encoded) || encoded.length % 4 !== 0) fail('not valid base64 after whsec_');
    const key = Buffer.from(encoded, 'base64');
    if (key.length < 16 || key.length > 64) fail('a secret must decode to 16 to 64 bytes');
    return key;
  });
  if (keys.length === 0) fail('set it to whsec_<base64> (several: space-separated)');
  return keys;
}

const KEYS = loadKeys(process.env.PROFILE_ESCROW_WEBHOOK_SECRET || '');

// Whether any `v1,` signature matches any key, over `<id>.<timestamp>.<body>`, and the timestamp is fresh.
function verified(headers, body) {
  const id = headers['webhook-id'] || '';
  const timestamp = headers['webhook-timestamp'] || '';
  if (!/^[0-9]{1,15}$/.test(timestamp) || Math.abs(Date.now() / 1000 - Number(timestamp)) > TOLERANCE) {
    return false;
  }
  const signed = Buffer.concat([Buffer.from(`${id}.${timestamp}.`), body]);
  const given = (headers['webhook-signature'] || '')
    .split(' ')
    .filter((entry) => entry.startsWith('v1,'))
    .map((entry) => Buffer.from(entry.slice(3)));
  let match = false;
  for (const key of KEYS) {
    const expected = Buffer.from(crypto.createHmac('sha256', key).update(signed).digest('base64'));
    for (const signature of given) {
      // timingSafeEqual needs equal lengths; the length of a signature is not secret.
      if (signature.length === expected.length && crypto.timingSafeEqual(signature, expected)) match = true;
    }
  }
  return match;
}

const server = http.createServer((request, response) => {
  const answer = (status) => {
    response.writeHead(status, { 'Content-Length': '0' });
    response.end();
  };
  if (request.method !== 'POST') return answer(405);
  const chunks = [];
  let size = 0;
  let tooLarge = false;
  request.on('data', (chunk) => {
    size += chunk.length;
    if (size > MAX_BODY) tooLarge = true;
    else chunks.push(chunk);
  });
  request.on('end', () => {
    if (tooLarge) return answer(413);
    const body = Buffer.concat(chunks); // the raw bytes: verify before parsing
    if (!verified(request.headers, body)) return answer(401); // retried by ProfileEscrow: a secret mismatch loses nothing
    // Verified. Register the user from JSON.parse(body) here, idempotently by the Idempotency-Key
    // header (= escrowId): answer 200 when registered, 409 if the user already exists, 503 to be
    // asked again later; 400/410/422 only if it can never be registered (ProfileEscrow then gives
    // the profile up for good).
    answer(200);
  });
});

const port = Number(process.env.PORT || 8000);
server.listen(port, '127.0.0.1', () => console.log(`listening on 127.0.0.1:${port}`));
