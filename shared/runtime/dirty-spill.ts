/**
 * Dirty keyed state moved out of memory until the next snapshot (an instance's dirty state may
 * outgrow the function's memory). Nothing here is committed: parts are scoped by instance and
 * fence, the snapshot reads them back into its delta and drops them, and a key used before that is
 * loaded back from its part, still dirty.
 */
import { decodeDelta, encodeDelta } from '../codec/snapshot.js';
import type { SpillStore, StateRow, StateRowId } from './ports.js';

const rowTag = (id: StateRowId) => `${id.operatorId}\u0000${id.key}`;

export class DirtySpill {
  /** dirty keys moved to the spill store since the last snapshot: operator\0key → part */
  private readonly spilled = new Map<string, string>();
  private parts = 0;

  constructor(
    private readonly instanceId: string,
    private readonly store: SpillStore | undefined,
  ) {}

  get enabled(): boolean {
    return this.store !== undefined;
  }

  get size(): number {
    return this.spilled.size;
  }

  /** Writes rows to a new part of this epoch. */
  async put(rows: readonly StateRow[], epoch: number, fence: number): Promise<void> {
    const part = `${epoch}-${this.parts++}`;
    await this.store!.put(this.instanceId, fence, part, encodeDelta(rows));
    for (const r of rows) this.spilled.set(rowTag(r), part);
  }

  /** Takes back the spilled rows among `ids` (they are no longer spilled). */
  async takeBack(ids: readonly StateRowId[], fence: number): Promise<StateRow[]> {
    const back = ids.filter((id) => this.spilled.has(rowTag(id)));
    if (!back.length) return [];
    const rows = await this.read(back, fence);
    for (const id of back) this.spilled.delete(rowTag(id));
    return rows;
  }

  /** every spilled row, each from the part that holds its latest value */
  readAll(fence: number): Promise<StateRow[]> {
    return this.read(undefined, fence);
  }

  /** Forgets every part (after a snapshot took them in). */
  async clear(fence: number): Promise<void> {
    this.spilled.clear();
    await this.store!.drop(this.instanceId, fence);
  }

  /** The spilled rows of `ids` (every spilled row when absent), each from the part that holds its latest value. */
  private async read(ids: readonly StateRowId[] | undefined, fence: number): Promise<StateRow[]> {
    const wanted = ids ? new Map(ids.map((id) => [rowTag(id), this.spilled.get(rowTag(id))!])) : this.spilled;
    const byPart = new Map<string, Set<string>>();
    for (const [tag, part] of wanted) {
      let tags = byPart.get(part);
      if (!tags) byPart.set(part, (tags = new Set()));
      tags.add(tag);
    }
    const out: StateRow[] = [];
    for (const [part, tags] of byPart) {
      const { rows } = decodeDelta(await this.store!.get(this.instanceId, fence, part));
      for (const r of rows) if (tags.has(rowTag(r))) out.push(r);
    }
    return out;
  }
}
