// Answers A, AAAA and PTR from an inline list and a hosts-format file, re-read when it changes.

import { readFile, stat } from 'node:fs/promises';
import { QType, Rcode } from '../../dns/constants.js';
import { Response, type Handler, type HandlerResult, type Next, type Request } from '../../server/request.js';
import { bareReply, recordsReply } from '../../server/reply.js';
import { Fallthrough, matchZone } from '../fallthrough.js';
import type { Logger } from '../../log.js';
import { FAST_MAX_MS, fastFlush } from '../../server/fast-answers.js';
import { HostsTable, parseHostsText, type ParsedLine, type PreparedRecords } from './hostsfile.js';

export interface HostsOptions {
  file: string;
  zones: string[];
  inline: ParsedLine[];
  ttlSeconds: number;
  reverse: boolean;
  reloadMs: number;
  fallthrough: string[] | null;
}

const AA = 0x0400;

export class HostsHandler implements Handler {
  readonly name = 'hosts';
  private table: HostsTable;
  private readonly fall: Fallthrough;
  private timer: NodeJS.Timeout | null = null;
  private fileStamp = '';
  private fileLines: ParsedLine[] = [];

  constructor(
    private readonly opts: HostsOptions,
    private readonly log: Logger,
  ) {
    this.fall = new Fallthrough(opts.fallthrough);
    this.table = HostsTable.build(opts.inline, opts.ttlSeconds, opts.reverse, opts.zones);
  }

  async start(): Promise<void> {
    await this.readFileIfChanged();
    if (this.opts.reloadMs > 0) {
      this.timer = setInterval(() => void this.readFileIfChanged(), this.opts.reloadMs);
      this.timer.unref();
    }
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
  }

  /** Entries currently served (inline + file), for tests and status. */
  get size(): number {
    return this.table.size;
  }

  private async readFileIfChanged(): Promise<void> {
    let stamp: string;
    try {
      const s = await stat(this.opts.file);
      stamp = `${s.mtimeMs}:${s.size}:${s.ino}`;
    } catch {
      // A missing file serves no entries (inline ones stay); it is picked up when it returns.
      stamp = 'missing';
    }
    if (stamp === this.fileStamp) return;
    let lines: ParsedLine[] = [];
    if (stamp !== 'missing') {
      try {
        const text = await readFile(this.opts.file, 'utf8');
        lines = parseHostsText(text, (n, why) => this.log.warn(`${this.opts.file}:${n}: ${why}; line skipped`));
      } catch (e) {
        this.log.warn(`cannot read ${this.opts.file}: ${(e as Error).message}`);
        return;
      }
    } else if (this.fileStamp !== '') {
      this.log.warn(`${this.opts.file} is gone; serving inline entries only`);
    }
    this.fileStamp = stamp;
    this.fileLines = lines;
    fastFlush();
    this.table = HostsTable.build(
      [...this.opts.inline, ...this.fileLines],
      this.opts.ttlSeconds,
      this.opts.reverse,
      this.opts.zones,
    );
  }

  private answer(req: Request, recs: PreparedRecords): Response {
    const res = Response.wire(recordsReply(req, Rcode.NOERROR, AA, recs.bytes, recs.count, 0, 0), this.name);
    // The same until the file is re-read (which flushes the native table).
    res.fastMs = FAST_MAX_MS;
    return res;
  }

  serveDNS(req: Request, next: Next): HandlerResult {
    const name = req.name;
    if (req.qtype === QType.PTR) {
      // As in CoreDNS, reverse lookups are answered whatever the zones, and a miss always goes on.
      const recs = this.table.byReverse.get(name);
      if (recs) return this.answer(req, recs);
      if (matchZone(this.opts.zones, name) === undefined || !this.table.byName.has(name)) return next(req);
    } else if (matchZone(this.opts.zones, name) === undefined) {
      return next(req);
    }
    const entry = this.table.byName.get(name);
    if (entry !== undefined) {
      const recs = req.qtype === QType.A ? entry.a : req.qtype === QType.AAAA ? entry.aaaa : null;
      if (recs !== null) return this.answer(req, recs);
    }
    if (this.fall.through(name)) return next(req);
    // The name exists with other data: NODATA. Otherwise SERVFAIL, as CoreDNS does,
    // because a hosts file has no SOA to make an NXDOMAIN with.
    if (entry !== undefined) {
      const res = Response.wire(bareReply(req, Rcode.NOERROR, AA), this.name);
      res.fastMs = FAST_MAX_MS;
      return res;
    }
    return Response.rcode(Rcode.SERVFAIL, this.name);
  }
}
