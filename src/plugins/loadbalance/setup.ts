import { directiveError } from '../../corefile/errors.js';
import type { PluginSetup } from '../plugin.js';
import { noBlock, once } from '../../corefile/args.js';
import { LoadBalanceHandler } from './handler.js';

export const setup: PluginSetup = (ds) => {
  const d = once(ds, 'loadbalance');
  noBlock(d);
  const policy = d.args[0]?.text ?? 'round_robin';
  if (policy === 'weighted')
    throw directiveError(
      d.args[0]!,
      'loadbalance: the weighted policy is not supported by clusterdns (use round_robin)',
    );
  if (policy !== 'round_robin' || d.args.length > 1)
    throw directiveError(d.args[0]!, `loadbalance: unknown policy "${policy}"`);
  return { name: 'loadbalance', handler: new LoadBalanceHandler() };
};
