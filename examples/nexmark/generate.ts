/**
 * Writes Nexmark events as JSON-lines files, one per table: `person.jsonl`, `auction.jsonl`, `bid.jsonl`.
 *
 *   npx tsx examples/nexmark/generate.ts [--events 10000] [--rate 1000] [--seed 1] [--out nexmark-data]
 *   sluice sql examples/nexmark/sql/q5.sql --events bid=nexmark-data/bid.jsonl
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { generateNexmark, splitNexmark } from './generator.js';

const { values } = parseArgs({
  options: {
    events: { type: 'string', default: '10000' },
    rate: { type: 'string', default: '1000' },
    seed: { type: 'string', default: '1' },
    out: { type: 'string', default: 'nexmark-data' },
  },
});
const tables = splitNexmark(generateNexmark({ events: Number(values.events), ratePerSecond: Number(values.rate), seed: Number(values.seed) }));
mkdirSync(values.out!, { recursive: true });
for (const [name, rows] of Object.entries(tables)) {
  writeFileSync(join(values.out!, `${name}.jsonl`), rows.map((r) => JSON.stringify(r)).join('\n') + '\n');
  process.stderr.write(`${join(values.out!, `${name}.jsonl`)}: ${rows.length} events\n`);
}
