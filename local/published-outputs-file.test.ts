/** A collect sink's downstream in files gives back what the in-memory one does, in the same order. */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { CollectRegistry } from '../shared/adapters/memory/collect-registry.js';
import { FilePublishedOutputs } from './published-outputs-file.js';

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});
const freshDir = () => {
  const d = mkdtempSync(join(tmpdir(), 'sluice-published-'));
  dirs.push(d);
  return d;
};

describe('FilePublishedOutputs', () => {
  it('keeps every published output as a JSON line, per sink, in publishing order', async () => {
    const files = new FilePublishedOutputs(freshDir());
    const inFiles = new CollectRegistry(files);
    const inMemory = new CollectRegistry();
    const values = [{ id: 'a', text: 'line\nbreak', n: 1 }, { id: 'b', nested: { k: ['x', 2] } }, 'plain', 7, null];
    for (const r of [inFiles, inMemory]) {
      // staged out of order, over two epochs and two producers: publish sorts them
      await r.stage('out/one', values.map((value, i) => ({ producer: `s1:${i % 2}`, epoch: 2 - (i % 2), seq: i, value })));
      await r.stage('two', [{ producer: 's1:0', epoch: 1, seq: 0, value: { id: 'z' } }]);
      r.publish(2);
      r.publish(3);
    }
    expect(inFiles.published('out/one')).toEqual(inMemory.published('out/one'));
    expect(inFiles.published('two')).toEqual([{ id: 'z' }]);
    expect(files.count('out/one')).toBe(values.length);
    // one line per output: a newline inside a value stays escaped
    expect(readFileSync(files.fileOf('out/one'), 'utf8').split('\n').filter(Boolean)).toHaveLength(values.length);
    expect(inFiles.published('never')).toEqual([]);
  });

  it('refuses an output that is not JSON, naming the sink, instead of losing it', () => {
    const files = new FilePublishedOutputs(freshDir());
    expect(() => files.append('s', [undefined])).toThrow(/collect sink s: an output that is not JSON/);
  });
});
