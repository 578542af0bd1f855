// The verdict: what the application sees (glibc's h_errno, getaddrinfo's error), why, and
// what to check next, most likely cause first, in the words and commands of the people
// who troubleshoot cluster DNS by hand.

import { typeToString } from '../dns/constants.js';
import { DNS_NAMESPACE, DNS_POD_SELECTOR, DNS_SERVICE } from './cluster.js';
import type { CandidateOutcome } from './lookup.js';
import {
  rdataText,
  type ApplicationErrorJson,
  type ClusterJson,
  type VerdictJson,
  type VerdictStatus,
} from './report.js';
import type { ResolvConf } from '../sys/resolvconf.js';
import { podContext, type ServiceQuery, type Suggestion } from './suggest.js';
import type { WalkResult, WalkStep } from './walk.js';

export interface VerdictInput {
  name: string;
  qtypes: number[];
  walk: WalkResult;
  conf: ResolvConf;
  servers: string[];
  serversFrom: 'resolv.conf' | '--server';
  cluster: ClusterJson | null;
  /** null when the cluster was not consulted for names. */
  suggestions: Suggestion[] | null;
  serviceQuery: ServiceQuery | null;
  /** Namespaces known to exist (null: unknown). */
  namespaces: string[] | null;
}

export function verdictStatus(o: CandidateOutcome): VerdictStatus {
  switch (o) {
    case 'answered':
      return 'resolved';
    case 'invalid':
      return 'error';
    default:
      return o;
  }
}

/** What getaddrinfo reports for each failure (glibc 2.3x). */
export function applicationError(status: VerdictStatus): ApplicationErrorJson | null {
  switch (status) {
    case 'resolved':
      return null;
    case 'nxdomain':
      return { herrno: 'HOST_NOT_FOUND', gai: 'EAI_NONAME', message: 'Name or service not known' };
    case 'nodata':
      return { herrno: 'NO_DATA', gai: 'EAI_NODATA', message: 'No address associated with hostname' };
    case 'rejected':
      return { herrno: 'NO_RECOVERY', gai: 'EAI_FAIL', message: 'Non-recoverable failure in name resolution' };
    default:
      return { herrno: 'TRY_AGAIN', gai: 'EAI_AGAIN', message: 'Temporary failure in name resolution' };
  }
}

function sentSteps(walk: WalkResult): WalkStep[] {
  return walk.steps.filter((s) => s.result !== null && s.result.outcome !== 'invalid');
}

function ms(x: number): string {
  return x < 10 ? `${x.toFixed(1)} ms` : `${Math.round(x)} ms`;
}

function servingServers(step: WalkStep | null): string[] {
  const out = new Set<string>();
  for (const t of step?.result?.types ?? []) if (t.server) out.add(t.server);
  return [...out];
}

/** The records of the asked-for types in the answering step (none: only a CNAME chain came back). */
function askedRecords(step: WalkStep, qtypes: number[]) {
  return step.result!.types.flatMap((t) =>
    t.reply && t.reply.rcode === 0 ? t.reply.answers.filter((rr) => qtypes.includes(rr.type)) : [],
  );
}

export function buildVerdict(i: VerdictInput): VerdictJson {
  const { walk } = i;
  let status = verdictStatus(walk.final);
  // The resolver stops at a CNAME-only answer, but getaddrinfo finds no address in it.
  const cnameOnly = status === 'resolved' && askedRecords(walk.answeredBy!, i.qtypes).length === 0;
  if (cnameOnly) status = 'nodata';
  const sent = sentSteps(walk);
  const typesText = i.qtypes.map(typeToString).join('/');
  const v: VerdictJson = {
    status,
    summary: '',
    answers: [],
    resolvedAs: null,
    applicationError: applicationError(status),
    next: [],
    suggestions: i.suggestions ?? [],
    notes: [],
  };
  const decided = cnameOnly ? walk.answeredBy : walk.decidedBy;
  const decidedName = decided?.candidate.name ?? i.name;
  const broken = i.cluster?.checks.find((c) => c.status === 'fail') ?? null;
  const brokenLine = broken ? `cluster DNS is broken at the ${broken.step} step: ${broken.summary}` : null;
  const partialLoss = sent.some((s) => s.result?.partialLoss);

  switch (status) {
    case 'resolved': {
      const step = walk.answeredBy!;
      v.answers = askedRecords(step, i.qtypes).map(rdataText);
      const cnames = step.result!.types.flatMap((t) => (t.reply ? t.reply.answers.filter((rr) => rr.type === 5) : []));
      v.resolvedAs = step.candidate.name;
      const where = servingServers(step).join(', ');
      const n = sent.indexOf(step) + 1;
      v.summary = `${i.name} resolves to ${v.answers.join(', ') || '(only a CNAME chain)'} as ${step.candidate.name} (name ${n} of ${walk.steps.length} in the search order), answered by ${where} in ${ms(step.elapsedMs)}`;
      if (cnames.length > 0) v.notes.push(`via CNAME ${cnames.map(rdataText).join(' -> ')}`);
      if (n > 1) {
        v.notes.push(
          `${n - 1} name${n === 2 ? ' was' : 's were'} asked for before the one that answered (${n * i.qtypes.length} queries in all): ` +
            `ask for ${step.candidate.name} (with the trailing dot) or lower ndots in the pod's dnsConfig to skip them`,
        );
      }
      if (step.elapsedMs > 100)
        v.notes.push(
          `the answer took ${ms(step.elapsedMs)}: slow for cluster DNS (cache hit rate, upstream latency, CPU throttling of the DNS pods)`,
        );
      break;
    }
    case 'nxdomain': {
      const names = sent.map((s) => s.candidate.name);
      v.summary = `no such name: the DNS server answered NXDOMAIN for ${names.length === 1 ? names[0] : `all ${names.length} names tried (${names.join(', ')})`}`;
      const q = i.serviceQuery;
      if (q && i.namespaces && !i.namespaces.includes(q.namespace)) {
        v.next.push(
          `namespace "${q.namespace}" does not exist${q.namespaceImplied ? ` (it is this pod's namespace, from the first search domain)` : ''}`,
        );
      }
      if (q) {
        v.next.push(`check the Service name and namespace: kubectl get svc -A | grep ${q.service}`);
        if (q.namespaceImplied)
          v.next.push(
            `a Service in another namespace needs its namespace: ${q.service}.<namespace> (the search list only completes names in ${q.namespace})`,
          );
      } else {
        v.next.push(
          'check the spelling; for an external name, check the upstream the cluster DNS forwards to (the forward plugin in the Corefile)',
        );
      }
      if (!i.cluster) v.next.push('run again with --kubeconfig to have similar Service names suggested');
      break;
    }
    case 'nodata': {
      const q = i.serviceQuery;
      const clusterDomain = podContext(i.conf.search).clusterDomain;
      const inCluster = decidedName.toLowerCase().endsWith(`.${clusterDomain}.`);
      if (cnameOnly) {
        // The A and AAAA replies carry the same chain: each link once.
        const seen = new Set<string>();
        const chain = decided!
          .result!.types.flatMap((t) => (t.reply ? t.reply.answers.filter((rr) => rr.type === 5) : []))
          .filter((rr) => !seen.has(rdataText(rr)) && seen.add(rdataText(rr)) !== undefined);
        const target = chain.length > 0 ? rdataText(chain[chain.length - 1]!) : '';
        v.summary = `${decidedName} is a CNAME${chain.length ? ` to ${chain.map(rdataText).join(' -> ')}` : ''} and no ${typesText} record came with it: the resolver stops there and the application gets no address`;
        v.answers = chain.map(rdataText);
        // glibc (checked with 2.36): getaddrinfo(AF_UNSPEC) reports a CNAME-only answer as EAI_NONAME, one family as EAI_NODATA.
        if (i.qtypes.includes(1) && i.qtypes.includes(28)) v.applicationError = applicationError('nxdomain');
        if (target)
          v.next.push(
            `ask for the target itself: dig ${target} ${i.qtypes.map(typeToString).join(' ')} (the DNS server could not resolve it, or it has no ${typesText} record)`,
          );
        v.next.push(
          'an ExternalName Service answers with a CNAME only: check the name it points to and that the cluster DNS can resolve it (its forward upstream)',
        );
        break;
      }
      v.summary = `${decidedName} exists but has no ${typesText} records (NOERROR with an empty answer)`;
      // The name was meant as a Service (every cluster name got NXDOMAIN) and only the name as
      // it is, outside the cluster, exists: the typo is the likely cause, not the records.
      const clusterMiss =
        q !== null &&
        !inCluster &&
        sent.some(
          (st) => st.result?.outcome === 'nxdomain' && st.candidate.name.toLowerCase().endsWith(`.${clusterDomain}.`),
        );
      if (clusterMiss) {
        v.next.push(
          `${i.name} is not a Service in the cluster: ${sent
            .filter((st) => st.result?.outcome === 'nxdomain')
            .map((st) => st.candidate.name)
            .join(', ')} got NXDOMAIN`,
        );
        v.next.push(`check the Service name and namespace: kubectl get svc -A | grep ${q.service}`);
        if (!i.cluster) v.next.push('run again with --kubeconfig to have similar Service names suggested');
        v.next.push(
          `${decidedName} itself exists outside the cluster (the server's next plugin or upstream answered it without addresses): that is why the application sees NO_DATA rather than "no such name"`,
        );
        break;
      }
      if (!inCluster) {
        v.next.push(
          `${decidedName} is not a cluster name: its own DNS has no ${typesText} record for it (ask the upstream directly: dig ${decidedName} ${i.qtypes.map(typeToString).join(' ')})`,
        );
      }
      v.next.push(
        'a headless Service (clusterIP: None) answers with its ready endpoints: with none ready there are no records' +
          (q ? ` (kubectl -n ${q.namespace} get endpointslices -l kubernetes.io/service-name=${q.service})` : ''),
      );
      v.next.push(
        'a single-stack Service has no record of the other family: an IPv4-only Service has no AAAA, an IPv6-only one no A',
      );
      v.next.push('an ExternalName Service answers with a CNAME only: check the name it points to');
      break;
    }
    case 'servfail': {
      v.summary = `${servingServers(decided).join(', ') || 'the nameserver'} answered SERVFAIL for ${decidedName}: the DNS server got the query but could not answer it`;
      if (brokenLine) v.next.push(brokenLine);
      v.next.push(
        `check the DNS pods' logs: kubectl -n ${DNS_NAMESPACE} logs -l ${DNS_POD_SELECTOR} (the errors plugin logs each failure with its upstream)`,
      );
      v.next.push(
        `check the upstream in the Corefile's forward line (kubectl -n ${DNS_NAMESPACE} get configmap coredns -o yaml) and that the DNS pods can reach it`,
      );
      v.next.push(
        "for cluster names: the kubernetes plugin's connection to the API server (list/watch errors in the logs, /ready on :8181)",
      );
      break;
    }
    case 'timeout': {
      const tried = sent.map((s) => s.candidate.name).join(', ');
      v.summary = `no answer from ${i.servers.join(', ')} within the timeout (${tried})`;
      if (brokenLine) v.next.push(brokenLine);
      v.next.push(
        `the path to ${i.servers.join(', ')}: the ${DNS_SERVICE} Service, its endpoints and its pods (kubectl -n ${DNS_NAMESPACE} get svc,endpointslices,pods -l k8s-app=kube-dns)`,
      );
      v.next.push(
        'kube-proxy and conntrack on the node: the iptables/IPVS rules for the ClusterIP, conntrack -S (insert_failed, drop)',
      );
      v.next.push(`NetworkPolicy: the pod's egress to ${DNS_NAMESPACE} on UDP and TCP port 53`);
      break;
    }
    case 'unreachable': {
      v.summary = `nothing listens on ${i.servers.join(', ')}: connection refused (ICMP port unreachable)`;
      if (brokenLine) v.next.push(brokenLine);
      if (i.serversFrom === '--server') v.next.push('check the address and port given to --server');
      v.next.push(
        `a ClusterIP without ready endpoints is rejected by kube-proxy: check the ${DNS_SERVICE} endpoints and pods`,
      );
      v.next.push(
        'a node-local cache (169.254.20.10) that is not running: check the node-local-dns DaemonSet on this node',
      );
      break;
    }
    case 'rejected': {
      const rcodes =
        decided?.result?.types.map((t) => (t.reply ? t.reply.rcode : null)).filter((x) => x !== null) ?? [];
      v.summary = `${servingServers(decided).join(', ') || 'the nameserver'} rejected the query for ${decidedName} (rcode ${rcodes.join('/')})`;
      v.next.push(
        'REFUSED: the server serves no zone for this name (the Corefile server blocks and their zones) or an ACL denies this client',
      );
      v.next.push(
        'NOTIMP/FORMERR: the server does not understand the query (EDNS options, an old or broken forwarder)',
      );
      break;
    }
    default: {
      const step = decided;
      const why = step?.candidate.invalid ?? step?.result?.types.find((t) => t.error)?.error ?? 'unknown error';
      const nothingSent = sent.every((st) => st.result!.types.every((t) => t.tries.length === 0));
      v.summary =
        nothingSent && i.conf.attempts === 0
          ? 'the lookup failed at once: no query was sent (options attempts:0)'
          : `the lookup failed: ${why}`;
      if (brokenLine) v.next.push(brokenLine);
    }
  }
  const didYouMean = v.suggestions.map((s) => `did you mean ${s.name}? (${s.why}; its full name is ${s.fqdn})`);
  if (status === 'nxdomain' || status === 'nodata') v.next.unshift(...didYouMean);
  else v.next.push(...didYouMean);
  for (const s of sent) {
    const o = s.result!.outcome;
    if (
      s !== decided &&
      s !== walk.answeredBy &&
      (o === 'timeout' || o === 'rejected' || o === 'error' || o === 'unreachable')
    ) {
      const lost = walk.steps
        .filter((x) => x.candidate.phase === 'search' && x.skipped && x.skipped.includes('abandoned'))
        .map((x) => x.candidate.name);
      v.notes.push(
        lost.length
          ? `${s.candidate.name} got a ${o === 'rejected' ? 'refusal' : o}, so the search list was abandoned: ${lost.join(', ')} ${lost.length === 1 ? 'was' : 'were'} never asked for, and with a healthy server one of them might have answered`
          : `${s.candidate.name} got a ${o === 'rejected' ? 'refusal' : o} before the walk went on`,
      );
    }
  }
  if (partialLoss) {
    v.notes.push(
      'one of the A/AAAA pair was answered and the other lost: glibc waited a full timeout, then asked again one after the other (single-request, then single-request-reopen). ' +
        'This is the conntrack race of parallel queries from one socket; options single-request-reopen or use-vc in dnsConfig, or a node-local cache, avoid it',
    );
  }
  for (const p of i.conf.problems) v.notes.push(`${i.conf.file}${p.line ? `:${p.line}` : ''}: ${p.message}`);
  if (status !== 'resolved' && i.conf.attempts === 0)
    v.next.unshift('resolv.conf sets attempts:0: no query is ever sent; remove it');
  return v;
}
