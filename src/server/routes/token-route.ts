import formbody from '@fastify/formbody';
import type { FastifyInstance } from 'fastify';
import { parsePermissions } from '../../auth/access.js';
import { mintToken, newTokenId, tokenKey } from '../../auth/tokens.js';
import { KvbError, badRequest } from '../../errors.js';
import { checkKey } from '../../values/keys.js';
import { authorize, openBucket } from '../access-control.js';
import type { ServerContext } from '../server-context.js';
import { bucketIdOf, formBody, formField, parseInteger } from '../request-input.js';
import { bucketSchemas } from './bucket-schemas.js';
import { MAX_TTL_SECONDS, PERMISSIONS } from '../../limits.js';

/** `POST /api/v1/{bucket}/tokens/` (form): mints a JWT limited to a prefix and permissions. */
export async function tokenRoute(app: FastifyInstance, { buckets, clock }: ServerContext): Promise<void> {
  app.removeAllContentTypeParsers();
  await app.register(formbody, { bodyLimit: 16 * 1024 });

  app.post('/api/v1/:bucket/tokens/', { schema: bucketSchemas.mint }, async (request) => {
    const { bucket, principal } = await openBucket(buckets, bucketIdOf(request), request);
    authorize(bucket, principal, 'manage');
    const body = formBody(request, ['prefix', 'permissions', 'ttl']);
    const prefix = checkKey(formField(body, 'prefix') ?? '', 'prefix');
    const rawPermissions = body.permissions;
    const permissions = parsePermissions(
      typeof rawPermissions === 'string' ? [rawPermissions] : Array.isArray(rawPermissions) ? rawPermissions : [],
    );
    if (!permissions) throw badRequest(`permissions must list one or more of ${PERMISSIONS.join(', ')}`);
    const ttlText = formField(body, 'ttl');
    if (ttlText === undefined) throw badRequest('ttl is required');
    const ttl = parseInteger(ttlText, 'ttl', 1, MAX_TTL_SECONDS);
    const { signingKey, signingKeyGeneration, tokenSalt, id } = bucket.record;
    if (!signingKey) throw new KvbError('service_unavailable', 'the bucket has no signing_key');
    const tokenId = newTokenId();
    const token = await mintToken(
      tokenKey(signingKey, tokenSalt),
      { bucket: id, prefix, permissions, generation: signingKeyGeneration, id: tokenId },
      ttl,
      Math.floor(clock() / 1000),
    );
    return { access_token: token, id: tokenId };
  });
}
