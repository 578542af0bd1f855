// Serves zones read from master files; reloads a zone when its SOA serial changes on disk.

import { statSync } from 'node:fs';
import { Rcode } from '../../dns/constants.js';
import { isZoneTransfer } from '../../server/request.js';
import type { Invalidation } from '../../server/invalidation.js';
import { Response, type Handler, type HandlerResult, type Next, type Request } from '../../server/request.js';
import type { Logger } from '../../log.js';
import { matchZone, type Fallthrough } from '../fallthrough.js';
import { Zone } from './zone.js';
import type { ResourceRecord } from '../../dns/message.js';
import type { ZoneTransferSource } from '../plugin.js';
import { parseZoneFile } from './zonefile.js';

export interface FileOptions {
  file: string;
  zones: string[];
  reloadMs: number;
  fallthrough: Fallthrough;
}

/** Reads and checks the file for each zone; throws with FILE:LINE on a bad file. */
export function loadZones(file: string, origins: readonly string[]): Map<string, Zone> {
  const out = new Map<string, Zone>();
  for (const origin of origins) {
    const parsed = parseZoneFile(file, origin);
    out.set(origin, new Zone(origin, parsed.records));
  }
  return out;
}

export class FileHandler implements Handler, ZoneTransferSource {
  readonly name = 'file';
  private timer: NodeJS.Timeout | null = null;
  private mtimeMs = 0;
  private readonly changeListeners = new Set<(zone: string) => void>();

  constructor(
    private readonly o: FileOptions,
    private zones: Map<string, Zone>,
    private readonly resolve: (req: Request) => HandlerResult,
    private readonly log: Logger,
    private readonly invalidation: Invalidation,
  ) {}

  serveDNS(req: Request, next: Next): HandlerResult {
    const origin = matchZone(this.o.zones, req.name);
    if (origin === undefined) return next(req);
    const zone = this.zones.get(origin);
    // The file has not been read yet (it did not exist at start): CoreDNS answers SERVFAIL.
    if (zone === undefined) return Response.rcode(Rcode.SERVFAIL, this.name, `zone ${origin} not loaded`);
    // Zone transfers are the transfer plugin's; this one refuses them (CoreDNS without transfer).
    if (isZoneTransfer(req.qtype)) return Response.rcode(Rcode.REFUSED, this.name);
    const r = zone.lookup(req.qname, req.qtype);
    if (r.rcode === Rcode.NXDOMAIN && this.o.fallthrough.through(req.name)) return next(req);
    const m = req.reply(r.rcode);
    m.aa = r.authoritative;
    m.answers = r.answers;
    m.authorities = r.authorities;
    m.additionals = r.additionals;
    if (r.external === null || req.depth > 4) return Response.message(m, this.name);
    // A CNAME that leaves the zone is looked up through the server's own chain, as CoreDNS does.
    const ext = this.resolve(req.derive(r.external, req.qtype));
    const finish = (res: Response): Response => {
      if (res.rcode === Rcode.NOERROR && !res.dropped && !res.isBare) m.answers.push(...res.toMessage(req).answers);
      return Response.message(m, this.name);
    };
    return ext instanceof Promise ? ext.then(finish, () => Response.message(m, this.name)) : finish(ext);
  }

  transferZones(): readonly string[] {
    return this.o.zones;
  }

  transferRecords(zone: string): ResourceRecord[] | null {
    return this.zones.get(zone)?.all() ?? null;
  }

  onZoneChange(changed: (zone: string) => void): () => void {
    this.changeListeners.add(changed);
    return () => this.changeListeners.delete(changed);
  }

  start(): void {
    this.mtimeMs = this.mtime();
    if (this.o.reloadMs <= 0) return;
    this.timer = setInterval(() => this.check(), this.o.reloadMs);
    this.timer.unref();
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
  }

  private mtime(): number {
    try {
      return statSync(this.o.file).mtimeMs;
    } catch {
      return 0;
    }
  }

  /** Re-reads the file when it changed; a zone is swapped only when its SOA serial moved. */
  private check(): void {
    const m = this.mtime();
    if (m === this.mtimeMs) return;
    this.mtimeMs = m;
    let fresh: Map<string, Zone>;
    try {
      fresh = loadZones(this.o.file, this.o.zones);
    } catch (e) {
      this.log.error(`Failed to reload "${this.o.file}": ${(e as Error).message}`);
      return;
    }
    const next = new Map(this.zones);
    const changed: string[] = [];
    for (const [origin, z] of fresh) {
      const old = this.zones.get(origin);
      if (old !== undefined && z.serial === old.serial) continue;
      next.set(origin, z);
      changed.push(origin);
      this.log.info(`Successfully reloaded zone "${origin}" in "${this.o.file}" with ${z.serial} SOA serial`);
    }
    this.zones = next;
    for (const origin of changed) {
      this.invalidation.invalidateSuffix(origin);
      for (const f of this.changeListeners) f(origin);
    }
  }
}
