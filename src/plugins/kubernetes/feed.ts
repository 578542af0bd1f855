// One index per distinct source in a server, shared by the kubernetes instances of the
// running and the next configuration (the server keeps them: services.ts). A reload builds a new Runtime while the old one still
// serves; without sharing, its kubernetes instance would relist (or, in a worker, receive
// the primary's whole snapshot) and rebuild every index while queries flow, which showed as
// p99 spikes of most of a second under load with 10,000 Services. The watch already keeps
// the index current, so the next configuration adopts it: nothing is relisted, and a
// changed source (another endpoint, other labels, edited kubeconfig or TLS files) gets a
// fresh index of its own.

import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { ServiceKey } from '../../server/services.js';
import { ClusterIndex } from '../../cluster/clusterindex.js';
import type { KubeSource } from '../../cluster/events.js';
import { specKey, type SourceSpec } from '../../cluster/relay.js';

export interface Feed {
  readonly key: string;
  readonly index: ClusterIndex;
  readonly source: KubeSource;
  /** Takes a hold on the feed (at a plugin's startup; a configuration only parsed holds nothing). */
  hold(): FeedHold;
}

export interface FeedHold {
  /** Starts the source once; later holders wait on the same start. */
  start(): Promise<void>;
  /** Gives up this hold; the last one stops the source. */
  release(): Promise<void>;
}

interface Entry {
  key: string;
  index: ClusterIndex;
  source: KubeSource;
  holders: number;
  started: Promise<void> | null;
}

/** The files whose content a source reads at start: a reload after editing them must reconnect. */
function filesOf(spec: SourceSpec): string[] {
  const s = spec.source;
  if (s.kind === 'kubeconfig') return [s.file];
  if (s.kind === 'endpoint' && s.tls) return [s.tls.cert, s.tls.key, s.tls.ca];
  return [];
}

export function feedKey(spec: SourceSpec): string {
  const h = createHash('sha256').update(specKey(spec));
  for (const f of filesOf(spec)) {
    try {
      h.update(readFileSync(f));
    } catch {
      h.update(`unreadable:${f}`);
    }
  }
  return h.digest('hex').slice(0, 16);
}

/** A server's feeds, one per distinct source. */
export class KubeFeeds {
  private readonly feeds = new Map<string, Entry>();

  /** The feed for `spec`: the one already running for the same source, or a new one. */
  feedFor(spec: SourceSpec, makeSource: () => KubeSource): Feed {
    return feedIn(this.feeds, spec, makeSource);
  }
}

/** Each server's feeds, found by the kubernetes plugin through its setup context. */
export const KUBE_FEEDS = new ServiceKey('kubernetes feeds', () => new KubeFeeds());

function feedIn(feeds: Map<string, Entry>, spec: SourceSpec, makeSource: () => KubeSource): Feed {
  const key = feedKey(spec);
  let e = feeds.get(key);
  if (e === undefined || e.holders === 0) {
    // Nobody holds it: whatever was there (a configuration parsed but never started) is unused.
    e = { key, index: new ClusterIndex(), source: makeSource(), holders: 0, started: null };
    feeds.set(key, e);
  }
  const entry = e;
  return {
    key,
    index: entry.index,
    source: entry.source,
    hold() {
      if (feeds.get(key) !== entry) feeds.set(key, entry);
      entry.holders++;
      let released = false;
      return {
        start() {
          entry.started ??= entry.source.start(entry.index.apply).catch((err: unknown) => {
            // A failed start is not kept: the next configuration tries again.
            entry.started = null;
            throw err;
          });
          return entry.started;
        },
        async release() {
          if (released) return;
          released = true;
          if (--entry.holders > 0) return;
          if (feeds.get(key) === entry) feeds.delete(key);
          if (entry.started) await entry.source.stop();
        },
      };
    },
  };
}
