/**
 * A growable byte writer and a reader with unsigned LEB128 varints: the building blocks of the
 * envelope packet format. Numbers stay below 2^53 (JavaScript's safe integers).
 */
const EMPTY_BUFFER = new Uint8Array(0);

export class ByteWriter {
  private buf: Uint8Array;
  private view: DataView;
  length = 0;

  /** `initial`: a size, or a buffer to write into from its start (it grows out of it if needed) */
  constructor(initial: number | Uint8Array = 1024) {
    this.buf = typeof initial === 'number' ? new Uint8Array(initial) : initial;
    this.view = new DataView(this.buf.buffer, this.buf.byteOffset, this.buf.byteLength);
  }

  /** The buffer written into (grown beyond the initial one if needed); the writer must not be used after. */
  release(): Uint8Array {
    const b = this.buf;
    this.buf = EMPTY_BUFFER;
    this.view = new DataView(EMPTY_BUFFER.buffer);
    this.length = 0;
    return b;
  }

  private ensure(n: number): void {
    if (this.length + n <= this.buf.length) return;
    let size = Math.max(64, this.buf.length * 2);
    while (size < this.length + n) size *= 2;
    const next = new Uint8Array(size);
    next.set(this.buf.subarray(0, this.length));
    this.buf = next;
    this.view = new DataView(next.buffer);
  }

  byte(b: number): void {
    this.ensure(1);
    this.buf[this.length++] = b;
  }

  varint(n: number): void {
    this.ensure(10);
    // one byte, the most common case (key groups, seqs after a jump, payload lengths)
    if (n >>> 0 === n && n < 0x80) {
      this.buf[this.length++] = n;
      return;
    }
    if (n < 0 || !Number.isSafeInteger(n)) throw new RangeError(`varint needs a safe non-negative integer, got ${n}`);
    while (n >= 0x80) {
      this.buf[this.length++] = (n % 0x80) | 0x80;
      n = Math.floor(n / 0x80);
    }
    this.buf[this.length++] = n;
  }

  /** zig-zag, so small negative numbers stay short */
  svarint(n: number): void {
    if (!Number.isSafeInteger(n)) throw new RangeError(`svarint needs a safe integer, got ${n}`);
    this.varint(n >= 0 ? n * 2 : -n * 2 - 1);
  }

  float64(x: number): void {
    this.ensure(8);
    this.view.setFloat64(this.length, x, true);
    this.length += 8;
  }

  /** b[start, end), its length first */
  bytes(b: Uint8Array, start = 0, end = b.length): void {
    const n = end - start;
    this.varint(n);
    this.ensure(n);
    const buf = this.buf;
    let at = this.length;
    // a small payload is copied faster byte by byte than by \`set\`, whose call costs more than the copy
    if (n <= 64) for (let i = start; i < end; i++) buf[at++] = b[i]!;
    else {
      buf.set(start === 0 && end === b.length ? b : b.subarray(start, end), at);
      at += n;
    }
    this.length = at;
  }

  raw(b: Uint8Array): void {
    this.ensure(b.length);
    this.buf.set(b, this.length);
    this.length += b.length;
  }

  finish(): Uint8Array {
    return this.buf.slice(0, this.length);
  }
}

export class ByteReader {
  private readonly view: DataView;
  pos = 0;

  constructor(readonly buf: Uint8Array) {
    this.view = new DataView(buf.buffer, buf.byteOffset, buf.byteLength);
  }

  get done(): boolean {
    return this.pos >= this.buf.length;
  }

  byte(): number {
    if (this.pos >= this.buf.length) throw new RangeError('unexpected end of packet');
    return this.buf[this.pos++]!;
  }

  varint(): number {
    let result = 0;
    let mul = 1;
    for (;;) {
      const b = this.byte();
      result += (b & 0x7f) * mul;
      if (b < 0x80) return result;
      mul *= 0x80;
      if (mul > 2 ** 56) throw new RangeError('varint too long');
    }
  }

  svarint(): number {
    const z = this.varint();
    return z % 2 === 0 ? z / 2 : -(z + 1) / 2;
  }

  float64(): number {
    if (this.pos + 8 > this.buf.length) throw new RangeError('unexpected end of packet');
    const x = this.view.getFloat64(this.pos, true);
    this.pos += 8;
    return x;
  }

  bytes(): Uint8Array {
    const n = this.varint();
    if (this.pos + n > this.buf.length) throw new RangeError('unexpected end of packet');
    const out = this.buf.subarray(this.pos, this.pos + n);
    this.pos += n;
    return out;
  }
}
