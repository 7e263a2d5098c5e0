/**
 * Nexmark events: an online auction where people register, open auctions and bid. Out of every 50
 * events 1 is a person, 3 are auctions and 46 are bids (the benchmark's 1:3:46 proportions), in
 * event-time order, all drawn from a seeded generator so a seed always gives the same events.
 *
 * Simplified from the Beam/Flink generator: ids count up from 1000; an auction's seller is one of the
 * last 20 people; half of the bids go to one of the last 5 ("hot") auctions, the rest to one of the
 * last 100, from one of the last 100 people. `dateTime` and `expires` are ms since the epoch.
 */

export interface Person {
  readonly id: number;
  readonly name: string;
  readonly emailAddress: string;
  readonly creditCard: string;
  readonly city: string;
  readonly state: string;
  readonly dateTime: number;
  readonly extra: string;
}

export interface Auction {
  readonly id: number;
  readonly itemName: string;
  readonly description: string;
  readonly initialBid: number;
  readonly reserve: number;
  readonly dateTime: number;
  readonly expires: number;
  readonly seller: number;
  readonly category: number;
  readonly extra: string;
}

export interface Bid {
  readonly auction: number;
  readonly bidder: number;
  readonly price: number;
  readonly channel: string;
  readonly url: string;
  readonly dateTime: number;
  readonly extra: string;
}

export type NexmarkEvent = { readonly kind: 'person'; readonly value: Person } | { readonly kind: 'auction'; readonly value: Auction } | { readonly kind: 'bid'; readonly value: Bid };

export interface NexmarkOptions {
  /** @default 1 */
  readonly seed?: number;
  /** number of events (all kinds); @default 10_000 */
  readonly events?: number;
  /** events per second of event time; @default 1_000 */
  readonly ratePerSecond?: number;
  /** event time of the first event; @default 2026-01-01T00:00:00Z */
  readonly startMs?: number;
}

const FIRST = ['Peter', 'Paul', 'Luke', 'John', 'Saul', 'Vicky', 'Kate', 'Julie', 'Sarah', 'Deiter', 'Walter'];
const LAST = ['Shultz', 'Abrams', 'Spencer', 'White', 'Bartels', 'Walton', 'Smith', 'Jones', 'Noris'];
const CITIES = ['Phoenix', 'Los Angeles', 'San Francisco', 'Boise', 'Portland', 'Bend', 'Redmond', 'Seattle', 'Kent', 'Cheyenne'];
const STATES = ['AZ', 'CA', 'ID', 'OR', 'WA', 'WY'];
const CHANNELS = ['Google', 'Facebook', 'Baidu', 'Apple'];

/** A small fast seeded PRNG (mulberry32). */
export function seeded(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = Math.imul(s ^ (s >>> 15), s | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

export const FIRST_ID = 1000;

/** The events, in event-time order. */
export function generateNexmark(options: NexmarkOptions = {}): NexmarkEvent[] {
  const rnd = seeded(options.seed ?? 1);
  const n = options.events ?? 10_000;
  const rate = options.ratePerSecond ?? 1_000;
  const start = options.startMs ?? Date.UTC(2026, 0, 1);
  const int = (lo: number, hi: number) => lo + Math.floor(rnd() * (hi - lo + 1));
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rnd() * xs.length)]!;
  const out: NexmarkEvent[] = [];
  let nextPerson = FIRST_ID;
  let nextAuction = FIRST_ID;
  const recent = (next: number, window: number) => Math.max(FIRST_ID, next - 1 - int(0, window - 1));
  for (let i = 0; i < n; i++) {
    const dateTime = start + Math.floor((i * 1000) / rate);
    const slot = i % 50;
    if (slot === 0 || nextPerson === FIRST_ID) {
      const id = nextPerson++;
      out.push({
        kind: 'person',
        value: {
          id,
          name: `${pick(FIRST)} ${pick(LAST)}`,
          emailAddress: `user${id}@example.com`,
          creditCard: Array.from({ length: 4 }, () => String(int(1000, 9999))).join(' '),
          city: pick(CITIES),
          state: pick(STATES),
          dateTime,
          extra: '',
        },
      });
    } else if (slot <= 3 || nextAuction === FIRST_ID) {
      const id = nextAuction++;
      const initialBid = int(1, 100);
      out.push({
        kind: 'auction',
        value: {
          id,
          itemName: `item-${id}`,
          description: `description of item ${id}`,
          initialBid,
          reserve: initialBid + int(1, 100),
          dateTime,
          expires: dateTime + int(2_000, 20_000),
          seller: recent(nextPerson, 20),
          category: 10 + int(0, 4),
          extra: '',
        },
      });
    } else {
      const hot = rnd() < 0.5;
      out.push({
        kind: 'bid',
        value: {
          auction: hot ? recent(nextAuction, 5) : recent(nextAuction, 100),
          bidder: recent(nextPerson, 100),
          price: int(1, 10_000),
          channel: pick(CHANNELS),
          url: `https://auction.example/item?id=${int(1, 1000)}`,
          dateTime,
          extra: '',
        },
      });
    }
  }
  return out;
}

/** The events split by kind (each list in event-time order). */
export function splitNexmark(events: readonly NexmarkEvent[]): { person: Person[]; auction: Auction[]; bid: Bid[] } {
  const out = { person: [] as Person[], auction: [] as Auction[], bid: [] as Bid[] };
  for (const e of events) (out[e.kind] as unknown[]).push(e.value);
  return out;
}
