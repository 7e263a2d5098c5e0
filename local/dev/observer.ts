/**
 * What `sluice dev` shows about a running job, gathered from the outside of the engine: records per
 * second per stage (from the event source pollers' invocations), unread records per shard (a tap
 * that counts what each stream holds, against the position the stage has read to), watermarks of the
 * cached stage instances, and the structured logs of the simulated functions.
 */
import { GetRecordsCommand, GetShardIteratorCommand } from '@aws-sdk/client-kinesis';
import { sleep } from '../../shared/adapters/aws/clients.js';
import { listAllShards } from '../../shared/adapters/aws/kinesis.js';
import type { InvocationInfo } from '../event-source-poller.js';
import type { LocalJobRunner } from '../runner.js';

export interface LogLine {
  readonly seq: number;
  readonly stage: string | undefined;
  readonly level: string;
  readonly time: string;
  readonly message: string;
  readonly fields: Record<string, unknown>;
}

export interface StageView {
  readonly id: string;
  readonly name: string;
  readonly parallelism: number;
  readonly stream: string;
  readonly input: string[];
  readonly operators: Array<{ id: string; name: string; kind: string; watermark: number | null }>;
  /** Kinesis records read per second over the last RATE_WINDOW_MS */
  readonly rate: number;
  readonly records: number;
  readonly failedInvocations: number;
  readonly shards: Array<{ id: string; lag: number; read: number }>;
  /** lowest watermark of the stage's instances; null before every instance has one */
  readonly watermark: number | null;
}

const RATE_WINDOW_MS = 5_000;
const MAX_LOGS = 2_000;

const compareSeq = (a: string, b: string) => a.length - b.length || (a < b ? -1 : a > b ? 1 : 0);

interface ShardTap {
  iterator: string | undefined;
  /** sequence numbers the shard holds, ascending */
  seqs: string[];
  /** the highest sequence number a successful invocation covered */
  processed: string | undefined;
}

export class DevObserver {
  private readonly logs: LogLine[] = [];
  private logSeq = 0;
  private readonly reads = new Map<string, Array<{ at: number; count: number }>>();
  private readonly totals = new Map<string, { records: number; failed: number }>();
  private readonly taps = new Map<string, Map<string, ShardTap>>();
  private readonly logListeners = new Set<(l: LogLine) => void>();
  private runner: LocalJobRunner | undefined;
  private stopped = false;
  private tapLoop: Promise<void> | undefined;

  /** The log sink to pass to the runner (`LocalRunOptions.log`). */
  readonly log = (line: string): void => {
    let parsed: Record<string, unknown>;
    try {
      parsed = JSON.parse(line) as Record<string, unknown>;
    } catch {
      parsed = { level: 'INFO', message: line };
    }
    const { level, message, timestamp, service: _service, ...fields } = parsed;
    this.push(stageOf(fields), String(level ?? 'INFO'), String(message ?? ''), fields, typeof timestamp === 'string' ? timestamp : new Date().toISOString());
  };

  /** The invocation hook to pass to the runner (`LocalRunOptions.onInvocation`). */
  readonly onInvocation = (stage: string, info: InvocationInfo): void => {
    const t = this.totals.get(stage) ?? { records: 0, failed: 0 };
    this.totals.set(stage, t);
    const fields = { shardId: info.shardId, environment: info.environmentId, records: info.count, durationMs: info.durationMs, outcome: info.outcome };
    if (info.outcome !== 'success') {
      t.failed++;
      this.push(stage, 'WARN', `invocation ${info.outcome}`, { ...fields, error: info.error instanceof Error ? info.error.message : info.error !== undefined ? String(info.error) : undefined });
      return;
    }
    t.records += info.count;
    let r = this.reads.get(stage);
    if (!r) this.reads.set(stage, (r = []));
    r.push({ at: Date.now(), count: info.count });
    const tap = this.taps.get(stage)?.get(info.shardId);
    if (tap && (tap.processed === undefined || compareSeq(info.lastSequenceNumber, tap.processed) > 0)) tap.processed = info.lastSequenceNumber;
    else if (!tap) this.pendingProcessed.set(`${stage}/${info.shardId}`, info.lastSequenceNumber);
    this.push(stage, 'DEBUG', `invoked with ${info.count} records`, fields);
  };

  private readonly pendingProcessed = new Map<string, string>();

  /** Watches a (new) runner; the counters start over with it. */
  attach(runner: LocalJobRunner): void {
    this.runner = runner;
    this.reads.clear();
    this.totals.clear();
    this.taps.clear();
    this.pendingProcessed.clear();
    this.tapLoop ??= this.runTaps();
  }

  onLog(listener: (l: LogLine) => void): () => void {
    this.logListeners.add(listener);
    return () => this.logListeners.delete(listener);
  }

  recentLogs(stage?: string, limit = 500): LogLine[] {
    const all = stage ? this.logs.filter((l) => l.stage === stage) : this.logs;
    return all.slice(-limit);
  }

  /** A line of `sluice dev` itself (deploys, redeploys) in the same log. */
  note(message: string, fields: Record<string, unknown> = {}): void {
    this.push(undefined, 'INFO', message, fields);
  }

  stages(): StageView[] {
    const runner = this.runner;
    if (!runner) return [];
    const now = Date.now();
    return runner.plan.stages.map((stage) => {
      const reads = (this.reads.get(stage.id) ?? []).filter((r) => r.at > now - RATE_WINDOW_MS);
      this.reads.set(stage.id, reads);
      const instances = runner.instancesOf(stage.id);
      // an instance id can be cached in several environments: the freshest copy has the highest watermark
      const byInstance = new Map<string, number>();
      for (const i of instances) if (Number.isFinite(i.watermark)) byInstance.set(i.id, Math.max(byInstance.get(i.id) ?? -Infinity, i.watermark));
      const wms = [...byInstance.values()];
      const watermark = wms.length ? Math.min(...wms) : null;
      const taps = this.taps.get(stage.id) ?? new Map<string, ShardTap>();
      const t = this.totals.get(stage.id) ?? { records: 0, failed: 0 };
      return {
        id: stage.id,
        name: stage.name,
        parallelism: stage.parallelism,
        stream: runner.names.streamOf(stage),
        input: stage.input.kind === 'source' ? [] : [...stage.input.fromStages],
        operators: stage.operators.map((o) => ({ id: o.id, name: o.name, kind: o.kind, watermark })),
        rate: reads.reduce((a, r) => a + r.count, 0) / (RATE_WINDOW_MS / 1000),
        records: t.records,
        failedInvocations: t.failed,
        shards: [...taps.entries()].map(([id, tap]) => ({ id, lag: unread(tap), read: tap.seqs.length - unread(tap) })),
        watermark,
      };
    });
  }

  async stop(): Promise<void> {
    this.stopped = true;
    await this.tapLoop;
  }

  private push(stage: string | undefined, level: string, message: string, fields: Record<string, unknown>, time = new Date().toISOString()): void {
    const l: LogLine = { seq: ++this.logSeq, stage, level, time, message, fields };
    this.logs.push(l);
    if (this.logs.length > MAX_LOGS) this.logs.splice(0, this.logs.length - MAX_LOGS);
    for (const f of this.logListeners) f(l);
  }

  /** Counts what each stage's input stream holds, shard by shard, once a second. */
  private async runTaps(): Promise<void> {
    while (!this.stopped) {
      const runner = this.runner;
      if (runner?.isRunning) {
        for (const stage of runner.plan.stages) {
          try {
            await this.tapStream(runner, stage.id, runner.names.streamOf(stage));
          } catch {
            // the stream is being recreated (a redeploy) or the stack is stopping: try again next round
          }
        }
      }
      for (let i = 0; i < 10 && !this.stopped; i++) await sleep(100);
    }
  }

  private async tapStream(runner: LocalJobRunner, stageId: string, stream: string): Promise<void> {
    let taps = this.taps.get(stageId);
    if (!taps) this.taps.set(stageId, (taps = new Map()));
    for (const shard of await listAllShards(runner.clients, stream)) {
      let tap = taps.get(shard.shardId);
      if (!tap) {
        const it = await runner.clients.kinesis.send(new GetShardIteratorCommand({ StreamName: stream, ShardId: shard.shardId, ShardIteratorType: 'TRIM_HORIZON' }));
        taps.set(shard.shardId, (tap = { iterator: it.ShardIterator, seqs: [], processed: this.pendingProcessed.get(`${stageId}/${shard.shardId}`) }));
      }
      for (let pages = 0; tap.iterator && pages < 20; pages++) {
        const r = await runner.clients.kinesis.send(new GetRecordsCommand({ ShardIterator: tap.iterator, Limit: 1000 }));
        for (const rec of r.Records ?? []) tap.seqs.push(rec.SequenceNumber!);
        tap.iterator = r.NextShardIterator;
        if (!r.Records?.length) break;
      }
    }
  }
}

/** Records of the shard after the last one a successful invocation covered. */
function unread(tap: ShardTap): number {
  if (tap.processed === undefined) return tap.seqs.length;
  let lo = 0;
  let hi = tap.seqs.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (compareSeq(tap.seqs[mid]!, tap.processed) <= 0) lo = mid + 1;
    else hi = mid;
  }
  return tap.seqs.length - lo;
}

/** The stage a log line is about: its `stage` field, or the stage of its `instance` (`s1/shardId-…`). */
function stageOf(fields: Record<string, unknown>): string | undefined {
  if (typeof fields.stage === 'string') return fields.stage;
  if (typeof fields.instance === 'string') return /^(s\d+)/.exec(fields.instance)?.[1];
  return undefined;
}
