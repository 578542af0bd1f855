// Logs the errors plugins report: "[ERROR] plugin/errors: RCODE NAME TYPE: ERROR".

import { typeToString } from '../../dns/constants.js';
import type { Handler, HandlerResult, Next, Request, Response } from '../../server/request.js';
import type { Logger } from '../../log.js';

export interface ConsolidateRule {
  periodMs: number;
  pattern: RegExp;
  level: 'warning' | 'error' | 'info' | 'debug';
  showFirst: boolean;
  count: number;
  timer: NodeJS.Timeout | null;
}

export class ErrorsHandler implements Handler {
  readonly name = 'errors';

  constructor(
    private readonly rules: ConsolidateRule[],
    readonly stacktrace: boolean,
    private readonly log: Logger,
  ) {}

  serveDNS(req: Request, next: Next): HandlerResult {
    const r = next(req);
    if (r instanceof Promise) return r.then((res) => this.check(req, res));
    return this.check(req, r);
  }

  private check(req: Request, res: Response): Response {
    if (res.error !== undefined) this.report(`${res.rcode} ${req.qname} ${typeToString(req.qtype)}: ${res.error}`);
    return res;
  }

  private emit(level: ConsolidateRule['level'], msg: string): void {
    if (level === 'warning') this.log.warn(msg);
    else if (level === 'info') this.log.info(msg);
    else if (level === 'debug') this.log.debug(msg);
    else this.log.error(msg);
  }

  report(msg: string): void {
    for (const rule of this.rules) {
      if (!rule.pattern.test(msg)) continue;
      if (rule.count === 0) {
        if (rule.showFirst) this.emit(rule.level, msg);
        rule.timer = setTimeout(() => {
          const n = rule.count - (rule.showFirst ? 1 : 0);
          if (n > 0)
            this.emit(
              rule.level,
              `${n} errors like '${rule.pattern.source}' occurred in last ${rule.periodMs / 1000}s`,
            );
          rule.count = 0;
          rule.timer = null;
        }, rule.periodMs);
        rule.timer.unref();
      }
      rule.count++;
      return;
    }
    this.log.error(msg);
  }

  stop(): void {
    for (const r of this.rules) if (r.timer) clearTimeout(r.timer);
  }
}
