/** docs/performance.md quotes the committed bench run, not an older one. */
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { regionOf, regions, withResults } from '../bench/doc-results.js';
import type { BenchResults } from '../bench/main.js';
import { readTargets } from '../bench/targets.js';

const file = (p: string) => readFileSync(fileURLToPath(new URL(p, import.meta.url)), 'utf8');
const page = file('./performance.md');
const results = JSON.parse(file('../bench/results/latest.json')) as BenchResults;

describe('docs/performance.md', () => {
  it.each(Object.keys(regions))('its "%s" region is what bench/results/latest.json renders', (name) => {
    expect(regionOf(page, name)).toBe(regions[name]!(results).trim());
  });

  it('a rewrite from the same results changes nothing', () => {
    expect(withResults(page, results)).toBe(page);
  });

  it('reads every target from the summary line, and a missing figure meets nothing', () => {
    const read = readTargets(results);
    expect(read.every((t) => t.reading !== undefined)).toBe(true);
    const none = readTargets({} as BenchResults);
    expect(none.map((t) => [t.reading, t.met])).toEqual(none.map(() => [undefined, false]));
  });
});
