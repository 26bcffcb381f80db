import { Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { Tallies, scrapedMetric } from '../../src/server/plugins/tallies.js';

describe('request tallies exported as a Prometheus histogram at scrape time', () => {
  it('buckets are cumulative, +Inf equals the count, and the sum adds every observation', () => {
    const t = new Tallies([0.001, 0.01]);
    const labels = () => ({ op: 'get' });
    for (const seconds of [0.0005, 0.001, 0.005, 0.5]) t.record('get', labels, seconds);
    const value = (metricName: string, le?: string | number) =>
      t.histogramSamples('h').find((s) => s.metricName === metricName && (le === undefined || s.labels.le === le))?.value;
    // 0.001 falls in its own bucket (le means "less than or equal").
    expect(value('h_bucket', 0.001)).toBe(2);
    expect(value('h_bucket', 0.01)).toBe(3);
    expect(value('h_bucket', '+Inf')).toBe(4);
    expect(value('h_count')).toBe(4);
    expect(value('h_sum')).toBeCloseTo(0.5065, 10);
  });

  it('builds the labels of a series once, however many observations it gets', () => {
    const t = new Tallies([1]);
    let built = 0;
    const labels = () => {
      built++;
      return { route: '/x' };
    };
    for (let i = 0; i < 5; i++) t.record('GET 200 /x', labels, 0.1);
    t.record('GET 404 /x', () => ({ route: '/x', status: 404 }), 0.1);
    expect(built).toBe(1);
    expect(t.counterSamples('c')).toEqual([
      { metricName: 'c', labels: { route: '/x' }, value: 5 },
      { metricName: 'c', labels: { route: '/x', status: 404 }, value: 1 },
    ]);
  });

  it("prints in prom-client's text format, le first, with HELP and TYPE even before any observation", async () => {
    const t = new Tallies([0.5]);
    const registry = new Registry();
    registry.registerMetric(scrapedMetric('kvb_t_seconds', 'test', 'histogram', () => t.histogramSamples('kvb_t_seconds')) as never);
    registry.registerMetric(scrapedMetric('kvb_t_total', 'test', 'counter', () => t.counterSamples('kvb_t_total')) as never);
    expect(await registry.metrics()).toBe(
      '# HELP kvb_t_seconds test\n# TYPE kvb_t_seconds histogram\n\n# HELP kvb_t_total test\n# TYPE kvb_t_total counter\n',
    );
    t.record('a', () => ({ method: 'GET', status: 200 }), 0.25);
    expect((await registry.metrics()).split('\n')).toEqual([
      '# HELP kvb_t_seconds test',
      '# TYPE kvb_t_seconds histogram',
      'kvb_t_seconds_bucket{le="0.5",method="GET",status="200"} 1',
      'kvb_t_seconds_bucket{le="+Inf",method="GET",status="200"} 1',
      'kvb_t_seconds_sum{method="GET",status="200"} 0.25',
      'kvb_t_seconds_count{method="GET",status="200"} 1',
      '',
      '# HELP kvb_t_total test',
      '# TYPE kvb_t_total counter',
      'kvb_t_total{method="GET",status="200"} 1',
      '',
    ]);
  });
});
