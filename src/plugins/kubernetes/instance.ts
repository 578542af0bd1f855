// A kubernetes instance as other plugins reach it through SetupContext.instances():
// autopath reads its pod index, routes follows its Services.

import type { PluginInstance } from '../plugin.js';
import { ClusterIndex } from '../../cluster/clusterindex.js';
import type { KubernetesHandler } from './handler.js';
import type { KubernetesOptions } from './options.js';

export type KubernetesInstance = PluginInstance & {
  index: ClusterIndex;
  handler: KubernetesHandler;
  options: KubernetesOptions;
};

export function isKubernetesInstance(i: PluginInstance): i is KubernetesInstance {
  return i.name === 'kubernetes' && 'index' in i && i.index instanceof ClusterIndex && 'options' in i;
}
