// Reads, splices and writes the hosts file under the lock: the one place connect changes it.
import fs from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { realFileOps, resolveTarget, writeFileAtomic, type FileOps } from '../sys/atomic-file.js';
import { eolOf, renderBlock, spliceBlock } from './hosts-block.js';
import { withLock } from './lock.js';

export interface HostsRecord {
  path: string;
  /** The file's last line had no line break and we added one before our block. */
  addedNewline: boolean;
  /** The file did not exist and we created it (removed again if only our block is left). */
  created: boolean;
}

export interface HostsWriteOutcome {
  changed: boolean;
  method?: 'rename' | 'in-place' | 'unlink';
  record: HostsRecord;
}

export function hostsLockPath(hostsPath: string): string {
  return join(dirname(hostsPath), `.${basename(hostsPath)}.clusterdns.lock`);
}

/**
 * Makes the hosts file's marked block hold `entries` (null: no block). `before` runs while the
 * lock is held and before any byte is written, with the record that undoing needs, so that
 * a crash right after the write can still be undone from the state file.
 */
export async function syncHostsBlock(
  record: HostsRecord,
  entries: readonly string[] | null,
  opts: { defaultEol?: string; ops?: FileOps; before?: (next: HostsRecord) => void } = {},
): Promise<HostsWriteOutcome> {
  return withLock(hostsLockPath(record.path), () => {
    const target = resolveTarget(record.path);
    const text = target.exists ? fs.readFileSync(target.realPath, 'utf8') : '';
    const eol = eolOf(text, opts.defaultEol ?? '\n');
    const block = entries === null ? null : renderBlock(entries, eol);
    const spliced = spliceBlock(text, block, record.addedNewline);
    const next: HostsRecord = {
      path: record.path,
      addedNewline: spliced.addedNewline,
      created: target.exists ? record.created : entries !== null,
    };
    if (spliced.text === text && (target.exists || entries === null)) {
      return { changed: false, record: next };
    }
    opts.before?.(next);
    if (entries === null && spliced.text === '' && record.created) {
      fs.rmSync(target.realPath, { force: true });
      return { changed: true, method: 'unlink', record: { ...next, created: false } };
    }
    const { method } = writeFileAtomic(target, spliced.text, opts.ops ?? realFileOps);
    return { changed: true, method, record: next };
  });
}
