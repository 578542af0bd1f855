// A LIST body read as it arrives: each element of its `items` array is handed over as its own
// JSON text the moment it is complete, and only the rest (kind, metadata) is kept. A watch
// cache answers resourceVersion=0 with the whole collection in one body; parsed whole, 100,000
// objects cost hundreds of MB at once, item by item only the largest object.

/** Thrown when the body is not the JSON object of a list (cut short, or unbalanced). */
export class ListSyntaxError extends Error {
  readonly code = 'KUBE_ERR_LIST_SYNTAX';
  constructor(message: string) {
    super(message);
    this.name = 'ListSyntaxError';
  }
}

const QUOTE = 34;
const BACKSLASH = 92;
const OPEN_BRACE = 123;
const CLOSE_BRACE = 125;
const OPEN_BRACKET = 91;
const CLOSE_BRACKET = 93;
const ITEMS_KEY = /"items"\s*:\s*$/;

export class ListItemScanner {
  /** The body without the elements of `items`: `{"kind":…,"metadata":{…},"items":[]}`. */
  #skeleton = '';
  #depth = 0;
  #inString = false;
  #escape = false;
  /** Depth inside the items array (2), or -1 outside it. */
  #itemsDepth = -1;
  /** Text of an element not yet complete, carried to the next chunk. */
  #carry = '';
  #inItem = false;

  constructor(
    private readonly onItem: (json: string) => void,
    private readonly maxItemChars: number,
  ) {}

  write(chunk: string): void {
    const buf = this.#carry + chunk;
    const n = buf.length;
    let i = this.#carry.length;
    let itemStart = this.#inItem ? 0 : -1;
    // Where the current stretch of skeleton began (-1 while inside the items array).
    let segStart = this.#itemsDepth < 0 ? i : -1;
    for (; i < n; i++) {
      const c = buf.charCodeAt(i);
      if (this.#inString) {
        if (this.#escape) this.#escape = false;
        else if (c === BACKSLASH) this.#escape = true;
        else if (c === QUOTE) this.#inString = false;
        continue;
      }
      if (c === QUOTE) {
        this.#inString = true;
      } else if (c === OPEN_BRACE || c === OPEN_BRACKET) {
        if (
          c === OPEN_BRACKET &&
          this.#depth === 1 &&
          this.#itemsDepth < 0 &&
          ITEMS_KEY.test(this.#skeleton + buf.slice(segStart, i))
        ) {
          this.#skeleton += buf.slice(segStart, i + 1);
          segStart = -1;
          this.#itemsDepth = 2;
        } else if (this.#depth === this.#itemsDepth && itemStart < 0) {
          itemStart = i;
          this.#inItem = true;
        }
        this.#depth++;
      } else if (c === CLOSE_BRACE || c === CLOSE_BRACKET) {
        this.#depth--;
        if (this.#depth < 0) throw new ListSyntaxError('unbalanced brackets in the list body');
        if (this.#inItem && this.#depth === this.#itemsDepth) {
          this.#inItem = false;
          const text = buf.slice(itemStart, i + 1);
          itemStart = -1;
          this.onItem(text);
        } else if (this.#itemsDepth >= 0 && this.#depth === this.#itemsDepth - 1) {
          this.#itemsDepth = -1;
          segStart = i;
        }
      }
    }
    if (segStart >= 0) this.#skeleton += buf.slice(segStart);
    this.#carry = this.#inItem ? buf.slice(itemStart) : '';
    if (this.#carry.length > this.maxItemChars)
      throw new ListSyntaxError(`a list item is larger than ${this.maxItemChars} characters`);
  }

  /** The list without its items (`items` is empty), once the body has ended. */
  end(): unknown {
    if (this.#inString || this.#depth !== 0 || this.#inItem) throw new ListSyntaxError('the list body ended mid-value');
    try {
      return JSON.parse(this.#skeleton) as unknown;
    } catch (err) {
      throw new ListSyntaxError(`the list body is not JSON: ${err instanceof Error ? err.message : String(err)}`);
    }
  }
}
