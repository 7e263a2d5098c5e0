/**
 * A collect sink's downstream kept in files: one JSON line per published output, one file per sink.
 * The soak runs for many minutes and measures the heap of the process running the job; outputs the
 * emulated downstream kept in memory would grow it with the input by design and hide what the job
 * itself keeps. Values must be JSON (a collect sink's outputs are compared as JSON already).
 */
import { appendFileSync, existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { PublishedOutputs } from '../shared/adapters/memory/collect-registry.js';

export class FilePublishedOutputs implements PublishedOutputs {
  private readonly counts = new Map<string, number>();

  /** `dir` must exist; the files are the caller's to remove */
  constructor(private readonly dir: string) {}

  /** the file a sink's outputs go to */
  fileOf(sink: string): string {
    return join(this.dir, `${encodeURIComponent(sink)}.jsonl`);
  }

  append(sink: string, values: readonly unknown[]): void {
    if (!values.length) return;
    let text = '';
    for (const v of values) {
      const line = JSON.stringify(v);
      if (line === undefined) throw new Error(`collect sink ${sink}: an output that is not JSON (${typeof v}) cannot be kept in a file`);
      text += `${line}\n`;
    }
    appendFileSync(this.fileOf(sink), text);
    this.counts.set(sink, this.count(sink) + values.length);
  }

  /** how many outputs the sink has published (without reading the file) */
  count(sink: string): number {
    return this.counts.get(sink) ?? 0;
  }

  values<T = unknown>(sink: string): T[] {
    const file = this.fileOf(sink);
    if (!existsSync(file)) return [];
    return readFileSync(file, 'utf8')
      .split('\n')
      .filter((l) => l !== '')
      .map((l) => JSON.parse(l) as T);
  }
}
