// Request-scoped metadata, CoreDNS's plugin/metadata: labels such as `kubernetes/client-namespace`
// whose values plugins publish per query and others read (log's `{/LABEL}`, template's `.Meta`,
// rewrite's edns0 variables). A request carries a store only when the block has `metadata`.

/** A value is computed when first read, as CoreDNS's metadata.Func. */
export type MetadataValue = () => string;

export class Metadata {
  private readonly values = new Map<string, MetadataValue | string>();

  set(label: string, value: MetadataValue | string): void {
    this.values.set(label, value);
  }

  /** The label's value, or undefined when no plugin published it. */
  value(label: string): string | undefined {
    const v = this.values.get(label);
    if (v === undefined) return undefined;
    if (typeof v === 'string') return v;
    const s = v();
    this.values.set(label, s);
    return s;
  }

  labels(): string[] {
    return [...this.values.keys()];
  }
}

/** CoreDNS's metadata.IsLabel: `plugin/name`, one slash, neither part empty. */
export function isMetadataLabel(label: string): boolean {
  const p = label.indexOf('/');
  return p > 0 && p < label.length - 1 && label.indexOf('/', p + 1) < 0;
}
