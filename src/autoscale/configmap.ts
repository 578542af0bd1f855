// The params ConfigMap: read on every poll; created (again) from --default-params when missing.
import { KubeApiError, type KubeClient } from '../kube/http.js';
import { describeObject, isRecord, objectMeta, stringMap } from '../kube/types.js';

export interface ParamsConfigMap {
  data: Record<string, string>;
  resourceVersion: string;
  /** This poll created it from the defaults. */
  created: boolean;
}

export interface ConfigMapRef {
  namespace: string;
  name: string;
}

/** GET the ConfigMap; on 404 create it from `defaults` if there are any, else fail. */
export async function fetchOrCreateConfigMap(
  client: KubeClient,
  ref: ConfigMapRef,
  defaults: Record<string, string> | undefined,
  signal?: AbortSignal,
): Promise<ParamsConfigMap> {
  const ns = encodeURIComponent(ref.namespace);
  const name = encodeURIComponent(ref.name);
  let body: unknown;
  let created = false;
  try {
    body = await client.getJSON(`/api/v1/namespaces/${ns}/configmaps/${name}`, undefined, { signal });
  } catch (err) {
    if (!(err instanceof KubeApiError && err.status === 404)) throw err;
    if (!defaults)
      throw new Error(`ConfigMap ${ref.namespace}/${ref.name} not found and no --default-params to create it from`, {
        cause: err,
      });
    body = await client.request(
      'POST',
      `/api/v1/namespaces/${ns}/configmaps`,
      { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: ref.name, namespace: ref.namespace }, data: defaults },
      { signal },
    );
    created = true;
  }
  return toParamsConfigMap(body, ref, created);
}

function toParamsConfigMap(body: unknown, ref: ConfigMapRef, created: boolean): ParamsConfigMap {
  const meta = objectMeta(body);
  if (!isRecord(body) || !meta)
    throw new Error(`ConfigMap ${ref.namespace}/${ref.name}: answer is not an object: ${describeObject(body)}`);
  const data = body.data === undefined || body.data === null ? {} : stringMap(body.data);
  if (!data) throw new Error(`ConfigMap ${ref.namespace}/${ref.name}: data is not a map of strings`);
  return { data, resourceVersion: meta.resourceVersion ?? '', created };
}
