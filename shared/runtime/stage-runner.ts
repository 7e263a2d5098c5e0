/**
 * The engine behind a stage function. One StageRunner lives in each execution environment; it keeps
 * the instances it has served in a cache, but a cache is never trusted blindly: Lambda does not pin
 * a shard to an environment, and a timed-out invocation may still be running elsewhere. Each
 * (stage, shard) therefore has a lease with a fencing counter and the last position processed. A
 * batch runs on the cached instance only if both match the lease; otherwise the runner takes the
 * lease over (bumping the fence, which shuts out any zombie's writes), restores the instance's last
 * snapshot and replays its shard up to the batch. A batch that throws drops the cached instance.
 *
 * A batch the lease's position already covers was processed and committed by some owner: the
 * runner returns at once, without a takeover (which would fence out the owner for nothing).
 *
 * The lease's position never moves back. A timed-out invocation may take the lease over after its
 * retry succeeded further on (the retry ran where the instance was cached, so it bumped no fence);
 * the mapping goes on after the retry's last record, which the zombie's instance never read. Had it
 * committed its own, earlier position, its instance would match the lease and take the next batch
 * as a cache hit: the records in between would be skipped and the rest numbered as they were not
 * on any other run (another epoch or sequence number for the same record downstream).
 */
import type { Job } from '../api/job.js';
import type { Plan, PlanStage } from '../plan/plan.js';
import type { ResourceNames } from '../plan/resources.js';
import type { AnnouncedBarrier, RuntimePorts, StoredRecord } from './ports.js';
import type { SourceBarrierPlan } from './source-barriers.js';
import { ShardInheritance } from './shard-inheritance.js';
import { compareSeq, coveredBySnapshot, laterSeq, replayStart } from './positions.js';
import { instanceIdOf, StageInstance, type InstanceOptions, type StageSpec } from './stage-instance.js';
import type { SourceWindow } from './source-window.js';
import { callsForCheckpoint, decodeSourceControl } from '../codec/envelope.js';

export interface StageRunnerOptions extends InstanceOptions {
  /** clean cached keys kept per instance between batches; @default 100_000 */
  readonly maxCachedKeys?: number;
  /**
   * dirty keys kept in memory per instance between snapshots; past it, half are moved to the spill
   * store (S3) until the next snapshot; @default 200_000
   */
  readonly maxDirtyKeys?: number;
  /** how long a source batch that finds its window full waits for room before it is handed back; @default 1000 */
  readonly holdWaitMs?: number;
}

export interface BatchOutcome {
  readonly instanceId: string;
  readonly cacheHit: boolean;
  readonly replayed: number;
  readonly processed: number;
  /**
   * the first record the source's window did not take (source-window.ts): the function reports it
   * as the batch's first failure, so the mapping hands it over again
   */
  readonly heldFrom?: string;
  /**
   * a source batch with input on a lease that carries a parked coordinator's token (`token`), or
   * on the instance's first position (no token: it may be newer than the park): the stage function
   * wakes the coordinator (coordinator/wake.ts)
   */
  readonly wake?: { readonly token?: string };
}

/** What a stage's engine runs on: the job, its plan and stage, the resources' names and the ports. */
export interface StageEngineSpec extends StageSpec {
  readonly options?: StageRunnerOptions;
}

/**
 * The engine of one execution environment of a stage. The stage function builds it at cold start;
 * the local runner, the in-memory runner and the benchmarks build theirs here too, so they run what
 * a deployed function runs.
 */
export function createStageRunner(spec: StageEngineSpec): StageRunner {
  return new StageRunner(spec.job, spec.plan, spec.stage, spec.names, spec.ports, spec.options);
}

export class StageRunner {
  private readonly instances = new Map<string, StageInstance>();
  /** per cached instance: the first position it ever processed (committed once with its positions) */
  private readonly origins = new Map<string, string>();
  readonly totals = { batches: 0, alreadyProcessed: 0, cacheHits: 0, cacheMisses: 0, replayed: 0 };
  /** a child shard's start from its parents after a reshard */
  private readonly inheritance: ShardInheritance;

  constructor(
    private readonly job: Job,
    private readonly plan: Plan,
    private readonly stage: PlanStage,
    private readonly names: ResourceNames,
    private readonly ports: RuntimePorts,
    private readonly options: StageRunnerOptions = {},
  ) {
    this.inheritance = new ShardInheritance({ job, plan, stage, names, ports, options });
  }

  /** Runs records of one shard (already in AWS's order) through the shard's instance. */
  async run(shardId: string, records: readonly StoredRecord[]): Promise<BatchOutcome> {
    const id = instanceIdOf(this.stage.id, shardId);
    const t = this.ports.telemetry;
    this.totals.batches++;
    // a source learns with its lease which checkpoint is open: it puts that barrier at its read position
    const barriers = this.stage.input.kind === 'source' ? this.ports.sourceBarriers : undefined;
    const [lease, announced] = await Promise.all([this.ports.control.readLease(id), barriers ? barriers.announced() : []]);
    // the mapping hands a batch over again that an owner processed and committed (its invocation
    // timed out after the commit, or the retry went further elsewhere): nothing in it is new, and a
    // takeover would only fence out the current owner and make this one restore and replay for nothing
    const last = records.at(-1)?.sequenceNumber;
    if (last !== undefined && lease.lastPosition !== undefined && compareSeq(lease.lastPosition, last) >= 0) {
      this.totals.alreadyProcessed++;
      t.count('BatchAlreadyProcessed');
      // its first run's position write may have found the token and died before waking
      return { instanceId: id, cacheHit: false, replayed: 0, processed: 0, ...this.wakeCue(lease.parked, false, records) };
    }
    let inst = this.instances.get(id);
    const cacheHit = !!inst && inst.fence === lease.fence && inst.lastPosition === lease.lastPosition;
    this.instances.delete(id); // re-added only when the batch succeeds
    let replayed = 0;
    // the last position any owner committed: the mapping's next batch starts no later than after it
    let committed = lease.lastPosition;
    try {
      if (cacheHit) {
        this.totals.cacheHits++;
        t.count('CacheHit');
      } else {
        this.totals.cacheMisses++;
        t.count('CacheMiss');
        inst = new StageInstance(this.job, this.plan, this.stage, shardId, this.names, this.ports, this.options);
        // restore what the lease points to *after* the takeover: a pointer read before it may have
        // been superseded by the previous owner in between
        const owned = await this.ports.control.takeOver(id, lease.fence);
        committed = owned.lastPosition;
        inst.fence = owned.fence;
        await inst.init();
        await inst.restore(owned.snapshot);
        if (!owned.snapshot) {
          const inherited = await this.inheritance.inherit(inst, shardId);
          if (inherited.length) t.log('info', 'a child shard took over its parents\' state', { instance: id, parents: inherited });
        }
        if (owned.snapshot) {
          // the previous owner may have crashed between making the snapshot durable and acking it:
          // ack again (the ack set makes this idempotent; a finished checkpoint ignores it)
          const ack = await this.ports.control.ack(owned.snapshot.checkpointId, id);
          if (ack.completedBy && ack.taskToken) await this.ports.notifier.succeed(ack.taskToken, { checkpointId: owned.snapshot.checkpointId });
        }
        // barriers earlier owners placed go out where they recorded them, the restored position's first
        const plan = inst.barrierPlan;
        if (plan) {
          await plan.load(inst.epoch, inst.fence);
          if (inst.skipThrough.from === 'after') await plan.forwardReached(() => inst!.epoch, inst.skipThrough.sequenceNumber);
        }
        const r = await this.replay(inst, shardId, records[0]!.sequenceNumber, owned.snapshot ? undefined : owned.firstPosition);
        replayed = r.records;
        // the first position this instance ever processed: from the lease, else the first record read now
        const origin = owned.firstPosition ?? r.first ?? records[0]!.sequenceNumber;
        this.origins.set(id, origin);
        this.totals.replayed += replayed;
        t.count('RecordsReplayed', replayed);
      }
      let live = records.filter((r) => !coveredBySnapshot(r.sequenceNumber, inst!.skipThrough));
      const plan = inst!.barrierPlan;
      // a full window takes only what fits; the rest comes again. Not on a shard a reshard closed
      // (the last announcement leaves it out): its children are read only once it is read to its
      // end, and the checkpoints that would free its window wait for them
      const latest = announced.at(-1);
      const window = latest && !latest.instances.includes(id) ? undefined : inst!.window;
      let heldFrom: string | undefined;
      if (window && live.length) {
        let take = await takeable(live, window);
        if (take === 0) {
          // the announced barrier goes out at the unchanged read position first (it is what frees the
          // window), then a bounded wait for a checkpoint to cross: a held shard costs a few reads a
          // second, not a busy loop, and room that opens meanwhile is used by this batch
          if (plan) await this.placeAtReadPosition(inst!, plan, announced);
          await inst!.drain();
          await waitForRoom(window, this.options.holdWaitMs ?? 1_000);
          take = await takeable(live, window);
        }
        if (take < live.length) {
          heldFrom = live[take]!.sequenceNumber;
          t.count('SourceRecordsHeld', live.length - take);
          live = live.slice(0, take);
        }
      }
      const before = inst!.stats.recordsIn;
      // recorded before the batch emits anything: a later owner puts no barrier before what it read
      if (plan && live.length) await plan.readingThrough(inst!.epoch, inst!.fence, live[live.length - 1]!.sequenceNumber);
      await inst!.processRecords(live);
      if (plan) await this.placeAtReadPosition(inst!, plan, announced);
      await inst!.drain();
      // an instance behind what an earlier owner committed leaves the lease there: it matches no
      // lease then, and the next batch restores and replays instead of skipping what it never read
      const parked = inst!.lastPosition !== undefined ? await this.ports.control.commitPosition(id, inst!.fence, laterSeq(inst!.lastPosition, committed)!, this.origins.get(id)) : undefined;
      t.count('RecordsIn', inst!.stats.recordsIn - before);
      const maxDirty = this.options.maxDirtyKeys ?? 200_000;
      if (inst!.state.dirtyBound > maxDirty && inst!.state.dirtyCount > maxDirty) await inst!.spillDirty(Math.floor(maxDirty / 2));
      const max = this.options.maxCachedKeys ?? 100_000;
      if (inst!.state.size > max) inst!.state.evictClean(max);
      this.instances.set(id, inst!);
      const cue = inst!.lastPosition !== undefined ? this.wakeCue(parked, committed === undefined, records) : {};
      return { instanceId: id, cacheHit, replayed, processed: live.length, ...(heldFrom !== undefined ? { heldFrom } : {}), ...cue };
    } catch (err) {
      t.log('error', 'batch failed; the cached instance is dropped and the ESM will retry', {
        instance: id,
        firstSequenceNumber: records[0]?.sequenceNumber,
        error: err instanceof Error ? { name: err.name, message: err.message } : String(err),
      });
      throw err;
    }
  }

  /** The wake-up a source batch calls for: input, and a parked token on its lease or no position before it. */
  private wakeCue(parked: string | undefined, firstPosition: boolean, records: readonly StoredRecord[]): Pick<BatchOutcome, 'wake'> {
    if (this.stage.input.kind !== 'source' || (parked === undefined && !firstPosition)) return {};
    // the coordinator's barriers wake nothing: only input, or the end of a bounded input
    if (!records.some((r) => callsForCheckpoint(r.data))) return {};
    return { wake: parked !== undefined ? { token: parked } : {} };
  }

  /** Puts every announced checkpoint not placed yet at the source's read position and forwards what is due there. */
  private async placeAtReadPosition(inst: StageInstance, plan: SourceBarrierPlan, announced: readonly AnnouncedBarrier[]): Promise<void> {
    const at = inst.readPosition;
    await plan.placeAnnounced(inst.epoch, inst.fence, at, announced);
    if (at !== undefined) await plan.forwardReached(() => inst.epoch, at);
  }

  /**
   * Re-reads the shard from the snapshot's replay point up to the batch's first record. With no
   * snapshot the replay starts at the first position the instance ever processed (`origin`, from its
   * lease), not at whatever the shard still holds: if retention trimmed it, the read fails loudly
   * (REPLAY_TRIMMED) like every other replay, instead of skipping the trimmed records silently.
   *
   * A replay is bounded by design, not cut short: the instance snapshots at every barrier it
   * replays through (as in live processing), so an invocation that dies mid-replay leaves the next
   * one a later snapshot. Barriers land in every shard each checkpoint interval, aborted checkpoints
   * included, so one stretch between barriers holds at most an interval of input (≤ 1 MB/s per
   * shard, read back at up to 2 MB/s shared with the ESM): with an interval well below the function
   * timeout each retry passes at least one barrier. Only a coordinator that injects no barriers
   * for long makes the stretch unbounded — the CheckpointStalled alarm names that.
   */
  private async replay(inst: StageInstance, shardId: string, until: string, origin?: string): Promise<{ records: number; first?: string }> {
    const rp = replayStart(inst.skipThrough, origin);
    if (rp.from !== 'start' && compareSeq(rp.sequenceNumber, until) >= 0) return { records: 0 };
    let n = 0;
    let first: string | undefined;
    const stream = this.names.streamOf(this.stage);
    for await (const page of this.ports.reader.read(stream, shardId, rp, until)) {
      n += page.length;
      first ??= page[0]?.sequenceNumber;
      await inst.processRecords(page);
    }
    return { records: n, ...(first !== undefined ? { first } : {}) };
  }

  /** Instances cached in this environment (diagnostics and tests). */
  cached(): StageInstance[] {
    return [...this.instances.values()];
  }
}

/** How many of a batch's records fit the window: control records always, data records while there is room. */
async function takeable(records: readonly StoredRecord[], window: SourceWindow): Promise<number> {
  let room: number | undefined;
  for (let i = 0; i < records.length; i++) {
    if (decodeSourceControl(records[i]!.data)) continue;
    room ??= await window.room();
    if (room-- <= 0) return i;
  }
  return records.length;
}

async function waitForRoom(window: SourceWindow, ms: number): Promise<void> {
  const until = Date.now() + ms;
  for (let pause = 50; Date.now() < until; pause = Math.min(pause * 2, 400)) {
    await new Promise((resolve) => setTimeout(resolve, Math.min(pause, Math.max(0, until - Date.now()))));
    if ((await window.room()) > 0) return;
  }
}
