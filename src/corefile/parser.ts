// Corefile parser: server blocks, nested directive blocks, environment
// substitution, snippets and `import` (files, globs, snippets), following the
// coredns/caddy parser and CoreDNS's server-key normalisation.

import * as fs from 'node:fs';
import * as path from 'node:path';

import { cidrToReverseZones } from '../dns/reverse.js';
import { CorefileError, redactContent } from './errors.js';
import { lex, replaceEnv, type LexToken } from './lexer.js';
import type { Directive, ServerBlock, ServerKey, Token } from './types.js';

export interface ParseOptions {
  /** Environment for `{$VAR}` / `{%VAR%}`; default process.env. */
  env?: Record<string, string | undefined>;
  /** Port for `dns://` keys without one (the -dns.port flag); default 53. */
  defaultPort?: number;
  /** When given, an unknown top-level directive in a server block is an error. */
  knownDirectives?: ReadonlySet<string>;
  /** File reader for the Corefile and imports; default fs.readFileSync(path, 'utf8'). */
  readFile?: (path: string) => string;
  /** Called once for every file read (the Corefile itself in parseCorefileFile, and each imported file, as absolute paths). */
  onFile?: (path: string) => void;
  /** Non-fatal problems, e.g. an import glob that matches nothing. */
  onWarning?: (msg: string) => void;
}

/** Default ports per scheme. */
export const SCHEME_PORTS: Readonly<Record<string, number>> = {
  dns: 53,
  tls: 853,
  quic: 853,
  grpc: 443,
  https: 443,
  https3: 443,
};

export const MAX_SNIPPET_EXPANSIONS = 10_000;
export const MAX_FILE_EXPANSIONS = 100_000;
const MAX_NESTING = 1_000;

/** Parser-internal token: a LexToken plus the import chain it was expanded through. */
interface PTok extends LexToken {
  /** Import chain: 'file:/abs/path' and 'snippet:name' entries, outermost first. */
  chain: readonly string[];
}

function isOpen(t: PTok | undefined): boolean {
  return t !== undefined && !t.quoted && t.text === '{';
}
function isClose(t: PTok | undefined): boolean {
  return t !== undefined && !t.quoted && t.text === '}';
}

function hasGlobMeta(s: string): boolean {
  return /[*?[]/.test(s);
}

/** Converts one glob path segment (`*`, `?`, `[...]`, `[!...]`/`[^...]`, `\x`) into a RegExp. */
function segmentRegex(seg: string): RegExp {
  let re = '^';
  for (let i = 0; i < seg.length; i++) {
    const c = seg[i]!;
    if (c === '*') re += '[^/]*';
    else if (c === '?') re += '[^/]';
    else if (c === '[') {
      const end = seg.indexOf(']', i + 2);
      if (end === -1) {
        re += '\\[';
        continue;
      }
      let body = seg.slice(i + 1, end);
      let neg = false;
      if (body.startsWith('!') || body.startsWith('^')) {
        neg = true;
        body = body.slice(1);
      }
      const cls = body.replace(/[\\\]^]/g, (m) => `\\${m}`);
      re += `[${neg ? '^' : ''}${cls}]`;
      i = end;
    } else if (c === '\\' && i + 1 < seg.length) {
      re += seg[i + 1]!.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&');
      i++;
    } else re += c.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&');
  }
  return new RegExp(`${re}$`);
}

/**
 * Small glob over the real filesystem: wildcards are allowed in any segment of
 * `pattern` (relative to `base` unless absolute; wildcard characters in `base`
 * itself are literal). Returns the matching regular files, sorted per segment.
 */
function globFiles(base: string, pattern: string): string[] {
  const start = path.isAbsolute(pattern) ? path.parse(path.resolve(pattern)).root : base;
  const segs = pattern.split(path.sep === '\\' ? /[\\/]/ : /\//).filter((s) => s !== '');
  let current: string[] = [start];
  for (let k = 0; k < segs.length; k++) {
    const seg = segs[k]!;
    const last = k === segs.length - 1;
    const next: string[] = [];
    for (const dir of current) {
      if (!hasGlobMeta(seg)) {
        next.push(path.join(dir, seg));
        continue;
      }
      let names: string[];
      try {
        names = fs.readdirSync(dir);
      } catch {
        continue;
      }
      const re = segmentRegex(seg);
      for (const name of names.sort()) {
        if (re.test(name)) next.push(path.join(dir, name));
      }
    }
    current = next.filter((p) => {
      try {
        const st = fs.statSync(p);
        return last ? st.isFile() : st.isDirectory();
      } catch {
        return false;
      }
    });
  }
  return current;
}

function describeChainEntry(e: string): string {
  return e.startsWith('snippet:') ? `(${e.slice('snippet:'.length)})` : e.slice('file:'.length);
}

function errCode(e: unknown): string | undefined {
  if (typeof e === 'object' && e !== null && 'code' in e) {
    const c = e.code;
    return typeof c === 'string' ? c : undefined;
  }
  return undefined;
}

function errMessage(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}

/** A run of tokens being read: the Corefile itself, or one expansion of an import. */
interface Frame {
  toks: PTok[];
  pos: number;
}

class Parser {
  /** Stack of token sources; the top frame is read first. */
  private readonly frames: Frame[] = [];
  private last: PTok | undefined;
  private readonly lexCache = new Map<string, LexToken[]>();
  private readonly env: Record<string, string | undefined>;
  private readonly defaultPort: number;
  private readonly known: ReadonlySet<string> | undefined;
  private readonly readFile: (p: string) => string;
  private readonly onFile: ((p: string) => void) | undefined;
  private readonly onWarning: ((m: string) => void) | undefined;
  private readonly snippets = new Map<string, PTok[]>();
  private snippetExpansions = 0;
  private fileExpansions = 0;
  private readonly seenFiles = new Set<string>();
  /** The last block serving each `scheme://zone:port`: only a block with a `view` may be followed by another. */
  private readonly addrOwners = new Map<string, ServerBlock>();

  constructor(text: string, file: string, opts: ParseOptions, rootAbs: string) {
    this.env = opts.env ?? process.env;
    this.defaultPort = opts.defaultPort ?? 53;
    this.known = opts.knownDirectives;
    this.readFile = opts.readFile ?? ((p: string) => fs.readFileSync(p, 'utf8'));
    this.onFile = opts.onFile;
    this.onWarning = opts.onWarning;
    this.seenFiles.add(rootAbs);
    const chain = [`file:${rootAbs}`];
    this.frames.push({ toks: lex(stripBom(text), file).map((t) => ({ ...t, chain })), pos: 0 });
  }

  /** The k-th upcoming token (0 = next), looking through the frame stack. */
  private peek(k = 0): PTok | undefined {
    for (let f = this.frames.length - 1; f >= 0; f--) {
      const fr = this.frames[f]!;
      const avail = fr.toks.length - fr.pos;
      if (k < avail) return fr.toks[fr.pos + k];
      k -= avail;
    }
    return undefined;
  }

  /** Consumes and returns the next token. */
  private next(): PTok | undefined {
    while (this.frames.length > 0) {
      const fr = this.frames[this.frames.length - 1]!;
      if (fr.pos < fr.toks.length) {
        this.last = fr.toks[fr.pos++]!;
        return this.last;
      }
      this.frames.pop();
    }
    return undefined;
  }

  /** True when the k-th upcoming token exists and comes from the same frame as the next one. */
  private inSameFrame(k: number): boolean {
    for (let f = this.frames.length - 1; f >= 0; f--) {
      const fr = this.frames[f]!;
      const avail = fr.toks.length - fr.pos;
      if (avail === 0) continue;
      return k < avail;
    }
    return false;
  }

  // The parser quotes every token it names, so redacting quoted parts is enough here.
  private err(t: { file: string; line: number; imported?: boolean }, what: string): CorefileError {
    return new CorefileError(t.file, t.line, t.imported ? redactContent(what, []) : what);
  }

  private text(t: PTok): string {
    return replaceEnv(t.text, this.env);
  }

  private outTok(t: PTok): Token {
    const out: Token = { text: this.text(t), file: t.file, line: t.line, quoted: t.quoted };
    if (t.imported) out.imported = true;
    return out;
  }

  private isImport(t: PTok): boolean {
    return !t.quoted && this.text(t) === 'import';
  }

  parseAll(): ServerBlock[] {
    const blocks: ServerBlock[] = [];
    for (;;) {
      const t = this.peek();
      if (!t) break;
      if (isClose(t)) throw this.err(t, "Unexpected '}' because no matching opening brace");
      if (isOpen(t)) throw this.err(t, "Unexpected token '{', expecting argument");
      if (this.isImport(t)) {
        this.doImport();
        continue;
      }
      const b = this.parseServerBlock();
      if (b) {
        this.claimAddresses(b);
        blocks.push(b);
      }
    }
    return blocks;
  }

  /** Two blocks may serve the same zone and port only when the earlier one has a `view` (CoreDNS's rule). */
  private claimAddresses(b: ServerBlock): void {
    for (const k of b.keys) {
      const addr = `${k.scheme}://${k.zone}:${k.port}`;
      const prior = this.addrOwners.get(addr);
      if (prior !== undefined && !prior.directives.some((d) => d.name === 'view'))
        throw this.err(b, `cannot serve ${addr} - it is already defined`);
      this.addrOwners.set(addr, b);
    }
  }

  /** Parses keys and the block that follows; returns null for a snippet definition. */
  private parseServerBlock(): ServerBlock | null {
    const first = this.peek();
    if (!first) return null;
    const keyToks: { tok: PTok; text: string }[] = [];
    let expectingAnother = false;
    let prev: PTok | undefined;
    for (;;) {
      const t = this.peek();
      if (!t) {
        if (expectingAnother && prev)
          throw this.err(prev, 'Unexpected EOF, expecting another address after the trailing comma');
        break;
      }
      if (prev && t.lineStart && !expectingAnother) break;
      if (isOpen(t)) {
        if (expectingAnother && prev) {
          throw this.err(t, "Expected another address but had '{' - check for extra comma");
        }
        break;
      }
      if (isClose(t)) throw this.err(t, "Unexpected '}' because no matching opening brace");
      this.next();
      prev = t;
      const text = this.text(t);
      if (text === '') continue;
      const parts = text.split(',');
      expectingAnother = text.endsWith(',');
      for (const p of parts) if (p !== '') keyToks.push({ tok: t, text: p });
    }

    const next = this.peek();
    // CoreDNS (caddy) also accepts a server block's '{' at the start of the next line.
    const braced = next !== undefined && isOpen(next);

    // Snippet definition: a single `(name)` key.
    if (keyToks.length === 1 && /^\(.*\)$/s.test(keyToks[0]!.text)) {
      const name = keyToks[0]!.text.slice(1, -1);
      const at = keyToks[0]!.tok;
      if (!braced) {
        if (next && !next.lineStart) throw this.err(next, `Unexpected token '${next.text}', expecting '{'`);
        throw this.err(at, `Snippet (${name}) must be followed by '{' on the same line`);
      }
      if (this.snippets.has(name)) throw this.err(at, `redeclaration of previously declared snippet ${name}`);
      this.snippets.set(name, this.snippetTokens(next));
      return null;
    }

    if (keyToks.length === 0) throw this.err(first, 'Server block without an address (the keys are empty)');
    const keys = this.normalizeKeys(keyToks);
    let directives: Directive[];
    if (braced) {
      this.next(); // '{'
      directives = this.parseDirectives(next, 0);
    } else {
      directives = this.parseDirectives(null, 0);
    }
    return { keys, directives, file: first.file, line: first.line };
  }

  /** Consumes `{ ... }` (the current token is `{`) and returns the raw tokens inside. */
  private snippetTokens(open: PTok): PTok[] {
    this.next();
    let depth = 1;
    const out: PTok[] = [];
    for (;;) {
      const t = this.peek();
      if (!t) throw this.err(open, "Unexpected EOF: '{' is never closed");
      this.next();
      if (isClose(t)) {
        depth--;
        if (depth === 0) break;
      } else if (isOpen(t)) depth++;
      out.push(t);
    }
    return out;
  }

  private normalizeKeys(keyToks: { tok: PTok; text: string }[]): ServerKey[] {
    const keys: ServerKey[] = [];
    for (const { tok, text } of keyToks) {
      for (const k of this.normalizeKey(tok, text)) {
        keys.push(k);
      }
    }
    return keys;
  }

  private normalizeKey(tok: PTok, raw: string): ServerKey[] {
    let rest = raw;
    let scheme = 'dns';
    const m = /^([A-Za-z][A-Za-z0-9+.-]*):\/\//.exec(rest);
    if (m) {
      scheme = m[1]!.toLowerCase();
      if (!Object.hasOwn(SCHEME_PORTS, scheme)) throw this.err(tok, `unsupported scheme '${m[1]}' in '${raw}'`);
      rest = rest.slice(m[0].length);
    }
    let host = rest;
    let portText: string | undefined;
    const cidr = /^(.*\/[0-9]+)(?::([^:]*))?$/.exec(rest);
    if (cidr) {
      host = cidr[1]!;
      portText = cidr[2];
    } else if (rest.startsWith('[')) {
      const close = rest.indexOf(']');
      if (close === -1) throw this.err(tok, `invalid address '${raw}'`);
      host = rest.slice(1, close);
      const after = rest.slice(close + 1);
      if (after.startsWith(':')) portText = after.slice(1);
      else if (after !== '') throw this.err(tok, `invalid address '${raw}'`);
    } else {
      const colons = rest.split(':').length - 1;
      if (colons === 1) {
        const i = rest.indexOf(':');
        host = rest.slice(0, i);
        portText = rest.slice(i + 1);
      }
    }
    let port = scheme === 'dns' ? this.defaultPort : SCHEME_PORTS[scheme]!;
    if (portText !== undefined) {
      if (!/^[0-9]{1,5}$/.test(portText) || Number(portText) > 65535) {
        throw this.err(tok, `invalid port '${portText}' in '${raw}'`);
      }
      port = Number(portText);
    }
    let zones: string[];
    if (host.includes('/')) {
      try {
        zones = cidrToReverseZones(host);
      } catch {
        throw this.err(tok, `invalid CIDR '${host}' in '${raw}'`);
      }
    } else {
      let z = host.toLowerCase();
      if (z === '' || z === '.') z = '.';
      else if (!z.endsWith('.')) z += '.';
      zones = [z];
    }
    return zones.map((zone) => ({ scheme, zone, port, raw }));
  }

  /**
   * Parses directives until the `}` matching `open` (consumed) or, when open
   * is null (a server block without braces), until EOF.
   */
  private parseDirectives(open: PTok | null, depth: number): Directive[] {
    if (depth > MAX_NESTING) throw this.err(open ?? this.last ?? { file: '', line: 0 }, 'blocks are nested too deeply');
    const out: Directive[] = [];
    for (;;) {
      const t = this.peek();
      if (!t) {
        if (open) throw this.err(open, "Unexpected EOF: '{' is never closed");
        return out;
      }
      if (isClose(t)) {
        if (!open) throw this.err(t, "Unexpected '}' because no matching opening brace");
        this.next();
        return out;
      }
      if (isOpen(t)) throw this.err(t, "Unexpected token '{', expecting argument");
      if (this.isImport(t)) {
        this.doImport();
        continue;
      }
      out.push(this.parseDirective(depth));
    }
  }

  private parseDirective(depth: number): Directive {
    const nameTok = this.next();
    if (!nameTok) throw new Error('internal: parseDirective at EOF');
    const name = this.text(nameTok);
    if (depth === 0 && this.known && !this.known.has(name)) {
      throw this.err(nameTok, `Unknown directive '${name}'`);
    }
    const d: Directive = { name, args: [], block: null, file: nameTok.file, line: nameTok.line };
    if (nameTok.imported) d.imported = true;
    for (;;) {
      const t = this.peek();
      if (!t || t.lineStart || isClose(t)) break;
      if (isOpen(t)) {
        this.next();
        d.block = this.parseDirectives(t, depth + 1);
        const after = this.peek();
        if (after && !after.lineStart && !isClose(after)) {
          throw this.err(after, `Unexpected token '${after.text}' after '}', expecting a new line`);
        }
        break;
      }
      this.next();
      d.args.push(this.outTok(t));
    }
    return d;
  }

  /**
   * The current token is `import`: replace `import PATTERN` with the snippet's
   * or the file(s)' tokens. Afterwards the cursor is on the first imported token.
   */
  private doImport(): void {
    const imp = this.peek(0);
    const patTok = this.peek(1);
    if (!imp) throw new Error('internal: doImport at EOF');
    if (!patTok || !this.inSameFrame(1) || patTok.lineStart || isOpen(patTok) || isClose(patTok)) {
      throw this.err(imp, "Wrong argument count or unexpected line ending after 'import'");
    }
    const extra = this.peek(2);
    if (extra && !extra.lineStart && !isClose(extra)) {
      throw this.err(extra, 'Import takes only one argument (glob pattern or file)');
    }
    const pattern = this.text(patTok);
    if (pattern === '') throw this.err(patTok, 'Import requires a non-empty filepath');

    let imported: PTok[] = [];
    const snippet = this.snippets.get(pattern);
    if (snippet) {
      const entry = `snippet:${pattern}`;
      this.checkCycle(imp, entry);
      if (this.snippetExpansions >= MAX_SNIPPET_EXPANSIONS) {
        throw this.err(imp, `maximum snippet import depth (${MAX_SNIPPET_EXPANSIONS}) exceeded`);
      }
      this.snippetExpansions++;
      const chain = [...imp.chain, entry];
      imported = snippet.map((t, i) => ({ ...t, chain, lineStart: i === 0 ? true : t.lineStart }));
    } else {
      if (this.fileExpansions >= MAX_FILE_EXPANSIONS) {
        throw this.err(imp, `maximum file import depth (${MAX_FILE_EXPANSIONS}) exceeded`);
      }
      this.fileExpansions++;
      const base = path.dirname(path.resolve(imp.file));
      const full = path.isAbsolute(pattern) ? pattern : path.join(base, pattern);
      const isGlob = hasGlobMeta(pattern);
      let files: string[];
      if (isGlob) {
        files = globFiles(base, pattern);
        if (files.length === 0) this.onWarning?.(`No files matching import glob pattern: ${pattern}`);
      } else {
        files = [path.resolve(full)];
      }
      for (const f of files) {
        for (const t of this.importFile(imp, f, pattern, !isGlob)) imported.push(t);
      }
    }
    // Consume `import PATTERN` and read the imported tokens next; a `}` on the same
    // line stays and closes the enclosing block.
    this.next();
    this.next();
    if (imported.length > 0) this.frames.push({ toks: imported, pos: 0 });
  }

  private checkCycle(imp: PTok, entry: string): void {
    if (imp.chain.includes(entry)) {
      const from = imp.chain.indexOf(entry);
      const shown = [...imp.chain.slice(from), entry].map(describeChainEntry).join(' -> ');
      throw this.err(imp, `Import cycle detected: ${shown}`);
    }
  }

  private importFile(imp: PTok, abs: string, pattern: string, explicit: boolean): PTok[] {
    const entry = `file:${abs}`;
    this.checkCycle(imp, entry);
    let toks = this.lexCache.get(abs);
    if (!toks) {
      let text: string;
      try {
        text = this.readFile(abs);
      } catch (e) {
        const code = errCode(e);
        if (explicit && code === 'ENOENT') throw this.err(imp, `File to import not found: ${pattern}`);
        if (code === 'EISDIR') throw this.err(imp, `Could not import ${abs}: is a directory`);
        throw this.err(imp, `Could not import ${abs}: ${errMessage(e)}`);
      }
      if (!this.seenFiles.has(abs)) {
        this.seenFiles.add(abs);
        this.onFile?.(abs);
      }
      toks = lex(stripBom(text), abs);
      for (const t of toks) t.imported = true;
      this.lexCache.set(abs, toks);
    }
    const chain = [...imp.chain, entry];
    return toks.map((t) => ({ ...t, chain }));
  }
}

function stripBom(s: string): string {
  return s.charCodeAt(0) === 0xfeff ? s.slice(1) : s;
}

/**
 * Parses Corefile text. `file` names the source in error messages and is the
 * base for relative imports (its directory, resolved against the cwd).
 * Throws CorefileError.
 */
export function parseCorefile(text: string, file: string, options: ParseOptions = {}): ServerBlock[] {
  return new Parser(text, file, options, path.resolve(file)).parseAll();
}

/** Reads and parses a Corefile. A missing/unreadable file is a CorefileError at line 0. */
export function parseCorefileFile(file: string, options: ParseOptions = {}): ServerBlock[] {
  const read = options.readFile ?? ((p: string) => fs.readFileSync(p, 'utf8'));
  let text: string;
  try {
    text = read(file);
  } catch (e) {
    throw new CorefileError(file, 0, `Could not read Corefile: ${errMessage(e)}`);
  }
  options.onFile?.(path.resolve(file));
  return parseCorefile(text, file, options);
}

export interface CorefileParseResult {
  blocks: ServerBlock[];
  /** Absolute paths of every file read: the Corefile first, then each imported file once, in read order. */
  files: string[];
  warnings: string[];
}

/** Parses a Corefile and also reports every file read and all warnings. */
export function parseCorefileFileWithFiles(file: string, options: ParseOptions = {}): CorefileParseResult {
  const files: string[] = [];
  const warnings: string[] = [];
  const blocks = parseCorefileFile(file, {
    ...options,
    onFile: (p) => {
      files.push(p);
      options.onFile?.(p);
    },
    onWarning: (m) => {
      warnings.push(m);
      options.onWarning?.(m);
    },
  });
  return { blocks, files, warnings };
}

/**
 * Every file a Corefile consists of (the Corefile and each imported file,
 * absolute paths), e.g. for the `reload` plugin to watch. Throws CorefileError
 * when the Corefile does not parse.
 */
export function corefileFiles(file: string, options: ParseOptions = {}): string[] {
  return parseCorefileFileWithFiles(file, options).files;
}
