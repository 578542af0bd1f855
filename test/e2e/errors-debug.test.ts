// The errors plugin's `debug` level through the real binary: a consolidated summary at that
// level prints as a [DEBUG] line while the debug plugin is on, and not at all without it,
// as CoreDNS's log.Debug does.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { QType, Rcode } from '../../src/dns/constants.js';
import { query } from '../helpers/dns.js';
import { startServer } from '../helpers/server.js';
import { FakeUpstream } from '../forward/upstreams.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('errors: consolidate at the debug level', () => {
  let silent: FakeUpstream;
  before(async () => {
    silent = await FakeUpstream.start({ behaviour: () => {} });
  });
  after(async () => {
    await silent.close();
  });

  // Every query fails (the upstream never answers), so the errors plugin has a line to consolidate.
  const corefile = (debug: boolean) =>
    `.:PORT {\n    bind 127.0.0.1\n${debug ? '    debug\n' : ''}    errors {\n        consolidate 1s ".*" debug\n    }\n` +
    `    forward . 127.0.0.1:${silent.port} {\n        read_timeout 200ms\n        max_connect_attempts 1\n    }\n}\n`;

  it('prints the summary as a [DEBUG] line when the debug plugin is on', async () => {
    const s = await startServer({ corefile: corefile(true) });
    try {
      assert.equal((await query(s.port, 'example.org.', QType.A)).rcode, Rcode.SERVFAIL);
      await s.waitFor("[DEBUG] plugin/errors: 1 errors like '.*' occurred in last 1s", 5000);
    } finally {
      await s.stop();
    }
  });

  it('prints nothing at the debug level without the debug plugin', async () => {
    const s = await startServer({ corefile: corefile(false) });
    try {
      assert.equal((await query(s.port, 'example.org.', QType.A)).rcode, Rcode.SERVFAIL);
      // The summary is due one period after the first error; wait past it with room for a busy CI.
      await sleep(2500);
      assert.doesNotMatch(s.output(), /plugin\/errors/);
    } finally {
      await s.stop();
    }
  });
});
