/** What a bench run prints and writes: the summary line, the table and the SVG chart of its figures. */
import { byService, type MonthlyCost } from './cost.js';
import type { PathFigures } from './handler.js';
import type { BenchResults, CheckpointScenario } from './main.js';
import { FLINK_FLOOR_PER_MONTH, PRICES } from './prices.js';
import { chart, fmt, type Panel } from './svg.js';

export const pct = (x: number) => `${(100 * x).toFixed(1)} %`;

const ckOf = (r: BenchResults, s: CheckpointScenario['scenario']) => r.checkpoints?.find((c) => c.scenario === s);

/** The summary line; a figure whose part did not run is `-`. */
export function summaryLine(r: BenchResults): string {
  const n = (x: number | undefined, digits = 0) => (x === undefined || !Number.isFinite(x) ? '-' : digits ? x.toFixed(digits) : String(Math.round(x)));
  const q5 = r.nexmark?.figures.find((f) => f.query === 'q5');
  return [
    'bench:',
    `handler_eps=${n(r.handler?.engine.eps)}`,
    `fair_ratio=${n(r.handler?.fairRatio, 3)}`,
    `source_eps=${n(r.source?.engine.eps)}`,
    `window_fair_ratio=${n(r.window?.fairRatio, 3)}`,
    `ckpt_cpu_events_per_key=${n(r.handler?.checkpoints.eventsPerKey, 2)}`,
    `ckpt_wcu_uniform=${n(ckOf(r, 'uniform')?.layoutFreeRatio, 2)}`,
    `ckpt_wcu_hot=${n(ckOf(r, 'hot')?.layoutFreeRatio, 2)}`,
    `ckpt_wcu_tail=${n(ckOf(r, 'tail')?.layoutFreeRatio, 2)}`,
    `nexmark_q5_eps_core=${n(q5?.epsPerCore)}`,
    `overhead_bytes=${n(r.wire?.[0]?.overheadBytesPerEvent, 2)}`,
  ].join(' ');
}

const usd = (x: number) => (x >= 100 ? `$${x.toFixed(0)}` : x >= 1 ? `$${x.toFixed(2)}` : `$${x.toFixed(4)}`);

function pathRows(add: (...c: string[]) => void, name: string, f: PathFigures): void {
  const sh = f.shape;
  add(
    `${name}: events/s over total wall time (${fmt(sh.eventsPerCheckpoint)} events per checkpoint, checkpoints included; ${sh.keys})`,
    fmt(f.engine.eps),
    `fair loop ${fmt(f.fair.eps)}`,
    pct(f.fairRatio),
  );
  add(`${name}: events/s over total CPU time`, fmt(f.engine.cpuEps), `fair loop ${fmt(f.fair.cpuEps)}`, pct(f.fairCpuRatio));
  add(
    `${name}: checkpoints (barrier batches)`,
    `${f.checkpoints.count} × ${fmt(f.checkpoints.cpuMs / Math.max(1, f.checkpoints.count))} ms CPU`,
    f.checkpoints.dirtyKeys ? `${fmt(f.checkpoints.dirtyKeys / f.checkpoints.count)} dirty keys each` : '',
    f.checkpoints.dirtyKeys ? `${f.checkpoints.eventsPerKey.toFixed(2)} events' CPU per dirty key` : `${pct(f.checkpoints.cpuMs / f.engine.cpuMs)} of the CPU`,
  );
}

/** The cost model's rows (its own section of the table): dollars per month by service, per scenario. */
function renderCost(r: BenchResults, out: string[]): void {
  if (!r.cost) return;
  const sc = r.cost.scenarios;
  out.push('', `Monthly cost by service (bench/cost.ts; us-east-1 list prices, ${PRICES.date}; Managed Flink floor ${usd(FLINK_FLOOR_PER_MONTH)}/month):`, '');
  const name = (c: MonthlyCost) => (c.eventsPerSecond ? `${fmt(c.eventsPerSecond)} ev/s, ${c.checkpointIntervalS} s${c.expressCheckpoints ? ', Express rounds' : ''}` : 'idle');
  const services = [...new Set(sc.flatMap((c) => byService(c).map(([s]) => s)))];
  out.push(`| service | ${sc.map(name).join(' | ')} |`);
  out.push(`|---|${sc.map(() => '---').join('|')}|`);
  for (const service of services) out.push(`| ${service} | ${sc.map((c) => usd(byService(c).find(([s]) => s === service)?.[1] ?? 0)).join(' | ')} |`);
  out.push(`| **total** (without shards and producers' PUTs) | ${sc.map((c) => `**${usd(c.usd)}**`).join(' | ')} |`);
  out.push(`| shard-hours (apart) | ${sc.map((c) => usd(c.shardsUsd)).join(' | ')} |`);
}

export function renderTable(r: BenchResults): string {
  const rows: string[][] = [];
  const add = (...c: string[]) => rows.push(c);
  if (r.handler) pathRows(add, 'Keyed count through the handler, emitting', r.handler);
  if (r.window) pathRows(add, 'Tumbling window through the handler, emitting', r.window);
  if (r.source) pathRows(add, 'Source stage (JSON in, packed envelopes out)', r.source);
  if (r.components) {
    const k = r.components.nsPerKey;
    add(
      `Checkpoint CPU per dirty key, piece by piece (${fmt(r.components.dirtyKeys)} dirty keys, best of ${r.components.runs})`,
      `${fmt(k.rows + k.delta + k.spill + k.packed)} ns`,
      `rows ${fmt(k.rows)}, delta ${fmt(k.delta)}, spilling store ${fmt(k.spill)}, packed layout ${fmt(k.packed)} ns`,
      '',
    );
    add('encodePayload, CPU per call (best run)', `${fmt(r.components.nsPerPayload.output)} ns ({ k, n })`, `${fmt(r.components.nsPerPayload.event)} ns ({ k, v, ts })`, '');
  }
  for (const c of r.checkpoints ?? []) {
    add(
      `Checkpoint WCU, ${c.scenario}: ${c.distribution} (${fmt(c.eventsPerCheckpoint)} events; mean of ${c.checkpoints}, the table written every ${c.materializeEvery}-th)`,
      `${c.used.total.toFixed(1)} (rows ${c.used.rows.toFixed(1)} in ${c.used.items.toFixed(1)} items, delta ${c.used.delta.toFixed(1)}${c.used.s3Puts ? ` incl. ${c.used.s3Puts.toFixed(2)} S3 PUTs` : ''}, ${c.store})`,
      `layout-free floor ${c.layoutFreeFloor} (${fmt(c.dirtyBytes)} dirty B, ${fmt(c.dirtyRows)} dirty keys); per-key-group floor ${c.floor.toFixed(1)}`,
      `${c.layoutFreeRatio.toFixed(2)}; rows applied at every checkpoint ${c.everyCheckpoint ? `${c.everyCheckpoint.total.toFixed(1)}: ${c.everyCheckpoint.layoutFreeRatio.toFixed(2)}` : '-'}; full snapshot ${c.full.writeUnits}`,
    );
  }
  for (const w of r.wire ?? []) {
    add(
      `Wire: bytes/event beyond the payload (${fmt(w.eventsPerSecond)} ev/s, batch ${w.batch}, ${w.destinationShards} dest. shards)`,
      w.overheadBytesPerEvent.toFixed(2),
      `payload ${w.payloadBytesPerEvent.toFixed(1)} B (source JSON ${w.sourceBytesPerEvent.toFixed(1)} B)`,
      `${fmt(w.eventsPerRecord)} events per record`,
    );
  }
  if (r.recovery) {
    const mr = r.recovery.memory.recovery;
    add('Recovery in process: restore + replay + batch', `${mr.ms.toFixed(1)} ms for ${mr.replayedRecords} records (${fmt(r.recovery.memory.events)} events)`, `raw read ${mr.rawReadMs.toFixed(1)} ms; live ${mr.liveMs.toFixed(1)} ms`, `${fmt(r.recovery.memory.events / (mr.ms / 1000))} events/s`);
    const lr = r.recovery.modelled;
    add(
      `Recovery, modelled AWS latencies (${lr.latency.dynamoMs} ms DynamoDB, ${lr.latency.kinesisGetMs} ms GetRecords; ${fmt(lr.keys)} keys)`,
      `${fmt(lr.recovery.ms)} ms for ${fmt(lr.events)} events`,
      `${lr.recovery.ports['state.getRows']?.calls ?? 0} state reads; replay reads ${fmt(lr.recovery.ports['reader.read']?.ms ?? 0)} ms`,
      `${fmt(lr.events / (lr.recovery.ms / 1000))} events/s`,
    );
  }
  for (const f of r.nexmark?.figures ?? []) {
    add(`Nexmark ${f.query}, whole job in process (${f.stages} stages), events/s per core`, fmt(f.epsPerCore), `Flink 1.13 (published) ${fmt(f.flinkPerCore)}`, `${(f.epsPerCore / f.flinkPerCore).toFixed(2)}× (${fmt(f.events)} events, ${f.outputs} results${f.firstRunEpsPerCore === undefined ? '' : `; a first run: ${fmt(f.firstRunEpsPerCore)}`})`);
  }
  const em = r.emulated && 'raw' in r.emulated ? r.emulated : undefined;
  if (em) {
    const rawBound = Math.min(em.raw.putPerSec, em.raw.getPerSec);
    add(
      'End to end (emulated stack): throughput, events/s',
      fmt(em.e2e.throughput.eventsPerSec),
      `emulator raw, warmed: PutRecords ${fmt(em.raw.putPerSec)}/s, GetRecords ${fmt(em.raw.getPerSec)}/s (cold: ${fmt(em.rawCold.putPerSec)}/s)`,
      `${pct(em.e2e.throughput.eventsPerSec / rawBound)} of the slower of the two`,
    );
    add('End to end: latency producer → sink write, p50 / p99', `${em.e2e.latency.p50} / ${em.e2e.latency.p99} ms`, `at ${em.e2e.latency.rate} ev/s`, `to commit: ${em.e2e.latency.commitP50} / ${em.e2e.latency.commitP99} ms`);
    const n = em.stage1.checkpointMs;
    add('Keyed stage on the emulators: checkpoint (500 dirty keys)', `${fmt(n.reduce((a, b) => a + b, 0) / Math.max(1, n.length))} ms`, `recovery ${fmt(em.stage1.recovery.ms)} ms`, '');
  } else if (r.emulated) add('End to end (emulated stack)', 'failed', (r.emulated as { error: string }).error.slice(0, 80), '');
  const head = ['measure', 'Sluice', 'baseline (same run)', 'ratio'];
  const out = [`| ${head.join(' | ')} |`, `|${head.map(() => '---').join('|')}|`, ...rows.map((c) => `| ${c.join(' | ')} |`)];
  renderCost(r, out);
  return out.join('\n');
}

export function renderSvg(r: BenchResults): string {
  const blue = '#2e86de';
  const grey = '#95a5a6';
  const green = '#27ae60';
  const panels: Panel[] = [];
  const paths = [r.handler && (['keyed count', r.handler] as const), r.window && (['window', r.window] as const), r.source && (['source stage', r.source] as const)].filter((x) => !!x);
  if (paths.length) {
    panels.push({
      title: 'Through the Lambda handler, events/s over total wall time (checkpoints included)',
      unit: 'ev/s',
      bars: paths.flatMap(([name, f]) => [
        { label: `${name}: Sluice`, value: f.engine.eps, color: blue },
        { label: `${name}: fair hand-written loop`, value: f.fair.eps, color: grey },
      ]),
      marker: { value: 1e6, label: '1 M' },
    });
  }
  if (r.checkpoints?.length) {
    panels.push({
      title: 'Checkpoint write units against the layout-free floor (dirty bytes / 1 KB)',
      unit: 'WCU',
      bars: r.checkpoints.flatMap((c) => [
        { label: `${c.scenario}: floor`, value: c.layoutFreeFloor, color: green },
        { label: `${c.scenario}: Sluice`, value: c.used.total, color: blue },
      ]),
    });
  }
  if (r.nexmark) {
    panels.push({
      title: 'Nexmark, events/s per core (Sluice: whole job in process; Flink: published)',
      unit: 'ev/s',
      bars: r.nexmark.figures.flatMap((f) => [
        { label: `${f.query}: Sluice`, value: f.epsPerCore, color: blue },
        { label: `${f.query}: Flink 1.13`, value: f.flinkPerCore, color: grey },
      ]),
    });
  }
  return chart('Sluice benchmarks', `${r.date} · ${r.machine.cpu} ×${r.machine.cpus} · Node ${r.machine.node} · load ${r.machine.loadAvgAtStart.join(' ')}`, panels);
}
