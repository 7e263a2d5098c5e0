const SEQ_BITMAP_LIMIT = 1 << 26;

/**
 * The sequence numbers seen on one channel in one epoch (the dedupe set of the protocol: order on a
 * channel is not guaranteed, so membership, not a high-water mark). A Set<number> whose dense part
 * — sequence numbers from 0 up, as producers number them — lives in a growable bitmap: no hashing
 * and a bit per record. Anything else (negative, fractional, huge) goes to the Set itself.
 */
export class SeqSet extends Set<number> {
  private bits = new Uint32Array(64);
  private count = 0;

  override has(x: number): boolean {
    if (x >>> 0 === x && x < SEQ_BITMAP_LIMIT) {
      const w = x >>> 5;
      return w < this.bits.length && (this.bits[w]! & (1 << (x & 31))) !== 0;
    }
    return super.has(x);
  }

  override add(x: number): this {
    if (x >>> 0 === x && x < SEQ_BITMAP_LIMIT) {
      const w = x >>> 5;
      if (w >= this.bits.length) {
        let n = this.bits.length * 2;
        while (n <= w) n *= 2;
        const next = new Uint32Array(n);
        next.set(this.bits);
        this.bits = next;
      }
      const m = 1 << (x & 31);
      if (!(this.bits[w]! & m)) {
        this.bits[w] = this.bits[w]! | m;
        this.count++;
      }
      return this;
    }
    return super.add(x);
  }

  override delete(x: number): boolean {
    if (x >>> 0 === x && x < SEQ_BITMAP_LIMIT) {
      const w = x >>> 5;
      const m = 1 << (x & 31);
      if (w >= this.bits.length || !(this.bits[w]! & m)) return false;
      this.bits[w] = this.bits[w]! & ~m;
      this.count--;
      return true;
    }
    return super.delete(x);
  }

  override clear(): void {
    this.bits.fill(0);
    this.count = 0;
    super.clear();
  }

  /** members in the bitmap (ascending), then the others in insertion order */
  override *values(): SetIterator<number> {
    for (let w = 0; w < this.bits.length; w++) {
      const word = this.bits[w]!;
      if (!word) continue;
      for (let b = 0; b < 32; b++) if (word & (1 << b)) yield w * 32 + b;
    }
    yield* super.values();
  }

  override keys(): SetIterator<number> {
    return this.values();
  }

  override *entries(): SetIterator<[number, number]> {
    for (const v of this.values()) yield [v, v];
  }

  override [Symbol.iterator](): SetIterator<number> {
    return this.values();
  }

  override forEach(fn: (value: number, value2: number, set: Set<number>) => void, thisArg?: unknown): void {
    for (const v of this.values()) fn.call(thisArg, v, v, this);
  }
}

Object.defineProperty(SeqSet.prototype, 'size', {
  get(this: Set<number>) {
    return (this as unknown as { count: number }).count + (Reflect.get(Set.prototype, 'size', this) as number);
  },
});
