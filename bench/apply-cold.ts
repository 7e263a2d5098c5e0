/**
 * The state table's application as a fresh process meets it: the packed layout's apply of 10 k rows
 * (one ValueState each, 128 key groups, the keyed count's shape) on an in-memory table, the first
 * onto an empty table (every item made), then over the items the one before wrote, timed one by one.
 * A stage applies its rows only every `materializeEvery`-th checkpoint, so its first applications
 * run code the JIT has not optimized yet — what `components` (best of 30 runs) leaves out. Run it
 * for two checkouts, alternating, since a single run follows the machine's load:
 *
 *   npx tsx bench/apply-cold.ts DIR [applications=4]
 *
 * Prints the CPU time of each application; it writes no results.
 */
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import type * as Memory from '../shared/adapters/memory/memory-ports.js';
import type * as KeyGroups from '../shared/plan/key-groups.js';
import type * as Packed from '../shared/runtime/packed-state.js';
import type { StateRow } from '../shared/runtime/ports.js';

const dir = process.argv[2];
if (!dir) throw new Error('usage: apply-cold.ts DIR [applications]');
const applications = Number(process.argv[3] ?? 4);
if (!Number.isInteger(applications) || applications < 1) throw new Error('applications: an integer ≥ 1');
const imp = async <T>(file: string) => (await import(pathToFileURL(resolve(dir, file)).href)) as T;
const { PackedStateStore } = await imp<typeof Packed>('shared/runtime/packed-state.ts');
const { MemoryStateTable } = await imp<typeof Memory>('shared/adapters/memory/memory-ports.ts');
const { keyGroupOf } = await imp<typeof KeyGroups>('shared/plan/key-groups.ts');

const enc = new TextEncoder();
const store = new PackedStateStore(new MemoryStateTable());
// rows in compareRows order (one operator: by key), as the changelog hands them over
const keys = Array.from({ length: 10_000 }, (_, i) => `key-${i}`).sort();
const out: string[] = [];
for (let n = 1; n <= applications; n++) {
  const rows: StateRow[] = keys.map((key) => ({ operatorId: 'op', keyGroup: keyGroupOf(key, 128), key, values: { count: enc.encode(String(n * 7)) } }));
  const c0 = process.cpuUsage();
  await store.applyRows(n, 1, rows);
  const c = process.cpuUsage(c0);
  out.push(((c.user + c.system) / 1000).toFixed(1));
}
console.log(`${dir}: ${out.join(' / ')} ms CPU (applications of 10 k rows, the first onto an empty table)`);
