/**
 * `npm run bench`: Sluice's benchmarks, each next to a baseline measured in the same run.
 *
 *   npm run bench                       everything (in process, then the emulated AWS stack)
 *   npm run bench -- --no-emulators     in-process sections only
 *   npm run bench -- --quick            tiny inputs, no emulators, no files written (smoke test)
 *   npm run bench -- --out DIR          where latest.json and latest.svg go (default bench/results)
 *   npm run bench -- --hotpath-only     the hot path section only: prints its lines, writes nothing
 *
 * Prints a markdown table, writes `latest.json` and `latest.svg`, and ends with one summary line:
 * `bench: hotpath_eps=… hotpath_ratio=… overhead_bytes=… ckpt_wcu_ratio=… usd_per_million=…`.
 * Performance is never asserted: the numbers are for reading (shared machines are noisy).
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createMemoryPorts } from '../shared/adapters/memory/memory-ports.js';
import { measureCheckpoint, type CheckpointFigures } from './checkpoint.js';
import { costOf, transitionsPerCheckpoint, type AslState, type CostScenario } from './cost.js';
import type { EmulatedStage1, EndToEnd, RawRate } from './emulated.js';
import { handCount, handWindow, measureHotpath, type HotpathRun } from './hotpath.js';
import { e2eJob, keyedCountJob, makeEvents, windowJob } from './jobs.js';
import { runPipeline, type PipelineResult } from './pipeline.js';
import { ASSUMPTIONS, FLINK_FLOOR_PER_MONTH, PRICES } from './prices.js';
import { runScenario, PortTimer, timePorts, withLatency, type LatencyModel, type ScenarioResult } from './stage1-scenario.js';
import { encodeRounds, loadRounds, type InputShape } from './stage1-input.js';
import { chart, fmt, type Panel } from './svg.js';

export interface BenchOptions {
  readonly quick?: boolean;
  readonly emulators?: boolean;
  readonly log?: (line: string) => void;
}

export interface HotpathFigures extends HotpathRun {
  /** headline: median over batches of the engine's events/s on one core */
  readonly eps: number;
  /** headline: median over batch pairs of engine speed ÷ hand-written loop speed */
  readonly ratio: number;
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

export interface BenchResults {
  readonly version: 1;
  readonly date: string;
  readonly quick: boolean;
  readonly machine: { node: string; cpus: number; cpu: string; loadAvgAtStart: number[]; loadAvgAtEnd?: number[] };
  readonly hotpath: { count: HotpathFigures; window: HotpathFigures; shape: InputShape; keys: number };
  readonly wire: WireFigures[];
  readonly checkpoints: Array<CheckpointFigures & { scenario: string; eventsPerCheckpoint: number }>;
  readonly recovery: {
    memory: ScenarioResult & { events: number };
    /** the same on the twins with AWS-like request latencies (an assumption: see latency) */
    modelled: ScenarioResult & { events: number; latency: LatencyModel; keys: number };
  };
  readonly cost: { transitionsPerCheckpoint: number; transitionsPath: string[]; scenarios: CostScenario[]; prices: typeof PRICES; assumptions: typeof ASSUMPTIONS };
  readonly emulated?: { raw: RawRate; stage1: EmulatedStage1; e2e: EndToEnd; startMs: number } | { error: string };
  summary?: string;
}

const sizes = (quick: boolean) =>
  quick
    ? {
        hotShape: { eventsPerPacket: 50, packetsPerBatch: 2, batchesPerRound: 1 },
        hotRounds: 3,
        hotWarmup: 1,
        hotReps: 1,
        keys: 50,
        pipeline: [{ eps: 200, seconds: 2, every: 1, sourceShards: 1, parallelism: 1, keys: 100 }],
        ckShape: { eventsPerPacket: 50, packetsPerBatch: 2, batchesPerRound: 1 },
        ckKeys: [{ name: 'tiny', keys: 20 }],
        recShape: { eventsPerPacket: 50, packetsPerBatch: 2, batchesPerRound: 3 },
      }
    : {
        hotShape: { eventsPerPacket: 500, packetsPerBatch: 20, batchesPerRound: 2 },
        hotRounds: 10,
        hotWarmup: 2,
        hotReps: 2,
        keys: 10_000,
        pipeline: [
          { eps: 1_000, seconds: 30, every: 10, sourceShards: 2, parallelism: 1, keys: 10_000 },
          { eps: 10_000, seconds: 30, every: 10, sourceShards: 12, parallelism: 2, keys: 10_000 },
          // the same 1 k ev/s with checkpoints every 60 s: a key written many times is written once
          { eps: 1_000, seconds: 120, every: 60, sourceShards: 2, parallelism: 1, keys: 10_000 },
        ],
        ckShape: { eventsPerPacket: 500, packetsPerBatch: 10, batchesPerRound: 2 },
        ckKeys: [
          { name: 'hot keys: 1 k keys', keys: 1_000 },
          { name: 'typical: 10 k keys', keys: 10_000 },
          { name: 'long tail: 100 k keys', keys: 100_000 },
        ],
        recShape: { eventsPerPacket: 500, packetsPerBatch: 10, batchesPerRound: 6 },
      };

async function hotpath(kind: 'count' | 'window', s: ReturnType<typeof sizes>, log: (l: string) => void): Promise<HotpathFigures> {
  const perRound = s.hotShape.eventsPerPacket * s.hotShape.packetsPerBatch * s.hotShape.batchesPerRound;
  const rounds = encodeRounds(makeEvents(perRound * s.hotRounds, s.keys), s.hotShape, 128);
  const r =
    kind === 'count'
      ? await measureHotpath(() => keyedCountJob(), handCount, rounds, s.hotWarmup, s.hotReps)
      : await measureHotpath(() => windowJob(), handWindow, rounds, s.hotWarmup, s.hotReps);
  if (kind === 'count' && r.checksum.engine !== perRound * s.hotRounds) throw new Error(`hot path: the engine counted ${r.checksum.engine} events of ${perRound * s.hotRounds}`);
  if (kind === 'count' && r.checksum.hand !== perRound * s.hotRounds) throw new Error(`hot path: the hand-written loop counted ${r.checksum.hand} events`);
  if (kind === 'window' && r.outputs.engine !== r.outputs.hand) throw new Error(`hot path: the engine fired ${r.outputs.engine} windows, the hand-written loop ${r.outputs.hand}`);
  log(`  ${kind}: engine ${fmt(r.engineMedianEps)} ev/s, hand-written ${fmt(r.handMedianEps)} ev/s (medians of ${r.ratios.length} batches), ratio ${(100 * r.medianRatio).toFixed(1)} %`);
  return { ...r, eps: r.engineMedianEps, ratio: r.medianRatio };
}

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

/** The coordinator's state transitions per checkpoint, from the synthesized workflow (cached after the first synthesis). */
async function coordinatorTransitions(quick: boolean): Promise<{ count: number; path: string[] }> {
  if (quick) return { count: 7, path: ['(quick: not synthesized)'] };
  const { cachedCoordinatorDefinition } = await import('../local/coordinator-cache.js');
  const def = cachedCoordinatorDefinition(e2eJob());
  return transitionsPerCheckpoint(def.definition.States as unknown as Record<string, AslState>);
}

export async function runBench(o: BenchOptions = {}): Promise<BenchResults> {
  const quick = o.quick ?? false;
  const log = o.log ?? (() => undefined);
  const s = sizes(quick);
  const loadAvgAtStart = os.loadavg().map((x) => Math.round(x * 100) / 100);

  log('hot path (in process, memory ports)');
  const count = await hotpath('count', s, log);
  const window = await hotpath('window', s, log);

  log('whole job in process, metered (wire efficiency, cost)');
  const transitions = await coordinatorTransitions(quick);
  const pipelines: PipelineResult[] = [];
  for (const p of s.pipeline) {
    const r = await runPipeline({
      job: keyedCountJob({ sourceShards: p.sourceShards, parallelism: p.parallelism, checkpointIntervalMs: p.every * 1000 }),
      eventsPerSecond: p.eps,
      seconds: p.seconds,
      checkpointEverySeconds: p.every,
      maxBatch: 500,
      keys: p.keys,
      warmupSeconds: p.every,
    });
    pipelines.push(r);
    log(`  ${fmt(p.eps)} ev/s: ${r.events} events, ${r.checkpoints} checkpoints`);
  }
  const wire = pipelines.map((r) => wireOf(r, 500));
  const scenarios = pipelines.map((r) => costOf(r, transitions.count));

  // the state table on DynamoDB (dynalite, in this process) unless emulators are off: the real store, measured
  const ckDynamo = (o.emulators ?? !quick) ? await checkpointTable() : undefined;
  log(`checkpoints (state table on ${ckDynamo ? 'dynalite: the real store, DynamoDB-reported write units' : 'the twin, sized as DynamoDB bills'})`);
  const checkpoints: BenchResults['checkpoints'] = [];
  const ckPerRound = s.ckShape.eventsPerPacket * s.ckShape.packetsPerBatch * s.ckShape.batchesPerRound;
  try {
    for (const [i, c] of s.ckKeys.entries()) {
      const rounds = encodeRounds(makeEvents(ckPerRound * 4, c.keys, 11), s.ckShape, 128);
      const f = await measureCheckpoint(keyedCountJob(), rounds, 3, ckDynamo ? { clients: ckDynamo.clients, table: await ckDynamo.table(`bench-ckpt-${i}`) } : undefined);
      checkpoints.push({ ...f, scenario: c.name, eventsPerCheckpoint: ckPerRound });
      log(`  ${c.name}: ${f.dirtyRows} dirty rows, ${f.used.total} WCU (rows ${f.used.rows} in ${f.used.items} items, delta ${f.used.delta}), floor ${f.floor}, ratio ${f.ratio.toFixed(2)}, ${f.ms.toFixed(0)} ms`);
    }
  } finally {
    await ckDynamo?.stop();
  }

  log('recovery (in process, memory ports)');
  const recPerRound = s.recShape.eventsPerPacket * s.recShape.packetsPerBatch * s.recShape.batchesPerRound;
  const recRounds = encodeRounds(makeEvents(recPerRound * 5, s.keys, 13), s.recShape, 128);
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
  const recovery = { memory: { ...memRec, events: eventsReplayed }, modelled: { ...latRec, events: eventsReplayed, latency, keys: latKeys } };
  log(`  in process: ${fmt(memRec.recovery.ms)} ms; with modelled AWS latencies (${fmt(latKeys)} keys): ${fmt(latRec.recovery.ms)} ms`);

  const results: BenchResults = {
    version: 1,
    date: new Date().toISOString(),
    quick,
    machine: { node: process.version, cpus: os.cpus().length, cpu: os.cpus()[0]?.model ?? 'unknown', loadAvgAtStart },
    hotpath: { count, window, shape: s.hotShape, keys: s.keys },
    wire,
    checkpoints,
    recovery,
    cost: { transitionsPerCheckpoint: transitions.count, transitionsPath: transitions.path, scenarios, prices: PRICES, assumptions: ASSUMPTIONS },
  };

  if (o.emulators ?? !quick) {
    log('emulated AWS stack (kinesis-mock, dynalite, fauxqs)');
    const { startEmulators, rawKinesisRate, emulatedStage1, emulatorClients, endToEnd } = await import('./emulated.js');
    const t0 = Date.now();
    let emu;
    try {
      emu = await startEmulators();
      const startMs = Date.now() - t0;
      const clients = emulatorClients(emu);
      const raw = await rawKinesisRate(clients, 1000);
      clients.kinesis.destroy();
      log(`  raw PutRecords ${fmt(raw.putPerSec)}/s, GetRecords ${fmt(raw.getPerSec)}/s`);
      const shape = { eventsPerPacket: 500, packetsPerBatch: 4, batchesPerRound: 4 };
      const rounds = encodeRounds(makeEvents(8_000 * 3, 500, 17), shape, 128);
      const stage1 = await emulatedStage1(emu, keyedCountJob(), rounds, { rounds: 2, tailBatches: 3, warmup: 0 });
      log(`  keyed stage: checkpoint ${fmt(stage1.checkpointMs.at(-1) ?? 0)} ms, recovery ${fmt(stage1.recovery.ms)} ms`);
      const e2e = await endToEnd(emu, { throughputEvents: 3000, latencySeconds: 6, timeoutMs: 90_000 });
      log(`  end to end: ${fmt(e2e.throughput.eventsPerSec)} ev/s, p50 ${e2e.latency.p50} ms, p99 ${e2e.latency.p99} ms`);
      (results as { emulated?: BenchResults['emulated'] }).emulated = { raw, stage1, e2e, startMs };
    } catch (err) {
      (results as { emulated?: BenchResults['emulated'] }).emulated = { error: err instanceof Error ? `${err.name}: ${err.message}` : String(err) };
      log(`  emulated stack failed: ${String(err)}`);
    } finally {
      await emu?.stop();
    }
  }
  results.machine.loadAvgAtEnd = os.loadavg().map((x) => Math.round(x * 100) / 100);
  results.summary = summaryLine(results);
  return results;
}

/** dynalite alone (in this process), with a way to create state tables in it. */
async function checkpointTable() {
  const { startEmulators } = await import('../local/emulators.js');
  const { createAwsClients } = await import('../shared/adapters/aws/clients.js');
  const { CreateTableCommand } = await import('@aws-sdk/client-dynamodb');
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
      const { DescribeTableCommand } = await import('@aws-sdk/client-dynamodb');
      for (let i = 0; i < 100; i++) {
        const d = await clients.dynamodb.send(new DescribeTableCommand({ TableName: name }));
        if (d.Table?.TableStatus === 'ACTIVE') break;
        await new Promise((r) => setTimeout(r, 20));
      }
      return name;
    },
    async stop() {
      clients.dynamodb.destroy();
      await emu.stop();
    },
  };
}

// ------------------------------------------------------------------------------------------ output

const typicalCheckpoint = (r: BenchResults) => r.checkpoints.find((c) => c.scenario.startsWith('typical')) ?? r.checkpoints[0]!;
const headlineWire = (r: BenchResults) => r.wire[0]!;

export function summaryLine(r: BenchResults): string {
  const ck = typicalCheckpoint(r);
  return [
    'bench:',
    `hotpath_eps=${Math.round(r.hotpath.count.eps)}`,
    `hotpath_ratio=${r.hotpath.count.ratio.toFixed(3)}`,
    `overhead_bytes=${headlineWire(r).overheadBytesPerEvent.toFixed(2)}`,
    `ckpt_wcu_ratio=${ck.ratio.toFixed(2)}`,
    `usd_per_million=${r.cost.scenarios[0]!.usdPerMillion.toFixed(4)}`,
  ].join(' ');
}

const usd = (x: number) => (x >= 100 ? `$${x.toFixed(0)}` : x >= 1 ? `$${x.toFixed(2)}` : `$${x.toFixed(4)}`);

export function renderTable(r: BenchResults): string {
  const rows: string[][] = [];
  const add = (...c: string[]) => rows.push(c);
  const hc = r.hotpath.count;
  const hw = r.hotpath.window;
  add('Hot path: keyed count (ValueState), events/s/core (median batch)', fmt(hc.eps), `hand-written loop ${fmt(hc.handMedianEps)}`, `${(100 * hc.ratio).toFixed(1)} % (targets ≥ 1 M/s, ≥ 50 %)`);
  add('Hot path: tumbling window aggregate, events/s/core (median batch)', fmt(hw.eps), `hand-written loop ${fmt(hw.handMedianEps)}`, `${(100 * hw.ratio).toFixed(1)} %`);
  add('Hot path: keyed count over CPU time (all threads)', fmt(hc.engineCpuEps), `hand-written loop ${fmt(hc.handCpuEps)}`, `${((100 * hc.engineCpuEps) / hc.handCpuEps).toFixed(1)} %`);
  add('Hot path: ms per batch (keyed count, mean)', `${hc.engine.msPerBatch.toFixed(2)} ms / ${fmt(hc.engine.events / hc.engine.batches)} events`, `${hc.hand.msPerBatch.toFixed(2)} ms`, '');
  for (const w of r.wire) {
    add(
      `Wire: bytes/event beyond the payload (${fmt(w.eventsPerSecond)} ev/s, batch ${w.batch}, ${w.destinationShards} dest. shards)`,
      w.overheadBytesPerEvent.toFixed(2),
      `payload ${w.payloadBytesPerEvent.toFixed(1)} B (source JSON ${w.sourceBytesPerEvent.toFixed(1)} B)`,
      'target ≤ 12 B',
    );
    add(`Wire: Kinesis records per event (${fmt(w.eventsPerSecond)} ev/s)`, w.recordsPerEvent.toFixed(5), `unpacked: 1`, `${fmt(w.eventsPerRecord)} events per record`);
  }
  const em = r.emulated && 'raw' in r.emulated ? r.emulated : undefined;
  if (em) {
    const rawBound = Math.min(em.raw.putPerSec, em.raw.getPerSec);
    add(
      'End to end (emulated stack): throughput, events/s',
      fmt(em.e2e.throughput.eventsPerSec),
      `emulator raw: PutRecords ${fmt(em.raw.putPerSec)}/s, GetRecords ${fmt(em.raw.getPerSec)}/s (one after the other: ${fmt(em.raw.putGetPerSec)}/s)`,
      `${((100 * em.e2e.throughput.eventsPerSec) / rawBound).toFixed(0)} % of the slower of the two`,
    );
    add('End to end: latency producer → sink write, p50 / p99', `${em.e2e.latency.p50} / ${em.e2e.latency.p99} ms`, `at ${em.e2e.latency.rate} ev/s`, `to commit: ${em.e2e.latency.commitP50} / ${em.e2e.latency.commitP99} ms`);
  } else if (r.emulated) add('End to end (emulated stack)', 'failed', (r.emulated as { error: string }).error.slice(0, 80), '');
  for (const c of r.checkpoints) {
    add(
      `Checkpoint WCU (${c.scenario}, ${fmt(c.eventsPerCheckpoint)} events)`,
      `${c.used.total} (rows ${c.used.rows} in ${c.used.items} items, delta ${c.used.delta}${c.used.s3Puts ? ' = 1 S3 PUT' : ''}, ${c.store})`,
      `floor ${c.floor} (${fmt(c.dirtyBytes)} dirty B in ${c.dirtyKeyGroups} key groups)`,
      `ratio ${c.ratio.toFixed(2)}; full snapshot ${c.full.writeUnits}`,
    );
  }
  const ck = typicalCheckpoint(r);
  add('Checkpoint: requests / bytes written (typical)', `${ck.used.requests} req, ${fmt(ck.used.bytes)} B`, `${ck.dirtyRows} dirty rows`, `${(ck.used.bytes / ck.dirtyBytes).toFixed(1)}× the dirty bytes`);
  add('Checkpoint duration, in process (typical)', `${ck.ms.toFixed(1)} ms`, '', '');
  if (em) {
    const n = em.stage1.checkpointMs;
    add('Checkpoint duration on dynalite (500 dirty keys)', `${fmt(n.reduce((a, b) => a + b, 0) / n.length)} ms`, `batch of ${fmt(em.stage1.eventsPerBatch)} events: ${fmt(em.stage1.batchMs.reduce((a, b) => a + b, 0) / em.stage1.batchMs.length)} ms`, `control WCU: model ${em.stage1.writeUnits.model} = dynalite ${em.stage1.writeUnits.dynalite}; state ${em.stage1.writeUnits.state} (dynalite)`);
  }
  const mr = r.recovery.memory.recovery;
  add('Recovery in process: restore + replay + batch', `${mr.ms.toFixed(1)} ms for ${mr.replayedRecords} records (${fmt(r.recovery.memory.events)} events)`, `raw read ${mr.rawReadMs.toFixed(1)} ms; live ${mr.liveMs.toFixed(1)} ms`, `${fmt(r.recovery.memory.events / (mr.ms / 1000))} events/s`);
  const lr = r.recovery.modelled;
  add(
    `Recovery, modelled AWS latencies (${lr.latency.dynamoMs} ms DynamoDB, ${lr.latency.kinesisGetMs} ms GetRecords; ${fmt(lr.keys)} keys)`,
    `${fmt(lr.recovery.ms)} ms for ${fmt(lr.events)} events`,
    `redo of the delta's rows ${fmt(lr.recovery.ports['state.applyRows']?.ms ?? 0)} ms; ${lr.recovery.ports['state.getRows']?.calls ?? 0} state reads (${fmt(lr.recovery.ports['state.getRows']?.ms ?? 0)} ms summed, 8 at a time); replay reads ${fmt(lr.recovery.ports['reader.read']?.ms ?? 0)} ms`,
    `${fmt(lr.events / (lr.recovery.ms / 1000))} events/s`,
  );
  if (em) {
    const er = em.stage1.recovery;
    add('Recovery on the emulators: restore + replay + batch', `${fmt(er.ms)} ms for ${er.replayedRecords} records (${fmt(er.replayedEvents)} events)`, `raw read ${fmt(er.rawReadMs)} ms`, `redo of the delta's rows: ${fmt(er.ports['state.applyRows']?.ms ?? 0)} ms`);
  }
  for (const c of r.cost.scenarios) {
    add(`Cost at ${fmt(c.eventsPerSecond)} events/s, checkpoint every ${c.checkpointIntervalS} s`, `${usd(c.usdPerMillion)} per 1 M events`, `${usd(c.usdPerMonth)}/month`, `Managed Flink floor ${usd(FLINK_FLOOR_PER_MONTH)}/month`);
  }
  const head = ['measure', 'Sluice', 'baseline (same run)', 'ratio / target'];
  const out = [`| ${head.join(' | ')} |`, `|${head.map(() => '---').join('|')}|`, ...rows.map((c) => `| ${c.join(' | ')} |`)];
  // cost breakdown
  out.push('', `Cost per 1 M events by service (us-east-1 list prices, ${PRICES.date}):`, '');
  const sc = r.cost.scenarios;
  const name = (c: CostScenario) => `${fmt(c.eventsPerSecond)} ev/s, ${c.checkpointIntervalS} s`;
  out.push(`| service | item | ${sc.map((c) => `${name(c)}: quantity`).join(' | ')} | ${sc.map((c) => `${name(c)}: $`).join(' | ')} |`);
  out.push(`|---|---|${sc.map(() => '---').join('|')}|${sc.map(() => '---').join('|')}|`);
  const first = sc[0]!;
  first.lines.forEach((l, i) => {
    out.push(`| ${l.service} | ${l.item} | ${sc.map((c) => `${fmt(c.lines[i]!.quantity)} ${c.lines[i]!.unit}`).join(' | ')} | ${sc.map((c) => usd(c.lines[i]!.usdPerMillion)).join(' | ')} |`);
  });
  out.push(`| **total** | | ${sc.map(() => '').join(' | ')} | ${sc.map((c) => `**${usd(c.usdPerMillion)}**`).join(' | ')} |`);
  return out.join('\n');
}

export function renderSvg(r: BenchResults): string {
  const em = r.emulated && 'raw' in r.emulated ? r.emulated : undefined;
  const blue = '#2e86de';
  const grey = '#95a5a6';
  const green = '#27ae60';
  const orange = '#e67e22';
  const panels: Panel[] = [
    {
      title: 'Hot path, events/s on one core (in process, warm cache)',
      unit: 'ev/s',
      bars: [
        { label: 'keyed count: Sluice', value: r.hotpath.count.eps, color: blue },
        { label: 'keyed count: hand-written loop', value: r.hotpath.count.handMedianEps, color: grey },
        { label: 'tumbling window: Sluice', value: r.hotpath.window.eps, color: blue },
        { label: 'tumbling window: hand-written loop', value: r.hotpath.window.handMedianEps, color: grey },
      ],
      marker: { value: 1e6, label: 'target 1 M' },
    },
    {
      title: `Checkpoint write units (${typicalCheckpoint(r).scenario})`,
      unit: 'WCU',
      bars: [
        { label: 'floor (dirty bytes, one item per key group)', value: typicalCheckpoint(r).floor, color: green },
        { label: 'Sluice: packed items + delta + lease + ack', value: typicalCheckpoint(r).used.total, color: blue },
        { label: 'one item per key, before packing (2026-11-29 run)', value: 6567, color: orange },
        { label: 'full snapshot', value: typicalCheckpoint(r).full.writeUnits, color: grey },
      ],
    },
    {
      title: 'Cost per month (us-east-1 list prices)',
      unit: '$',
      bars: [
        ...r.cost.scenarios.map((c) => ({ label: `Sluice, ${fmt(c.eventsPerSecond)} ev/s, checkpoint ${c.checkpointIntervalS} s`, value: c.usdPerMonth, color: blue, text: `$${c.usdPerMonth.toFixed(0)}/month` })),
        { label: 'Managed Flink floor (2 KPU)', value: FLINK_FLOOR_PER_MONTH, color: grey, text: `$${FLINK_FLOOR_PER_MONTH.toFixed(0)}/month` },
      ],
    },
  ];
  if (em) {
    panels.push({
      title: 'Emulated stack (one machine: kinesis-mock, dynalite)',
      unit: 'ev/s',
      bars: [
        { label: 'emulator raw PutRecords', value: em.raw.putPerSec, color: grey, text: `${fmt(em.raw.putPerSec)} rec/s` },
        { label: 'emulator raw GetRecords', value: em.raw.getPerSec, color: grey, text: `${fmt(em.raw.getPerSec)} rec/s` },
        { label: 'Sluice end to end', value: em.e2e.throughput.eventsPerSec, color: blue, text: `${fmt(em.e2e.throughput.eventsPerSec)} ev/s, p50 ${em.e2e.latency.p50} ms, p99 ${em.e2e.latency.p99} ms` },
      ],
    });
  }
  return chart('Sluice benchmarks', `${r.date} · ${r.machine.cpu} ×${r.machine.cpus} · Node ${r.machine.node} · load ${r.machine.loadAvgAtStart.join(' ')}`, panels);
}

async function main(): Promise<void> {
  const args = process.argv.slice(2);
  const quick = args.includes('--quick');
  const emulators = !args.includes('--no-emulators') && !quick;
  const outIdx = args.indexOf('--out');
  const outDir = outIdx >= 0 ? args[outIdx + 1]! : join(dirname(fileURLToPath(import.meta.url)), 'results');
  void createMemoryPorts;
  if (args[args.indexOf('--only') + 1] === 'cost' && args.includes('--only')) {
    const { runCostPart } = await import('./cost-part.js');
    process.stdout.write(`${await runCostPart((l) => process.stdout.write(`${l}\n`), quick)}\n`);
    return;
  }
  if (args.includes('--hotpath-only')) {
    const s = sizes(quick);
    const log = (l: string) => process.stdout.write(`${l}\n`);
    const count = await hotpath('count', s, log);
    const window = await hotpath('window', s, log);
    log(`hotpath: count_eps=${Math.round(count.eps)} count_ratio=${count.ratio.toFixed(3)} count_cpu_ratio=${(count.engineCpuEps / count.handCpuEps).toFixed(3)} window_eps=${Math.round(window.eps)} window_ratio=${window.ratio.toFixed(3)}`);
    return;
  }
  const r = await runBench({ quick, emulators, log: (l) => process.stderr.write(`${l}\n`) });
  process.stdout.write(`${renderTable(r)}\n\n`);
  if (!quick || outIdx >= 0) {
    mkdirSync(outDir, { recursive: true });
    writeFileSync(join(outDir, 'latest.json'), `${JSON.stringify(r, null, 2)}\n`);
    writeFileSync(join(outDir, 'latest.svg'), renderSvg(r));
    process.stdout.write(`wrote ${join(outDir, 'latest.json')} and ${join(outDir, 'latest.svg')}\n`);
  }
  process.stdout.write(`${r.summary}\n`);
}

if (import.meta.url === `file://${process.argv[1]}` || process.argv[1]?.endsWith('bench/main.ts')) {
  main().then(
    () => process.exit(0),
    (err: unknown) => {
      process.stderr.write(`bench failed: ${err instanceof Error ? err.stack : String(err)}\n`);
      process.exit(1);
    },
  );
}
