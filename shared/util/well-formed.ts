/**
 * Strings UTF-8 can carry. A string holding half a surrogate pair has no UTF-8 form: MessagePack
 * payloads and UTF-8 text would carry it as U+FFFD, so a key would become another key and a value
 * not the one a function returned. Such strings are refused where they enter, with this error.
 */

/** String.prototype.isWellFormed (Node 20; typed by ES2024, past this project's lib) */
const isWellFormedNative = (String.prototype as unknown as { isWellFormed(this: string): boolean }).isWellFormed;

/** True when `s` holds no lone surrogate (a one-byte string is answered without a scan). */
export function isWellFormed(s: string): boolean {
  return isWellFormedNative.call(s);
}

/** The error for a string holding a lone surrogate; `where` says what held it. */
export function loneSurrogateError(s: string, where?: string): RangeError {
  return new RangeError(`${where ? `${where}: ` : ''}the string ${JSON.stringify(s.slice(0, 40))} holds a lone surrogate, which UTF-8 cannot carry`);
}

/**
 * Throws `loneSurrogateError` for the first string (a value, an object's or a Map's key) of
 * `value` holding a lone surrogate. Byte arrays are not walked.
 */
export function checkWellFormed(value: unknown, where?: string): void {
  if (typeof value === 'string') {
    if (!isWellFormed(value)) throw loneSurrogateError(value, where);
  } else if (typeof value === 'object' && value !== null && !ArrayBuffer.isView(value)) {
    if (Array.isArray(value) || value instanceof Set) for (const v of value) checkWellFormed(v, where);
    else if (value instanceof Map) {
      for (const [k, v] of value) {
        checkWellFormed(k, where);
        checkWellFormed(v, where);
      }
    } else {
      for (const k in value) {
        checkWellFormed(k, where);
        checkWellFormed((value as Record<string, unknown>)[k], where);
      }
    }
  }
}
