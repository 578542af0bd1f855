// A DNS responder whose latency is known: it answers every query (the query echoed back with QR
// set) exactly --delay-us after the kernel received it, to check what a recording client
// reports (bench/latency-client-check.mjs, test/bench/latency-client.test.ts). Every --drop-every
// Nth query gets no answer (a known loss). Built with the C latency client.
//
//   delay-responder --port P --delay-us 2000 [--drop-every N] [--mark PREFIX]
//
// The due time is the query's kernel RX stamp (SO_TIMESTAMPING, CLOCK_REALTIME) plus the delay;
// a timerfd on CLOCK_REALTIME with TFD_TIMER_ABSTIME wakes it then, so its own wakeup latency is
// the only error, and it measures that itself: on SIGTERM/SIGINT it prints one JSON line
// { answered, dropped, lateUs: { p50, p99, p999, max } }, lateness = the kernel's TX stamp of
// the answer (the moment a client's RX stamp is taken on loopback; clock_gettime just before
// sendto when no stamp came back) minus the due time; with --mark, also `markedLateUs` over only the queries whose name
// starts with PREFIX (the recording client's, told apart from dnsperf's load).

#define _GNU_SOURCE
#include <time.h> // before linux/net_tstamp.h users
#include <arpa/inet.h>
#include <errno.h>
#include <linux/errqueue.h>
#include <linux/net_tstamp.h>
#include <math.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <unistd.h>

#define QMAX 65536 // pending answers (a ring); more in flight than this are dropped
#define LATE_MAX 2000000

typedef struct {
  double due;
  int marked;
  struct sockaddr_in to;
  int len;
  unsigned char b[512];
} pending_t;

static pending_t *ring;
static long head, tail;
static volatile sig_atomic_t stop;
static void on_sig(int s) {
  (void)s;
  stop = 1;
}
static time_t realBase; // whole second at start: ns since 1970 in a double keep only 256 ns
static double real_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_REALTIME, &t);
  return (t.tv_sec - realBase) * 1e9 + t.tv_nsec;
}
static int cmpd(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/** p50/p99/p99.9/max of `a` in µs as a JSON object (null when empty). */
static void pcts(double *a, long n) {
  if (n == 0) {
    printf("null");
    return;
  }
  qsort(a, n, sizeof(double), cmpd);
  double q[3] = {50, 99, 99.9};
  printf("{");
  for (int i = 0; i < 3; i++) {
    long k = (long)ceil(q[i] / 100 * n) - 1;
    printf("\"%s\":%.1f,", i == 0 ? "p50" : i == 1 ? "p99" : "p999", a[k < 0 ? 0 : k] / 1e3);
  }
  printf("\"max\":%.1f}", a[n - 1] / 1e3);
}

int main(int argc, char **argv) {
  int port = 0;
  long dropEvery = 0;
  const char *mark = NULL;
  double delay = 0;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "--port")) port = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--delay-us")) delay = atof(argv[i + 1]) * 1e3;
    else if (!strcmp(argv[i], "--drop-every")) dropEvery = atol(argv[i + 1]);
    else if (!strcmp(argv[i], "--mark")) mark = argv[i + 1];
  }
  if (!(port > 0)) {
    fprintf(stderr, "usage: delay-responder --port P --delay-us US [--drop-every N]\n");
    return 2;
  }
  prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
  struct timespec rb;
  clock_gettime(CLOCK_REALTIME, &rb);
  realBase = rb.tv_sec;
  struct sigaction sa = {.sa_handler = on_sig};
  sigaction(SIGTERM, &sa, NULL);
  sigaction(SIGINT, &sa, NULL);
  ring = malloc(sizeof(pending_t) * QMAX);
  double *late = malloc(sizeof(double) * LATE_MAX);
  double *mlate = malloc(sizeof(double) * LATE_MAX);
  long nmlate = 0;
  long nlate = 0, answered = 0, dropped = 0, received = 0;

  int s = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK, 0);
  int sz = 4 << 20;
  if (setsockopt(s, SOL_SOCKET, SO_RCVBUFFORCE, &sz, sizeof sz) < 0) setsockopt(s, SOL_SOCKET, SO_RCVBUF, &sz, sizeof sz);
  int flags = SOF_TIMESTAMPING_RX_SOFTWARE | SOF_TIMESTAMPING_TX_SOFTWARE | SOF_TIMESTAMPING_SOFTWARE |
              SOF_TIMESTAMPING_OPT_ID | SOF_TIMESTAMPING_OPT_TSONLY;
  setsockopt(s, SOL_SOCKET, SO_TIMESTAMPING, &flags, sizeof flags);
  struct sockaddr_in la = {.sin_family = AF_INET, .sin_port = htons(port), .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  if (bind(s, (struct sockaddr *)&la, sizeof la) < 0) {
    perror("bind");
    return 1;
  }
  int tfd = timerfd_create(CLOCK_REALTIME, TFD_NONBLOCK);
  // Per answer sent, by the kernel's OPT_ID counter: its due time, whether marked, user stamp.
  double *sentDue = malloc(sizeof(double) * LATE_MAX), *sentUser = malloc(sizeof(double) * LATE_MAX);
  char *sentMarked = malloc(LATE_MAX), *stamped = calloc(LATE_MAX, 1);
  long nsent = 0;
  double armed = 0;

  while (!stop) {
    // Send every answer that is due.
    double now = real_ns();
    while (head < tail && ring[head % QMAX].due <= now) {
      pending_t *p = &ring[head % QMAX];
      double t = real_ns();
      if (sendto(s, p->b, p->len, 0, (struct sockaddr *)&p->to, sizeof p->to) == p->len && nsent < LATE_MAX) {
        sentDue[nsent] = p->due;
        sentUser[nsent] = t;
        sentMarked[nsent] = p->marked;
        nsent++;
      }
      answered++;
      head++;
      now = real_ns();
    }
    if (head < tail && ring[head % QMAX].due != armed) {
      armed = ring[head % QMAX].due;
      struct itimerspec it = {{0, 0}, {realBase + (time_t)(armed / 1e9), (long)fmod(armed, 1e9)}};
      timerfd_settime(tfd, TFD_TIMER_ABSTIME, &it, NULL);
    }
    struct pollfd pf[2] = {{s, POLLIN, 0}, {tfd, POLLIN, 0}};
    if (poll(pf, 2, head < tail ? -1 : 100) < 0 && errno != EINTR) break;
    if (pf[1].revents & POLLIN) {
      uint64_t x;
      if (read(tfd, &x, sizeof x) < 0) { /* raced with a re-arm */
      }
      armed = 0;
    }
    if (pf[0].revents & POLLERR) {
      for (;;) { // TX stamps of answers sent
        char ctrl[256], data[64];
        struct iovec iov = {data, sizeof data};
        struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctrl, .msg_controllen = sizeof ctrl};
        if (recvmsg(s, &m, MSG_ERRQUEUE) < 0) break;
        double tx = 0;
        long key = -1;
        for (struct cmsghdr *c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c)) {
          if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_TIMESTAMPING) {
            struct scm_timestamping ts;
            memcpy(&ts, CMSG_DATA(c), sizeof ts);
            tx = (ts.ts[0].tv_sec - realBase) * 1e9 + ts.ts[0].tv_nsec;
          } else if (c->cmsg_level == SOL_IP && c->cmsg_type == IP_RECVERR) {
            struct sock_extended_err e;
            memcpy(&e, CMSG_DATA(c), sizeof e);
            if (e.ee_origin == SO_EE_ORIGIN_TIMESTAMPING && e.ee_info == SCM_TSTAMP_SND) key = e.ee_data;
          }
        }
        // The stamp must fall after its own user stamp and before the next send's.
        if (key >= 0 && key < nsent && tx >= sentUser[key] - 1000 && (key + 1 >= nsent || tx <= sentUser[key + 1] + 1000)) {
          stamped[key] = 1;
          sentUser[key] = tx;
        }
      }
    }
    if (!(pf[0].revents & POLLIN)) continue;
    for (;;) {
      pending_t *p = &ring[tail % QMAX];
      char ctrl[256];
      struct iovec iov = {p->b, sizeof p->b};
      struct msghdr m = {.msg_name = &p->to, .msg_namelen = sizeof p->to, .msg_iov = &iov, .msg_iovlen = 1,
                         .msg_control = ctrl, .msg_controllen = sizeof ctrl};
      ssize_t n = recvmsg(s, &m, 0);
      if (n < 0) break;
      if (n < 12 || (p->b[2] & 0x80)) continue;
      received++;
      if (dropEvery > 0 && received % dropEvery == 0) {
        dropped++;
        continue;
      }
      if (tail - head >= QMAX) {
        dropped++;
        continue;
      }
      double rx = 0;
      for (struct cmsghdr *c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c))
        if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_TIMESTAMPING) {
          struct scm_timestamping ts;
          memcpy(&ts, CMSG_DATA(c), sizeof ts);
          rx = (ts.ts[0].tv_sec - realBase) * 1e9 + ts.ts[0].tv_nsec;
        }
      p->due = (rx > 0 ? rx : real_ns()) + delay;
      p->len = n;
      size_t ml = mark ? strlen(mark) : 0;
      p->marked = mark && n > 13 + (long)ml && p->b[12] >= ml && memcmp(p->b + 13, mark, ml) == 0;
      p->b[2] |= 0x80; // QR: an answer (NOERROR, no records)
      tail++;
    }
  }
  long nstamped = 0;
  for (long i = 0; i < nsent; i++) {
    nstamped += stamped[i];
    late[nlate++] = sentUser[i] - sentDue[i];
    if (sentMarked[i]) mlate[nmlate++] = sentUser[i] - sentDue[i];
  }
  printf("{\"answered\":%ld,\"dropped\":%ld,\"txKernel\":%ld,\"lateUs\":", answered, dropped, nstamped);
  pcts(late, nlate);
  printf(",\"markedLateUs\":");
  pcts(mlate, nmlate);
  printf("}\n");
  return 0;
}
