/**
 * The keyed stage's apply pass as a property: random packets of two producers (duplicates, payloads
 * that do not decode, records whose function throws, barriers between epochs, records of a later
 * epoch held back or re-read past a small hold bound), cut into random batches, some of them run by a new runner (the cache lost: a takeover restores the last snapshot
 * and replays the shard, reading its keys from the state store ahead of the records). Whatever the
 * cuts, the stage's outputs are those of a plain fold over the distinct records, and no record's
 * decoded value reaches a function twice (the pass keeps decoded values and arrays across records).
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { collectSink, job, valueState, WatermarkStrategies, type KeyedProcessFunction } from '../api/index.js';
import { PacketBuilder, type Envelope } from '../codec/envelope.js';
import { encodePayload } from '../codec/payload.js';
import { keyGroupOf } from '../plan/key-groups.js';
import type { RuntimePorts, StagedOutput } from './ports.js';
import { innerStageOnTwins } from '../testing/inner-stage-on-twins.js';
import { instanceIdOf } from './stage-instance.js';
import { createStageRunner } from './stage-runner.js';

interface Ev {
  readonly k: string;
  readonly fail: boolean;
  /** set by the function: a value seen twice was handed to two records */
  used?: boolean;
}

const MAX_PARALLELISM = 8;
const PRODUCERS = [instanceIdOf('s0', 'shardId-000000000000'), instanceIdOf('s0', 'shardId-000000000001')];

function countJob() {
  const n = valueState<number>('n');
  const fn: KeyedProcessFunction<string, Ev, string> = {
    state: [n],
    processElement(e, ctx, out) {
      if (e.used) throw new Error('a decoded value reached a function twice');
      e.used = true;
      const s = ctx.getState(n);
      const next = (s.value() ?? 0) + 1;
      s.update(next);
      out.collect(`${e.k}:${next}`);
      // after its effects: the record must be undone whole
      if (e.fail) throw new Error('fails');
    },
  };
  const j = job('keyed-apply', { maxParallelism: MAX_PARALLELISM, poisonPolicy: 'dead-letter' });
  j.source<Ev>({ name: 'ev', shards: 2, timestamp: () => 0, watermarks: WatermarkStrategies.boundedOutOfOrderness(0) })
    .keyBy((e) => e.k, { parallelism: 1 })
    .process(fn, { name: 'count' })
    .sinkTo(collectSink('out'));
  return j;
}

interface Rec {
  readonly k: string;
  readonly fail: boolean;
  /** a payload that does not decode */
  readonly poison: boolean;
  /** which of the two producers sends it */
  readonly producer: number;
}

const recArb = fc.record({ k: fc.constantFrom('a', 'b', 'c', 'd', 'e'), fail: fc.nat(9).map((x) => x === 0), poison: fc.boolean(), producer: fc.nat(1) }).map(
  (r): Rec => ({ ...r, poison: r.poison && r.k === 'e' && !r.fail }),
);

const scenarioArb = fc.record({
  epochs: fc.array(fc.array(recArb, { maxLength: 12 }), { minLength: 1, maxLength: 4 }),
  // positions (per mille of the epoch) where a record already sent is sent again, and which one
  dups: fc.array(fc.tuple(fc.nat(999), fc.nat(999)), { maxLength: 6 }),
  packetSizes: fc.array(fc.integer({ min: 1, max: 6 }), { minLength: 1, maxLength: 10 }),
  batchSizes: fc.array(fc.integer({ min: 1, max: 4 }), { minLength: 1, maxLength: 10 }),
  // per batch: run by a new runner (the cache is lost)
  fresh: fc.array(fc.boolean(), { minLength: 1, maxLength: 10 }),
  lastBarrier: fc.boolean(),
  // the order of the producers' packets in the shard (true: the first producer's next)
  merge: fc.array(fc.boolean(), { minLength: 1, maxLength: 12 }),
  // records of a later epoch held in memory before the shard is re-read instead
  maxHeld: fc.constantFrom(1, 2, 50_000),
});

const BAD = new Uint8Array([0xc1]);

describe('the keyed apply pass: property', () => {
  it('outputs a plain fold over the distinct records, whatever the batches, duplicates, failures and cache losses', async () => {
    await fc.assert(
      fc.asyncProperty(scenarioArb, async (sc) => {
        // each producer's envelopes; the fold (the outputs of a key are its counts, in any order)
        const counts = new Map<string, number>();
        const packets: Uint8Array[][] = [[], []];
        for (const p of [0, 1]) {
          const envs: Envelope[] = [];
          sc.epochs.forEach((all, epoch) => {
            const recs = all.filter((r) => r.producer === p);
            const sent: Envelope[] = [];
            recs.forEach((r, seq) => {
              const payload = r.poison ? BAD : encodePayload({ k: r.k, fail: r.fail });
              const e: Envelope = { kind: 'data', epoch, seq, keyGroup: keyGroupOf(r.k, MAX_PARALLELISM), timestamp: 0, payload };
              sent.push(e);
              envs.push(e);
              for (const [at, which] of sc.dups) if (Math.floor((at * recs.length) / 1000) === seq) envs.push(sent[which % sent.length]!);
              if (!r.poison && !r.fail) counts.set(r.k, (counts.get(r.k) ?? 0) + 1);
            });
            if (epoch < sc.epochs.length - 1 || sc.lastBarrier) envs.push({ kind: 'barrier', checkpointId: epoch + 1, count: recs.length, topology: [2, 1], savepoint: false });
          });
          for (let i = 0, k = p; i < envs.length; k++) {
            const b = new PacketBuilder(PRODUCERS[p]!);
            const n = sc.packetSizes[k % sc.packetSizes.length]!;
            for (const e of envs.slice(i, i + n)) b.add(e);
            packets[p]!.push(b.finish());
            i += n;
          }
        }
        const expected: string[] = [];
        for (const [k, n] of counts) for (let i = 1; i <= n; i++) expected.push(`${k}:${i}`);
        // the shard holds both producers' packets, each producer's in its order
        const merged: Uint8Array[] = [];
        for (let i = 0, a = 0, b = 0; a < packets[0]!.length || b < packets[1]!.length; i++) {
          const fromA = b >= packets[1]!.length || (a < packets[0]!.length && sc.merge[i % sc.merge.length]);
          merged.push(fromA ? packets[0]![a++]! : packets[1]![b++]!);
        }

        const j = countJob();
        const { plan, names, mem, stage, shard, stored } = innerStageOnTwins(j, merged);
        const outputs = new Map<string, StagedOutput>();
        const ports: RuntimePorts = { ...mem.ports, collectSink: { stage: async (_sink, out) => void out.forEach((o) => outputs.set(`${o.producer}|${o.epoch}|${o.seq}`, o)) } };
        const newRunner = () => createStageRunner({ job: j, plan, stage, names, ports, options: { maxHeldRecords: sc.maxHeld } });
        let runner = newRunner();
        for (let i = 0, b = 0; i < stored.length; b++) {
          const n = sc.batchSizes[b % sc.batchSizes.length]!;
          if (b > 0 && sc.fresh[b % sc.fresh.length]) runner = newRunner();
          await runner.run(shard.shardId, stored.slice(i, i + n));
          i += n;
        }
        expect([...outputs.values()].map((o) => o.value as string).sort()).toEqual(expected.sort());
      }),
      { seed: 20_261_203, numRuns: 60 },
    );
  }, 120_000);
});
