/**
 * Savepoints, the coordinator's side: a user's request (the savepoint's record, then the request the
 * next allocate turns into a savepoint checkpoint, as a sequence a retry with the same id finishes),
 * and its completion when that checkpoint commits (the portable files written, the record COMPLETED,
 * the job stopped when it was a stop-with-savepoint; FAILED when state has moved past it).
 */
import type { SnapshotPointer, Telemetry } from '../runtime/ports.js';
import { SluiceError } from '../util/errors.js';
import type { CoordinatorPorts } from './ports.js';
import { validSavepointId, type SavepointRecord } from './records.js';

export class Savepoints {
  constructor(
    private readonly ports: CoordinatorPorts,
    private readonly now: () => Date,
    private readonly telemetry: Telemetry | undefined,
  ) {}

  private get store() {
    return this.ports.store;
  }

  /**
   * Asks for a savepoint (see Coordinator.requestSavepoint). Two writes — the savepoint's record,
   * then the request allocate reads — as a sequence a retry with the same id finishes: a record still
   * REQUESTED (the request never written, or written and its answer lost) is taken over as it is, and
   * the request may be rewritten with the same id. A record past REQUESTED was taken by a checkpoint
   * already: that id exists.
   */
  async request(options: { id?: string; stop?: boolean } = {}): Promise<SavepointRecord> {
    const at = this.now();
    const id = options.id ?? `sp-${at.toISOString().replace(/[-:]/g, '').replace(/\.\d+Z$/, 'Z').toLowerCase()}`;
    if (!validSavepointId(id)) throw new SluiceError(`savepoint id must be 1-100 letters, digits, "_", "." or "-", starting with a letter or digit; got "${id}"`, 'BAD_INPUT');
    const stop = options.stop ?? false;
    let record: SavepointRecord = { id, status: 'REQUESTED', stop, requestedAt: at.toISOString() };
    let retried = false;
    if (!(await this.store.createSavepoint(record))) {
      const existing = await this.get(id);
      // a request that died between its writes (or lost an answer): finish it, as first asked
      if (existing?.status !== 'REQUESTED' || existing.stop !== stop) throw new SluiceError(`savepoint "${id}" already exists`, 'SAVEPOINT_EXISTS');
      record = existing;
      retried = true;
    }
    if (!(await this.store.putSavepointRequest({ id, stop: record.stop, requestedAt: record.requestedAt }))) {
      // another request waits: drop this record (a crash before the delete leaves it REQUESTED, which a retry takes over)
      await this.store.dropRequestedSavepoint(id);
      throw new SluiceError('another savepoint request is still waiting for a checkpoint', 'SAVEPOINT_PENDING', true);
    }
    if (retried) {
      // a retry: an allocate may have taken the request between our read and our write, and this
      // write put it back — a request whose record moved on would turn a second checkpoint into it
      const now = await this.get(id);
      if (now && now.status !== 'REQUESTED') {
        await this.store.deleteSavepointRequest(id);
        return now;
      }
    }
    return record;
  }

  async get(id: string): Promise<SavepointRecord | undefined> {
    return this.store.getSavepoint(id);
  }

  /** Every savepoint, oldest request first. */
  async list(): Promise<SavepointRecord[]> {
    return (await this.store.listSavepoints()).sort((a, b) => a.requestedAt.localeCompare(b.requestedAt));
  }

  /** Writes savepoint `id` from checkpoint n's snapshot pointers, at its commit. */
  async complete(id: string, n: number, pointers: Map<string, SnapshotPointer>): Promise<void> {
    const sp = await this.get(id);
    if (sp?.status === 'COMPLETED' || sp?.status === 'FAILED') return;
    let m;
    try {
      m = await this.ports.savepoints.write(id, n, pointers, this.now());
    } catch (err) {
      // state moved past n (a later checkpoint ran before this commit was retried): the savepoint
      // cannot be taken any more, but the commit must go on
      if (!(err instanceof SluiceError) || err.code !== 'SAVEPOINT_INCONSISTENT') throw err;
      await this.store.updateSavepoint(id, { status: 'FAILED', reason: err.message.slice(0, 1000) });
      this.telemetry?.log('warn', 'savepoint failed', { savepointId: id, checkpointId: n, error: err.message });
      return;
    }
    if (sp?.stop) {
      // stop-with-savepoint: no checkpoint after this one
      await this.store.markStopped(n);
    }
    await this.store.updateSavepoint(id, { status: 'COMPLETED', completedAt: this.now().toISOString(), location: m.location, rows: m.rows, timers: m.timers, bytes: m.bytes });
    this.telemetry?.log('info', 'savepoint written', { savepointId: id, checkpointId: n, rows: m.rows, timers: m.timers });
  }
}
