// The part of Go's text/template that Corefiles' `template` answers use: {{ .Field.Sub }},
// method calls with arguments ({{ .Meta "kubernetes/namespace" }}), functions (index, len,
// printf, print, println, eq, ne, lt, le, gt, ge, and, or, not, and CoreDNS's parseInt),
// parentheses, pipelines (|), if / else if / else, with, comments and {{- -}} trimming.
// Hand-written: no npm package does method calls, pipelines and custom functions (see README).

export class TemplateError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'TemplateError';
  }
}

export type Value = string | number | boolean | null | undefined | Value[] | ValueObject | ValueFunction;
export interface ValueObject {
  [key: string]: Value;
}
export type ValueFunction = (...args: Value[]) => Value;

// ------------------------------------------------------------------ syntax tree

type Operand =
  | { kind: 'field'; base: Operand | null; path: string[] } // .A.B (base null: from dot), or (x).A
  | { kind: 'dot' }
  | { kind: 'root' } // $
  | { kind: 'literal'; value: Value }
  | { kind: 'func'; name: string }
  | { kind: 'pipe'; pipe: Pipeline };

type Command = Operand[];
type Pipeline = Command[];

type Node =
  | { kind: 'text'; text: string }
  | { kind: 'action'; pipe: Pipeline }
  | { kind: 'if' | 'with'; pipe: Pipeline; then: Node[]; else: Node[] | null };

// ------------------------------------------------------------------ lexing the actions

interface Action {
  body: string;
  /** Text before the action, trimmed as its markers say. */
  text: string;
}

function splitActions(src: string, name: string): { actions: Action[]; tail: string } {
  const actions: Action[] = [];
  let pos = 0;
  let text: string;
  let trimNext = false;
  for (;;) {
    const open = src.indexOf('{{', pos);
    if (open < 0) break;
    text = src.slice(pos, open);
    if (trimNext) text = text.replace(/^\s+/, '');
    let start = open + 2;
    if (/^-[ \t\r\n]/.test(src.slice(start, start + 2))) {
      text = text.replace(/\s+$/, '');
      start += 2;
    }
    const close = findClose(src, start, name);
    let end = close;
    trimNext = false;
    if (/[ \t\r\n]-$/.test(src.slice(close - 2, close))) {
      end = close - 2;
      trimNext = true;
    }
    actions.push({ body: src.slice(start, end), text });
    pos = close + 2;
  }
  let tail = src.slice(pos);
  if (trimNext) tail = tail.replace(/^\s+/, '');
  return { actions, tail };
}

/** The `}}` closing an action that starts at `from`, skipping quoted strings. */
function findClose(src: string, from: number, name: string): number {
  for (let i = from; i < src.length; i++) {
    const c = src[i];
    if (c === '"' || c === '`') {
      const q = c;
      i++;
      while (i < src.length && src[i] !== q) i += q === '"' && src[i] === '\\' ? 2 : 1;
      continue;
    }
    if (c === '}' && src[i + 1] === '}') return i;
  }
  throw new TemplateError(`template: ${name}: unclosed action`);
}

type Tok = { t: 'str' | 'num' | 'field' | 'ident' | 'var' | '(' | ')' | '|' | 'dot'; v: string };

function tokenize(body: string, name: string): Tok[] {
  const out: Tok[] = [];
  let i = 0;
  const err = (m: string) => new TemplateError(`template: ${name}: ${m}`);
  while (i < body.length) {
    const c = body[i]!;
    if (/\s/.test(c)) {
      i++;
      continue;
    }
    if (c === '(' || c === ')' || c === '|') {
      out.push({ t: c, v: c });
      i++;
      continue;
    }
    if (c === '"') {
      let j = i + 1;
      while (j < body.length && body[j] !== '"') j += body[j] === '\\' ? 2 : 1;
      if (j >= body.length) throw err('unterminated quoted string');
      let v: unknown;
      try {
        v = JSON.parse(body.slice(i, j + 1));
      } catch {
        throw err(`bad quoted string ${body.slice(i, j + 1)}`);
      }
      out.push({ t: 'str', v: v as string });
      i = j + 1;
      continue;
    }
    if (c === '`') {
      const j = body.indexOf('`', i + 1);
      if (j < 0) throw err('unterminated raw quoted string');
      out.push({ t: 'str', v: body.slice(i + 1, j) });
      i = j + 1;
      continue;
    }
    const num = /^[-+]?(0[xX][0-9a-fA-F_]+|0[oO]?[0-7_]+|0[bB][01_]+|\d[\d_]*(\.\d+)?([eE][-+]?\d+)?)/.exec(
      body.slice(i),
    );
    if (num && (c !== '-' && c !== '+' ? true : /\d/.test(body[i + 1] ?? ''))) {
      const s = num[0].replace(/_/g, '');
      const neg = s.startsWith('-');
      const abs = s.replace(/^[-+]/, '');
      const v = /^0[oO]/.test(abs) ? parseInt(abs.slice(2), 8) : /^0\d/.test(abs) ? parseInt(abs, 8) : Number(abs);
      if (Number.isNaN(v)) throw err(`bad number syntax: ${num[0]}`);
      out.push({ t: 'num', v: String(neg ? -v : v) });
      i += num[0].length;
      continue;
    }
    if (c === '.') {
      const m = /^(\.[A-Za-z_][A-Za-z0-9_]*)+/.exec(body.slice(i));
      if (m) {
        out.push({ t: 'field', v: m[0] });
        i += m[0].length;
      } else {
        out.push({ t: 'dot', v: '.' });
        i++;
      }
      continue;
    }
    if (c === '$') {
      const m = /^\$[A-Za-z0-9_]*/.exec(body.slice(i))!;
      if (m[0] !== '$') throw err(`undefined variable "${m[0]}"`);
      out.push({ t: 'var', v: '$' });
      i += 1;
      continue;
    }
    const id = /^[A-Za-z_][A-Za-z0-9_]*/.exec(body.slice(i));
    if (id) {
      out.push({ t: 'ident', v: id[0] });
      i += id[0].length;
      continue;
    }
    throw err(`unexpected "${c}" in command`);
  }
  return out;
}

// ------------------------------------------------------------------ parsing

const BUILTINS = new Set([
  'and',
  'or',
  'not',
  'len',
  'index',
  'print',
  'printf',
  'println',
  'eq',
  'ne',
  'lt',
  'le',
  'gt',
  'ge',
]);

class PipeParser {
  private i = 0;

  constructor(
    private readonly toks: Tok[],
    private readonly name: string,
    private readonly funcs: ReadonlySet<string>,
  ) {}

  private err(m: string): TemplateError {
    return new TemplateError(`template: ${this.name}: ${m}`);
  }

  parseAll(): Pipeline {
    const p = this.pipeline();
    if (this.i < this.toks.length) throw this.err(`unexpected "${this.toks[this.i]!.v}" in operand`);
    return p;
  }

  private pipeline(): Pipeline {
    const cmds: Pipeline = [];
    for (;;) {
      const cmd = this.command();
      if (cmd.length === 0) throw this.err(cmds.length ? 'missing command after |' : 'missing value for command');
      cmds.push(cmd);
      if (this.toks[this.i]?.t !== '|') break;
      this.i++;
    }
    return cmds;
  }

  private command(): Command {
    const ops: Operand[] = [];
    for (;;) {
      const t = this.toks[this.i];
      if (t === undefined || t.t === '|' || t.t === ')') break;
      ops.push(this.operand());
    }
    return ops;
  }

  private operand(): Operand {
    const t = this.toks[this.i++]!;
    let op: Operand;
    switch (t.t) {
      case 'str':
        op = { kind: 'literal', value: t.v };
        break;
      case 'num':
        op = { kind: 'literal', value: Number(t.v) };
        break;
      case 'field':
        return { kind: 'field', base: null, path: t.v.slice(1).split('.') };
      case 'dot':
        return { kind: 'dot' };
      case 'var':
        op = { kind: 'root' };
        break;
      case 'ident':
        if (t.v === 'true' || t.v === 'false') op = { kind: 'literal', value: t.v === 'true' };
        else if (t.v === 'nil') op = { kind: 'literal', value: null };
        else if (this.funcs.has(t.v) || BUILTINS.has(t.v)) op = { kind: 'func', name: t.v };
        else throw this.err(`function "${t.v}" not defined`);
        break;
      case '(': {
        const pipe = this.pipeline();
        if (this.toks[this.i]?.t !== ')') throw this.err('unclosed left paren');
        this.i++;
        op = { kind: 'pipe', pipe };
        break;
      }
      default:
        throw this.err(`unexpected "${t.v}" in operand`);
    }
    // A field chained on a term: (x).Field, $.Field.
    const next = this.toks[this.i];
    if (next?.t === 'field' && op.kind !== 'literal' && op.kind !== 'func') {
      this.i++;
      return { kind: 'field', base: op, path: next.v.slice(1).split('.') };
    }
    return op;
  }
}

/** A parsed template; `execute` renders it for one data value. */
export class GoTemplate {
  private constructor(
    readonly name: string,
    private readonly nodes: Node[],
    private readonly funcs: ReadonlyMap<string, ValueFunction>,
  ) {}

  /** Parses `src`. Throws TemplateError (`template: NAME: ...`) when it does not parse. */
  static parse(name: string, src: string, funcs: ReadonlyMap<string, ValueFunction> = new Map()): GoTemplate {
    const { actions, tail } = splitActions(src, name);
    const names = new Set(funcs.keys());
    // A stack of open blocks: the list nodes go to, and the if/with node being filled.
    const root: Node[] = [];
    const stack: Array<{ list: Node[]; node: Extract<Node, { kind: 'if' | 'with' }> | null; chained: number }> = [
      { list: root, node: null, chained: 0 },
    ];
    const pipe = (body: string) => new PipeParser(tokenize(body, name), name, names).parseAll();
    for (const a of actions) {
      const top = stack[stack.length - 1]!;
      if (a.text) top.list.push({ kind: 'text', text: a.text });
      const body = a.body.trim();
      if (body.startsWith('/*')) {
        if (!body.endsWith('*/')) throw new TemplateError(`template: ${name}: unclosed comment`);
        continue;
      }
      const word = /^[a-z]+/.exec(body)?.[0] ?? '';
      const rest = body.slice(word.length);
      if (word === 'if' || word === 'with') {
        const node = { kind: word, pipe: pipe(rest), then: [] as Node[], else: null } as Extract<
          Node,
          { kind: 'if' | 'with' }
        >;
        top.list.push(node);
        stack.push({ list: node.then, node, chained: 0 });
      } else if (word === 'else') {
        if (top.node === null || top.node.else !== null)
          throw new TemplateError(`template: ${name}: unexpected {{else}}`);
        const r = rest.trim();
        top.node.else = [];
        if (r.startsWith('if ') || r.startsWith('with ')) {
          // {{else if X}} is an if inside the else that closes with the same {{end}}.
          const w = r.startsWith('if ') ? 'if' : 'with';
          const inner = { kind: w, pipe: pipe(r.slice(w.length)), then: [] as Node[], else: null } as Extract<
            Node,
            { kind: 'if' | 'with' }
          >;
          top.node.else.push(inner);
          stack.pop();
          stack.push({ list: inner.then, node: inner, chained: top.chained + 1 });
        } else {
          if (r !== '') throw new TemplateError(`template: ${name}: unexpected "${r}" after else`);
          top.list = top.node.else;
        }
      } else if (word === 'end') {
        if (rest.trim() !== '' || top.node === null) throw new TemplateError(`template: ${name}: unexpected {{end}}`);
        stack.pop();
      } else if (
        word === 'range' ||
        word === 'template' ||
        word === 'define' ||
        word === 'block' ||
        word === 'break' ||
        word === 'continue'
      ) {
        throw new TemplateError(`template: ${name}: {{${word}}} is not supported by clusterdns's template plugin`);
      } else {
        top.list.push({ kind: 'action', pipe: pipe(body) });
      }
    }
    if (stack.length > 1) throw new TemplateError(`template: ${name}: unexpected EOF`);
    if (tail) root.push({ kind: 'text', text: tail });
    return new GoTemplate(name, root, funcs);
  }

  /**
   * The top-level fields the template reads (`.Name` → Name), and whether it reads anything
   * else (`$`, or `with`, which moves the dot): what an answer cache needs to know.
   */
  reads(): { fields: Set<string>; other: boolean } {
    const fields = new Set<string>();
    let other = false;
    const operand = (o: Operand): void => {
      if (o.kind === 'root') other = true;
      else if (o.kind === 'pipe') pipe(o.pipe);
      else if (o.kind === 'field') {
        if (o.base === null) fields.add(o.path[0]!);
        else operand(o.base);
      }
    };
    const pipe = (p: Pipeline): void => p.forEach((c) => c.forEach(operand));
    const walk = (nodes: Node[]): void => {
      for (const n of nodes) {
        if (n.kind === 'action') pipe(n.pipe);
        else if (n.kind === 'if' || n.kind === 'with') {
          if (n.kind === 'with') other = true;
          pipe(n.pipe);
          walk(n.then);
          if (n.else) walk(n.else);
        }
      }
    };
    walk(this.nodes);
    return { fields, other };
  }

  /** Renders the template. Throws TemplateError when a value cannot be evaluated. */
  execute(data: Value): string {
    const out: string[] = [];
    this.run(this.nodes, data, data, out);
    return out.join('');
  }

  private run(nodes: Node[], dot: Value, root: Value, out: string[]): void {
    for (const n of nodes) {
      switch (n.kind) {
        case 'text':
          out.push(n.text);
          break;
        case 'action':
          out.push(format(this.pipe(n.pipe, dot, root)));
          break;
        case 'if':
        case 'with': {
          const v = this.pipe(n.pipe, dot, root);
          if (truth(v)) this.run(n.then, n.kind === 'with' ? v : dot, root, out);
          else if (n.else) this.run(n.else, dot, root, out);
        }
      }
    }
  }

  private err(m: string): TemplateError {
    return new TemplateError(`template: ${this.name}: ${m}`);
  }

  private pipe(p: Pipeline, dot: Value, root: Value): Value {
    let v: Value;
    let piped = false;
    for (const cmd of p) {
      v = this.command(cmd, dot, root, piped ? [v] : []);
      piped = true;
    }
    return v;
  }

  private command(cmd: Command, dot: Value, root: Value, extra: Value[]): Value {
    const first = cmd[0]!;
    const args = () => [...cmd.slice(1).map((o) => this.operand(o, dot, root)), ...extra];
    if (first.kind === 'func') return this.call(first.name, args());
    if (first.kind === 'field') {
      const f = this.field(first, dot, root);
      if (typeof f === 'function') return f(...args());
      if (cmd.length > 1 || extra.length)
        throw this.err(`can't give argument to non-function ${'.' + first.path.join('.')}`);
      return f;
    }
    if (cmd.length > 1 || extra.length) throw this.err(`can't give argument to non-function`);
    return this.operand(first, dot, root);
  }

  private operand(o: Operand, dot: Value, root: Value): Value {
    switch (o.kind) {
      case 'literal':
        return o.value;
      case 'dot':
        return dot;
      case 'root':
        return root;
      case 'pipe':
        return this.pipe(o.pipe, dot, root);
      case 'func':
        return this.call(o.name, []);
      case 'field': {
        const f = this.field(o, dot, root);
        return typeof f === 'function' ? f() : f;
      }
    }
  }

  private field(o: Extract<Operand, { kind: 'field' }>, dot: Value, root: Value): Value {
    let v: Value = o.base === null ? dot : this.operand(o.base, dot, root);
    for (let i = 0; i < o.path.length; i++) {
      const key = o.path[i]!;
      if (typeof v === 'function' && i > 0) v = v();
      if (v === null || v === undefined) throw this.err(`nil pointer evaluating .${o.path.slice(0, i + 1).join('.')}`);
      if (typeof v !== 'object' || Array.isArray(v))
        throw this.err(`can't evaluate field ${key} in type ${typeName(v)}`);
      if (!Object.prototype.hasOwnProperty.call(v, key)) {
        // A map gives "no value" for a missing key; a struct has no such field (an error).
        if ((v as { [MAP]?: boolean })[MAP]) return undefined;
        throw this.err(`can't evaluate field ${key} in type ${typeName(v)}`);
      }
      v = v[key];
    }
    return v;
  }

  private call(name: string, args: Value[]): Value {
    const f = this.funcs.get(name);
    if (f) return f(...args);
    const argc = (n: number) => {
      if (args.length !== n) throw this.err(`wrong number of args for ${name}: want ${n} got ${args.length}`);
    };
    switch (name) {
      case 'and': {
        let v: Value = args[0];
        for (const a of args) {
          v = a;
          if (!truth(a)) break;
        }
        return v;
      }
      case 'or': {
        let v: Value = args[0];
        for (const a of args) {
          v = a;
          if (truth(a)) break;
        }
        return v;
      }
      case 'not':
        argc(1);
        return !truth(args[0]);
      case 'len': {
        argc(1);
        const a = args[0];
        if (typeof a === 'string') return Buffer.byteLength(a);
        if (Array.isArray(a)) return a.length;
        if (a && typeof a === 'object') return Object.keys(a).length;
        throw this.err(`len of type ${typeName(a)}`);
      }
      case 'index': {
        let v = args[0];
        for (const k of args.slice(1)) {
          if (Array.isArray(v)) {
            if (typeof k !== 'number' || !Number.isInteger(k))
              throw this.err(`cannot index slice/array with type ${typeName(k)}`);
            if (k < 0 || k >= v.length) throw this.err(`error calling index: index out of range: ${k}`);
            v = v[k];
          } else if (typeof v === 'string') {
            if (typeof k !== 'number' || k < 0 || k >= v.length)
              throw this.err(`error calling index: index out of range: ${format(k)}`);
            v = v.charCodeAt(k);
          } else if (v && typeof v === 'object') {
            v = Object.prototype.hasOwnProperty.call(v, format(k)) ? v[format(k)] : '';
          } else throw this.err(`can't index item of type ${typeName(v)}`);
        }
        return v;
      }
      case 'print':
        return goSprint(args);
      case 'println':
        return args.map(format).join(' ') + '\n';
      case 'printf':
        if (args.length === 0 || typeof args[0] !== 'string') throw this.err('printf: format must be a string');
        return sprintf(args[0], args.slice(1));
      case 'eq': {
        if (args.length < 2) throw this.err('missing argument for comparison');
        return args.slice(1).some((b) => compare(args[0], b, this) === 0);
      }
      case 'ne':
        argc(2);
        return compare(args[0], args[1], this) !== 0;
      case 'lt':
        argc(2);
        return compare(args[0], args[1], this, true) < 0;
      case 'le':
        argc(2);
        return compare(args[0], args[1], this, true) <= 0;
      case 'gt':
        argc(2);
        return compare(args[0], args[1], this, true) > 0;
      case 'ge':
        argc(2);
        return compare(args[0], args[1], this, true) >= 0;
    }
    throw this.err(`function "${name}" not defined`);
  }

  /** For compare(): errors carry the template's name. */
  error(m: string): TemplateError {
    return this.err(m);
  }
}

/** Marks an object as a Go map (a missing key is "no value", not an error). */
export const MAP = Symbol('map');

export function goMap(entries: Record<string, Value>): ValueObject {
  const m = { ...entries } as ValueObject & { [MAP]?: boolean };
  Object.defineProperty(m, MAP, { value: true, enumerable: false });
  return m;
}

function typeName(v: Value): string {
  if (v === null || v === undefined) return 'nil';
  if (Array.isArray(v)) return '[]interface {}';
  if (typeof v === 'number') return Number.isInteger(v) ? 'int' : 'float64';
  return typeof v;
}

function compare(a: Value, b: Value, t: GoTemplate, ordered = false): number {
  if (typeof a === 'number' && typeof b === 'number') return a < b ? -1 : a > b ? 1 : 0;
  if (typeof a === 'string' && typeof b === 'string') return a < b ? -1 : a > b ? 1 : 0;
  if (typeof a === 'boolean' && typeof b === 'boolean' && !ordered) return a === b ? 0 : 1;
  throw t.error(`error calling ${ordered ? 'lt' : 'eq'}: incompatible types for comparison`);
}

/** Go's truth: false, 0, "", nil and empty collections are false. */
export function truth(v: Value): boolean {
  if (v === null || v === undefined || v === false || v === 0 || v === '') return false;
  if (Array.isArray(v)) return v.length > 0;
  // A map is true when it has keys; a struct (our other objects) always is.
  if (typeof v === 'object') return (v as { [MAP]?: boolean })[MAP] ? Object.keys(v).length > 0 : true;
  return true;
}

/** fmt.Sprint of one value. */
export function format(v: Value): string {
  if (v === undefined) return '<no value>';
  if (v === null) return '<nil>';
  if (typeof v === 'string') return v;
  if (typeof v === 'number' || typeof v === 'boolean') return String(v);
  if (Array.isArray(v)) return `[${v.map(format).join(' ')}]`;
  if (typeof v === 'function') return '<func>';
  if (Object.prototype.hasOwnProperty.call(v, 'toString')) return (v as { toString(): string }).toString();
  // eslint-disable-next-line @typescript-eslint/no-base-to-string -- Object's default text is what marks a Go map here
  const s = String(v);
  return s === '[object Object]'
    ? `map[${Object.keys(v)
        .sort()
        .map((k) => `${k}:${format(v[k])}`)
        .join(' ')}]`
    : s;
}

/** fmt.Sprint: spaces between operands when neither is a string. */
function goSprint(args: Value[]): string {
  let s = '';
  for (let i = 0; i < args.length; i++) {
    if (i > 0 && typeof args[i] !== 'string' && typeof args[i - 1] !== 'string') s += ' ';
    s += format(args[i]);
  }
  return s;
}

/** fmt.Sprintf for the verbs templates use: %s %v %d %x %X %o %b %c %q %f and %%, with flags and width. */
export function sprintf(fmt: string, args: Value[]): string {
  let ai = 0;
  return fmt.replace(
    /%([-+# 0]*)(\d*)(?:\.(\d+))?([a-zA-Z%])/g,
    (all, flags: string, width: string, prec: string | undefined, verb: string) => {
      if (verb === '%') return '%';
      if (ai >= args.length) return `%!${verb}(MISSING)`;
      const a = args[ai++];
      let s: string;
      const int = typeof a === 'number' && Number.isInteger(a);
      switch (verb) {
        case 'd':
          s = int ? String(a) : `%!d(${typeName(a)}=${format(a)})`;
          break;
        case 'x':
        case 'X':
          s = int ? a.toString(16) : Buffer.from(format(a), 'latin1').toString('hex');
          if (verb === 'X') s = s.toUpperCase();
          break;
        case 'o':
          s = int ? a.toString(8) : `%!o(${format(a)})`;
          break;
        case 'b':
          s = int ? a.toString(2) : `%!b(${format(a)})`;
          break;
        case 'c':
          s = int ? String.fromCharCode(a) : `%!c(${format(a)})`;
          break;
        case 'q':
          s = JSON.stringify(format(a));
          break;
        case 'f':
          s = typeof a === 'number' ? a.toFixed(prec === undefined ? 6 : Number(prec)) : `%!f(${format(a)})`;
          break;
        case 's':
        case 'v':
          s = format(a);
          if (prec !== undefined && verb === 's') s = s.slice(0, Number(prec));
          break;
        default:
          return `%!${verb}(${format(a)})`;
      }
      const w = Number(width || 0);
      if (s.length < w) {
        if (flags.includes('-')) s = s.padEnd(w);
        else if (flags.includes('0') && verb !== 's' && verb !== 'q' && verb !== 'v')
          s = s.startsWith('-') ? '-' + s.slice(1).padStart(w - 1, '0') : s.padStart(w, '0');
        else s = s.padStart(w);
      }
      return s;
    },
  );
}
