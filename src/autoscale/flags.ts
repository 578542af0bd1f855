// cluster-proportional-autoscaler's command line (pflag style: --name=value or --name value;
// a single dash is accepted too), plus --kubeconfig and --health-port. glog's flags are
// accepted and ignored so existing manifests run unchanged.
import { defaultParamsData, ParamsError, parseScalingParams } from './params.js';
import { parseTargets, TargetError, type ScaleTarget } from './target.js';

export const USAGE = `Usage: clusterdns autoscale --target=KIND/NAME --configmap=NAME [flags]

Scales a workload in proportion to the cluster's nodes and cores, like cluster-proportional-autoscaler.

Flags:
  --target string               what to scale: deployment/NAME, replicaset/NAME, statefulset/NAME or
                                replicationcontroller/NAME; comma-separated for several (case-insensitive)
  --configmap string            ConfigMap holding the params (one key: linear or ladder)
  --namespace string            namespace of the ConfigMap and the targets
                                (default $MY_POD_NAMESPACE, else the service account's / kubeconfig context's)
  --default-params JSON         params to create (and re-create) the ConfigMap with when it is missing,
                                e.g. {"linear":{"coresPerReplica":256,"nodesPerReplica":16}}
  --poll-period-seconds int     seconds between polls, at least 1 (default 10)
  --nodelabels string           count only nodes with these labels: key1=value1,key2=value2
  --max-sync-failures int       exit 1 after this many consecutive failed polls; 0 = never (default 0)
  --kubeconfig string           kubeconfig file (default: the in-cluster service account)
  --health-port int             port of /healthz and /last-poll; 0 = off (default 8080)
  --version                     print the version and exit
  --logtostderr, --alsologtostderr, --v, --vmodule, --log-dir, --stderrthreshold, --log-backtrace-at
                                glog flags: accepted and ignored (logs always go to stdout/stderr)
`;

export interface AutoscaleFlags {
  /** Targets without a namespace yet: it may come from the connection. */
  targetSpec: string;
  configMap: string;
  namespace?: string;
  defaultParams?: Record<string, string>;
  pollPeriodSeconds: number;
  nodeLabels?: string;
  maxSyncFailures: number;
  kubeconfig?: string;
  healthPort: number;
  version: boolean;
  help: boolean;
  /** Ignored flags, for one log line each. */
  ignored: string[];
}

/** Bad command line; the message says which flag and what to do. */
export class FlagError extends Error {
  readonly code = 'AUTOSCALE_ERR_FLAGS';
  constructor(message: string) {
    super(message);
    this.name = 'FlagError';
  }
}

type FlagKind = 'string' | 'int' | 'bool' | 'ignored-value' | 'ignored-bool';

const FLAGS: ReadonlyMap<string, FlagKind> = new Map<string, FlagKind>([
  ['target', 'string'],
  ['configmap', 'string'],
  ['namespace', 'string'],
  ['default-params', 'string'],
  ['poll-period-seconds', 'int'],
  ['nodelabels', 'string'],
  ['max-sync-failures', 'int'],
  ['kubeconfig', 'string'],
  ['health-port', 'int'],
  ['version', 'bool'],
  ['help', 'bool'],
  ['h', 'bool'],
  ['logtostderr', 'ignored-bool'],
  ['alsologtostderr', 'ignored-bool'],
  ['v', 'ignored-value'],
  ['vmodule', 'ignored-value'],
  ['log-dir', 'ignored-value'],
  ['stderrthreshold', 'ignored-value'],
  ['log-backtrace-at', 'ignored-value'],
]);

const TRUE_WORDS = new Set(['1', 't', 'T', 'true', 'TRUE', 'True']);
const FALSE_WORDS = new Set(['0', 'f', 'F', 'false', 'FALSE', 'False']);
const LABEL_PAIR =
  /^[A-Za-z0-9]([-A-Za-z0-9_./]*[A-Za-z0-9])?\s*(=|==|!=)\s*([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?$/;

/** Parse argv (after `autoscale`); throws FlagError. Does not touch the network. */
export function parseAutoscaleFlags(argv: readonly string[], env: NodeJS.ProcessEnv = process.env): AutoscaleFlags {
  const values = new Map<string, string>();
  const ignored: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i] ?? '';
    if (!arg.startsWith('-') || arg === '-' || arg === '--') throw new FlagError(`unexpected argument "${arg}"`);
    const body = arg.replace(/^--?/, '');
    const eq = body.indexOf('=');
    // glog spells its flags with underscores (--log_dir); pflag normalises them to dashes.
    const name = (eq === -1 ? body : body.slice(0, eq)).replaceAll('_', '-');
    let value = eq === -1 ? undefined : body.slice(eq + 1);
    const kind = FLAGS.get(name);
    if (!kind) throw new FlagError(`unknown flag: --${name}`);
    if (kind === 'bool' || kind === 'ignored-bool') {
      if (value !== undefined && !TRUE_WORDS.has(value) && !FALSE_WORDS.has(value)) {
        throw new FlagError(`invalid argument "${value}" for --${name}: must be true or false`);
      }
      value = value === undefined || TRUE_WORDS.has(value) ? 'true' : 'false';
    } else if (value === undefined) {
      const next = argv[i + 1];
      if (next === undefined) throw new FlagError(`flag needs an argument: --${name}`);
      value = next;
      i++;
    }
    if (kind === 'ignored-bool' || kind === 'ignored-value') ignored.push(`--${name}=${value}`);
    else values.set(name, value);
  }

  const int = (name: string, dflt: number, min: number): number => {
    const raw = values.get(name);
    if (raw === undefined) return dflt;
    const n = /^[+-]?\d+$/.test(raw.trim()) ? Number(raw) : NaN;
    if (!Number.isSafeInteger(n)) throw new FlagError(`invalid argument "${raw}" for --${name}: must be an integer`);
    if (n < min) throw new FlagError(`--${name} cannot be less than ${min}`);
    return n;
  };

  const flags: AutoscaleFlags = {
    targetSpec: values.get('target') ?? '',
    configMap: values.get('configmap') ?? '',
    namespace: values.get('namespace') || env.MY_POD_NAMESPACE || undefined,
    pollPeriodSeconds: int('poll-period-seconds', 10, 1),
    maxSyncFailures: int('max-sync-failures', 0, 0),
    healthPort: int('health-port', 8080, 0),
    version: values.get('version') === 'true',
    help: values.get('help') === 'true' || values.get('h') === 'true',
    ignored,
  };
  if (flags.healthPort > 65535) throw new FlagError('--health-port must be at most 65535');
  const kubeconfig = values.get('kubeconfig');
  if (kubeconfig) flags.kubeconfig = kubeconfig;
  if (flags.version || flags.help) return flags;

  const problems: string[] = [];
  try {
    parseTargets(flags.targetSpec, flags.namespace ?? 'default');
  } catch (err) {
    if (!(err instanceof TargetError)) throw err;
    problems.push(err.message);
  }
  if (!flags.configMap) problems.push('--configmap is required: the ConfigMap that holds the params');
  const nodeLabels = values.get('nodelabels');
  if (nodeLabels) {
    const bad = nodeLabels.split(',').filter((pair) => !LABEL_PAIR.test(pair.trim()));
    if (bad.length > 0)
      problems.push(`--nodelabels: "${bad.join(',')}" is not key=value (use key1=value1,key2=value2)`);
    flags.nodeLabels = nodeLabels;
  }
  const defaults = values.get('default-params');
  if (defaults !== undefined) {
    try {
      flags.defaultParams = defaultParamsData(defaults);
      parseScalingParams(flags.defaultParams);
    } catch (err) {
      if (!(err instanceof ParamsError)) throw err;
      problems.push(`--default-params: ${err.message.replace(/^--default-params: /, '')}`);
    }
  }
  if (problems.length > 0) throw new FlagError(problems.join('\n'));
  return flags;
}

/** The targets once the namespace is known. */
export function targetsOf(flags: AutoscaleFlags, namespace: string): ScaleTarget[] {
  return parseTargets(flags.targetSpec, namespace);
}
