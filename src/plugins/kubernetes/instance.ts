// A kubernetes instance as this plugin builds it. Other plugins never use this type: they
// find the ClusterView it publishes (plugin.ts) through SetupContext.instances().

import type { PluginInstance } from '../plugin.js';
import type { ClusterIndex } from '../../cluster/clusterindex.js';
import type { KubernetesHandler } from './handler.js';
import type { KubernetesOptions } from './options.js';

export type KubernetesInstance = PluginInstance & {
  index: ClusterIndex;
  handler: KubernetesHandler;
  options: KubernetesOptions;
};
