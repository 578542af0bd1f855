// The part of expr-lang's language (the library CoreDNS's *view* uses) that view expressions need:
// literals (strings in single or double quotes, numbers, true/false/nil, [lists]), the view
// functions, `!`/`not`, `&&`/`and`, `||`/`or`, comparisons, `in`/`not in`, `matches`, `contains`,
// `startsWith`, `endsWith`, `+` and parentheses. Compiled once at setup into a closure tree.

export type Value = string | number | boolean | null | Value[];

/** What an expression can ask about the query (view's functions). */
export interface ExprEnv {
  call(name: string, args: Value[]): Value;
}

export class ExprError extends Error {
  constructor(
    what: string,
    readonly column: number,
  ) {
    super(`${what} (at column ${column + 1})`);
    this.name = 'ExprError';
  }
}

type Node = (env: ExprEnv) => Value;

interface Tok {
  kind: 'num' | 'str' | 'id' | 'op' | 'end';
  text: string;
  at: number;
}

const OPS = ['==', '!=', '<=', '>=', '&&', '||', '<', '>', '!', '(', ')', '[', ']', ',', '+', '-'];

function lex(src: string): Tok[] {
  const out: Tok[] = [];
  let i = 0;
  while (i < src.length) {
    const c = src[i]!;
    if (c === ' ' || c === '\t' || c === '\n' || c === '\r') {
      i++;
      continue;
    }
    if (c === "'" || c === '"') {
      let s = '';
      let j = i + 1;
      for (; j < src.length && src[j] !== c; j++) {
        if (src[j] === '\\' && j + 1 < src.length) {
          const e = src[++j]!;
          s += e === 'n' ? '\n' : e === 't' ? '\t' : e;
        } else s += src[j]!;
      }
      if (j >= src.length) throw new ExprError('unterminated string', i);
      out.push({ kind: 'str', text: s, at: i });
      i = j + 1;
      continue;
    }
    const num = /^\d+(\.\d+)?/.exec(src.slice(i));
    if (num) {
      out.push({ kind: 'num', text: num[0], at: i });
      i += num[0].length;
      continue;
    }
    const id = /^[A-Za-z_][A-Za-z0-9_]*/.exec(src.slice(i));
    if (id) {
      out.push({ kind: 'id', text: id[0], at: i });
      i += id[0].length;
      continue;
    }
    const op = OPS.find((o) => src.startsWith(o, i));
    if (op === undefined) throw new ExprError(`unexpected character '${c}'`, i);
    out.push({ kind: 'op', text: op, at: i });
    i += op.length;
  }
  out.push({ kind: 'end', text: '', at: src.length });
  return out;
}

function truthy(v: Value): boolean {
  return v === true;
}

function equal(a: Value, b: Value): boolean {
  if (Array.isArray(a) || Array.isArray(b)) return false;
  return a === b;
}

function compare(op: string, a: Value, b: Value): boolean {
  if (typeof a !== typeof b || (typeof a !== 'number' && typeof a !== 'string')) return false;
  const x = a;
  const y = b as number | string;
  return op === '<' ? x < y : op === '<=' ? x <= y : op === '>' ? x > y : x >= y;
}

/** Regexes are compiled once per literal pattern; a dynamic pattern is compiled (and bounded) per use. */
const MAX_DYNAMIC_PATTERNS = 64;

class Parser {
  private pos = 0;
  private readonly dynamic = new Map<string, RegExp>();

  constructor(
    private readonly toks: Tok[],
    private readonly functions: ReadonlySet<string>,
  ) {}

  private peek(): Tok {
    return this.toks[this.pos]!;
  }

  private take(): Tok {
    return this.toks[this.pos++]!;
  }

  private isOp(text: string): boolean {
    const t = this.peek();
    return t.kind === 'op' && t.text === text;
  }

  private isWord(text: string): boolean {
    const t = this.peek();
    return t.kind === 'id' && t.text === text;
  }

  private expect(text: string): void {
    const t = this.take();
    if (t.kind !== 'op' || t.text !== text) throw new ExprError(`expected '${text}'`, t.at);
  }

  parse(): Node {
    const n = this.or();
    const t = this.peek();
    if (t.kind !== 'end') throw new ExprError(`unexpected '${t.text}'`, t.at);
    return n;
  }

  private or(): Node {
    let l = this.and();
    while (this.isOp('||') || this.isWord('or')) {
      this.take();
      const a = l;
      const b = this.and();
      l = (env) => truthy(a(env)) || truthy(b(env));
    }
    return l;
  }

  private and(): Node {
    let l = this.not();
    while (this.isOp('&&') || this.isWord('and')) {
      this.take();
      const a = l;
      const b = this.not();
      l = (env) => truthy(a(env)) && truthy(b(env));
    }
    return l;
  }

  private not(): Node {
    if (this.isOp('!') || this.isWord('not')) {
      this.take();
      const a = this.not();
      return (env) => !truthy(a(env));
    }
    return this.comparison();
  }

  private comparison(): Node {
    const l = this.additive();
    const t = this.peek();
    let op = '';
    if (t.kind === 'op' && ['==', '!=', '<', '<=', '>', '>='].includes(t.text)) op = t.text;
    else if (t.kind === 'id' && ['in', 'matches', 'contains', 'startsWith', 'endsWith'].includes(t.text)) op = t.text;
    else if (t.kind === 'id' && t.text === 'not' && this.toks[this.pos + 1]?.text === 'in') {
      this.take();
      op = 'not in';
    }
    if (op === '') return l;
    this.take();
    const rTok = this.peek();
    const r = this.additive();
    switch (op) {
      case '==':
        return (env) => equal(l(env), r(env));
      case '!=':
        return (env) => !equal(l(env), r(env));
      case 'in':
      case 'not in': {
        const want = op === 'in';
        return (env) => {
          const list = r(env);
          const v = l(env);
          return Array.isArray(list) ? list.some((x) => equal(x, v)) === want : !want;
        };
      }
      case 'matches': {
        if (rTok.kind === 'str' && this.toks[this.pos - 1] === rTok) {
          let re: RegExp;
          try {
            re = new RegExp(rTok.text);
          } catch (e) {
            throw new ExprError(`invalid regular expression: ${(e as Error).message}`, rTok.at);
          }
          return (env) => {
            const v = l(env);
            return typeof v === 'string' && re.test(v);
          };
        }
        return (env) => {
          const v = l(env);
          const p = r(env);
          if (typeof v !== 'string' || typeof p !== 'string') return false;
          let re = this.dynamic.get(p);
          if (re === undefined) {
            try {
              re = new RegExp(p);
            } catch {
              return false;
            }
            if (this.dynamic.size >= MAX_DYNAMIC_PATTERNS) this.dynamic.clear();
            this.dynamic.set(p, re);
          }
          return re.test(v);
        };
      }
      case 'contains':
      case 'startsWith':
      case 'endsWith':
        return (env) => {
          const a = l(env);
          const b = r(env);
          if (typeof a !== 'string' || typeof b !== 'string') return false;
          return op === 'contains' ? a.includes(b) : op === 'startsWith' ? a.startsWith(b) : a.endsWith(b);
        };
      default:
        return (env) => compare(op, l(env), r(env));
    }
  }

  private additive(): Node {
    let l = this.unary();
    while (this.isOp('+') || this.isOp('-')) {
      const op = this.take().text;
      const a = l;
      const b = this.unary();
      l = (env) => {
        const x = a(env);
        const y = b(env);
        if (op === '+' && typeof x === 'string' && typeof y === 'string') return x + y;
        if (typeof x === 'number' && typeof y === 'number') return op === '+' ? x + y : x - y;
        return null;
      };
    }
    return l;
  }

  private unary(): Node {
    if (this.isOp('-')) {
      this.take();
      const a = this.unary();
      return (env) => {
        const v = a(env);
        return typeof v === 'number' ? -v : null;
      };
    }
    return this.primary();
  }

  private primary(): Node {
    const t = this.take();
    switch (t.kind) {
      case 'num': {
        const v = Number(t.text);
        return () => v;
      }
      case 'str': {
        const v = t.text;
        return () => v;
      }
      case 'op':
        if (t.text === '(') {
          const n = this.or();
          this.expect(')');
          return n;
        }
        if (t.text === '[') {
          const items: Node[] = [];
          if (!this.isOp(']')) {
            do items.push(this.or());
            while (this.isOp(',') && this.take());
          }
          this.expect(']');
          return (env) => items.map((i) => i(env));
        }
        throw new ExprError(`unexpected '${t.text}'`, t.at);
      case 'id': {
        if (t.text === 'true') return () => true;
        if (t.text === 'false') return () => false;
        if (t.text === 'nil') return () => null;
        if (!this.isOp('(')) throw new ExprError(`unknown name '${t.text}' (functions are called: ${t.text}())`, t.at);
        if (!this.functions.has(t.text)) throw new ExprError(`unknown function '${t.text}'`, t.at);
        this.take();
        const args: Node[] = [];
        if (!this.isOp(')')) {
          do args.push(this.or());
          while (this.isOp(',') && this.take());
        }
        this.expect(')');
        const name = t.text;
        return (env) =>
          env.call(
            name,
            args.map((a) => a(env)),
          );
      }
      default:
        throw new ExprError('unexpected end of expression', t.at);
    }
  }
}

/** Compiles `src`; throws ExprError for a syntax error or an unknown function. */
export function compileExpr(src: string, functions: ReadonlySet<string>): (env: ExprEnv) => boolean {
  const n = new Parser(lex(src), functions).parse();
  return (env) => n(env) === true;
}
