// The Corefile template (`Corefile.base`) and its placeholders, as in the node-local-dns addon.

/**
 * The addon's ConfigMap `node-local-dns` (key `Corefile`) before the installer's sed: the cluster
 * zone and the reverse zones go to the cluster DNS over TCP, everything else to the node's
 * resolvers. Used when `-basecorefile` is not given and /etc/coredns/Corefile.base is absent.
 */
export const DEFAULT_BASE_COREFILE = `__PILLAR__DNS__DOMAIN__:53 {
    errors
    cache {
        success 9984 30
        denial 9984 5
    }
    reload
    loop
    bind __PILLAR__LOCAL__DNS__ __PILLAR__DNS__SERVER__
    forward . __PILLAR__CLUSTER__DNS__ {
        force_tcp
    }
    prometheus :9253
    health __PILLAR__LOCAL__DNS__:8080
}
in-addr.arpa:53 {
    errors
    cache 30
    reload
    loop
    bind __PILLAR__LOCAL__DNS__ __PILLAR__DNS__SERVER__
    forward . __PILLAR__CLUSTER__DNS__ {
        force_tcp
    }
    prometheus :9253
}
ip6.arpa:53 {
    errors
    cache 30
    reload
    loop
    bind __PILLAR__LOCAL__DNS__ __PILLAR__DNS__SERVER__
    forward . __PILLAR__CLUSTER__DNS__ {
        force_tcp
    }
    prometheus :9253
}
.:53 {
    errors
    cache 30
    reload
    loop
    bind __PILLAR__LOCAL__DNS__ __PILLAR__DNS__SERVER__
    forward . __PILLAR__UPSTREAM__SERVERS__
    prometheus :9253
}
`;

export const PILLAR = {
  localDns: '__PILLAR__LOCAL__DNS__',
  dnsServer: '__PILLAR__DNS__SERVER__',
  clusterDns: '__PILLAR__CLUSTER__DNS__',
  upstreamServers: '__PILLAR__UPSTREAM__SERVERS__',
  dnsDomain: '__PILLAR__DNS__DOMAIN__',
} as const;

export interface TemplateValues {
  /** `-localip` in order; the first is the link-local address. */
  localIPs: readonly string[];
  /** The upstream Service's ClusterIP. */
  clusterDns: string;
  /** kube-dns `upstreamNameservers` when set, else the node's resolv.conf nameservers. */
  upstreamServers: readonly string[];
  /** True when upstreamServers came from the kube-dns ConfigMap (they get plain UDP). */
  upstreamFromKubeDns: boolean;
  dnsDomain: string;
  /** kube-dns `stubDomains`: domain → servers, each appended as its own server block. */
  stubDomains: ReadonlyMap<string, readonly string[]>;
  dnsPort: number;
}

const bracket = (ip: string): string => (ip.includes(':') ? `[${ip}]` : ip);

/**
 * Fills the placeholders. Upstream relies on the installer's sed for the local addresses; we
 * fill them too, so the unedited addon template works:
 * - `__PILLAR__LOCAL__DNS__:PORT` (health) → the first local IP;
 * - on a line that also has `__PILLAR__DNS__SERVER__` (bind) → the first local IP, and
 *   `__PILLAR__DNS__SERVER__` → the others (the kube-dns IP; nothing in IPVS mode);
 * - elsewhere `__PILLAR__LOCAL__DNS__` → every local IP, `__PILLAR__DNS__SERVER__` → the others.
 */
export function renderCorefile(base: string, v: TemplateValues): string {
  const [first = '', ...rest] = v.localIPs;
  const others = rest.join(' ');
  let text = base;
  if (v.upstreamFromKubeDns) {
    // As upstream: custom upstreams from kube-dns may not speak TCP, so drop force_tcp there.
    text = text.replace(
      /forward \. __PILLAR__UPSTREAM__SERVERS__ \{\s*force_tcp\s*\}/g,
      `forward . ${PILLAR.upstreamServers}`,
    );
  }
  const lines = text.split('\n').map((line) => {
    let l = line.replace(/__PILLAR__LOCAL__DNS__(?=:\d)/g, bracket(first));
    if (l.includes(PILLAR.dnsServer) && l.includes(PILLAR.localDns)) l = l.replaceAll(PILLAR.localDns, first);
    l = l.replaceAll(PILLAR.localDns, v.localIPs.join(' '));
    l = l.replaceAll(PILLAR.dnsServer, others);
    l = l.replaceAll(PILLAR.clusterDns, v.clusterDns);
    l = l.replaceAll(PILLAR.upstreamServers, v.upstreamServers.join(' '));
    l = l.replaceAll(PILLAR.dnsDomain, v.dnsDomain);
    // A blanked placeholder leaves "bind 169.254.20.10 " behind; keep lines tidy.
    return l.replace(/[ \t]+$/, '');
  });
  let out = lines.join('\n');
  for (const [domain, servers] of v.stubDomains) {
    if (!out.endsWith('\n')) out += '\n';
    out += `${domain}:${v.dnsPort} {\n    errors\n    cache 30\n    bind ${v.localIPs.join(' ')}\n    forward . ${servers.join(' ')}\n}\n`;
  }
  return out;
}
