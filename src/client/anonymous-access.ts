/**
 * What anonymous callers may do on a bucket created with these credentials (nothing: []), in the
 * words `kvb init`, `kvb create-bucket` and the web console's creation form all warn with. The
 * names are the creation form's fields. Imports nothing, so the console can take it too.
 */
export function anonymousAccessLeft(chosen: readonly string[]): string[] {
  const left: string[] = [];
  if (!chosen.includes('read_key')) left.push('read and list every key');
  if (!chosen.includes('write_key')) left.push('write and delete every key');
  if (!chosen.includes('secret_key')) left.push('change the policy and delete the bucket');
  return left;
}
