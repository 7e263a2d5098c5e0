/**
 * Keyed state read ahead of the records that touch it: units are decoded and keyed first, and the
 * rows their keys miss in the cache are read together (a cold cache after a takeover reads its
 * keys in a few concurrent reads instead of one per record).
 */
import { PacketDataEnvelope } from '../codec/envelope.js';
import { decodePayload, decodePayloadAt } from '../codec/payload.js';
import { keyString } from '../plan/key-groups.js';
import { FencedError } from '../util/errors.js';
import type { CompiledChain } from './chain.js';
import type { DirtySpill } from './dirty-spill.js';
import type { Unit } from './inner-packets.js';
import type { KeyedStateCache } from './keyed-state.js';
import type { StateRowId, StateStore } from './ports.js';

/** keys per state read (a BatchGetItem takes 100), and reads in flight at once */
const PREFETCH_CHUNK = 100;
const PREFETCH_CONCURRENCY = 8;

/**
 * Decodes the payloads and keys of units not decoded yet, points each at its first keyed
 * operator's cached entry, and adds the (operator, key)s not cached to `ids` (some may repeat).
 */
export function resolveUnits(units: readonly Unit[], ids: StateRowId[], chain: CompiledChain, state: KeyedStateCache): void {
  for (let i = 0; i < units.length; i++) resolveUnit(units[i]!, ids, chain, state);
}

/** `resolveUnits` of one unit. */
export function resolveUnit(u: Unit, ids: StateRowId[], chain: CompiledChain, state: KeyedStateCache): void {
  const env = u.env;
  if (env.kind !== 'data') return;
  const ops = chain.keyedOperators;
  if (u.value !== undefined || u.poison !== undefined) {
    const key = u.key;
    if (key === undefined) return;
    u.state = undefined;
    for (let o = 0; o < ops.length; o++) {
      const e = state.lookup(ops[o]!, key);
      if (!e) ids.push({ operatorId: ops[o]!, keyGroup: env.keyGroup, key });
      else if (o === 0) {
        u.state = e;
        u.key = e.key;
      }
    }
    return;
  }
  try {
    u.value = env instanceof PacketDataEnvelope ? decodePayloadAt(env.packet, env.payloadStart, env.payloadEnd) : decodePayload(env.payload);
    const selector = chain.keySelectors[env.input ?? 0];
    if (selector) {
      const key = (u.key = keyString(selector(u.value)));
      for (let o = 0; o < ops.length; o++) {
        const e = state.lookup(ops[o]!, key);
        if (!e) ids.push({ operatorId: ops[o]!, keyGroup: env.keyGroup, key });
        else if (o === 0) {
          u.state = e;
          // the cache's copy of the key: later lookups of it (state, timers) match by identity
          u.key = e.key;
        }
      }
    }
  } catch (err) {
    u.poison = err;
  }
}

/** Loads missing rows into an instance's cache: from its spill if they were moved there, else from the state store. */
export class StateLoader {
  constructor(
    /** the instance: its epoch bounds the rows it may read, its fence scopes its spill */
    private readonly owner: { readonly id: string; readonly epoch: number; readonly fence: number },
    private readonly cache: KeyedStateCache,
    /** where rows not cached are read (the instance's pending rows in front of the state table: changelog.ts) */
    private readonly store: Pick<StateStore, 'getRows'>,
    private readonly spill: DirtySpill,
  ) {}

  /** Reads the rows of `ids` that are still not cached (duplicates are read once). */
  async readMissing(ids: readonly StateRowId[]): Promise<void> {
    const missing = this.cache.missing(ids);
    if (missing.length <= PREFETCH_CHUNK) {
      await this.load(missing);
      return;
    }
    // many keys to read (a cold cache: after a takeover, or a burst of new keys): read them in
    // chunks of a BatchGetItem's size, several at a time, instead of one chunk after another
    const chunks: StateRowId[][] = [];
    for (let i = 0; i < missing.length; i += PREFETCH_CHUNK) chunks.push(missing.slice(i, i + PREFETCH_CHUNK));
    let next = 0;
    const worker = async () => {
      while (next < chunks.length) await this.load(chunks[next++]!);
    };
    await Promise.all(Array.from({ length: Math.min(PREFETCH_CONCURRENCY, chunks.length) }, worker));
  }

  /**
   * Loads state rows into the cache. A row written by a checkpoint above the instance's epoch
   * means another owner has moved on (this invocation is a zombie): computing with it would emit
   * other content under ids already used, so the batch stops here.
   */
  async load(missing: StateRowId[]): Promise<void> {
    if (this.spill.size && missing.length) {
      // a key spilled since the last snapshot comes back from the spill, still dirty
      const back = await this.spill.takeBack(missing, this.owner.fence);
      if (back.length) {
        this.cache.adoptDirty(back);
        missing = missing.filter((id) => !this.cache.has(id.operatorId, id.key));
      }
    }
    if (!missing.length) return;
    const rows = await this.store.getRows(missing);
    const epoch = this.owner.epoch;
    for (const r of rows) {
      if (r.checkpointId !== undefined && r.checkpointId > epoch) {
        throw new FencedError(`${this.owner.id}: state row ${r.operatorId}/${r.key} was written by checkpoint ${r.checkpointId}, past this instance's epoch ${epoch}`);
      }
    }
    this.cache.load(missing, rows);
  }
}
