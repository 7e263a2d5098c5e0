/**
 * `npm run soak -- --minutes N [--rate R] [--preload S] [--seed X] [--no-faults] [--inner-delay MS]
 * [--inner-record-ms MS] [--max-in-flight N] [--timeline]`: runs the soak
 * (infra-tests/soak/soak.ts) on the emulated stack, prints progress once a minute, the measurements,
 * and then exactly one summary line:
 *
 *   soak: minutes=… events=… steady_ckpt_p99_ms=… catchup_ckpt_p99_ms=… aborted=… heap_growth_pct=… s3_objects_end=… lost=0 duplicated=0
 *
 * Exit code 1 when anything was lost, duplicated or mismatched, or a steady minute completed no checkpoint.
 */
import { Command, InvalidArgumentError } from 'commander';
import { percentile, runSoak } from './soak.js';

const int = (name: string, min: number) => (v: string) => {
  const n = Number(v);
  if (!Number.isInteger(n) || n < min) throw new InvalidArgumentError(`${name} must be an integer ≥ ${min}, got ${v}`);
  return n;
};

const program = new Command()
  .name('soak')
  .description('Runs the chaos job for N minutes on the emulated AWS stack, with a pre-loaded backlog and light faults, and checks it against the oracle.')
  .option('--minutes <n>', 'minutes of input after the job starts', int('--minutes', 1), 5)
  .option('--rate <n>', 'steady input, records per second', int('--rate', 1), 20)
  .option('--preload <s>', 'seconds of input on the source before the job starts', int('--preload', 0), 60)
  .option('--seed <n>', 'seed of the input and the faults', int('--seed', 0), 1)
  .option('--checkpoint-timeout <ms>', 'the job\'s checkpoint timeoutMs (progress window)', int('--checkpoint-timeout', 1000), 8000)
  .option('--no-faults', 'no faults (a baseline)')
  .option('--inner-delay <ms>', 'every inner-stage invocation first waits this long (a backlog between stages)', int('--inner-delay', 0), 0)
  .option('--inner-record-ms <ms>', 'every inner-stage invocation also waits this long per data record (an inner stage slower than the source)', int('--inner-record-ms', 0), 0)
  .option('--max-in-flight <n>', 'the job\'s checkpoint.maxInFlightRecords: records a source shard forwards beyond its last crossed barrier', int('--max-in-flight', 1))
  .option('--timeline', 'print every checkpoint: start, duration, status')
  .option('--heap-snapshots <dir>', 'write a heap snapshot at the warm-up sample and one at the end of the input into <dir>')
  .option('--verbose', 'print engine warnings and errors to stderr')
  .action(async (o: { minutes: number; rate: number; preload: number; seed: number; checkpointTimeout: number; faults: boolean; innerDelay: number; innerRecordMs: number; maxInFlight?: number; timeline?: boolean; heapSnapshots?: string; verbose?: boolean }) => {
    if (!(globalThis as { gc?: unknown }).gc) console.log('note: node runs without --expose-gc: heap figures include garbage');
    const t0 = Date.now();
    const r = await runSoak({
      minutes: o.minutes,
      ratePerSecond: o.rate,
      preloadSeconds: o.preload,
      seed: o.seed,
      checkpointTimeoutMs: o.checkpointTimeout,
      noFaults: !o.faults,
      ...(o.innerDelay ? { innerDelayMs: o.innerDelay } : {}),
      ...(o.innerRecordMs ? { innerRecordMs: o.innerRecordMs } : {}),
      ...(o.heapSnapshots ? { heapSnapshotDir: o.heapSnapshots } : {}),
      ...(o.maxInFlight !== undefined ? { maxInFlightRecords: o.maxInFlight } : {}),
      progress: (l) => console.log(l),
      ...(o.verbose ? { engineLog: (l: string) => process.stderr.write(l + '\n') } : {}),
    });
    const ms = (xs: number[]) => (xs.length ? `n=${xs.length} p50=${Math.round(percentile(xs, 50))} p99=${Math.round(percentile(xs, 99))} max=${Math.max(...xs)}` : 'n=0');
    console.log(`catch-up: ${r.catchUpMs === undefined ? 'not finished' : `${(r.catchUpMs / 1000).toFixed(1)} s`}; checkpoint ms during catch-up ${ms(r.checkpoints.catchUp)}; steady ${ms(r.checkpoints.steady)}`);
    console.log(`steady checkpoint ms by the faults that fired while each was open: a zombie stall ${ms(r.steadyByFault.zombie)}; other faults only ${ms(r.steadyByFault.other)}; none ${ms(r.steadyByFault.none)}`);
    console.log(`checkpoints: completed=${r.checkpoints.completed} aborted=${r.checkpoints.aborted}${r.checkpoints.reasons.length ? ` reasons: ${r.checkpoints.reasons.join(' | ')}` : ''}`);
    console.log(`commit latency ms (PutRecords → published): p50=${Math.round(r.commitLatencyMs.p50)} p99=${Math.round(r.commitLatencyMs.p99)} max=${r.commitLatencyMs.max}`);
    for (const [stage, byPhase] of [...r.barrierTravel].sort()) {
      const dist = (xs: number[]) => (xs.length ? `n=${xs.length} p50=${Math.round(percentile(xs, 50))} p99=${Math.round(percentile(xs, 99))} max=${Math.round(percentile(xs, 100))}` : 'n=0');
      for (const [phase, w] of byPhase) console.log(`barrier wait in ${stage}'s input stream (${phase}): ${dist(w.barrier)}; oldest record's age per batch: ${dist(w.backlog)}`);
    }
    const first = r.samples[0];
    const last = r.samples.at(-1);
    if (first && last) {
      const dd = (s: typeof first) => Object.entries(s.dynamo).map(([t, v]) => `${t}: ${v.items} items ${v.bytes} B`).join(', ');
      console.log(`dynamodb at start: ${dd(first)}; at end: ${dd(last)}`);
      console.log(`s3 objects: start ${first.s3Objects}, max ${Math.max(...r.samples.map((s) => s.s3Objects))}, end ${last.s3Objects} (${Object.entries(last.s3ByPrefix).map(([p, n]) => `${p} ${n}`).join(', ')})`);
      // one sample a minute, as the minute progress lines
      const perMinute = r.samples.filter((s, i) => i === 0 || i === r.samples.length - 1 || Math.floor(s.atMs / 60_000) > Math.floor(r.samples[i - 1]!.atMs / 60_000));
      const items = (s: typeof first) => Object.values(s.dynamo).reduce((a, x) => a + x.items, 0);
      const bytes = (s: typeof first) => Object.values(s.dynamo).reduce((a, x) => a + x.bytes, 0);
      console.log(`over time (one sample a minute): dynamodb items ${perMinute.map(items).join(' ')}; bytes ${perMinute.map(bytes).join(' ')}; s3 objects ${perMinute.map((s) => s.s3Objects).join(' ')} (deltas/ ${perMinute.map((s) => s.s3ByPrefix['deltas/'] ?? 0).join(' ')})`);
      console.log(`heap MB (one process serves every simulated environment): ${r.samples.map((s) => s.heapMb.toFixed(0)).join(' ')}`);
      const [warm, warmTo] = r.heapWindows.warm;
      const [endFrom] = r.heapWindows.end;
      const at = (s: typeof first) => `${(s.atMs / 1000).toFixed(0)} s`;
      const kept = (s: typeof first) => `published outputs ${s.retained.publishedOutputs}, staged outputs ${s.retained.stagedOutputs}, records awaiting their output ${s.retained.awaitingOutput}`;
      console.log(
        `heap growth: median ${r.heapWarmMb.toFixed(1)} MB after warm-up (${at(warm)}–${at(warmTo)}) → median ${r.heapEndMb.toFixed(1)} MB in the input's last minute (${at(endFrom)}–${at(last)}): ${r.heapGrowthPct.toFixed(1)} %; ` +
          `kept by design: at warm-up ${kept(warm)}; at the end ${kept(last)}`,
      );
      if (r.heapSnapshots.length) console.log(`heap snapshots: ${r.heapSnapshots.join(' ')}`);
      console.log(`cached keys per environment at end: ${last.environments.map((e) => `${e.id}=${e.keys}`).join(' ')}`);
    }
    if (o.timeline) for (const c of r.timeline) console.log(`checkpoint ${c.id}: started at ${(c.startMs / 1000).toFixed(1)} s, ${c.durationMs} ms, ${c.status}`);
    if (r.deadMinutes) console.log(`liveness: ${r.deadMinutes} steady minute(s) completed no checkpoint`);
    for (const p of r.problems.slice(0, 12)) console.log(`problem: ${p}`);
    console.log(`duration: ${((Date.now() - t0) / 1000).toFixed(1)}s`);
    console.log(r.line);
    process.exitCode = r.ok ? 0 : 1;
  });

await program.parseAsync(process.argv);
await new Promise<void>((resolve) => process.stdout.write('', () => resolve()));
process.exit(process.exitCode ?? 0);
