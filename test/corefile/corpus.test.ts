// The 71 Corefiles of the shared corpus (copied into fixtures/ with their `# source:` lines and
// INDEX.md): every one that current CoreDNS accepts loads here, parsed and every plugin set up;
// the ones CoreDNS rejects too are refused with a FILE:LINE error naming the same problem.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { parseConfig, readConfigSource, Runtime } from '../../src/server/runtime.js';
import { HttpServices } from '../../src/server/http.js';
import { ServerServices } from '../../src/server/services.js';
import { knownDirectives, loadPlugins } from '../../src/plugins/order.js';
import { setLogSink } from '../../src/log.js';

const FIXTURES = resolve('test/corefile/fixtures');

/** Plugins outside CoreDNS's own build (third-party builds): the files are loaded without them. */
const EXTERNAL = new Set(['mdns', 'kuadrant', 'vcluster', 'k8s_crd', 'k8s_gateway', 'fanout']);

/** Files CoreDNS rejects as well (INDEX.md marks them), and the error each must give. */
const REJECTED = new Map<string, RegExp>([
  // kubespray's documented `cache: 0` renders `cache 0`, which CoreDNS refuses.
  [
    '06-kubespray-coredns-documented-options.Corefile',
    /:30 - Error during parsing: cache TTL can not be zero or negative/,
  ],
  // LEGACY: `upstream` in kubernetes (removed in CoreDNS 1.7.0).
  ['30-typhoon-legacy-upstream.Corefile', /:12 - Error during parsing: kubernetes: 'upstream' was removed/],
  // vcluster's own build; without its plugin the kubeconfig it names is not there either.
  ['32-vcluster-embedded.Corefile', /:10 - Error during parsing: kubernetes: kubeconfig: .*no such file/],
  // LEGACY: `federation` (removed in CoreDNS 1.7.0).
  ['36-k8s-docs-federation-legacy.Corefile', /:11 - Error during parsing: Unknown directive 'federation'/],
  // LEGACY: `proxy` (removed in CoreDNS 1.7.0).
  ['47-rewrite-regex-answer-proxy-legacy.Corefile', /:11 - Error during parsing: Unknown directive 'proxy'/],
  ['48-rewrite-continue-type-legacy.Corefile', /Error during parsing: (Unknown directive 'proxy'|rewrite: )/],
  [
    '56-kops-autopath-nsid-legacy.Corefile',
    /Error during parsing: (Unknown directive 'proxy'|kubernetes: 'upstream' was removed)/,
  ],
  ['60-kubernetes-transfer-legacy.Corefile', /Error during parsing: (Unknown directive 'proxy'|kubernetes: )/],
  ['68-file-zone-custom-domain-legacy.Corefile', /Error during parsing: Unknown directive 'proxy'/],
  // Kuadrant's own CoreDNS build (its `kuadrant` plugin), which also needs `geoip` and a MaxMind
  // database: clusterdns has no geoip (documented in the README), so it says so at the line.
  [
    '71-kuadrant-geoip-transfer.Corefile',
    /Error during parsing: Unknown directive 'geoip' \(a CoreDNS plugin that clusterdns does not include/,
  ],
]);

const files = readdirSync(FIXTURES)
  .filter((f) => f.endsWith('.Corefile'))
  .sort();

async function load(f: string): Promise<string[]> {
  const restore = setLogSink(() => {});
  try {
    const cfg = parseConfig(readConfigSource(join(FIXTURES, f)), 53);
    for (const b of cfg.blocks)
      b.directives = b.directives.filter((d) => knownDirectives.has(d.name) || !EXTERNAL.has(d.name));
    await loadPlugins(cfg.blocks.flatMap((b) => b.directives.map((d) => d.name)));
    const http = new HttpServices();
    const rt = new Runtime(cfg, {
      http,
      services: new ServerServices(),
      requestReload: () => {},
      shuttingDown: () => false,
    });
    const names = rt.instances.map((i) => i.name);
    await rt.shutdown();
    await http.closeAll();
    return names;
  } finally {
    restore();
  }
}

test('the whole corpus is here: 71 files and the index that says where each comes from', () => {
  assert.equal(files.length, 71);
});

for (const f of files) {
  const rejected = REJECTED.get(f);
  if (rejected) {
    test(`${f}: refused, as CoreDNS refuses it, with FILE:LINE`, async () => {
      await assert.rejects(load(f), rejected);
    });
    continue;
  }
  test(`${f}: loads, every plugin CoreDNS would run set up`, async () => {
    const names = await load(f);
    assert.ok(names.length > 0);
  });
}
