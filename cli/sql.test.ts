/** `sluice sql`: which files feed which tables, and --explain printing the planned stages. */
import { execFile } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { compileSql } from '../shared/sql/index.js';
import { columnWarnings, eventFiles } from './sql.js';

const TWO = `CREATE TABLE a (x BIGINT) WITH ('connector' = 'kinesis');
CREATE TABLE b (x BIGINT) WITH ('connector' = 'kinesis');
SELECT x FROM a; SELECT x FROM b;`;

describe('sluice sql', () => {
  it('maps --events to tables: table=file, a folder, or a bare file for a single source', () => {
    const dir = mkdtempSync(join(tmpdir(), 'sluice-sql-'));
    writeFileSync(join(dir, '2.jsonl'), '');
    writeFileSync(join(dir, '1.jsonl'), '');
    const two = compileSql(TWO);
    expect(eventFiles(two, [`A=${dir}/1.jsonl`, `b=${dir}`])).toEqual(
      new Map([
        ['a', [`${dir}/1.jsonl`]],
        ['b', [`${dir}/1.jsonl`, `${dir}/2.jsonl`]],
      ]),
    );
    expect(() => eventFiles(two, [`${dir}/1.jsonl`])).toThrow(/reads 2 tables \(a, b\); write --events <table>=<file>/);
    expect(() => eventFiles(two, [`c=${dir}/1.jsonl`])).toThrow(/reads no table "c"/);
    const one = compileSql("CREATE TABLE a (x BIGINT) WITH ('connector' = 'kinesis'); SELECT x FROM a;");
    expect(eventFiles(one, [`${dir}/1.jsonl`])).toEqual(new Map([['a', [`${dir}/1.jsonl`]]]));
  });

  it('--explain prints the stages of the planned job; a bad script fails with file:line:column', async () => {
    const run = promisify(execFile);
    const { stdout } = await run(process.execPath, ['bin/sluice.mjs', 'sql', 'examples/nexmark/sql/q7.sql', '--explain']);
    expect(stdout).toMatch(/^job q7 /);
    expect(stdout).toMatch(/stage s\d: interval join/);
    const dir = mkdtempSync(join(tmpdir(), 'sluice-sql-'));
    writeFileSync(join(dir, 'bad.sql'), "CREATE TABLE a (x BIGINT) WITH ('connector' = 'kinesis');\nSELECT y FROM a;");
    const failed = await run(process.execPath, ['bin/sluice.mjs', 'sql', join(dir, 'bad.sql'), '--explain']).catch((e: { stderr: string; code: number }) => e);
    expect((failed as { code: number }).code).toBe(1);
    expect((failed as { stderr: string }).stderr).toContain(`${join(dir, 'bad.sql')}:2:8: unknown column "y" (columns: x)`);
  });

  it('warns about a declared column that no record of the table\'s files holds', () => {
    const dir = mkdtempSync(join(tmpdir(), 'sluice-sql-'));
    writeFileSync(join(dir, 'a.jsonl'), '{"x":1,"Y":2}\n{"x":3,\n');
    const compiled = compileSql("CREATE TABLE a (x BIGINT, y BIGINT, z BIGINT) WITH ('connector' = 'kinesis'); SELECT SUM(z) AS s FROM a;");
    expect(columnWarnings(compiled, new Map([['a', [join(dir, 'a.jsonl')]]]))).toEqual([
      `table a: column "z" is declared but no record of ${join(dir, 'a.jsonl')} has it: it reads as NULL everywhere`,
    ]);
  });
});
