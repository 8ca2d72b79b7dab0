// An MCP server behind an OAuth login, for devboy's login tests: the
// TypeScript SDK's authorization router (metadata, dynamic registration,
// authorize, token with PKCE) with an in-memory provider of our own that
// consents at once, and its bearer-token check in front of one tool.
//
// Access tokens live TOKEN_TTL seconds (default 2), so a client that keeps
// working past that must refresh. GET /stats (unauthenticated: a test's
// window into the server) counts the grants and lists every code and token issued,
// for the test's byte scan.
//
//   PORT=0 TOKEN_TTL=2 node oauth-server.mjs  →  prints its MCP URL

import { randomBytes } from 'node:crypto';
import express from 'express';
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { CallToolRequestSchema, ListToolsRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import { mcpAuthRouter, getOAuthProtectedResourceMetadataUrl } from '@modelcontextprotocol/sdk/server/auth/router.js';
import { requireBearerAuth } from '@modelcontextprotocol/sdk/server/auth/middleware/bearerAuth.js';
import { InvalidGrantError, InvalidTokenError } from '@modelcontextprotocol/sdk/server/auth/errors.js';

const TTL = Number(process.env.TOKEN_TTL ?? 2);
export const NOTE = 'the note behind the login: 4417 tangerine';

const secret = (prefix) => `${prefix}_${randomBytes(18).toString('base64url')}`;

const stats = { registrations: 0, authorizations: 0, codeGrants: 0, refreshGrants: 0, refused: 0, calls: 0, tokens: [] };

const clients = new Map();
const codes = new Map(); // code → { clientId, challenge, redirectUri, scopes, resource }
const access = new Map(); // token → { clientId, scopes, expiresAt, resource }
const refresh = new Map(); // token → { clientId, scopes, resource }

function issue(clientId, scopes, resource) {
  const accessToken = secret('at');
  const refreshToken = secret('rt');
  access.set(accessToken, { clientId, scopes, expiresAt: Math.floor(Date.now() / 1000) + TTL, resource });
  refresh.set(refreshToken, { clientId, scopes, resource });
  stats.tokens.push(accessToken, refreshToken);
  return {
    access_token: accessToken,
    token_type: 'bearer',
    expires_in: TTL,
    refresh_token: refreshToken,
    scope: scopes.join(' ')
  };
}

const provider = {
  clientsStore: {
    async getClient(id) {
      return clients.get(id);
    },
    async registerClient(client) {
      stats.registrations += 1;
      clients.set(client.client_id, client);
      return client;
    }
  },
  // Consents at once: straight back to the client with a code.
  async authorize(client, params, res) {
    stats.authorizations += 1;
    const code = secret('code');
    stats.tokens.push(code);
    codes.set(code, {
      clientId: client.client_id,
      challenge: params.codeChallenge,
      redirectUri: params.redirectUri,
      scopes: params.scopes ?? [],
      resource: params.resource?.href
    });
    const back = new URL(params.redirectUri);
    back.searchParams.set('code', code);
    if (params.state !== undefined) back.searchParams.set('state', params.state);
    res.redirect(302, back.href);
  },
  async challengeForAuthorizationCode(client, code) {
    const grant = codes.get(code);
    if (!grant || grant.clientId !== client.client_id) throw new InvalidGrantError('unknown code');
    return grant.challenge;
  },
  async exchangeAuthorizationCode(client, code, _verifier, redirectUri) {
    const grant = codes.get(code);
    if (!grant || grant.clientId !== client.client_id) throw new InvalidGrantError('unknown code');
    if (redirectUri !== undefined && redirectUri !== grant.redirectUri) throw new InvalidGrantError('redirect_uri differs');
    codes.delete(code);
    stats.codeGrants += 1;
    return issue(client.client_id, grant.scopes, grant.resource);
  },
  async exchangeRefreshToken(client, refreshToken) {
    const grant = refresh.get(refreshToken);
    if (!grant || grant.clientId !== client.client_id) throw new InvalidGrantError('unknown refresh token');
    refresh.delete(refreshToken); // rotated: each refresh token works once
    stats.refreshGrants += 1;
    return issue(client.client_id, grant.scopes, grant.resource);
  },
  async verifyAccessToken(token) {
    const grant = access.get(token);
    if (!grant) {
      stats.refused += 1;
      throw new InvalidTokenError('unknown token');
    }
    return { token, clientId: grant.clientId, scopes: grant.scopes, expiresAt: grant.expiresAt, resource: grant.resource ? new URL(grant.resource) : undefined };
  }
};

function createMcpServer() {
  const server = new Server({ name: 'devboy-oauth-target', version: '1.0.0' }, { capabilities: { tools: {} } });
  server.setRequestHandler(ListToolsRequestSchema, async () => ({
    tools: [
      {
        name: 'secret_note',
        description: 'Returns a note only a logged-in client may read',
        inputSchema: { type: 'object', properties: {} }
      }
    ]
  }));
  server.setRequestHandler(CallToolRequestSchema, async (request) => {
    if (request.params.name !== 'secret_note') throw new Error(`unknown tool ${request.params.name}`);
    stats.calls += 1;
    return { content: [{ type: 'text', text: NOTE }] };
  });
  return server;
}

const app = express();
app.use(express.json());
const listener = app.listen(Number(process.env.PORT ?? 0), '127.0.0.1', () => {
  const base = new URL(`http://127.0.0.1:${listener.address().port}`);
  const mcpUrl = new URL('/mcp', base);
  app.use(mcpAuthRouter({ provider, issuerUrl: base, resourceServerUrl: mcpUrl, scopesSupported: ['notes:read'] }));
  const bearer = requireBearerAuth({
    verifier: provider,
    requiredScopes: [],
    resourceMetadataUrl: getOAuthProtectedResourceMetadataUrl(mcpUrl),
    expectedResource: mcpUrl
  });
  // Stateless: a server and a transport per request.
  app.post('/mcp', bearer, async (req, res) => {
    const server = createMcpServer();
    const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined });
    res.on('close', () => {
      transport.close();
      server.close();
    });
    await server.connect(transport);
    await transport.handleRequest(req, res, req.body);
  });
  app.get('/mcp', bearer, (_req, res) => res.status(405).set('Allow', 'POST').end());
  app.delete('/mcp', bearer, (_req, res) => res.status(405).set('Allow', 'POST').end());
  app.get('/stats', (_req, res) => res.json(stats));
  console.log(`oauth server listening on ${mcpUrl.href}`);
});
