/**
 * Hot path: events per second through the real stage code (StageRunner.run on a warm cache, on the
 * in-memory twins), against a hand-written loop doing the same work on the same bytes.
 */
import { performance } from 'node:perf_hooks';
import { Packr } from 'msgpackr';
import type { Job } from '../shared/api/job.js';
import { keyString } from '../shared/plan/key-groups.js';
import { StageRunner } from '../shared/runtime/stage-runner.js';
import { WINDOW_MS, type Ev } from './jobs.js';
import { loadRounds, type EncodedRound } from './stage1-input.js';

export interface Timed {
  readonly events: number;
  readonly ms: number;
  /** CPU time of this process over the timed sections (all threads, so GC helpers count) */
  readonly cpuMs: number;
  readonly eps: number;
  readonly batches: number;
  readonly msPerBatch: number;
}

function timed(events: number, ms: number, cpuMs: number, batches: number): Timed {
  return { events, ms, cpuMs, eps: events / (ms / 1000), batches, msPerBatch: ms / batches };
}

// ---------------------------------------------------------------------------------------------
// the hand-written loops: the project's packet layout and MessagePack payloads, decoded inline

const packr = new Packr({ useRecords: false, moreTypes: false, int64AsType: 'number' });
// MessagePack straight from the packet's bytes (msgpackr's start/end options: no view per record)
const range = { start: 0, end: 0 };

/** Calls `onData(payload value, timestamp)` and `onWatermark(wm)` for every envelope of a packet. */
function scanPacket(b: Uint8Array, onData: (v: Ev, ts: number) => void, onWatermark: (wm: number) => void): void {
  let p = 2;
  const varint = () => {
    let x = 0;
    let mul = 1;
    for (;;) {
      const c = b[p++]!;
      x += (c & 0x7f) * mul;
      if (c < 0x80) return x;
      mul *= 128;
    }
  };
  const plen = varint();
  p += plen;
  const count = varint();
  let ts = 0;
  for (let i = 0; i < count; i++) {
    const h = b[p++]!;
    switch (h & 7) {
      case 0: {
        if (!(h & 0x10)) varint();
        if (!(h & 0x20)) varint();
        varint(); // key group
        if (h & 0x08) {
          const z = varint();
          ts += z % 2 === 0 ? z / 2 : -(z + 1) / 2;
        }
        const n = varint();
        range.start = p;
        range.end = p + n;
        onData((n ? packr.unpack(b, range) : packr.unpack(b.subarray(p, p))) as Ev, ts);
        p += n;
        break;
      }
      case 1: {
        varint();
        varint();
        const n = varint();
        for (let j = 0; j < n; j++) varint();
        break;
      }
      case 2: {
        varint();
        const z = varint();
        onWatermark(z % 2 === 0 ? z / 2 : -(z + 1) / 2);
        break;
      }
      case 3:
        varint();
        varint();
        break;
      default:
        varint();
    }
  }
}

/** A hand-written consumer of packets: the same work as the engine's job, nothing else. */
export interface HandLoop {
  batch(packets: readonly Uint8Array[]): void;
  readonly outputs: number;
  readonly checksum: number;
}

/** Decode packets and payloads, count per key in a Map. */
export function handCount(): HandLoop {
  const counts = new Map<string, number>();
  const onData = (v: Ev) => {
    const k = keyString(v.k);
    counts.set(k, (counts.get(k) ?? 0) + 1);
  };
  const onWm = () => undefined;
  return {
    batch(packets) {
      for (const p of packets) scanPacket(p, onData, onWm);
    },
    outputs: 0,
    get checksum() {
      let s = 0;
      for (const c of counts.values()) s += c;
      return s;
    },
  };
}

/** Decode, then per-key tumbling windows in a Map, fired (and emitted to an array) when the watermark passes. */
export function handWindow(): HandLoop {
  // window start → key → accumulator
  const windows = new Map<number, Map<string, { n: number; sum: number }>>();
  let watermark = Number.NEGATIVE_INFINITY;
  let outputs = 0;
  const out: unknown[] = [];
  const onData = (v: Ev, ts: number) => {
    const start = ts - (ts % WINDOW_MS);
    if (start + WINDOW_MS - 1 <= watermark) return; // late
    let w = windows.get(start);
    if (!w) windows.set(start, (w = new Map()));
    const k = keyString(v.k);
    const a = w.get(k);
    if (a) {
      a.n++;
      a.sum += v.v;
    } else w.set(k, { n: 1, sum: v.v });
  };
  const onWm = (wm: number) => {
    if (wm <= watermark) return;
    watermark = wm;
    for (const [start, w] of windows) {
      if (start + WINDOW_MS - 1 > wm) continue;
      for (const [k, a] of w) out.push({ k, start, n: a.n, sum: a.sum });
      windows.delete(start);
    }
  };
  return {
    batch(packets) {
      for (const p of packets) scanPacket(p, onData, onWm);
      outputs += out.length;
      out.length = 0;
    },
    get outputs() {
      return outputs;
    },
    checksum: 0,
  };
}

export interface HotpathRun {
  /** all timed batches of all repetitions */
  readonly engine: Timed;
  readonly hand: Timed;
  /** per batch pair: hand time ÷ engine time (the engine's share of the hand-written loop's speed) */
  readonly ratios: number[];
  readonly medianRatio: number;
  /** median over batches of events/s */
  readonly engineMedianEps: number;
  readonly handMedianEps: number;
  /** engine: events/s over CPU time (all threads of the process, so GC helpers count) */
  readonly engineCpuEps: number;
  readonly handCpuEps: number;
  readonly cacheHits: number;
  readonly batchesRun: number;
  readonly outputs: { engine: number; hand: number };
  readonly checksum: { engine: number; hand: number };
}

const median = (xs: readonly number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length ? s[Math.floor(s.length / 2)]! : 0;
};

/**
 * The engine and the hand-written loop take turns on the same batches: batch i through
 * StageRunner.run (warm cache, memory ports), then the same packets through the loop. Pairs taken
 * moments apart see the same machine, so their ratio holds up on a noisy machine better than either
 * figure alone. Rounds before `warmup` (JIT) are not counted; barriers (checkpoints) never are.
 */
export async function measureHotpath(job: () => Job, hand: () => HandLoop, rounds: readonly EncodedRound[], warmup: number, reps: number): Promise<HotpathRun> {
  const eMs: number[] = [];
  const hMs: number[] = [];
  const ev: number[] = [];
  let eCpu = 0;
  let hCpu = 0;
  let cacheHits = 0;
  let batchesRun = 0;
  let outputs = { engine: 0, hand: 0 };
  let checksum = { engine: 0, hand: 0 };
  for (let rep = 0; rep < reps; rep++) {
    const input = loadRounds(job(), rounds);
    const runner = new StageRunner(input.job, input.plan, input.stage, input.names, input.ports);
    const loop = hand();
    for (let r = 0; r < input.rounds.length; r++) {
      const round = input.rounds[r]!;
      const encoded = rounds[r]!;
      for (let b = 0; b < round.batches.length; b++) {
        let c0 = process.cpuUsage();
        let t0 = performance.now();
        await runner.run(input.shardId, round.batches[b]!);
        const e = performance.now() - t0;
        let dc = process.cpuUsage(c0);
        const ec = (dc.user + dc.system) / 1000;
        c0 = process.cpuUsage();
        t0 = performance.now();
        loop.batch(encoded.batches[b]!);
        const h = performance.now() - t0;
        dc = process.cpuUsage(c0);
        if (r >= warmup) {
          eMs.push(e);
          hMs.push(h);
          ev.push(round.events / round.batches.length);
          eCpu += ec;
          hCpu += (dc.user + dc.system) / 1000;
        }
      }
      await runner.run(input.shardId, round.barrier); // the checkpoint: not the hot path
    }
    let engineSum = 0;
    for (const { row } of input.mem.state.rows()) {
      const v = row.values.count;
      if (v) engineSum += Number(new TextDecoder().decode(v));
    }
    cacheHits += runner.totals.cacheHits;
    batchesRun += runner.totals.batches;
    outputs = { engine: input.outputs.count, hand: loop.outputs };
    checksum = { engine: engineSum, hand: loop.checksum };
  }
  const events = ev.reduce((a, b) => a + b, 0);
  const sum = (xs: number[]) => xs.reduce((a, b) => a + b, 0);
  const ratios = eMs.map((e, i) => hMs[i]! / e);
  return {
    engine: timed(events, sum(eMs), eCpu, eMs.length),
    hand: timed(events, sum(hMs), hCpu, hMs.length),
    ratios,
    medianRatio: median(ratios),
    engineMedianEps: median(eMs.map((e, i) => ev[i]! / (e / 1000))),
    handMedianEps: median(hMs.map((h, i) => ev[i]! / (h / 1000))),
    engineCpuEps: events / (eCpu / 1000),
    handCpuEps: events / (hCpu / 1000),
    cacheHits,
    batchesRun,
    outputs,
    checksum,
  };
}
