// Must NOT compile (test/unit/client-types.test.ts): a Date and a method are not JSON, inside an interface or not.
import { connect } from 'kvb/client';

interface Dated {
  name: string;
  at: Date;
}

interface WithMethod {
  name: string;
  greet(): string;
}

export async function notJson(): Promise<void> {
  const kv = connect({ url: 'http://127.0.0.1:8080', bucket: 'b' });
  await kv.get<Dated>('a');
  await kv.get<WithMethod>('b');
}
