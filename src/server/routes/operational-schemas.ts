/** Schemas of /health, /ready, /metrics and the OpenAPI document (operational-routes.ts). */
import { MAX_VALUE_BYTES } from '../../limits.js';
import { VERSION } from '../../version.js';

const OPERATIONS = 'operations';
const health = {
  type: 'object',
  properties: {
    status: { type: 'string', enum: ['ok', 'degraded'] },
    storage: { type: 'string', enum: ['ok', 'error'] },
    version: { type: 'string', description: 'the service version' },
  },
};

export const operationalSchemas = {
  health: {
    tags: [OPERATIONS],
    operationId: 'health',
    summary: 'Liveness (storage is not probed)',
    response: {
      200: {
        ...health,
        properties: {
          ...health.properties,
          max_value_bytes: {
            type: 'integer',
            description: "the largest value this server stores, in bytes (kvb serve --max-value-bytes; the spec's 16 KiB by default)",
          },
          webhooks: {
            type: 'object',
            description: 'only while webhooks have had changes waiting for over a minute: how many, and the longest wait',
            properties: { lagging: { type: 'integer' }, max_lag_seconds: { type: 'integer' } },
          },
        },
        description: 'Alive',
        examples: [{ status: 'ok', storage: 'ok', version: VERSION, max_value_bytes: MAX_VALUE_BYTES }],
      },
    },
  },
  ready: {
    tags: [OPERATIONS],
    operationId: 'ready',
    summary: 'Readiness: probes storage',
    response: {
      200: { ...health, description: 'Ready', examples: [{ status: 'ok', storage: 'ok', version: VERSION }] },
      503: {
        ...health,
        properties: { ...health.properties, draining: { type: 'boolean', description: 'true while the server shuts down (SIGTERM)' } },
        description: 'Storage unreachable, or the server is draining (the health shape, not the error envelope)',
        examples: [{ status: 'degraded', storage: 'error', version: VERSION }],
      },
    },
  },
  metrics: {
    tags: [OPERATIONS],
    operationId: 'metrics',
    summary: 'Prometheus metrics',
    response: {
      200: {
        description: 'Prometheus text exposition format',
        content: {
          'text/plain': { schema: { type: 'string' }, example: 'kvb_http_requests_total{method="GET",route="/health",status="200"} 1\n' },
        },
      },
    },
  },
  openapi: {
    tags: [OPERATIONS],
    operationId: 'openapi',
    summary: 'This OpenAPI document (the explorer is at /swagger-ui/)',
    response: {
      200: {
        description: 'The OpenAPI 3 document',
        content: { 'application/json': { schema: { type: 'object', additionalProperties: true } } },
      },
    },
  },
};
