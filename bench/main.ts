/**
 * `npm run bench`: Sluice's benchmarks, each next to a baseline measured in the same run. Run
 * `npm run bench -- --help` for the options. A full run (no --only, no --quick) prints a table,
 * writes bench/results/latest.json and latest.svg, and ends with one summary line:
 *
 *   bench: handler_eps=… fair_ratio=… source_eps=… window_fair_ratio=… ckpt_cpu_events_per_key=…
 *          ckpt_wcu_uniform=… ckpt_wcu_hot=… ckpt_wcu_tail=… nexmark_q5_eps_core=… overhead_bytes=…
 *
 * (on one line). Every rate is events over total wall time or over total CPU time of what it
 * measures; performance is never asserted (shared machines are noisy).
 */
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { checkpointRounds, measureCheckpoint, S3_PUT_IN_WCU, type CheckpointFigures } from './checkpoint.js';
import { measureComponents, type ComponentFigures } from './components.js';
import type { MonthlyCost } from './cost.js';
import { withResults } from './doc-results.js';
import { KB } from './dynamo-size.js';
import type { EmulatedStage1, EndToEnd, RawRate } from './emulated.js';
import { FULL_SIZE, measurePath, type PathFigures, type PathSpec } from './handler.js';
import { keyedCountJob, makeEvents, makeEventsOf, type KeyDistribution } from './jobs.js';
import { NEXMARK_QUERIES, runNexmark, type NexmarkFigures } from './nexmark.js';
import { runPipeline, type PipelineResult } from './pipeline.js';
import { ASSUMPTIONS, PRICES } from './prices.js';
import { runScenario, PortTimer, timePorts, withLatency, type LatencyModel, type ScenarioResult } from './stage1-scenario.js';
import { encodeRounds, loadRounds, type InputShape } from './stage1-input.js';
import { fmt } from './svg.js';
import { pct, renderSvg, renderTable, summaryLine } from './report.js';

export { renderSvg, renderTable, summaryLine } from './report.js';

// ------------------------------------------------------------------------------------------ parts

/**
 * The parts of the bench, in the order a full run takes them. `--only a,b` runs some of them.
 * A part reads its sizes from `Sizes`, writes its figures into `BenchResults` and logs progress.
 * The `cost` part is where the cost model plugs in (its figures: metering.ts, prices.ts, cost.ts).
 */
export const PARTS = ['handler', 'window', 'source', 'components', 'checkpoint', 'wire', 'recovery', 'nexmark', 'cost', 'emulated'] as const;
export type PartName = (typeof PARTS)[number];

const PART_HELP: Record<PartName, string> = {
  handler: 'keyed count through the Lambda handler (handleKinesisBatch, AWS event shape), emitting every update to a next stage, checkpoints included; against a fair hand-written loop; checkpoint CPU per dirty key',
  window: 'tumbling event-time window aggregate through the handler, results to a next stage, checkpoints included; against a fair loop',
  source: 'the source stage through the handler: JSON records in, packed envelopes out, checkpoints included; against a fair loop',
  components: "a checkpoint's CPU per dirty key, piece by piece (rows, delta, spilling store, packed layout), and the payload writer; each piece alone, best run",
  checkpoint: 'write units of a checkpoint against a layout-free floor (dirty bytes / 1 KB) for uniform, hot-key and long-tail keys (state table on dynalite in a full run)',
  wire: 'bytes per event on the stage-to-stage stream beyond the payload (whole job in process, metered)',
  recovery: 'restore + replay + batch after a lost cache (in process; and with modelled AWS latencies)',
  nexmark: `Nexmark ${NEXMARK_QUERIES.join(', ')} as whole in-process jobs: events/s per core of every stage's CPU, next to Flink's published per-core figures`,
  cost: 'AWS cost per 1 M events from metered in-process runs (see metering.ts, prices.ts, cost.ts)',
  emulated: 'the emulated AWS stack (kinesis-mock, dynalite, fauxqs): warmed raw Kinesis rate, keyed stage, end to end (not in --quick unless asked with --only)',
};

export interface BenchOptions {
  readonly quick?: boolean;
  /** parts to run; @default every part (the emulated one not in quick mode) */
  readonly only?: readonly PartName[];
  readonly log?: (line: string) => void;
}

export interface WireFigures {
  readonly eventsPerSecond: number;
  readonly batch: number;
  readonly destinationShards: number;
  readonly payloadBytesPerEvent: number;
  readonly overheadBytesPerEvent: number;
  readonly recordsPerEvent: number;
  readonly eventsPerRecord: number;
  readonly sourceBytesPerEvent: number;
}

export interface CheckpointScenario extends CheckpointFigures {
  readonly scenario: 'uniform' | 'hot' | 'tail';
  readonly distribution: string;
  readonly eventsPerCheckpoint: number;
  /** ceil(dirty bytes / 1 KB): what the dirty state costs written with no layout at all */
  readonly layoutFreeFloor: number;
  /** used.total ÷ layoutFreeFloor */
  readonly layoutFreeRatio: number;
  /** the same checkpoints with every one applying its rows to the table (materializeEvery 1) */
  readonly everyCheckpoint: { readonly total: number; readonly rows: number; readonly layoutFreeRatio: number };
}

export interface BenchResults {
  readonly version: 2;
  readonly date: string;
  readonly quick: boolean;
  readonly parts: PartName[];
  readonly machine: { node: string; cpus: number; cpu: string; loadAvgAtStart: number[]; loadAvgAtEnd?: number[] };
  handler?: PathFigures;
  window?: PathFigures;
  source?: PathFigures;
  components?: ComponentFigures;
  checkpoints?: CheckpointScenario[];
  wire?: WireFigures[];
  recovery?: {
    memory: ScenarioResult & { events: number };
    /** the same on the twins with AWS-like request latencies (an assumption: see latency) */
    modelled: ScenarioResult & { events: number; latency: LatencyModel; keys: number };
  };
  nexmark?: { figures: NexmarkFigures[]; events: number; checkpointEvery: number; batch: number; ratePerSecond: number };
  /** the monthly cost line of `--only cost` (bench/cost-part.ts) */
  costLine?: string;
  /** the cost model's scenarios (bench/cost.ts): idle, 1,000 ev/s at 10 s and at 60 s checkpoints */
  cost?: { transitionsPerCheckpoint: number; transitionsPath: string[]; scenarios: MonthlyCost[]; prices: typeof PRICES; assumptions: typeof ASSUMPTIONS };
  emulated?: { rawCold: RawRate; raw: RawRate; stage1: EmulatedStage1; e2e: EndToEnd; startMs: number } | { error: string };
  summary?: string;
}

const DISTRIBUTIONS: Array<{ scenario: CheckpointScenario['scenario']; dist: KeyDistribution; label: string }> = [
  { scenario: 'uniform', dist: { kind: 'uniform', keys: 10_000 }, label: 'uniform over 10 k keys' },
  { scenario: 'hot', dist: { kind: 'hot', keys: 10_000, hot: 100, share: 0.9 }, label: '90 % of events on 100 hot keys, the rest uniform over 10 k' },
  { scenario: 'tail', dist: { kind: 'zipf', keys: 100_000, s: 1 }, label: 'Zipf (s = 1) over 100 k keys' },
];

const sizes = (quick: boolean) =>
  quick
    ? {
        keyedShape: { eventsPerPacket: 100, packetsPerBatch: 5, batchesPerRound: 2 } as InputShape,
        keyedRounds: 4,
        keyedWarmup: 1,
        keys: 200,
        sourceBatch: 100,
        sourcePerCheckpoint: 1_000,
        pipelines: [{ eps: 200, seconds: 2, every: 1, sourceShards: 1, parallelism: 1, keys: 100 }],
        ckShape: { eventsPerPacket: 50, packetsPerBatch: 2, batchesPerRound: 1 } as InputShape,
        ckScale: 0.01,
        recShape: { eventsPerPacket: 50, packetsPerBatch: 2, batchesPerRound: 3 } as InputShape,
        nexmark: { events: 3_000, checkpointEvery: 1_000, batch: 500, ratePerSecond: 10_000 },
      }
    : {
        // 20 k events per checkpoint: 4 ESM batches of 10 packets × 500 events, then the barrier
        keyedShape: FULL_SIZE.shape as InputShape,
        // 36 measured checkpoints after 12 left out: whole periods of the default materializeEvery
        // at 10 s (12: runtime/changelog.ts). The left-out period holds JIT, every key's first read
        // and the state table's creation (its first apply, paid once by a running job); the three
        // measured ones hold one apply each over existing items, as a running job's do.
        keyedRounds: 48,
        keyedWarmup: 12,
        keys: FULL_SIZE.keys,
        sourceBatch: FULL_SIZE.sourceBatch,
        sourcePerCheckpoint: FULL_SIZE.sourcePerCheckpoint,
        pipelines: [
          { eps: 1_000, seconds: 30, every: 10, sourceShards: 2, parallelism: 1, keys: 10_000 },
          { eps: 10_000, seconds: 30, every: 10, sourceShards: 12, parallelism: 2, keys: 10_000 },
          // the same 1 k ev/s with checkpoints every 60 s: a key written many times is written once
          { eps: 1_000, seconds: 120, every: 60, sourceShards: 2, parallelism: 1, keys: 10_000 },
        ],
        ckShape: { eventsPerPacket: 500, packetsPerBatch: 10, batchesPerRound: 2 } as InputShape,
        ckScale: 1,
        recShape: { eventsPerPacket: 500, packetsPerBatch: 10, batchesPerRound: 6 } as InputShape,
        nexmark: { events: 200_000, checkpointEvery: 20_000, batch: 500, ratePerSecond: 10_000 },
      };
type Sizes = ReturnType<typeof sizes>;

function wireOf(r: PipelineResult, batch: number): WireFigures {
  return {
    eventsPerSecond: r.events / r.seconds,
    batch,
    destinationShards: r.topology[1] ?? 0,
    payloadBytesPerEvent: r.payloadBytes / r.events,
    overheadBytesPerEvent: (r.exchange.bytes - r.payloadBytes) / r.events,
    recordsPerEvent: r.exchange.records / r.events,
    eventsPerRecord: r.events / r.exchange.records,
    sourceBytesPerEvent: r.sourceBytes / r.events,
  };
}

function logPath(log: (l: string) => void, f: PathFigures): void {
  log(
    `  ${f.path}: engine ${fmt(f.engine.eps)} ev/s wall (${fmt(f.engine.cpuEps)} CPU), fair loop ${fmt(f.fair.eps)} ev/s wall (${fmt(f.fair.cpuEps)} CPU): ${pct(f.fairRatio)} (CPU ${pct(f.fairCpuRatio)}); ` +
      `${f.checkpoints.count} checkpoints ${fmt(f.checkpoints.cpuMs)} ms CPU` +
      (f.checkpoints.dirtyKeys ? ` for ${fmt(f.checkpoints.dirtyKeys)} dirty keys = ${f.checkpoints.eventsPerKey.toFixed(2)} events' CPU per key` : ''),
  );
}

function checkSame(what: string, a: number, b: number): void {
  if (a !== b) throw new Error(`${what}: the engine gave ${a}, the fair loop ${b}`);
}

type Runner = (s: Sizes, r: BenchResults, log: (l: string) => void, quick: boolean) => Promise<void>;

let pipelineMemo: Promise<PipelineResult[]> | undefined;
/** The metered whole-job runs, shared by the wire and cost parts (run once per bench run). */
function pipelines(s: Sizes, log: (l: string) => void): Promise<PipelineResult[]> {
  return (pipelineMemo ??= (async () => {
    const out: PipelineResult[] = [];
    for (const p of s.pipelines) {
      const r = await runPipeline({
        job: keyedCountJob({ sourceShards: p.sourceShards, parallelism: p.parallelism, checkpointIntervalMs: p.every * 1000 }),
        eventsPerSecond: p.eps,
        seconds: p.seconds,
        checkpointEverySeconds: p.every,
        maxBatch: 500,
        keys: p.keys,
        warmupSeconds: p.every,
      });
      out.push(r);
      log(`  whole job, ${fmt(p.eps)} ev/s: ${r.events} events, ${r.checkpoints} checkpoints`);
    }
    return out;
  })());
}

/** The spec of the `handler`, `window` or `source` part's path at these sizes. */
const pathSpec = (path: PathSpec['path'], s: Sizes): PathSpec => ({
  path,
  shape: s.keyedShape,
  sourceBatch: s.sourceBatch,
  sourcePerCheckpoint: s.sourcePerCheckpoint,
  rounds: s.keyedRounds,
  warmupRounds: s.keyedWarmup,
  keys: s.keys,
});

const RUNNERS: Record<PartName, Runner> = {
  async handler(s, r, log) {
    const f = await measurePath(pathSpec('count', s));
    checkSame('keyed count: sum of counts', f.checksum.engine, f.checksum.fair);
    checkSame('keyed count: outputs', f.outputs.engine, f.outputs.fair);
    logPath(log, f);
    r.handler = f;
  },
  async window(s, r, log) {
    const f = await measurePath(pathSpec('window', s));
    checkSame('window: windows fired', f.checksum.engine, f.checksum.fair);
    logPath(log, f);
    r.window = f;
  },
  async source(s, r, log) {
    const f = await measurePath(pathSpec('source', s));
    checkSame('source: sum of values', f.checksum.engine, f.checksum.fair);
    checkSame('source: envelopes', f.outputs.engine, f.outputs.fair);
    logPath(log, f);
    r.source = f;
  },
  async components(s, r, log, quick) {
    const f = await measureComponents({ dirtyKeys: quick ? 500 : 8_700, keys: quick ? 1_000 : 10_000, runs: quick ? 3 : 30 });
    const k = f.nsPerKey;
    log(`  per dirty key: rows ${fmt(k.rows)} ns, delta ${fmt(k.delta)} ns, spilling store ${fmt(k.spill)} ns, packed layout ${fmt(k.packed)} ns; encodePayload: output ${fmt(f.nsPerPayload.output)} ns, event ${fmt(f.nsPerPayload.event)} ns`);
    r.components = f;
  },
  async checkpoint(s, r, log, quick) {
    // the state table on DynamoDB (dynalite, in this process) in a full run: the real store, measured
    const dynamo = quick ? undefined : await checkpointTable();
    log(`  state table on ${dynamo ? 'dynalite (DynamoDB-reported write units)' : 'the twin, sized as DynamoDB bills'}`);
    const perRound = s.ckShape.eventsPerPacket * s.ckShape.packetsPerBatch * s.ckShape.batchesPerRound;
    const out: CheckpointScenario[] = [];
    try {
      for (const [i, d] of DISTRIBUTIONS.entries()) {
        const dist: KeyDistribution = { ...d.dist, keys: Math.max(10, Math.round(d.dist.keys * s.ckScale)) } as KeyDistribution;
        // 3 rounds to warm up, then two whole periods of the plan's materializeEvery (runtime/changelog.ts): the table's writes amortized
        const job = keyedCountJob();
        const rounds = encodeRounds(makeEventsOf(perRound * checkpointRounds(job, 3, 2), dist, 11), s.ckShape, 128);
        const f = await measureCheckpoint(job, rounds, 3, dynamo ? { clients: dynamo.clients, table: await dynamo.table(`bench-ckpt-${i}`) } : undefined);
        // the same checkpoints with the rows applied at every one (materializeEvery 1), on a table of its own
        const every = await measureCheckpoint(keyedCountJob({ materializeEvery: 1 }), rounds, 3, dynamo ? { clients: dynamo.clients, table: await dynamo.table(`bench-ckpt-${i}-every`) } : undefined);
        const layoutFreeFloor = Math.max(1, Math.ceil(f.dirtyBytes / KB));
        const sc: CheckpointScenario = {
          ...f,
          scenario: d.scenario,
          distribution: d.label,
          eventsPerCheckpoint: perRound,
          layoutFreeFloor,
          layoutFreeRatio: f.used.total / layoutFreeFloor,
          everyCheckpoint: { total: every.used.total, rows: every.used.rows, layoutFreeRatio: every.used.total / layoutFreeFloor },
        };
        out.push(sc);
        const wcu = (x: number) => x.toFixed(1);
        log(
          `  ${d.scenario} (${d.label}), per checkpoint over ${f.checkpoints} (the table written every ${f.materializeEvery}-th): ${fmt(f.dirtyRows)} dirty keys, ${fmt(f.dirtyBytes)} dirty B, ` +
            `${wcu(f.used.total)} WCU (rows ${wcu(f.used.rows)} in ${wcu(f.used.items)} items, delta ${wcu(f.used.delta)} of which ${f.used.s3Puts.toFixed(2)} S3 PUTs at ${S3_PUT_IN_WCU} WCU each, pointer ${wcu(f.used.pointer)}, ack ${wcu(f.used.ack)}), layout-free floor ${layoutFreeFloor}: ${sc.layoutFreeRatio.toFixed(2)}; ` +
            `rows applied at every checkpoint: ${wcu(every.used.total)} WCU (rows ${wcu(every.used.rows)}): ${sc.everyCheckpoint.layoutFreeRatio.toFixed(2)}`,
        );
      }
    } finally {
      await dynamo?.stop();
    }
    r.checkpoints = out;
  },
  async wire(s, r, log) {
    const p = await pipelines(s, log);
    r.wire = p.map((x) => wireOf(x, 500));
    log(`  ${r.wire[0]!.overheadBytesPerEvent.toFixed(2)} B per event beyond the payload`);
  },
  async recovery(s, r, log, quick) {
    const keys = quick ? s.keys : 10_000;
    const recPerRound = s.recShape.eventsPerPacket * s.recShape.packetsPerBatch * s.recShape.batchesPerRound;
    const recRounds = encodeRounds(makeEvents(recPerRound * 5, keys, 13), s.recShape, 128);
    const timer = new PortTimer();
    const recInput = loadRounds(keyedCountJob(), recRounds, (p) => timePorts(p, timer));
    const tailBatches = s.recShape.batchesPerRound - 1;
    const memRec = await runScenario({ ...recInput }, { rounds: 4, tailBatches, warmup: 1 }, timer);
    // with request latencies like AWS's, and many keys (a cold cache must read them all back)
    const latency: LatencyModel = { dynamoMs: 5, kinesisGetMs: 20, kinesisPutMs: 20 };
    const latTimer = new PortTimer();
    const latKeys = quick ? 200 : 20_000;
    const latRounds = encodeRounds(makeEvents(recPerRound * 5, latKeys, 19), s.recShape, 128);
    const latInput = loadRounds(keyedCountJob(), latRounds, (p) => timePorts(withLatency(p, latency), latTimer));
    const latRec = await runScenario({ ...latInput }, { rounds: 4, tailBatches, warmup: 1 }, latTimer);
    const eventsReplayed = tailBatches * (recPerRound / s.recShape.batchesPerRound);
    r.recovery = { memory: { ...memRec, events: eventsReplayed }, modelled: { ...latRec, events: eventsReplayed, latency, keys: latKeys } };
    log(`  in process: ${fmt(memRec.recovery.ms)} ms; with modelled AWS latencies (${fmt(latKeys)} keys): ${fmt(latRec.recovery.ms)} ms`);
  },
  async nexmark(s, r, log) {
    const figures: NexmarkFigures[] = [];
    for (const q of NEXMARK_QUERIES) {
      // a first run of the query, the same job on the same input, so that the timed one runs warm
      // code as a job running for hours does (Flink's figures are from 100 M events); its rate is
      // kept beside the timed one's
      const first = await runNexmark(q, s.nexmark);
      const f = { ...(await runNexmark(q, s.nexmark)), firstRunEpsPerCore: first.epsPerCore };
      checkSame(`nexmark ${q}: results of the two runs`, f.outputs, first.outputs);
      figures.push(f);
      log(
        `  ${q}: ${fmt(f.events)} events through ${f.stages} stages, ${f.checkpoints} checkpoints, ${fmt(f.cpuMs)} ms CPU (the twins' Kinesis's ${fmt(f.twinKinesisCpuMs)} ms left out): ` +
          `${fmt(f.epsPerCore)} ev/s per core (first run ${fmt(first.epsPerCore)}; Flink ${fmt(f.flinkPerCore)}); ${f.outputs} results`,
      );
    }
    r.nexmark = { figures, ...s.nexmark };
  },
  // the cost model's part (bench/cost.ts): monthly bills from metered runs (metering.ts) at list prices (prices.ts)
  async cost(_s, r, log, quick) {
    const { runCostPart } = await import('./cost-part.js');
    const c = await runCostPart(log, quick);
    r.cost = { transitionsPerCheckpoint: c.transitions.count, transitionsPath: c.transitions.path, scenarios: c.scenarios, prices: PRICES, assumptions: ASSUMPTIONS };
    r.costLine = c.line;
  },
  async emulated(_s, r, log) {
    const { startEmulators, rawKinesisRate, emulatedStage1, emulatorClients, endToEnd } = await import('./emulated.js');
    const t0 = Date.now();
    let emu;
    try {
      emu = await startEmulators();
      const startMs = Date.now() - t0;
      const clients = emulatorClients(emu);
      // the first pass warms the emulator (its JIT, its first streams) and the SDK; the second is the figure
      const rawCold = await rawKinesisRate(clients, 1000);
      const raw = await rawKinesisRate(clients, 2000);
      clients.kinesis.destroy();
      log(`  raw (warmed) PutRecords ${fmt(raw.putPerSec)}/s, GetRecords ${fmt(raw.getPerSec)}/s (cold: ${fmt(rawCold.putPerSec)}/s, ${fmt(rawCold.getPerSec)}/s)`);
      const shape = { eventsPerPacket: 500, packetsPerBatch: 4, batchesPerRound: 4 };
      const rounds = encodeRounds(makeEvents(8_000 * 3, 500, 17), shape, 128);
      const stage1 = await emulatedStage1(emu, keyedCountJob(), rounds, { rounds: 2, tailBatches: 3, warmup: 0 });
      log(`  keyed stage: checkpoint ${fmt(stage1.checkpointMs.at(-1) ?? 0)} ms, recovery ${fmt(stage1.recovery.ms)} ms`);
      const e2e = await endToEnd(emu, { throughputEvents: 3000, latencySeconds: 6, timeoutMs: 90_000 });
      log(`  end to end: ${fmt(e2e.throughput.eventsPerSec)} ev/s, p50 ${e2e.latency.p50} ms, p99 ${e2e.latency.p99} ms`);
      r.emulated = { rawCold, raw, stage1, e2e, startMs };
    } catch (err) {
      r.emulated = { error: err instanceof Error ? `${err.name}: ${err.message}` : String(err) };
      log(`  emulated stack failed: ${String(err)}`);
    } finally {
      await emu?.stop();
    }
  },
};

export async function runBench(o: BenchOptions = {}): Promise<BenchResults> {
  const quick = o.quick ?? false;
  const log = o.log ?? (() => undefined);
  const s = sizes(quick);
  const parts = o.only?.length ? PARTS.filter((p) => o.only!.includes(p)) : PARTS.filter((p) => !(quick && p === 'emulated'));
  const r: BenchResults = {
    version: 2,
    date: new Date().toISOString(),
    quick,
    parts,
    machine: { node: process.version, cpus: os.cpus().length, cpu: os.cpus()[0]?.model ?? 'unknown', loadAvgAtStart: os.loadavg().map((x) => Math.round(x * 100) / 100) },
  };
  pipelineMemo = undefined;
  for (const [i, p] of parts.entries()) {
    log(`[${i + 1}/${parts.length}] ${p}: ${PART_HELP[p]}`);
    const t0 = Date.now();
    await RUNNERS[p](s, r, log, quick);
    log(`  (${((Date.now() - t0) / 1000).toFixed(1)} s)`);
  }
  r.machine.loadAvgAtEnd = os.loadavg().map((x) => Math.round(x * 100) / 100);
  r.summary = summaryLine(r);
  return r;
}

/** dynalite alone (in this process), with a way to create state tables in it. */
async function checkpointTable() {
  const { startEmulators } = await import('../local/emulators.js');
  const { createAwsClients } = await import('../shared/adapters/aws/clients.js');
  const { CreateTableCommand, DescribeTableCommand } = await import('@aws-sdk/client-dynamodb');
  const emu = await startEmulators({ services: ['dynamodb'] });
  const clients = createAwsClients({ region: emu.region, credentials: emu.credentials, endpoints: emu.endpoints, maxAttempts: 3 });
  return {
    clients,
    async table(name: string) {
      await clients.dynamodb.send(
        new CreateTableCommand({
          TableName: name,
          BillingMode: 'PAY_PER_REQUEST',
          KeySchema: [
            { AttributeName: 'pk', KeyType: 'HASH' },
            { AttributeName: 'sk', KeyType: 'RANGE' },
          ],
          AttributeDefinitions: [
            { AttributeName: 'pk', AttributeType: 'S' },
            { AttributeName: 'sk', AttributeType: 'S' },
          ],
        }),
      );
      // dynalite creates tables asynchronously
      for (let i = 0; i < 100; i++) {
        const d = await clients.dynamodb.send(new DescribeTableCommand({ TableName: name }));
        if (d.Table?.TableStatus === 'ACTIVE') break;
        await new Promise((res) => setTimeout(res, 20));
      }
      return name;
    },
    async stop() {
      clients.dynamodb.destroy();
      await emu.stop();
    },
  };
}

// ------------------------------------------------------------------------------------------ CLI

const USAGE = `Usage: npm run bench -- [options]

Runs Sluice's benchmarks in this process (and on the emulated AWS stack), each next to a baseline
measured in the same run. Rates are events over total wall time and over CPU time.

Options:
  --help            this text; runs nothing
  --quick           tiny inputs, no emulators (a smoke run); writes nothing
  --only <parts>    only these parts (comma-separated); writes nothing
  --out <dir>       where a full run writes latest.json and latest.svg (default bench/results);
                    with --out, docs/performance.md is left alone

Only a full run (no --quick, no --only) writes results; into bench/results, it also rewrites the
figures docs/performance.md quotes from them.

Parts:
${PARTS.map((p) => `  ${p.padEnd(11)} ${PART_HELP[p]}`).join('\n')}
`;

export interface CliArgs {
  readonly help: boolean;
  readonly quick: boolean;
  readonly only: PartName[];
  readonly out: string | undefined;
}

/** Parses the command line; throws on anything it does not know. */
export function parseArgs(args: readonly string[]): CliArgs {
  let help = false;
  let quick = false;
  let only: PartName[] = [];
  let out: string | undefined;
  for (let i = 0; i < args.length; i++) {
    const a = args[i]!;
    const value = () => {
      const v = args[++i];
      if (v === undefined || v.startsWith('--')) throw new Error(`${a} needs a value`);
      return v;
    };
    if (a === '--help' || a === '-h') help = true;
    else if (a === '--quick') quick = true;
    else if (a === '--only' || a.startsWith('--only=')) {
      const list = a.includes('=') ? a.slice(a.indexOf('=') + 1) : value();
      for (const p of list.split(',').filter(Boolean)) {
        if (!(PARTS as readonly string[]).includes(p)) throw new Error(`unknown part "${p}" (parts: ${PARTS.join(', ')})`);
        only.push(p as PartName);
      }
      if (!only.length) throw new Error('--only needs at least one part');
    } else if (a === '--out' || a.startsWith('--out=')) out = a.includes('=') ? a.slice(a.indexOf('=') + 1) : value();
    else throw new Error(`unknown option "${a}"`);
  }
  only = [...new Set(only)];
  return { help, quick, only, out };
}

async function main(): Promise<number> {
  let args: CliArgs;
  try {
    args = parseArgs(process.argv.slice(2));
  } catch (err) {
    process.stderr.write(`bench: ${(err as Error).message}\n\n${USAGE}`);
    return 2;
  }
  if (args.help) {
    process.stdout.write(USAGE);
    return 0;
  }
  const full = !args.quick && !args.only.length;
  const r = await runBench({ quick: args.quick, only: args.only, log: (l) => process.stderr.write(`${l}\n`) });
  process.stdout.write(`${renderTable(r)}\n\n`);
  if (full) {
    const here = dirname(fileURLToPath(import.meta.url));
    const outDir = args.out ?? join(here, 'results');
    mkdirSync(outDir, { recursive: true });
    writeFileSync(join(outDir, 'latest.json'), `${JSON.stringify(r, null, 2)}\n`);
    writeFileSync(join(outDir, 'latest.svg'), renderSvg(r));
    process.stdout.write(`wrote ${join(outDir, 'latest.json')} and ${join(outDir, 'latest.svg')}\n`);
    // the page quotes the committed results, so only a run that writes those rewrites it
    if (args.out === undefined) {
      const page = join(here, '..', 'docs', 'performance.md');
      writeFileSync(page, withResults(readFileSync(page, 'utf8'), r));
      process.stdout.write(`rewrote the figures in ${page}; its prose is still yours to update\n`);
    }
  } else process.stdout.write(`(${args.quick ? '--quick' : '--only'}: nothing written; only a full run writes results)\n`);
  process.stdout.write(`${r.summary}\n`);
  if (r.costLine) process.stdout.write(`${r.costLine}\n`);
  return 0;
}

if (import.meta.url === `file://${process.argv[1]}` || process.argv[1]?.endsWith('bench/main.ts')) {
  main().then(
    (code) => process.exit(code),
    (err: unknown) => {
      process.stderr.write(`bench failed: ${err instanceof Error ? err.stack : String(err)}\n`);
      process.exit(1);
    },
  );
}
