#!/usr/bin/env node
// provider.mjs runs a real OAuth 2.1 authorization server (oidc-provider) on
// loopback, so the Go e2e tests check troupe's resource server against
// tokens nobody on this project minted.
//
// Usage: node provider.mjs [--port N]   (0 or absent: a free port)
//
// When it listens it prints one JSON line on stdout:
//
//   {"issuer": "http://127.0.0.1:PORT", "kid": "...",
//    "clients": {"app": {"id": "...", "secret": "..."}, "short": {...}}}
//
// Both clients use the client credentials grant (client_secret_basic or
// client_secret_post) and may ask for the scopes "mcp:read" and "mcp:write".
// Resource indicators (RFC 8707) are on: a token request names the resource
// it wants a token for, and the token is a JWT access token (RFC 9068,
// typ at+jwt, RS256) whose "aud" is that resource. Tokens of "app" live five
// minutes, tokens of "short" three seconds (for the expired case).
//
// POST /control/rotate replaces the signing key: the provider starts again
// with a fresh RSA key under a new kid (and the same clients), publishes only
// that key in its JWKS, and answers {"kid": "..."}. Tokens signed before are
// then signed by a key the issuer no longer publishes.
//
// It exits when its stdin ends (the test that started it is gone) or on
// SIGTERM/SIGINT, so it never outlives the test.

import { generateKeyPairSync, randomBytes, randomUUID } from 'node:crypto';
import { createServer } from 'node:http';
import Provider from 'oidc-provider';

const SCOPES = ['mcp:read', 'mcp:write'];
const TTL_SECONDS = { app: 300, short: 3 };

function parsePort(argv) {
  const i = argv.indexOf('--port');
  if (i < 0) return 0;
  const port = Number(argv[i + 1]);
  if (!Number.isInteger(port) || port < 0 || port > 65535) {
    throw new Error(`--port wants a port number, got ${JSON.stringify(argv[i + 1])}`);
  }
  return port;
}

// signingKey makes a fresh RSA key as a private JWK with a kid of its own.
function signingKey() {
  const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
  return { ...privateKey.export({ format: 'jwk' }), kid: randomUUID(), use: 'sig', alg: 'RS256' };
}

// clientFor is the metadata of one client credentials client.
function clientFor(client) {
  return {
    client_id: client.id,
    client_secret: client.secret,
    grant_types: ['client_credentials'],
    response_types: [],
    redirect_uris: [],
    scope: SCOPES.join(' '),
  };
}

// makeProvider builds the authorization server for issuer, signing with key.
function makeProvider(issuer, key, clients) {
  const ttlOf = new Map(Object.entries(clients).map(([name, c]) => [c.id, TTL_SECONDS[name]]));
  const provider = new Provider(issuer, {
    clients: Object.values(clients).map(clientFor),
    jwks: { keys: [key] },
    scopes: SCOPES,
    // No end-user flows here: only machine clients ask for tokens.
    features: {
      devInteractions: { enabled: false },
      clientCredentials: { enabled: true },
      resourceIndicators: {
        enabled: true,
        // Any http(s) resource gets a JWT for itself: the tests ask for
        // troupe's URL, and for another resource to get a token troupe must
        // refuse (wrong audience).
        getResourceServerInfo(_ctx, resourceIndicator, client) {
          return {
            scope: SCOPES.join(' '),
            audience: resourceIndicator,
            accessTokenTTL: ttlOf.get(client.clientId) ?? 300,
            accessTokenFormat: 'jwt',
            jwt: { sign: { alg: 'RS256' } },
          };
        },
      },
    },
    ttl: {
      ClientCredentials(_ctx, token) {
        return token.resourceServer?.accessTokenTTL ?? 300;
      },
    },
    cookies: { keys: [randomBytes(32).toString('hex')] },
  });
  return provider;
}

async function main() {
  // oidc-provider prints its notices with console.log; stdout is the ready
  // line's alone.
  console.log = console.error;
  console.info = console.error;
  const port = parsePort(process.argv.slice(2));
  const clients = {
    app: { id: 'troupe-e2e-app', secret: randomBytes(24).toString('hex') },
    short: { id: 'troupe-e2e-short', secret: randomBytes(24).toString('hex') },
  };

  let issuer;
  let key;
  let handle;
  const server = createServer((req, res) => {
    if (req.method === 'POST' && req.url === '/control/rotate') {
      key = signingKey();
      handle = makeProvider(issuer, key, clients).callback();
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ kid: key.kid }));
      return;
    }
    handle(req, res);
  });
  await new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, '127.0.0.1', resolve);
  });
  issuer = `http://127.0.0.1:${server.address().port}`;
  key = signingKey();
  handle = makeProvider(issuer, key, clients).callback();

  const stop = () => {
    server.close();
    server.closeAllConnections();
    process.exit(0);
  };
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
  process.stdin.on('end', stop);
  process.stdin.resume();

  process.stdout.write(JSON.stringify({ issuer, kid: key.kid, clients }) + '\n');
}

main().catch((err) => {
  console.error(`provider: ${err?.stack ?? err}`);
  process.exit(1);
});
