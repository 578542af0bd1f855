// An open-loop DNS client that records every query's latency from the kernel's own timestamps,
// so that the recording client's stalls (being descheduled, reading an answer late) do not land
// in the figures. Same command line, stdout JSON and --raw file as latency-client.mjs; built by
// bench/lib/latency-client-build.mjs (`cc -O2`) into bench/build/.
//
//   latency-client --port 5353 --rate 20000 --seconds 20 --queries queries.txt
//        [--sockets 4] [--pace spin|timer] [--skip 1] [--timeout-ms 2000] [--raw FILE]
//
// Schedule: query i is due at start + i/rate (open loop). --pace timer sleeps until each
// query's own due time (clock_nanosleep TIMER_ABSTIME on CLOCK_MONOTONIC, timer slack 1 ns; at
// most 1 ms at a time, so answers are read and losses expired meanwhile); --pace spin polls the
// clock in a busy loop. Queries go round-robin over --sockets connected UDP sockets; an answer
// is matched by its socket and ID, and its question bytes must equal the query's.
//
// Timestamps (SO_TIMESTAMPING, software): a query's send time is the kernel's TX stamp of the
// datagram (SOF_TIMESTAMPING_TX_SOFTWARE, read back from the socket's error queue and matched
// by SOF_TIMESTAMPING_OPT_ID's per-socket counter), or clock_gettime(CLOCK_MONOTONIC) taken just
// before sendto() when no stamp came back; an answer's receive time is the kernel's RX stamp of
// the datagram (SOF_TIMESTAMPING_RX_SOFTWARE), whenever the client gets round to reading it.
// Both kernel stamps are CLOCK_REALTIME: a latency from two of them needs no conversion. Send
// times go onto the CLOCK_MONOTONIC timeline of the --raw file (the clock of the bench's other
// intervals) by subtracting REALTIME - MONOTONIC, read as a MONOTONIC reading bracketed by two
// REALTIME ones (error: half the bracket, reported as clockOffsetErrorNs) and re-read every
// 100 ms; the offset changes only when the wall clock is stepped (NTP slews both clocks alike),
// which shows as clockSteps and moves only the queries in flight across the step.
// On loopback the TX stamp is taken as the query reaches the loopback device (loopback_xmit) and
// the RX stamp as the server's send hands the answer to it (netif_rx, with the default
// net.core.netdev_tstamp_prequeue=1): counted are the query's delivery to the server's socket,
// the server, and its send; not counted are the client's own reading and, when the kernel
// defers the server core's backlog to ksoftirqd, the answer's wait there.
//
// stdout: one JSON object as latency-client.mjs's, plus `client: "c"`, `timestamps` (how many
// send/receive times came from the kernel) and `readLagMs` (receive stamp to the client reading
// the answer: the delay a client timing its own reads would have added). --raw FILE: a JSON
// header line, then Float64 pairs (send time in ns since `startNs` on CLOCK_MONOTONIC, latency
// in ns or NaN if lost); `stalls` lists the loop's gaps over 3 ms as [start, end] ns.

#define _GNU_SOURCE
#include <time.h> // before linux/errqueue.h, which uses struct timespec
#include <errno.h>
#include <linux/errqueue.h>
#include <linux/net_tstamp.h>
#include <math.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>

#define STALL_NS 3e6
#define MAX_STALLS 100000
#define BATCH 64
#define MAXMSG 1500

static double now_mono(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e9 + t.tv_nsec;
}
static double ts_ns(const struct timespec *t) { return t->tv_sec * 1e9 + t->tv_nsec; }
// CLOCK_REALTIME stamps in ns since the whole second the client started in: as plain ns since
// 1970 a double keeps only 256 ns.
static time_t realBase;
static double real_ns(const struct timespec *t) { return (t->tv_sec - realBase) * 1e9 + t->tv_nsec; }

// REALTIME - MONOTONIC from the tightest of a few brackets; *err: half that bracket.
static double clock_offset(double *err) {
  double best = INFINITY, off = 0;
  for (int i = 0; i < 5; i++) {
    struct timespec a, m, b;
    clock_gettime(CLOCK_REALTIME, &a);
    clock_gettime(CLOCK_MONOTONIC, &m);
    clock_gettime(CLOCK_REALTIME, &b);
    double w = real_ns(&b) - real_ns(&a);
    if (w < best) {
      best = w;
      off = (real_ns(&a) + real_ns(&b)) / 2 - ts_ns(&m);
    }
  }
  if (err) *err = best / 2;
  return off;
}

static void usage(void) {
  fprintf(stderr, "usage: latency-client --port P --rate QPS --seconds S --queries FILE [--sockets N] "
                  "[--pace spin|timer] [--skip S] [--timeout-ms MS] [--raw FILE]\n");
  exit(2);
}

// ---- queries: wire templates, ID 0 (patched per send) ----------------------------------------
typedef struct {
  unsigned char *b;
  int len;
} tmpl_t;
static tmpl_t *templates;
static int ntemplates;

static int qtype(const char *t) {
  static const struct {
    const char *n;
    int v;
  } T[] = {{"A", 1},   {"NS", 2},  {"CNAME", 5}, {"SOA", 6},  {"PTR", 12},
           {"MX", 15}, {"TXT", 16}, {"AAAA", 28}, {"SRV", 33}, {"ANY", 255}};
  for (size_t i = 0; i < sizeof T / sizeof T[0]; i++)
    if (strcasecmp(t, T[i].n) == 0) return T[i].v;
  return atoi(t);
}

static void add_query(const char *name, const char *type) {
  unsigned char buf[600];
  memset(buf, 0, 12);
  buf[2] = 0x01; // RD, as dnsperf and stub resolvers send
  buf[5] = 1;    // QDCOUNT
  int p = 12;
  const char *s = name;
  while (*s && !(s[0] == '.' && s[1] == 0)) {
    const char *dot = strchr(s, '.');
    int l = dot ? (int)(dot - s) : (int)strlen(s);
    if (l > 63 || p + 1 + l + 5 > (int)sizeof buf) {
      fprintf(stderr, "query name too long: %s\n", name);
      exit(2);
    }
    buf[p++] = l;
    memcpy(buf + p, s, l);
    p += l;
    if (!dot) break;
    s = dot + 1;
  }
  buf[p++] = 0;
  int t = qtype(type);
  buf[p++] = t >> 8;
  buf[p++] = t & 0xff;
  buf[p++] = 0;
  buf[p++] = 1; // IN
  templates = realloc(templates, (ntemplates + 1) * sizeof *templates);
  templates[ntemplates].b = malloc(p);
  memcpy(templates[ntemplates].b, buf, p);
  templates[ntemplates].len = p;
  ntemplates++;
}

static void read_queries(const char *file) {
  FILE *f = fopen(file, "r");
  if (!f) {
    perror(file);
    exit(2);
  }
  char line[1024];
  while (fgets(line, sizeof line, f)) {
    char name[600], type[32] = "A";
    int n = sscanf(line, "%599s %31s", name, type);
    if (n >= 1) add_query(name, type);
  }
  fclose(f);
  if (ntemplates == 0) {
    fprintf(stderr, "%s: no queries\n", file);
    exit(2);
  }
}

// ---- state, indexed by sequence number -------------------------------------------------------
static long total, sent, answered, lost, late, mismatched, collisions;
static double *sendNs; // send time, ns since t0 (MONOTONIC)
static double *userNs; // clock_gettime just before sendto, ns since t0
static double *latNs;  // NaN: not answered (yet)
static double *txReal; // kernel TX stamp (REALTIME ns), 0 until it comes back
static double *rxReal; // kernel RX stamp of the answer, for latencies settled at the end
static uint16_t *idOf;
static int nsock;
static int *socks;
static int32_t **slots; // per socket: id -> seq + 1 (0: free)
static int32_t **txSeq; // per socket: OPT_ID counter -> seq + 1
static uint32_t *txCount;
static uint16_t *nextId;
static double rcodes[16];
static double t0, offset, offsetErr, workNs;
static long txKernel, rxKernel, rxUser, clockSteps;
static double *readLag;
static long nReadLag;

static void send_one(long seq) {
  int k = seq % nsock;
  tmpl_t *t = &templates[seq % ntemplates];
  uint16_t id = nextId[k];
  // An ID still in flight on this socket (only after 65,536 sends inside the timeout): skip it.
  for (int n = 0; slots[k][id] != 0 && n < 65536; n++) id++;
  if (slots[k][id] != 0) {
    collisions++;
    return;
  }
  nextId[k] = id + 1;
  unsigned char b[600];
  memcpy(b, t->b, t->len);
  b[0] = id >> 8;
  b[1] = id & 0xff;
  slots[k][id] = seq + 1;
  idOf[seq] = id;
  double u = now_mono() - t0;
  userNs[seq] = u;
  sendNs[seq] = u;
  if (send(socks[k], b, t->len, 0) == t->len) {
    // The kernel numbers every datagram sent with a stamp request, from 0, per socket.
    uint32_t c = txCount[k]++;
    if (c < (uint32_t)(total / nsock + 2)) txSeq[k][c] = seq + 1;
  }
  workNs += now_mono() - t0 - u;
}

static void on_tx_stamp(int k, uint32_t key, double real) {
  if (key >= (uint32_t)(total / nsock + 2)) return;
  long seq = txSeq[k][key] - 1;
  if (seq < 0) return;
  double mono = real - offset - t0;
  // A stamp must fall just after the user-space one; anything else is a mismatched counter.
  // (a counter off by one: an earlier send's stamp falls before it, a later one's after the next
  // send on this socket).
  if (mono < userNs[seq] - 2 * offsetErr - 1000) return;
  if (seq + nsock < sent && mono > userNs[seq + nsock] + 2 * offsetErr + 1000) return;
  txReal[seq] = real;
  sendNs[seq] = mono;
  txKernel++;
  // Answered before its stamp was read: put the latency on the kernel's two stamps.
  if (!isnan(latNs[seq]) && rxReal[seq] > 0) latNs[seq] = rxReal[seq] - real;
}

static void drain_errqueue(int k) {
  for (;;) {
    char ctrl[512];
    char data[64];
    struct iovec iov = {data, sizeof data};
    struct msghdr m = {0};
    m.msg_iov = &iov;
    m.msg_iovlen = 1;
    m.msg_control = ctrl;
    m.msg_controllen = sizeof ctrl;
    if (recvmsg(socks[k], &m, MSG_ERRQUEUE | MSG_DONTWAIT) < 0) {
      // A pending socket error (ICMP port unreachable: nothing listening) also reads as EPOLLERR.
      int e;
      socklen_t l = sizeof e;
      getsockopt(socks[k], SOL_SOCKET, SO_ERROR, &e, &l);
      return;
    }
    double real = 0;
    int haveKey = 0;
    uint32_t key = 0;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c)) {
      if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_TIMESTAMPING) {
        struct scm_timestamping ts;
        memcpy(&ts, CMSG_DATA(c), sizeof ts);
        real = real_ns(&ts.ts[0]);
      } else if ((c->cmsg_level == SOL_IP && c->cmsg_type == IP_RECVERR)) {
        struct sock_extended_err e;
        memcpy(&e, CMSG_DATA(c), sizeof e);
        if (e.ee_errno == ENOMSG && e.ee_origin == SO_EE_ORIGIN_TIMESTAMPING && e.ee_info == SCM_TSTAMP_SND) {
          key = e.ee_data;
          haveKey = 1;
        }
      }
    }
    if (haveKey && real > 0) on_tx_stamp(k, key, real);
  }
}

static struct mmsghdr msgs[BATCH];
static struct iovec iovs[BATCH];
static unsigned char bufs[BATCH][MAXMSG];
static char ctrls[BATCH][256];

static void drain(int k) {
  for (;;) {
    for (int i = 0; i < BATCH; i++) {
      iovs[i].iov_base = bufs[i];
      iovs[i].iov_len = MAXMSG;
      memset(&msgs[i].msg_hdr, 0, sizeof msgs[i].msg_hdr);
      msgs[i].msg_hdr.msg_iov = &iovs[i];
      msgs[i].msg_hdr.msg_iovlen = 1;
      msgs[i].msg_hdr.msg_control = ctrls[i];
      msgs[i].msg_hdr.msg_controllen = sizeof ctrls[i];
    }
    int n = recvmmsg(socks[k], msgs, BATCH, MSG_DONTWAIT, NULL);
    if (n <= 0) return;
    double w0 = now_mono();
    double readReal = w0 + offset; // when the client read them, on the kernel stamps' clock
    for (int i = 0; i < n; i++) {
      unsigned char *msg = bufs[i];
      int len = msgs[i].msg_len;
      double rx = 0;
      for (struct cmsghdr *c = CMSG_FIRSTHDR(&msgs[i].msg_hdr); c; c = CMSG_NXTHDR(&msgs[i].msg_hdr, c)) {
        if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_TIMESTAMPING) {
          struct scm_timestamping ts;
          memcpy(&ts, CMSG_DATA(c), sizeof ts);
          rx = real_ns(&ts.ts[0]);
        }
      }
      if (len < 12) continue;
      uint16_t id = (msg[0] << 8) | msg[1];
      long seq = (long)slots[k][id] - 1;
      if (seq < 0) {
        late++;
        continue;
      }
      tmpl_t *t = &templates[seq % ntemplates];
      if (len < t->len || memcmp(msg + 12, t->b + 12, t->len - 12) != 0 || !(msg[2] & 0x80)) {
        mismatched++;
        continue;
      }
      slots[k][id] = 0;
      if (rx > 0) {
        rxKernel++;
        rxReal[seq] = rx;
        if (nReadLag < total) readLag[nReadLag++] = readReal - rx;
      } else {
        rxUser++;
        rx = readReal;
      }
      latNs[seq] = txReal[seq] > 0 ? rx - txReal[seq] : rx - offset - t0 - sendNs[seq];
      rcodes[msg[3] & 0x0f]++;
      answered++;
    }
    workNs += now_mono() - w0;
    if (n < BATCH) return;
  }
}

// Queries unanswered after the timeout are lost; they are expired in send order.
static long expireAt;
static double timeoutNs;
static void expire(double t) {
  while (expireAt < sent && t - sendNs[expireAt] >= timeoutNs) {
    long seq = expireAt++;
    if (isnan(latNs[seq])) {
      int k = seq % nsock;
      if (slots[k][idOf[seq]] == seq + 1) slots[k][idOf[seq]] = 0;
      lost++;
    }
  }
}

static int epfd;
static void poll_sockets(int timeoutMs) {
  struct epoll_event ev[16];
  int n = epoll_wait(epfd, ev, 16, timeoutMs);
  for (int i = 0; i < n; i++) {
    int k = ev[i].data.u32;
    if (ev[i].events & EPOLLERR) drain_errqueue(k);
    if (ev[i].events & EPOLLIN) drain(k);
  }
}

static int cmpd(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}
static double pct(const double *a, long n, double p) {
  if (n == 0) return NAN;
  long i = (long)ceil(p / 100 * n) - 1;
  if (i < 0) i = 0;
  if (i > n - 1) i = n - 1;
  return a[i];
}
// ns -> ms with µs precision, as JSON (NaN -> null, as JSON.stringify writes it).
static void jms(FILE *f, const char *key, double ns, int comma) {
  if (isnan(ns) || isinf(ns)) fprintf(f, "\"%s\":null%s", key, comma ? "," : "");
  else fprintf(f, "\"%s\":%.3f%s", key, round(ns / 1e3) / 1e3, comma ? "," : "");
}

int main(int argc, char **argv) {
  int port = 0;
  double rate = 0, seconds = 10, skipS = 1, timeoutMs = 2000;
  const char *queries = NULL, *raw = NULL, *pace = "spin";
  nsock = 4;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    const char *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!v) usage();
    if (!strcmp(a, "--port")) port = atoi(v);
    else if (!strcmp(a, "--rate")) rate = atof(v);
    else if (!strcmp(a, "--seconds")) seconds = atof(v);
    else if (!strcmp(a, "--queries")) queries = v;
    else if (!strcmp(a, "--sockets")) nsock = atoi(v);
    else if (!strcmp(a, "--pace")) pace = v;
    else if (!strcmp(a, "--skip")) skipS = atof(v);
    else if (!strcmp(a, "--timeout-ms")) timeoutMs = atof(v);
    else if (!strcmp(a, "--raw")) raw = v;
    else usage();
    i++;
  }
  if (nsock < 1) nsock = 1;
  int spin = !strcmp(pace, "spin");
  if (!(port > 0) || !(rate > 0) || !(seconds > 0) || !queries || (!spin && strcmp(pace, "timer"))) usage();
  read_queries(queries);
  timeoutNs = timeoutMs * 1e6;
  prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0); // wake at the due time, not up to 50 µs after it

  total = (long)ceil(rate * seconds);
  sendNs = calloc(total, sizeof(double));
  userNs = calloc(total, sizeof(double));
  latNs = malloc(total * sizeof(double));
  txReal = calloc(total, sizeof(double));
  rxReal = calloc(total, sizeof(double));
  readLag = malloc(total * sizeof(double));
  idOf = calloc(total, sizeof(uint16_t));
  for (long i = 0; i < total; i++) latNs[i] = NAN;
  socks = calloc(nsock, sizeof(int));
  slots = calloc(nsock, sizeof(int32_t *));
  txSeq = calloc(nsock, sizeof(int32_t *));
  txCount = calloc(nsock, sizeof(uint32_t));
  nextId = calloc(nsock, sizeof(uint16_t));
  epfd = epoll_create1(0);
  for (int k = 0; k < nsock; k++) {
    slots[k] = calloc(65536, sizeof(int32_t));
    txSeq[k] = calloc(total / nsock + 2, sizeof(int32_t));
    int s = socket(AF_INET, SOCK_DGRAM, 0);
    if (s < 0) {
      perror("socket");
      return 1;
    }
    int sz = 4 << 20;
    // Past rmem_max when allowed (root), so a long stall of the reader drops nothing.
    if (setsockopt(s, SOL_SOCKET, SO_RCVBUFFORCE, &sz, sizeof sz) < 0)
      setsockopt(s, SOL_SOCKET, SO_RCVBUF, &sz, sizeof sz);
    if (setsockopt(s, SOL_SOCKET, SO_SNDBUFFORCE, &sz, sizeof sz) < 0)
      setsockopt(s, SOL_SOCKET, SO_SNDBUF, &sz, sizeof sz);
    int flags = SOF_TIMESTAMPING_RX_SOFTWARE | SOF_TIMESTAMPING_TX_SOFTWARE | SOF_TIMESTAMPING_SOFTWARE |
                SOF_TIMESTAMPING_OPT_ID | SOF_TIMESTAMPING_OPT_TSONLY;
    if (setsockopt(s, SOL_SOCKET, SO_TIMESTAMPING, &flags, sizeof flags) < 0)
      fprintf(stderr, "SO_TIMESTAMPING: %s (timing reads in user space)\n", strerror(errno));
    struct sockaddr_in la = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    struct sockaddr_in ra = {.sin_family = AF_INET, .sin_port = htons(port), .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (bind(s, (struct sockaddr *)&la, sizeof la) < 0 || connect(s, (struct sockaddr *)&ra, sizeof ra) < 0) {
      perror("bind/connect");
      return 1;
    }
    struct epoll_event ev = {.events = EPOLLIN, .data.u32 = k}; // EPOLLERR is always reported
    epoll_ctl(epfd, EPOLL_CTL_ADD, s, &ev);
    socks[k] = s;
  }

  struct timespec rb;
  clock_gettime(CLOCK_REALTIME, &rb);
  realBase = rb.tv_sec;
  offset = clock_offset(&offsetErr);
  double maxOffsetErr = offsetErr;
  t0 = now_mono();
  double nsPerQuery = 1e9 / rate;
  struct rusage ru0, ru1;
  getrusage(RUSAGE_SELF, &ru0);
  double (*stalls)[2] = malloc(sizeof(double[2]) * MAX_STALLS);
  long nstalls = 0;
  double maxLoopGap = 0, lastLoop = 0, lastExpire = 0, lastOffset = 0;

  // ---- the schedule --------------------------------------------------------------------------
  while (sent < total) {
    double t = now_mono() - t0;
    if (lastLoop > 0 && t - lastLoop > STALL_NS && nstalls < MAX_STALLS) {
      stalls[nstalls][0] = lastLoop;
      stalls[nstalls][1] = t;
      nstalls++;
    }
    if (lastLoop > 0 && t - lastLoop > maxLoopGap) maxLoopGap = t - lastLoop;
    lastLoop = t;
    long due = (long)floor(t / nsPerQuery) + 1;
    if (due > total) due = total;
    while (sent < due) send_one(sent++);
    poll_sockets(0);
    if (t - lastExpire > 50e6) {
      expire(t);
      lastExpire = t;
    }
    if (t - lastOffset > 100e6) {
      double e, o = clock_offset(&e);
      if (fabs(o - offset) > 1e3 + 2 * (e + offsetErr)) clockSteps++;
      offset = o;
      offsetErr = e;
      if (e > maxOffsetErr) maxOffsetErr = e;
      lastOffset = t;
    }
    if (sent >= total) break;
    if (!spin) {
      // Sleep until the next query is due, at most 1 ms (answers and timeouts meanwhile).
      double next = sent * nsPerQuery;
      if (next > t + 1e6) next = t + 1e6;
      double abs = t0 + next;
      struct timespec ts = {(time_t)(abs / 1e9), (long)fmod(abs, 1e9)};
      clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL);
    }
  }
  double sendEnd = now_mono() - t0;
  getrusage(RUSAGE_SELF, &ru1);
  double workSending = workNs;
  // Wait for the answers still due, then count the rest as lost.
  double until = sendEnd + timeoutNs + 100e6;
  while (answered + lost < sent && now_mono() - t0 < until) {
    poll_sockets(20);
    expire(now_mono() - t0);
  }
  // TX stamps of the last queries may still be on their way to the error queue.
  for (int k = 0; k < nsock; k++) drain_errqueue(k);
  expire(INFINITY);
  for (int k = 0; k < nsock; k++) close(socks[k]);

  // ---- summary -------------------------------------------------------------------------------
  long from = (long)ceil(skipS * rate);
  if (from > sent) from = sent;
  double *lat = malloc((sent - from + 1) * sizeof(double));
  double *lags = malloc((sent - from + 1) * sizeof(double));
  double *txDelay = malloc((sent - from + 1) * sizeof(double));
  long nlat = 0, lostCounted = 0, ntx = 0;
  double sum = 0;
  for (long i = from; i < sent; i++) {
    if (isnan(latNs[i])) lostCounted++;
    else {
      lat[nlat++] = latNs[i];
      sum += latNs[i];
    }
    lags[i - from] = sendNs[i] - i * nsPerQuery;
    if (txReal[i] > 0) txDelay[ntx++] = sendNs[i] - userNs[i];
  }
  long nlags = sent - from;
  qsort(lat, nlat, sizeof(double), cmpd);
  qsort(lags, nlags, sizeof(double), cmpd);
  qsort(txDelay, ntx, sizeof(double), cmpd);
  qsort(readLag, nReadLag, sizeof(double), cmpd);
  double sendSeconds = sendEnd / 1e9;
  double ucpu = (ru1.ru_utime.tv_sec - ru0.ru_utime.tv_sec) + (ru1.ru_utime.tv_usec - ru0.ru_utime.tv_usec) / 1e6;
  double scpu = (ru1.ru_stime.tv_sec - ru0.ru_stime.tv_sec) + (ru1.ru_stime.tv_usec - ru0.ru_stime.tv_usec) / 1e6;
  double stallTotal = 0;
  for (long i = 0; i < nstalls; i++) stallTotal += stalls[i][1] - stalls[i][0];
  static const char *rcn[] = {"NOERROR", "FORMERR", "SERVFAIL", "NXDOMAIN", "NOTIMP", "REFUSED"};
  char startNs[32];
  snprintf(startNs, sizeof startNs, "%.0f", t0);

  FILE *o = stdout;
  fprintf(o, "{\"client\":\"c\",\"port\":%d,\"rate\":%.15g,\"seconds\":%.15g,\"sockets\":%d,\"pace\":\"%s\",", port, rate,
          seconds, nsock, pace);
  fprintf(o, "\"skipS\":%.15g,\"sent\":%ld,\"answered\":%ld,\"lost\":%ld,\"lostTotal\":%ld,", skipS, nlags, nlat,
          lostCounted, lost);
  fprintf(o, "\"lateAnswers\":%ld,\"mismatched\":%ld,\"idCollisions\":%ld,", late, mismatched, collisions);
  double achieved = round(nlags / (sendSeconds - from / rate));
  if (isfinite(achieved)) fprintf(o, "\"achievedQps\":%.0f,\"rcodes\":{", achieved);
  else fprintf(o, "\"achievedQps\":null,\"rcodes\":{");
  int first = 1;
  for (int i = 0; i < 16; i++)
    if (rcodes[i] > 0) {
      if (i < 6) fprintf(o, "%s\"%s\":%.0f", first ? "" : ",", rcn[i], rcodes[i]);
      else fprintf(o, "%s\"RCODE%d\":%.0f", first ? "" : ",", i, rcodes[i]);
      first = 0;
    }
  fprintf(o, "},\"latencyMs\":{");
  jms(o, "p50", pct(lat, nlat, 50), 1);
  jms(o, "p90", pct(lat, nlat, 90), 1);
  jms(o, "p99", pct(lat, nlat, 99), 1);
  jms(o, "p999", pct(lat, nlat, 99.9), 1);
  jms(o, "max", nlat ? lat[nlat - 1] : NAN, 1);
  jms(o, "mean", sum / (nlat ? nlat : 1), 0);
  fprintf(o, "},\"sendLagMs\":{");
  jms(o, "p50", pct(lags, nlags, 50), 1);
  jms(o, "p99", pct(lags, nlags, 99), 1);
  jms(o, "p999", pct(lags, nlags, 99.9), 1);
  jms(o, "max", nlags ? lags[nlags - 1] : NAN, 0);
  fprintf(o, "},");
  jms(o, "maxLoopGapMs", maxLoopGap, 1);
  fprintf(o, "\"stalls\":{\"count\":%ld,", nstalls);
  jms(o, "totalMs", stallTotal, 0);
  fprintf(o, "},\"clientCpuPercent\":%.1f,\"clientWorkPercent\":%.1f,\"clientCpuUserPercent\":%.1f,",
          round((ucpu + scpu) / sendSeconds * 1000) / 10, round(workSending / sendEnd * 1000) / 10,
          round(ucpu / sendSeconds * 1000) / 10);
  fprintf(o, "\"eventLoopUtilization\":null,\"startNs\":\"%s\",", startNs);
  // Where the times came from: kernel stamps, or clock_gettime when the kernel gave none.
  fprintf(o, "\"timestamps\":{\"txKernel\":%ld,\"txUser\":%ld,\"rxKernel\":%ld,\"rxUser\":%ld,", txKernel,
          sent - txKernel, rxKernel, rxUser);
  // How long after the user-space stamp the datagram left: what a client timing send() misses.
  fprintf(o, "\"clockOffsetErrorNs\":%.0f,\"clockSteps\":%ld,\"txAfterUserMs\":{", maxOffsetErr, clockSteps);
  jms(o, "p50", pct(txDelay, ntx, 50), 1);
  jms(o, "p99", pct(txDelay, ntx, 99), 1);
  jms(o, "max", ntx ? txDelay[ntx - 1] : NAN, 0);
  fprintf(o, "}},");
  fprintf(o, "\"readLagMs\":{");
  jms(o, "p50", pct(readLag, nReadLag, 50), 1);
  jms(o, "p99", pct(readLag, nReadLag, 99), 1);
  jms(o, "p999", pct(readLag, nReadLag, 99.9), 1);
  jms(o, "max", nReadLag ? readLag[nReadLag - 1] : NAN, 0);
  fprintf(o, "}}\n");

  if (raw) {
    FILE *f = fopen(raw, "wb");
    if (!f) {
      perror(raw);
      return 1;
    }
    fprintf(f, "{\"startNs\":\"%s\",\"rate\":%.15g,\"skipS\":%.15g,\"count\":%ld,\"stallNs\":%.0f,\"stalls\":[", startNs,
            rate, skipS, sent, STALL_NS);
    for (long i = 0; i < nstalls; i++) fprintf(f, "%s[%.0f,%.0f]", i ? "," : "", stalls[i][0], stalls[i][1]);
    fprintf(f, "],\"client\":\"c\"}\n");
    for (long i = 0; i < sent; i++) {
      double pair[2] = {sendNs[i], latNs[i]};
      fwrite(pair, sizeof pair, 1, f);
    }
    if (fclose(f) != 0) {
      perror(raw);
      return 1;
    }
  }
  return 0;
}
