/**
 * docs/performance.md's figures come from the committed full run: a full `npm run bench` rewrites
 * the marked regions from its results, and a test checks that the page and bench/results/latest.json
 * agree, so the page cannot keep the figures of an older run.
 */
import type { BenchResults } from './main.js';
import { renderTable, summaryLine } from './report.js';
import { fmt } from './svg.js';
import { readTargets } from './targets.js';

const begin = (name: string) => `<!-- bench:${name} (written by a full npm run bench from bench/results/latest.json) -->`;
const end = (name: string) => `<!-- /bench:${name} -->`;

/** The summary line (and the cost line), then each target against this run. */
export function summaryRegion(r: BenchResults): string {
  const lines = ['```', summaryLine(r), ...(r.costLine ? [r.costLine] : []), '```', '', '| field | this run | target | met |', '|---|---|---|---|'];
  for (const t of readTargets(r)) {
    const shown = (x: number) => (Number.isInteger(x) && x >= 1000 ? fmt(x) : String(x));
    lines.push(`| \`${t.field}\` | ${t.reading === undefined ? '–' : shown(t.reading)} | ${t.bound === 'min' ? '≥' : '≤'} ${shown(t.value)} | ${t.met ? '**yes**' : 'no'} |`);
  }
  return lines.join('\n');
}

export const regions: Record<string, (r: BenchResults) => string> = { summary: summaryRegion, table: renderTable };

/** The text between a region's markers; throws when the page lacks them. */
export function regionOf(doc: string, name: string): string {
  const b = doc.indexOf(begin(name));
  const e = doc.indexOf(end(name));
  if (b < 0 || e < b) throw new Error(`docs/performance.md has no region "${name}" (${begin(name)} … ${end(name)})`);
  return doc.slice(b + begin(name).length, e).trim();
}

/** The page with every region rewritten from `r`. */
export function withResults(doc: string, r: BenchResults): string {
  let out = doc;
  for (const [name, render] of Object.entries(regions)) {
    regionOf(out, name); // throws when missing
    const b = out.indexOf(begin(name)) + begin(name).length;
    out = `${out.slice(0, b)}\n${render(r)}\n${out.slice(out.indexOf(end(name)))}`;
  }
  return out;
}
