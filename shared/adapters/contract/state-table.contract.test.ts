/**
 * Contract of the state table (`PackedTable`: conditional PutItem on the version, Query by pk,
 * BatchGetItem, DeleteItem; 400 KB items), and of the one state store logic over it: one set of
 * tests run against the in-memory twin and against DynamoDB's emulator (dynalite, started here on
 * a free port and closed in teardown).
 */
import { describe, expect, it } from 'vitest';
import { startEmulators, type LocalEmulators } from '../../../local/emulators.js';
import { createTable } from '../../../local/provision.js';
import { PackedStateStore, type PackedTable, type StoredItem } from '../../runtime/packed-state.js';
import type { StateRow } from '../../runtime/ports.js';
import { createAwsClients } from '../aws/clients.js';
import { DynamoPackedTable } from '../aws/dynamo-state-store.js';
import { MemoryStateTable } from '../memory/memory-ports.js';
import { contractTarget } from './target.js';
import { losingConditionalWrites } from '../../../local/chaos/sdk-answers.js';

interface TableTarget {
  /** `lostResponses`: every conditional write is applied, its response lost, and sent again (the caller gets the retry's answer) */
  table(options?: { readonly lostResponses?: boolean }): Promise<PackedTable>;
  stop(): Promise<void>;
}

const targets: Array<{ name: string; start(): Promise<TableTarget> }> = [
  {
    name: 'in-memory twin',
    async start() {
      return { table: async ({ lostResponses = false } = {}) => new MemoryStateTable({ loseResponse: () => lostResponses }), stop: async () => {} };
    },
  },
  {
    name: 'DynamoDB emulator',
    async start() {
      const emulators: LocalEmulators = await startEmulators({ services: ['dynamodb'] });
      const clients = createAwsClients({ region: emulators.region, credentials: emulators.credentials, endpoints: { dynamodb: emulators.endpoints.dynamodb } });
      let n = 0;
      return {
        async table({ lostResponses = false } = {}) {
          const name = `contract-state-${++n}`;
          await createTable(clients, name, 'pk', 'sk');
          // the real request reaches the emulator twice, as the chaos schedule's lost-response sends it
          return new DynamoPackedTable(lostResponses ? losingConditionalWrites(clients) : clients, name);
        },
        stop: async () => {
          clients.dynamodb.destroy();
          await emulators.stop();
        },
      };
    },
  },
];

const bytes = (s: string) => new TextEncoder().encode(s);
const text = (b: Uint8Array | undefined) => (b ? new TextDecoder().decode(b) : undefined);
const item = (sk: string, r: number, d = 'x'): StoredItem => ({ sk, f: 1, c: 1, r, d: bytes(d) });
const bySk = (items: readonly StoredItem[]) => [...items].sort((a, b) => (a.sk < b.sk ? -1 : 1)).map((i) => [i.sk, i.r, text(i.d)]);

describe.each(targets)('state table contract: $name', (target) => {
  const side = contractTarget(target.start);

  it('puts an item only at the version it expects (or only if absent)', async () => {
    const table = await side().table();
    expect(await table.put('g#1', item('a', 1), undefined)).toBe(true);
    expect(await table.put('g#1', item('a', 1, 'again'), undefined)).toBe(false);
    expect(await table.put('g#1', item('a', 2, 'two'), 7)).toBe(false);
    expect(await table.put('g#1', item('a', 2, 'two'), 1)).toBe(true);
    expect(bySk(await table.query('g#1'))).toEqual([['a', 2, 'two']]);
  });

  it('queries one partition, every item of it; gets the items asked for that exist', async () => {
    const table = await side().table();
    for (const sk of ['b', 'a', 'c']) await table.put('g#1', item(sk, 1, sk), undefined);
    await table.put('g#2', item('a', 1, 'other'), undefined);
    expect(bySk(await table.query('g#1'))).toEqual([
      ['a', 1, 'a'],
      ['b', 1, 'b'],
      ['c', 1, 'c'],
    ]);
    expect(await table.query('g#3')).toEqual([]);
    const got = await table.getItems([
      { pk: 'g#1', sk: 'c' },
      { pk: 'g#2', sk: 'a' },
      { pk: 'g#1', sk: 'zz' },
    ]);
    expect(got.map((g) => `${g.pk}/${g.item.sk}=${text(g.item.d)}`).sort()).toEqual(['g#1/c=c', 'g#2/a=other']);
  });

  it('deletes an item (at a version, when one is given)', async () => {
    const table = await side().table();
    await table.put('g#1', item('a', 3), undefined);
    await table.put('g#1', item('b', 1), undefined);
    await table.delete('g#1', 'a', 2);
    expect(bySk(await table.query('g#1')).map((i) => i[0])).toEqual(['a', 'b']);
    await table.delete('g#1', 'a', 3);
    await table.delete('g#1', 'b');
    await table.delete('g#1', 'never');
    expect(await table.query('g#1')).toEqual([]);
  });

  it('refuses an item over 400 KB', async () => {
    const table = await side().table();
    await expect(table.put('g#1', { sk: 'big', f: 1, c: 1, r: 1, d: new Uint8Array(401 * 1024) }, undefined)).rejects.toThrow(/size/i);
  });

  it('under the packed state store: rows round-trip, and a write of an older checkpoint is dropped on an item a later one wrote', async () => {
    const store = new PackedStateStore(await side().table(), { splitBytes: 256 });
    const row = (key: string, v: string): StateRow => ({ operatorId: 'op1', keyGroup: 3, key, values: { count: bytes(v) } });
    // enough keys to split the group into several items
    await store.applyRows(5, 1, Array.from({ length: 40 }, (_, i) => row(`k${String(i).padStart(2, '0')}`, `v${i}`)));
    const all = await store.readGroup('op1', 3);
    expect(all).toHaveLength(40);
    expect(text(all.find((r) => r.key === 'k07')!.values.count)).toBe('v7');
    await store.applyRows(7, 2, [row('k07', 'seven')]);
    await store.applyRows(6, 1, [row('k07', 'zombie')]); // a zombie of checkpoint 6 writes late
    const [k07] = await store.getRows([{ operatorId: 'op1', keyGroup: 3, key: 'k07' }]);
    expect(text(k07!.values.count)).toBe('seven');
    expect(k07!.checkpointId).toBe(7);
    await store.applyRows(8, 2, [{ ...row('k07', ''), values: {} }]);
    expect((await store.getRows([{ operatorId: 'op1', keyGroup: 3, key: 'k07' }])).filter((r) => Object.keys(r.values).length)).toEqual([]);
  });

  it('a put whose retry after a lost response meets its own earlier write succeeds; a put at a version another wrote still fails', async () => {
    const table = await side().table({ lostResponses: true });
    expect(await table.put('g#1', item('a', 1), undefined)).toBe(true);
    expect(await table.put('g#1', item('a', 2, 'two'), 1)).toBe(true);
    expect(bySk(await table.query('g#1'))).toEqual([['a', 2, 'two']]);
    // another writer's item is there: a put expecting an older version, or no item, is refused
    expect(await table.put('g#1', item('a', 2, 'stale'), 1)).toBe(false);
    expect(await table.put('g#1', item('a', 1, 'again'), undefined)).toBe(false);
    expect(bySk(await table.query('g#1'))).toEqual([['a', 2, 'two']]);
  });

  it('under the packed state store with every response lost: a flush takes its writes as its own, with no version conflict to redo', async () => {
    const store = new PackedStateStore(await side().table({ lostResponses: true }), { splitBytes: 256 });
    const row = (key: string, v: string): StateRow => ({ operatorId: 'op1', keyGroup: 3, key, values: { count: bytes(v) } });
    await store.applyRows(5, 1, Array.from({ length: 40 }, (_, i) => row(`k${String(i).padStart(2, '0')}`, `v${i}`)));
    await store.applyRows(6, 1, [row('k07', 'seven')]);
    expect(store.versionConflicts).toBe(0);
    const all = await store.readGroup('op1', 3);
    expect(all).toHaveLength(40);
    expect(text(all.find((r) => r.key === 'k07')!.values.count)).toBe('seven');
  });
});
