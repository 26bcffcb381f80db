import swagger from '@fastify/swagger';
import swaggerUi from '@fastify/swagger-ui';
import type { FastifyInstance } from 'fastify';
import { VERSION } from '../version.js';
import { errorEnvelopeSchema, securitySchemes } from './routes/schema-parts.js';

type RouteSchema = Record<string, unknown> & { params?: { properties?: Record<string, unknown>; required?: string[] } };

/**
 * The OpenAPI view of a route schema: Fastify's wildcard path parameter `*` is the key, and a
 * `rawBody` (a body the route reads raw, with no JSON schema to validate it) is its request body.
 */
export function openapiSchema(schema: RouteSchema | undefined): RouteSchema | undefined {
  if (!schema) return schema;
  const { rawBody, ...rest } = schema;
  const result: RouteSchema = rawBody === undefined ? rest : { ...rest, body: rawBody };
  // @fastify/swagger suffixes the operationId of a HEAD route; ours are unique already.
  if (typeof result.operationId === 'string') result.operationId = result.operationId.replace(/-head$/, '');
  const params = result.params;
  if (!params?.properties || !('*' in params.properties)) return result;
  const { '*': key, ...others } = params.properties;
  return { ...result, params: { ...params, properties: { ...others, key }, required: ['bucket', 'key'] } };
}

const API_DESCRIPTION = `An HTTP key-value store. Values live in buckets; each bucket has its own access policy.

**Try it here:** create a bucket (give it a \`secret_key\`, and a \`signing_key\` to mint tokens), then *Authorize*
with that secret key as the Bearer value, and set, read, list and count keys. Every request is sent to this server.

**Credentials**, looked up in this order (the first present is the only one used): \`Authorization: Bearer <credential>\`,
\`Authorization: Basic\` (the username is the credential), \`?access_token=\`, \`?key=\`. A bucket's \`secret_key\` is
admin, \`read_key\` reads and lists, \`write_key\` writes; a temporary token gets its permissions under its prefix.
A bucket with no key of a kind leaves that kind of access open to anonymous callers.

**Errors** are \`{"error":{"code":<status>,"message":<name>,"detail":<reason in words>}}\`; the reason is also in the \`Kvb-Error-Detail\` header.

**Values** are answered with the Content-Type of their type, plus \`Kvb-Type\` and (when they expire) \`Kvb-Expires-At\`.`;

/** The OpenAPI document (from the route schemas) and its explorer. */
export async function registerApiDocs(app: FastifyInstance): Promise<void> {
  app.addSchema(errorEnvelopeSchema);
  await app.register(swagger, {
    openapi: {
      openapi: '3.0.3',
      info: { title: 'kvb', description: API_DESCRIPTION, version: VERSION, license: { name: 'MIT' } },
      // Relative: the explorer sends every request to the server that served it.
      servers: [{ url: '/', description: 'this server' }],
      tags: [
        { name: 'buckets', description: 'Create and manage buckets' },
        { name: 'keys', description: 'Values, counters, listing and transactions' },
        { name: 'tokens', description: 'Temporary tokens' },
        { name: 'webhooks', description: 'Changes delivered to a URL, signed, in order' },
        { name: 'operations', description: 'Health, readiness, metrics and this document' },
      ],
      components: { securitySchemes: securitySchemes as never },
    },
    refResolver: { buildLocalReference: (json, _baseUri, _fragment, i) => (typeof json.$id === 'string' ? json.$id : `def-${i}`) },
    transform: ({ schema, url }) => ({
      schema: openapiSchema(schema as RouteSchema | undefined) as never,
      url: url.replace(/\*$/, '{key}'),
    }),
  });
  // The explorer's assets are served from the package (no CDN); the policy keeps it that way.
  await app.register(swaggerUi, {
    routePrefix: '/swagger-ui',
    theme: { title: 'kvb API explorer' },
    uiConfig: { deepLinking: true, displayRequestDuration: true, docExpansion: 'list', defaultModelsExpandDepth: 0 },
    staticCSP:
      "default-src 'self'; base-uri 'self'; connect-src 'self'; font-src 'self' data:; form-action 'self'; " +
      "frame-ancestors 'self'; img-src 'self' data:; object-src 'none'; script-src 'self'; script-src-attr 'none'; " +
      "style-src 'self' 'unsafe-inline'",
  });
}
