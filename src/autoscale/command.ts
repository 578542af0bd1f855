// `clusterdns autoscale ...`: flags → API connection → health server → control loop.
// Exit codes: 2 bad flags, 1 cannot start or --max-sync-failures reached, 0 on SIGTERM/SIGINT.
import { inClusterConnection, kubeconfigConnection, type ApiConnection } from '../kube/connection.js';
import { KubeClient } from '../kube/http.js';
import { exitWith, roleLogger, type Logger } from '../log.js';
import { roleFlags } from '../cli-flags.js';
import { VERSION } from '../version.js';
import { Autoscaler } from './autoscaler.js';
import { FlagError, parseAutoscaleFlags, targetsOf, USAGE } from './flags.js';
import { startHealthServer } from './health.js';
import { describeTarget } from './target.js';

const autoscaleLogger = (): Logger => roleLogger('autoscale');
function die(code: number, message: string): never {
  return exitWith('autoscale', code, message);
}

export async function run(argv: string[]): Promise<void> {
  const flags = roleFlags('autoscale', USAGE, () => parseAutoscaleFlags(argv), FlagError, die);
  if (flags === null) return;
  const log = autoscaleLogger();
  for (const f of flags.ignored) log.info(`ignoring ${f} (a glog flag, accepted for compatibility)`);

  let conn: ApiConnection;
  try {
    conn = flags.kubeconfig ? await kubeconfigConnection(flags.kubeconfig) : await inClusterConnection();
  } catch (err) {
    die(1, err instanceof Error ? err.message : String(err));
  }
  const namespace = flags.namespace ?? conn.namespace;
  if (!namespace) die(2, '--namespace is not set, $MY_POD_NAMESPACE is empty, and the connection names no namespace');
  const targets = targetsOf(flags, namespace);
  const client = new KubeClient(conn);

  const autoscaler = new Autoscaler({
    client,
    namespace,
    configMap: flags.configMap,
    targets,
    defaultParams: flags.defaultParams,
    pollPeriodMs: flags.pollPeriodSeconds * 1000,
    nodeLabels: flags.nodeLabels,
    maxSyncFailures: flags.maxSyncFailures,
    log,
  });
  let health: Awaited<ReturnType<typeof startHealthServer>> | undefined;
  if (flags.healthPort > 0) {
    try {
      health = await startHealthServer(flags.healthPort, () => autoscaler.lastPoll);
    } catch (err) {
      die(1, `health server on port ${flags.healthPort}: ${err instanceof Error ? err.message : String(err)}`);
    }
  }

  const stop = new AbortController();
  process.once('SIGTERM', () => stop.abort());
  process.once('SIGINT', () => stop.abort());
  log.info(
    `clusterdns-${VERSION}: scaling ${targets.map(describeTarget).join(', ')} by ConfigMap ${namespace}/${flags.configMap} ` +
      `every ${flags.pollPeriodSeconds}s (API: ${conn.source ?? conn.server.href}${health ? `, health :${health.port}` : ''})`,
  );
  const outcome = await autoscaler.run(stop.signal);
  await autoscaler.stop();
  client.close();
  await health?.close();
  if (outcome === 'too-many-failures') {
    log.fatal(`${flags.maxSyncFailures} consecutive polls failed (--max-sync-failures); exiting`);
    process.exit(1);
  }
  log.info('stopped');
  process.exit(0);
}
