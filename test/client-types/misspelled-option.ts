// Must NOT compile (test/unit/client-types.test.ts): `ifRevison` is a misspelled `ifRevision`.
import { connect } from 'kvb/client';

export async function misspelled(): Promise<void> {
  const kv = connect({ url: 'http://127.0.0.1:8080', bucket: 'b' });
  await kv.set('k', 'v', { ifRevison: 3 });
}
