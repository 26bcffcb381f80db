import { expect } from 'vitest';
import { call } from './http.js';

/** The p-th percentile of `values` (nearest rank). */
export const percentile = (values: number[], p: number) =>
  [...values].sort((a, b) => a - b)[Math.min(values.length - 1, Math.floor((values.length * p) / 100))]!;

/** Latencies (ms) of `count` sequential GETs of a missing key with `token` (each must answer 404). */
export async function latencies(url: string, token: string, count: number): Promise<number[]> {
  const result: number[] = [];
  for (let i = 0; i < count; i++) {
    const started = performance.now();
    const answer = await call(url, { token });
    expect(answer.status).toBe(404);
    result.push(performance.now() - started);
  }
  return result;
}
