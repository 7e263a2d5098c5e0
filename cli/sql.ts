/**
 * `sluice sql <file.sql>`: runs a SQL script on this machine against the emulated AWS stack
 * (LocalJobRunner), feeding its source tables from local files, and prints what its sinks hold; or,
 * with --explain, prints the planned stages. Tables with connector 's3' are bounded: their files are
 * uploaded to the emulated bucket under the table's prefix and read by the bounded reader, which
 * ends their input. Kinesis tables get the lines of their files as records; unless --no-end, their
 * input is then ended too, so every window fires.
 */
import { readFileSync, readdirSync, statSync } from 'node:fs';
import { basename, join } from 'node:path';
import { CreateBucketCommand, PutObjectCommand } from '@aws-sdk/client-s3';
import type { Command } from 'commander';
import { describePlan } from '../shared/plan/describe.js';
import { planJob } from '../shared/plan/planner.js';
import { BoundedReader, endInput } from '../shared/bounded/bounded-reader.js';
import { kinesisSourceWriter, s3ObjectStore } from '../shared/adapters/aws/bounded-input.js';
import { compileSql, type CompiledSql } from '../shared/sql/index.js';
import { missingColumns } from '../shared/sql/missing-columns.js';
import { allDeadLettered, printDeadLetters } from './run.js';

interface SqlCommandOptions {
  explain?: boolean;
  events: string[];
  checkpoints: number;
  end: boolean;
  seed: number;
  limit: number;
  name?: string;
}

/** `table=path` pairs (or one bare path, for a script with one source table). */
export function eventFiles(compiled: CompiledSql, specs: readonly string[]): Map<string, string[]> {
  const out = new Map<string, string[]>();
  for (const spec of specs) {
    const eq = spec.indexOf('=');
    let table: string;
    let path: string;
    if (eq > 0) {
      table = spec.slice(0, eq);
      path = spec.slice(eq + 1);
    } else {
      if (compiled.sources.length !== 1) throw new Error(`--events ${spec}: the script reads ${compiled.sources.length} tables (${compiled.sources.join(', ')}); write --events <table>=<file>`);
      table = compiled.sources[0]!;
      path = spec;
    }
    const known = compiled.sources.find((s) => s.toLowerCase() === table.toLowerCase());
    if (!known) throw new Error(`--events ${spec}: the script reads no table "${table}" (it reads: ${compiled.sources.join(', ')})`);
    const files = statSync(path).isDirectory() ? readdirSync(path).sort().map((f) => join(path, f)) : [path];
    out.set(known, [...(out.get(known) ?? []), ...files]);
  }
  return out;
}

/** A warning per declared column of a JSON source table that no record of its files holds. */
export function columnWarnings(compiled: CompiledSql, inputs: ReadonlyMap<string, readonly string[]>): string[] {
  const out: string[] = [];
  for (const [table, files] of inputs) {
    const def = compiled.tables.get(table.toLowerCase());
    if (!def) continue;
    const records = files.flatMap((f) =>
      readFileSync(f, 'utf8')
        .split('\n')
        .flatMap((line) => {
          try {
            return line.trim() ? [JSON.parse(line) as unknown] : [];
          } catch {
            return []; // a malformed line is the dead letters' business
          }
        }),
    );
    for (const column of missingColumns(def, records)) {
      out.push(`table ${def.name}: column "${column}" is declared but no record of ${files.join(', ')} has it: it reads as NULL everywhere`);
    }
  }
  return out;
}

export function registerSqlCommand(program: Command, int: (name: string) => (v: string) => number): void {
  program
    .command('sql')
    .description('run a SQL script on the emulated AWS stack (or --explain its plan); see docs/sql.md')
    .argument('<file>', 'SQL script: CREATE TABLE statements and INSERT INTO … SELECT / SELECT queries')
    .option('--explain', 'print the planned stages and exit')
    .option('-e, --events <table=file>', 'file (or folder) of records for a source table; repeatable; a bare file feeds the only source', (v: string, acc: string[]) => [...acc, v], [] as string[])
    .option('-c, --checkpoints <n>', 'checkpoints to commit after the input before printing', int('--checkpoints'), 2)
    .option('--no-end', 'do not end the Kinesis tables\' input after their files (windows then fire only as event time advances)')
    .option('--seed <n>', 'seed of routing and environment recycling', int('--seed'), 1)
    .option('--limit <n>', 'rows of each sink to print', int('--limit'), 20)
    .option('--name <name>', 'job name (default: the file name)')
    .action(async (file: string, opts: SqlCommandOptions) => {
      const name = opts.name ?? (basename(file).replace(/\.sql$/i, '').replace(/[^A-Za-z0-9_-]/g, '-').replace(/^[^A-Za-z]+/, '') || 'sql');
      const compiled = compileSql(readFileSync(file, 'utf8'), { name, origin: file });
      const plan = planJob(compiled.job);
      if (opts.explain) {
        console.log(describePlan(plan));
        if (compiled.bounded.length) console.log(`\nbounded tables: ${compiled.bounded.map((b) => `${b.table} ← s3://${b.bucket ?? '<job bucket>'}/${b.prefix}`).join(', ')}`);
        return;
      }
      const inputs = eventFiles(compiled, opts.events);
      for (const warning of columnWarnings(compiled, inputs)) process.stderr.write(`warning: ${warning}\n`);
      let produced = 0;
      let allDead: string | undefined;
      const { LocalJobRunner } = await import('../local/runner.js');
      process.stderr.write(`starting the emulated AWS stack and deploying ${plan.job} (${plan.stages.length} stages)…\n`);
      const runner = await LocalJobRunner.start(compiled.job, { seed: opts.seed, checkpointIntervalMs: 500 });
      try {
        const writer = kinesisSourceWriter(runner.clients.kinesis);
        for (const [table, files] of inputs) {
          const source = plan.sources.find((s) => s.name === table)!;
          const stream = runner.names.sourceStream(source);
          const bounded = compiled.bounded.find((b) => b.table === table);
          if (bounded) {
            const bucket = bounded.bucket ?? runner.names.bucket;
            if (bounded.bucket) await runner.clients.s3.send(new CreateBucketCommand({ Bucket: bucket })).catch(() => undefined);
            for (const f of files) await runner.clients.s3.send(new PutObjectCommand({ Bucket: bucket, Key: `${bounded.prefix}${basename(f)}`, Body: readFileSync(f) }));
            const stats = await new BoundedReader(s3ObjectStore(runner.clients.s3), writer).run({
              bucket,
              prefix: bounded.prefix,
              stream,
              ...(bounded.format === 'csv' ? { format: 'csv' as const, csvHeader: bounded.header } : { format: 'jsonl' as const }),
            });
            process.stderr.write(`table ${table}: read ${stats.records} records from ${stats.objects} objects (s3://${bucket}/${bounded.prefix}), input ended\n`);
          } else {
            const fed = await runner.produceFiles(files.map((file) => ({ source: table, file })));
            produced += fed.reduce((a, f) => a + f.records, 0);
            if (opts.end) await endInput(writer, stream);
            process.stderr.write(`table ${table}: produced ${fed.reduce((a, f) => a + f.records, 0)} records${opts.end ? ', input ended' : ''}\n`);
          }
        }
        await runner.awaitCheckpoints(opts.checkpoints, new Date(), 180_000);
        for (const sink of compiled.sinks) {
          let rows: Array<Record<string, unknown>>;
          if (sink.connector === 'collect') rows = runner.collected.published<Record<string, unknown>>(sink.name);
          else if (sink.connector === 'dynamodb') rows = await runner.readUpsertSink(sink.name);
          else {
            console.log(`\nsink "${sink.name}" (${sink.connector}): see the emulated ${sink.connector === 's3' ? 'bucket' : 'stream'}`);
            continue;
          }
          const shown = rows.slice(0, opts.limit).map((r) => Object.fromEntries(sink.columns.map((c) => [c, r[c] ?? null])));
          console.log(`\nsink "${sink.name}": ${rows.length} rows${sink.updating ? ' (upserted by key)' : ''}`);
          console.table(shown);
          if (rows.length > shown.length) console.log(`… and ${rows.length - shown.length} more`);
        }
        // one per rejected record: a replayed batch rejects a record again under the same object key
        const letters = await runner.deadLettersWithLines();
        printDeadLetters(letters, opts.limit);
        const s = await runner.stats();
        console.log(`\ncheckpoints: completed=${s.completed} aborted=${s.aborted} records_in=${s.recordsIn} dead_letters=${letters.length}`);
        allDead = allDeadLettered(produced, letters);
      } finally {
        await runner.stop();
      }
      if (allDead) throw new Error(allDead);
    });
}
