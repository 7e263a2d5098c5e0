/**
 * What the chaos job must produce, computed from the input log alone. It shares no code with the
 * engine or the job: it re-derives, from the raw bytes that were produced, which records are poison,
 * the per-key totals, and the set of per-record outputs; then it judges what the sinks hold.
 */

/** One record as it was put on the source stream. */
export interface ProducedRecord {
  /** the raw bytes' text (JSON, or deliberately broken JSON) */
  readonly text: string;
  /** source-stream partition key used */
  readonly partitionKey: string;
  /**
   * the texts of the user records packed into a KPL aggregate whose checksum or encoding is broken:
   * the aggregate is one poison record (dead-lettered whole, named by its first record's id)
   */
  readonly brokenAggregateOf?: readonly string[];
}

export interface OracleOptions {
  /** the keyed function fails for every record of this key: they are all poison */
  readonly failingKey?: string;
}

export interface ExpectedRecord {
  readonly id: string;
  readonly key: string;
  readonly value: number;
}

export interface Expected {
  /** non-poison records, in produce order */
  readonly records: ExpectedRecord[];
  readonly byId: Map<string, ExpectedRecord>;
  /** per key: final sum and count */
  readonly totals: Map<string, { sum: number; count: number }>;
  /** ids of the poison records (decode failures, map or process rejections) */
  readonly poisonIds: Set<string>;
  /** poison records whose id could not even be read (none with the harness's generator) */
  readonly anonymousPoison: number;
}

const ID_RE = /"id"\s*:\s*"([^"]+)"/;

/** Classifies every produced record and folds the good ones into totals. */
export function expectedFrom(produced: readonly ProducedRecord[], options: OracleOptions = {}): Expected {
  const records: ExpectedRecord[] = [];
  const byId = new Map<string, ExpectedRecord>();
  const totals = new Map<string, { sum: number; count: number }>();
  const poisonIds = new Set<string>();
  let anonymousPoison = 0;
  for (const p of produced) {
    if (p.brokenAggregateOf) {
      const m = ID_RE.exec(p.brokenAggregateOf[0] ?? '');
      if (m) poisonIds.add(m[1]!);
      else anonymousPoison++;
      continue;
    }
    let obj: unknown;
    try {
      obj = JSON.parse(p.text);
    } catch {
      const m = ID_RE.exec(p.text);
      if (m) poisonIds.add(m[1]!);
      else anonymousPoison++;
      continue;
    }
    const o = obj as { id?: unknown; key?: unknown; value?: unknown; poison?: unknown };
    if (!o || typeof o !== 'object' || typeof o.id !== 'string' || typeof o.key !== 'string' || typeof o.value !== 'number') {
      const m = ID_RE.exec(p.text);
      if (m) poisonIds.add(m[1]!);
      else anonymousPoison++;
      continue;
    }
    if (o.poison === 'map' || o.poison === 'process' || (options.failingKey !== undefined && o.key === options.failingKey)) {
      poisonIds.add(o.id);
      continue;
    }
    const r = { id: o.id, key: o.key, value: o.value };
    records.push(r);
    byId.set(r.id, r);
    const t = totals.get(r.key) ?? { sum: 0, count: 0 };
    totals.set(r.key, { sum: t.sum + r.value, count: t.count + 1 });
  }
  return { records, byId, totals, poisonIds, anonymousPoison };
}

export interface PublishedOutput {
  readonly id: string;
  readonly key: string;
  readonly sum: number;
}

export interface UpsertRow {
  readonly pk: string;
  readonly sum?: number;
  readonly count?: number;
}

export interface Verdict {
  /** published outputs */
  outputs: number;
  /** input ids missing from the published outputs, plus keys whose upsert total is short */
  lost: number;
  /** ids published more than once (each extra copy counts) */
  duplicated: number;
  /** wrong running sums, wrong or extra upsert rows, outputs nobody produced, poison published */
  mismatched: number;
  /** human-readable findings, capped */
  problems: string[];
}

const CAP = 12;

/**
 * Judges the sinks against the expectation.
 * - collect sink: every good id exactly once; per key, in publish order, each sum = previous + value;
 *   with `orderedKeys`, also per key in the order the records were produced (one source shard per key);
 * - upsert sink: one row per key with the key's total sum and count, nothing else.
 */
export function judge(
  exp: Expected,
  published: readonly PublishedOutput[],
  rows: readonly UpsertRow[],
  options: { orderedKeys?: boolean } = {},
): Verdict {
  const v: Verdict = { outputs: published.length, lost: 0, duplicated: 0, mismatched: 0, problems: [] };
  const note = (s: string) => {
    if (v.problems.length < CAP) v.problems.push(s);
  };

  // --- collect sink
  const seen = new Map<string, number>();
  const chain = new Map<string, number>();
  const orderSeen = new Map<string, string[]>();
  for (const o of published) {
    seen.set(o.id, (seen.get(o.id) ?? 0) + 1);
    const want = exp.byId.get(o.id);
    if (!want) {
      v.mismatched++;
      note(`published ${exp.poisonIds.has(o.id) ? 'poison' : 'unknown'} id ${o.id} (${JSON.stringify(o)})`);
      continue;
    }
    if (seen.get(o.id)! > 1) continue; // a duplicate: counted below, not part of the chain
    if (o.key !== want.key) {
      v.mismatched++;
      note(`output ${o.id} has key ${o.key}, input had ${want.key}`);
      continue;
    }
    const prev = chain.get(o.key) ?? 0;
    if (o.sum !== prev + want.value) {
      v.mismatched++;
      note(`key ${o.key}: output ${o.id} sum ${o.sum} != previous ${prev} + value ${want.value}`);
    }
    chain.set(o.key, o.sum);
    let list = orderSeen.get(o.key);
    if (!list) orderSeen.set(o.key, (list = []));
    list.push(o.id);
  }
  for (const [id, n] of seen) {
    if (n > 1) {
      v.duplicated += n - 1;
      note(`id ${id} published ${n} times`);
    }
  }
  const missing = exp.records.filter((r) => !seen.has(r.id));
  v.lost += missing.length;
  if (missing.length) note(`${missing.length} ids never published, e.g. ${missing.slice(0, 5).map((r) => r.id).join(', ')}`);
  if (options.orderedKeys) {
    const produced = new Map<string, string[]>();
    for (const r of exp.records) {
      let l = produced.get(r.key);
      if (!l) produced.set(r.key, (l = []));
      l.push(r.id);
    }
    for (const [key, ids] of produced) {
      const got = (orderSeen.get(key) ?? []).filter((id) => ids.includes(id));
      const want = ids.filter((id) => got.includes(id));
      if (got.join(',') !== want.join(',')) {
        v.mismatched++;
        const at = got.findIndex((id, i) => want[i] !== id);
        note(`key ${key}: published out of produce order at #${at}: ${got[at]} where ${want[at]} was expected`);
      }
    }
  }

  // --- upsert sink
  const byKey = new Map(rows.map((r) => [r.pk, r]));
  for (const [key, t] of exp.totals) {
    const row = byKey.get(key);
    if (!row) {
      v.lost++;
      note(`upsert row for ${key} missing (want sum ${t.sum} count ${t.count})`);
    } else if (row.count !== t.count || row.sum !== t.sum) {
      if ((row.count ?? 0) < t.count) v.lost++;
      else v.mismatched++;
      note(`upsert row ${key} = sum ${row.sum} count ${row.count}, want sum ${t.sum} count ${t.count}`);
    }
  }
  for (const r of rows) {
    if (!exp.totals.has(r.pk)) {
      v.mismatched++;
      note(`upsert row ${r.pk} should not exist`);
    }
  }
  return v;
}

/** Reads the record id out of a dead letter's raw bytes (source JSON or a binary payload that embeds it). */
export function idInDeadLetter(dataBase64: string): string | undefined {
  const text = Buffer.from(dataBase64, 'base64').toString('latin1');
  const m = ID_RE.exec(text) ?? /(c\d+-\d{5})/.exec(text);
  return m?.[1];
}
