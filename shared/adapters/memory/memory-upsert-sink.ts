/**
 * The upsert sinks' twin: writes of a key collapse to the last, each applied under the emitting
 * instance's (epoch, seq) version condition with the DynamoDB sink's SET semantics; every accepted
 * write is kept for tests to check.
 */
import type { UpsertSinkWriter, UpsertWrite } from '../../runtime/ports.js';
import { serviceCall, type MemoryFaults } from './memory-faults.js';
import { checkItemSize } from './memory-state.js';

/** Version attributes the upsert sink adds to every row, as the DynamoDB sink does. */
export const SINK_VERSION_ATTRIBUTES = { epoch: '_sluice_epoch', seq: '_sluice_seq', producer: '_sluice_producer' } as const;
/** set only on a row written by a child shard's instance in the epoch it took over (UpsertWrite.generation) */
export const SINK_GENERATION = '_sluice_gen';

export interface AcceptedUpsert {
  readonly table: string;
  readonly key: string;
  readonly write: UpsertWrite;
}

/** Tables of upsert sinks: writes collapse to the last per key, each applied under the version condition. */
export class MemoryUpsertSink implements UpsertSinkWriter {
  private readonly tables = new Map<string, Map<string, Record<string, unknown>>>();
  /** every accepted write, in order */
  readonly accepted: AcceptedUpsert[] = [];
  /** writes refused by the version condition */
  rejected = 0;

  constructor(private readonly faults: MemoryFaults = {}) {}

  async write(table: string, keyAttribute: string, writes: readonly UpsertWrite[]): Promise<void> {
    await serviceCall(this.faults, 'upsertSink.write', { size: writes.length }, () => {
      const last = new Map<string, UpsertWrite>();
      for (const w of writes) last.set(w.key, w);
      let t = this.tables.get(table);
      if (!t) this.tables.set(table, (t = new Map()));
      const { epoch: E, seq: S, producer: P } = SINK_VERSION_ATTRIBUTES;
      for (const w of last.values()) {
        const cur = t.get(w.key);
        const gen = w.generation ?? 0;
        const ok =
          !cur ||
          cur[E] === undefined ||
          (cur[E] as number) < w.epoch ||
          (cur[E] === w.epoch && cur[P] !== w.producer && ((cur[SINK_GENERATION] as number | undefined) ?? 0) <= gen) ||
          (cur[E] === w.epoch && cur[P] === w.producer && (cur[S] as number) < w.seq);
        if (!ok) {
          this.rejected++;
          continue;
        }
        // SET semantics: attributes not in this write stay; the key attribute is never overwritten
        const next: Record<string, unknown> = { ...(cur ?? { [keyAttribute]: w.key }), [E]: w.epoch, [S]: w.seq, [P]: w.producer };
        if (gen) next[SINK_GENERATION] = gen;
        else delete next[SINK_GENERATION];
        for (const [k, v] of Object.entries(w.item)) {
          if (k === keyAttribute || v === undefined) continue;
          next[k] = structuredClone(v);
        }
        checkItemSize(`${table} item ${w.key}`, next);
        t.set(w.key, next);
        this.accepted.push({ table, key: w.key, write: structuredClone(w) });
      }
    });
  }

  /** Rows of a table by key (copies). */
  table(table: string): Map<string, Record<string, unknown>> {
    return new Map([...(this.tables.get(table) ?? new Map<string, Record<string, unknown>>())].map(([k, v]) => [k, structuredClone(v)]));
  }
}
