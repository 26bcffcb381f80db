import { queryBuilder } from '../src/store/statements.js';
import { compileHistory } from '../src/store/history-statements.js';
for (const [d, s] of [['sqlite', undefined], ['postgres', 'kvb']] as const) {
  const all = compileHistory(queryBuilder(d, s), d === 'sqlite' ? 'kvb_import.staged' : 'pg_temp.kvb_import');
  for (const [n, c] of Object.entries(all)) console.log(d, n, c.sql, c.params.join(','));
}
