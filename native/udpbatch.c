// Batched UDP socket I/O for clusterdns: recvmmsg/sendmmsg on a socket this addon opens,
// watched with a uv_poll_t on the Node event loop. One JS call per batch of datagrams
// instead of one per datagram, and one sendmmsg for the answers the batch produced.
// Linux only (recvmmsg, sendmmsg, SO_REUSEPORT, SO_ATTACH_REUSEPORT_CBPF); see README.md.
//
// Memory shared with JS (all allocated once per socket):
//   in    slots × slot_size octets: datagram i at i × slot_size
//   meta  Int32Array, META_INTS per datagram: length, flags, family, port, scope, address
//   out   out_size octets: the answers JS wrote, packed
//   ometa Int32Array, OUT_INTS per answer: offset in `out`, length, datagram index (its
//         sender is the destination)
// The JS callback gets the number of datagrams and returns the number of answers to send.

#define _GNU_SOURCE
#define NAPI_VERSION 8
#include <node_api.h>
#include <uv.h>

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/filter.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#ifndef SO_ATTACH_REUSEPORT_CBPF
#define SO_ATTACH_REUSEPORT_CBPF 51
#endif
#ifndef SKF_AD_RANDOM
#define SKF_AD_RANDOM 56
#endif

#define META_INTS 10 /* len, flags, family, port, scope, a0, a1, a2, a3, reserved */
#define OUT_INTS 4   /* offset, len, slot, reserved */
#define FLAG_TRUNC 1
#define FLAG_FAST 2 /* answered from the fast table: JS skips the datagram */
#define MAX_SLOTS 1024
#define MAX_BATCHES_PER_WAKEUP 8 /* then back to the loop: timers and TCP get their turn */

enum { ST_RECEIVED, ST_BATCHES, ST_SENT, ST_SEND_ERRORS, ST_TRUNCATED, ST_RECV_ERRORS, ST_WAKEUPS, ST_COUNT };

typedef struct sock_s {
  napi_env env;
  uv_poll_t poll;
  int fd;
  int family;
  int polling;
  int in_batch;
  int close_pending; /* close() was called from inside the batch callback */
  int closed;
  int handle_open;   /* the uv_poll_t is initialised and its close callback has not run */
  int js_alive;      /* the wrapping JS object has not been finalised */
  int hook_added;
  int connected;     /* connect() succeeded: an upstream socket, read by on_conn_readable */
  int want_thread;   /* start(..., true): the answer thread takes over at the table's first entry */
  uv_loop_t *loop;
  napi_ref cb_ref;
  napi_ref ab_ref[4];
  napi_async_context actx;
  unsigned slots, slot_size, out_size;
  uint8_t *in;
  int32_t *meta;
  uint8_t *out;
  int32_t *ometa;
  struct mmsghdr *rm;
  struct iovec *riov;
  struct sockaddr_storage *raddr;
  struct mmsghdr *sm;
  struct iovec *siov;
  double st[ST_COUNT];
  struct fast_table *fast; /* the answer table; NULL until fastEnable */
  /* The answer thread (start's third argument): it owns the receive side, answers the table's
   * hits and hands the rest to JS through `rx`. mu guards the table, rx's queue and counters. */
  struct rx_s *rx;
  pthread_mutex_t mu;
  int async_open; /* rx's uv_async_t is initialised and its close callback has not run */
} sock_t;


/* ---------- the fast answer table ----------
 * Answers JS produced for a query, kept by the query's bytes after its ID, so that a byte-identical
 * question (same flags, EDNS, options, letter case) is answered here without entering JS. JS
 * installs an entry only when the answer depends on nothing but the query and the configuration
 * (src/server/fast-answers.ts), with a lifetime of at most FAST_MAX_MS; any change of what answers
 * were built from bumps fast_gen, which retires every entry of every table at once. */

/* 4-way sets: a client asking random names only replaces entries, it never adds memory. */
#define FAST_WAYS 4
#define FAST_SETS 4096 /* 16,384 entries: the repeated questions of a large cluster */
#define FAST_KEY_MAX 512
#define FAST_ANSWER_MAX 4096
#define FAST_BYTES_MAX (8u << 20) /* key + answer octets of all entries of one table */
#define FAST_MAX_MS 30000 /* a bound on what a missed flush could leave standing (fast-answers.ts) */
/* A cache hit's answer may go on past its lifetime one second at a time, every TTL one lower per
 * second, up to FAST_MAX_STEPS times: JS gives where its TTLs are (at most FAST_TTLS of them, all
 * equal, as the cache writes them) and how many seconds are left before the entry expires. */
#define FAST_TTLS 8
#define FAST_MAX_STEPS 30
#define FAST_STEP_NS 1000000000LL

typedef struct {
  uint8_t *buf; /* key (query from offset 2) then answer; NULL when empty */
  uint32_t hash;
  uint16_t klen, alen;
  uint32_t gen;
  uint32_t stat;
  int64_t expires_ns;     /* the end of the current step */
  uint8_t steps;          /* one-second steps left after it */
  uint8_t nttl;           /* TTL fields in the answer (0: no steps) */
  uint16_t ttl_at[FAST_TTLS]; /* their offsets in the answer */
} fast_entry_t;

/* When the entry stops answering, its steps included. */
static inline int64_t fast_end(const fast_entry_t *x) { return x->expires_ns + (int64_t)x->steps * FAST_STEP_NS; }

/* Moves an entry past its current step: every TTL down by the seconds gone by. 0 when it has none left. */
static int fast_step(fast_entry_t *x, int64_t now) {
  int64_t k = 1 + (now - x->expires_ns) / FAST_STEP_NS;
  if (x->nttl == 0 || k > x->steps) return 0;
  uint8_t *ans = x->buf + x->klen;
  for (int i = 0; i < x->nttl; i++) {
    uint32_t be;
    memcpy(&be, ans + x->ttl_at[i], 4);
    uint32_t ttl = ntohl(be);
    if (ttl <= (uint32_t)k) return 0; /* never a TTL of 0 or a wrap: JS's answer would differ */
    be = htonl(ttl - (uint32_t)k);
    memcpy(ans + x->ttl_at[i], &be, 4);
  }
  x->steps -= (uint8_t)k;
  x->expires_ns += k * FAST_STEP_NS;
  return 1;
}

typedef struct fast_table {
  fast_entry_t e[FAST_SETS * FAST_WAYS];
  size_t bytes;
  unsigned entries;
  uint32_t swept_gen; /* entries of older generations were freed at this one */
  double *hits;        /* JS's Float64Array: hits[stat] += 1 per answer given here */
  uint32_t nhits;
  double *thits;       /* the answer thread's counts (under mu), added to hits by fastCollect */
  napi_ref hits_ref;
} fast_table_t;

/* One generation for the process: a flush of one configuration's answers flushes every table. */
static uint32_t fast_gen = 1;

/* The generation as the answer thread sees it: JS bumps it without taking any table's lock. */
static inline uint32_t cur_gen(void) { return __atomic_load_n(&fast_gen, __ATOMIC_ACQUIRE); }

static int64_t mono_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static uint32_t fast_hash(const uint8_t *p, size_t n) {
  uint32_t h = 2166136261u;
  for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 16777619u;
  return h ^ (h >> 15);
}

static void fast_drop(fast_table_t *t, fast_entry_t *x) {
  if (!x->buf) return;
  t->bytes -= (size_t)x->klen + x->alen;
  t->entries--;
  free(x->buf);
  x->buf = NULL;
}

static void fast_free(fast_table_t *t) {
  if (!t) return;
  for (unsigned i = 0; i < FAST_SETS * FAST_WAYS; i++) free(t->e[i].buf);
  free(t->thits);
  free(t);
}

/* The entry answering this query (octets from offset 2), or NULL. */
static fast_entry_t *fast_find(fast_table_t *t, const uint8_t *key, size_t klen, int64_t now) {
  uint32_t h = fast_hash(key, klen), gen = cur_gen();
  fast_entry_t *set = &t->e[(h % FAST_SETS) * FAST_WAYS];
  for (int w = 0; w < FAST_WAYS; w++) {
    fast_entry_t *x = &set[w];
    if (x->buf && x->hash == h && x->klen == klen && x->gen == gen && memcmp(x->buf, key, klen) == 0) {
      if (now < x->expires_ns || fast_step(x, now)) return x;
      return NULL;
    }
  }
  return NULL;
}

/* Installs (or replaces) the answer to a query; 0 when it is not kept (too big, over the cap). */
static int fast_put(fast_table_t *t, const uint8_t *key, size_t klen, const uint8_t *ans, size_t alen, double valid_ms, uint32_t stat,
                    const uint16_t *ttl_at, size_t nttl, uint32_t ttl_base, uint32_t steps) {
  if (klen < 10 || klen > FAST_KEY_MAX || alen < 12 || alen > FAST_ANSWER_MAX || stat >= t->nhits || !(valid_ms > 0)) return 0;
  if (valid_ms > FAST_MAX_MS) valid_ms = FAST_MAX_MS;
  if (t->swept_gen != fast_gen) {
    /* The first install after a flush frees what the flush retired, so it holds no memory. */
    for (unsigned i = 0; i < FAST_SETS * FAST_WAYS; i++)
      if (t->e[i].buf && t->e[i].gen != fast_gen) fast_drop(t, &t->e[i]);
    t->swept_gen = fast_gen;
  }
  int64_t now = mono_ns();
  uint32_t h = fast_hash(key, klen);
  fast_entry_t *set = &t->e[(h % FAST_SETS) * FAST_WAYS];
  fast_entry_t *v = NULL;
  for (int w = 0; w < FAST_WAYS && !v; w++)
    if (set[w].buf && set[w].hash == h && set[w].klen == klen && memcmp(set[w].buf, key, klen) == 0) v = &set[w];
  for (int w = 0; w < FAST_WAYS && !v; w++)
    if (!set[w].buf || set[w].gen != fast_gen || fast_end(&set[w]) <= now) v = &set[w];
  if (!v) {
    v = &set[0]; /* the one that expires first goes */
    for (int w = 1; w < FAST_WAYS; w++)
      if (fast_end(&set[w]) < fast_end(v)) v = &set[w];
  }
  fast_drop(t, v);
  if (t->bytes + klen + alen > FAST_BYTES_MAX) return 0;
  uint8_t *b = (uint8_t *)malloc(klen + alen);
  if (!b) return 0;
  memcpy(b, key, klen);
  memcpy(b + klen, ans, alen);
  v->buf = b;
  v->hash = h;
  v->klen = (uint16_t)klen;
  v->alen = (uint16_t)alen;
  v->gen = fast_gen;
  v->stat = stat;
  v->expires_ns = now + (int64_t)(valid_ms * 1e6);
  v->steps = 0;
  v->nttl = 0;
  if (steps > 0 && nttl > 0 && nttl <= FAST_TTLS) {
    size_t i = 0;
    for (; i < nttl; i++) {
      uint32_t at = ttl_base + ttl_at[i];
      if (at < 12 || at + 4 > alen) break; /* a TTL past the answer (cut): no steps */
      v->ttl_at[i] = (uint16_t)at;
    }
    if (i == nttl) {
      v->nttl = (uint8_t)nttl;
      v->steps = (uint8_t)(steps > FAST_MAX_STEPS ? FAST_MAX_STEPS : steps);
    }
  }
  t->bytes += klen + alen;
  t->entries++;
  return 1;
}

/* ---------- helpers ---------- */

#define CHECK(call)                                                                     \
  do {                                                                                  \
    if ((call) != napi_ok) {                                                            \
      const napi_extended_error_info *ei = NULL;                                        \
      napi_get_last_error_info(env, &ei);                                               \
      bool pending = false;                                                             \
      napi_is_exception_pending(env, &pending);                                         \
      if (!pending) napi_throw_error(env, NULL, ei && ei->error_message ? ei->error_message : #call); \
      return NULL;                                                                      \
    }                                                                                   \
  } while (0)

static napi_value throw_errno(napi_env env, int err, const char *syscall, const char *address, int port) {
  char msg[256];
  const char *code = uv_err_name(-err);
  if (address)
    snprintf(msg, sizeof msg, "%s %s %s%s%s:%d", syscall, code, strchr(address, ':') ? "[" : "", address, strchr(address, ':') ? "]" : "", port);
  else
    snprintf(msg, sizeof msg, "%s %s", syscall, code);
  napi_value e, m, c, n, sc;
  napi_create_string_utf8(env, msg, NAPI_AUTO_LENGTH, &m);
  napi_create_string_utf8(env, code, NAPI_AUTO_LENGTH, &c);
  napi_create_error(env, c, m, &e);
  napi_create_int32(env, -err, &n);
  napi_set_named_property(env, e, "errno", n);
  napi_create_string_utf8(env, syscall, NAPI_AUTO_LENGTH, &sc);
  napi_set_named_property(env, e, "syscall", sc);
  napi_throw(env, e);
  return NULL;
}

static sock_t *unwrap(napi_env env, napi_value v) {
  sock_t *s = NULL;
  if (napi_unwrap(env, v, (void **)&s) != napi_ok || s == NULL) {
    napi_throw_type_error(env, NULL, "not a udpbatch socket");
    return NULL;
  }
  return s;
}

/* The arguments of a call whose first is a socket: fills argv (missing ones are undefined) and
 * returns the socket, or NULL with a JS exception pending. */
static sock_t *sock_args(napi_env env, napi_callback_info info, size_t argc, napi_value *argv) {
  CHECK(napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  return unwrap(env, argv[0]);
}

static void rx_free(sock_t *s);
static void rx_stop(sock_t *s);
static void rx_close_async(sock_t *s);
static int rx_active(const sock_t *s);

static void maybe_free(sock_t *s) {
  if (s->handle_open || s->js_alive || s->async_open) return;
  rx_free(s);
  pthread_mutex_destroy(&s->mu);
  free(s->rm);
  free(s->riov);
  free(s->raddr);
  free(s->sm);
  free(s->siov);
  fast_free(s->fast);
  free(s);
}

static void on_handle_closed(uv_handle_t *h) {
  sock_t *s = (sock_t *)h->data;
  s->handle_open = 0;
  maybe_free(s);
}

static void env_cleanup(void *arg);

/* Stops reading, closes the descriptor and lets go of the JS values. Idempotent. */
static void do_close(sock_t *s) {
  if (s->closed) return;
  if (s->in_batch) {
    s->close_pending = 1;
    return;
  }
  s->closed = 1;
  s->polling = 0;
  if (s->handle_open) uv_close((uv_handle_t *)&s->poll, on_handle_closed);
  rx_stop(s); /* before the descriptor goes: the thread reads it */
  rx_close_async(s);
  if (s->fd >= 0) close(s->fd);
  s->fd = -1;
  napi_env env = s->env;
  if (s->cb_ref) napi_delete_reference(env, s->cb_ref);
  s->cb_ref = NULL;
  for (int i = 0; i < 4; i++) {
    if (s->ab_ref[i]) napi_delete_reference(env, s->ab_ref[i]);
    s->ab_ref[i] = NULL;
  }
  if (s->fast && s->fast->hits_ref) {
    napi_delete_reference(env, s->fast->hits_ref);
    s->fast->hits_ref = NULL;
    s->fast->hits = NULL;
    s->fast->nhits = 0;
  }
  if (s->actx) napi_async_destroy(env, s->actx);
  s->actx = NULL;
  if (s->hook_added) napi_remove_env_cleanup_hook(env, env_cleanup, s);
  s->hook_added = 0;
}

static void env_cleanup(void *arg) {
  sock_t *s = (sock_t *)arg;
  s->hook_added = 0; /* being run: removing it now is not allowed */
  s->in_batch = 0;
  do_close(s);
}

static void finalize_sock(napi_env env, void *data, void *hint) {
  (void)env;
  (void)hint;
  sock_t *s = (sock_t *)data;
  s->js_alive = 0;
  if (!s->closed) do_close(s);
  maybe_free(s);
}

static void finalize_mmap(napi_env env, void *data, void *hint) {
  (void)env;
  munmap(data, (size_t)(uintptr_t)hint);
}

static int sockaddr_from_ints(struct sockaddr_storage *ss, socklen_t *len, int family, int port, int scope, const int32_t *a) {
  memset(ss, 0, sizeof *ss);
  if (family == 4) {
    struct sockaddr_in *sin = (struct sockaddr_in *)ss;
    sin->sin_family = AF_INET;
    sin->sin_port = htons((uint16_t)port);
    sin->sin_addr.s_addr = htonl((uint32_t)a[0]);
    *len = sizeof *sin;
    return 0;
  }
  if (family == 6) {
    struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)ss;
    sin6->sin6_family = AF_INET6;
    sin6->sin6_port = htons((uint16_t)port);
    sin6->sin6_scope_id = (uint32_t)scope;
    memcpy(&sin6->sin6_addr, a, 16);
    *len = sizeof *sin6;
    return 0;
  }
  return -1;
}

/* ---------- the read path ---------- */

static void send_batch(sock_t *s, int count) {
  if (count <= 0 || s->fd < 0) return;
  if ((unsigned)count > s->slots) count = (int)s->slots;
  int m = 0;
  for (int j = 0; j < count; j++) {
    const int32_t *o = s->ometa + (size_t)j * OUT_INTS;
    uint32_t off = (uint32_t)o[0], len = (uint32_t)o[1], slot = (uint32_t)o[2];
    if (slot >= s->slots || off > s->out_size || len > s->out_size - off) {
      s->st[ST_SEND_ERRORS]++;
      continue;
    }
    s->siov[m].iov_base = s->out + off;
    s->siov[m].iov_len = len;
    struct msghdr *h = &s->sm[m].msg_hdr;
    memset(h, 0, sizeof *h);
    h->msg_name = &s->raddr[slot];
    h->msg_namelen = s->rm[slot].msg_hdr.msg_namelen;
    h->msg_iov = &s->siov[m];
    h->msg_iovlen = 1;
    m++;
  }
  int i = 0;
  while (i < m) {
    int r = sendmmsg(s->fd, s->sm + i, (unsigned)(m - i), 0);
    if (r > 0) {
      i += r;
      s->st[ST_SENT] += r;
    } else if (r < 0 && errno == EINTR) {
      continue;
    } else {
      /* EAGAIN/ENOBUFS (buffer full), EPERM (firewall), EINVAL (bad address): this answer is
       * lost, as a datagram can be; go on with the next. */
      s->st[ST_SEND_ERRORS]++;
      i++;
    }
  }
}

/* meta for one datagram: its length, flags, and its sender as family, port, scope, address. */
static void fill_meta(int32_t *m, const struct sockaddr_storage *ss, uint32_t len, int trunc) {
  m[0] = (int32_t)len;
  m[1] = trunc ? FLAG_TRUNC : 0;
  if (ss->ss_family == AF_INET) {
    const struct sockaddr_in *sin = (const struct sockaddr_in *)ss;
    m[2] = 4;
    m[3] = ntohs(sin->sin_port);
    m[4] = 0;
    m[5] = (int32_t)ntohl(sin->sin_addr.s_addr); /* host order: JS reads the octets with shifts */
    m[6] = m[7] = m[8] = 0;
  } else if (ss->ss_family == AF_INET6) {
    const struct sockaddr_in6 *sin6 = (const struct sockaddr_in6 *)ss;
    m[2] = 6;
    m[3] = ntohs(sin6->sin6_port);
    m[4] = (int32_t)sin6->sin6_scope_id;
    memcpy(&m[5], &sin6->sin6_addr, 16);
  } else {
    m[2] = 0;
    m[3] = 0;
  }
}

/* onBatch(n, done, doneBytes) for the n datagrams in `in`: the number of answers in `out` it
 * returns (done when the call could not be made). */
static int32_t batch_callback(sock_t *s, int n, int32_t done, int32_t done_bytes) {
  napi_env env = s->env;
  int32_t count = done;
  napi_handle_scope scope;
  if (napi_open_handle_scope(env, &scope) != napi_ok) return done;
  napi_value cb, recv, argv[3], result;
  napi_status st = napi_get_reference_value(env, s->cb_ref, &cb);
  if (st == napi_ok && cb != NULL) {
    napi_get_global(env, &recv); /* napi_make_callback wants an object as `this` */
    napi_create_int32(env, n, &argv[0]);
    napi_create_int32(env, done, &argv[1]);
    napi_create_int32(env, done_bytes, &argv[2]);
    s->in_batch = 1;
    st = napi_make_callback(env, s->actx, recv, cb, 3, argv, &result);
    s->in_batch = 0;
    if (st == napi_ok) {
      if (napi_get_value_int32(env, result, &count) != napi_ok) count = done;
    } else {
      bool pending = false;
      napi_is_exception_pending(env, &pending);
      if (pending) {
        napi_value ex;
        napi_get_and_clear_last_exception(env, &ex);
        napi_fatal_exception(env, ex); /* as a throwing 'message' listener would */
      }
    }
  }
  napi_close_handle_scope(env, scope);
  return count;
}

static void on_readable(uv_poll_t *h, int status, int events) {
  (void)events;
  sock_t *s = (sock_t *)h->data;
  s->st[ST_WAKEUPS]++;
  if (status < 0) s->st[ST_RECV_ERRORS]++;
  for (int round = 0; round < MAX_BATCHES_PER_WAKEUP && s->polling && !s->closed && !rx_active(s); round++) {
    for (unsigned i = 0; i < s->slots; i++) {
      struct msghdr *mh = &s->rm[i].msg_hdr;
      mh->msg_namelen = sizeof(struct sockaddr_storage);
      mh->msg_flags = 0;
      mh->msg_control = NULL;
      mh->msg_controllen = 0;
      s->riov[i].iov_len = s->slot_size;
    }
    int n = recvmmsg(s->fd, s->rm, s->slots, MSG_DONTWAIT, NULL);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) break;
      /* ECONNREFUSED and the like from an ICMP error queued on the socket: consumed, go on. */
      s->st[ST_RECV_ERRORS]++;
      continue;
    }
    if (n == 0) break;
    for (int i = 0; i < n; i++) {
      const struct msghdr *mh = &s->rm[i].msg_hdr;
      uint32_t len = s->rm[i].msg_len;
      int trunc = (mh->msg_flags & MSG_TRUNC) != 0;
      if (len > s->slot_size) len = s->slot_size;
      if (trunc) s->st[ST_TRUNCATED]++;
      fill_meta(s->meta + (size_t)i * META_INTS, &s->raddr[i], len, trunc);
    }
    s->st[ST_RECEIVED] += n;
    s->st[ST_BATCHES]++;

    /* Questions the table answers go into `out` first; JS is called only for the others. */
    int32_t fast_count = 0, fast_off = 0;
    fast_table_t *ft = s->fast;
    if (ft && ft->hits && ft->entries > 0) {
      int64_t now = mono_ns();
      for (int i = 0; i < n; i++) {
        int32_t *m = s->meta + (size_t)i * META_INTS;
        uint32_t len = (uint32_t)m[0];
        if (m[1] != 0 || m[2] == 0 || len < 12 || len - 2 > FAST_KEY_MAX) continue;
        const uint8_t *q = s->in + (size_t)i * s->slot_size;
        fast_entry_t *x = fast_find(ft, q + 2, len - 2, now);
        if (!x || x->alen > s->out_size - (uint32_t)fast_off) continue;
        uint8_t *o = s->out + fast_off;
        memcpy(o, x->buf + x->klen, x->alen);
        o[0] = q[0];
        o[1] = q[1];
        int32_t *om = s->ometa + (size_t)fast_count * OUT_INTS;
        om[0] = fast_off;
        om[1] = x->alen;
        om[2] = i;
        fast_off += x->alen;
        fast_count++;
        m[1] = FLAG_FAST;
        if (x->stat < ft->nhits) ft->hits[x->stat] += 1;
      }
    }

    int32_t count = fast_count < n ? batch_callback(s, n, fast_count, fast_off) : fast_count;
    if (!s->closed) send_batch(s, count);
    if (s->close_pending) {
      s->close_pending = 0;
      do_close(s);
      return;
    }
    if ((unsigned)n < s->slots) break; /* drained: a full batch means more may be waiting */
  }
}

/* ---------- the answer thread ----------
 * With start(sock, onBatch, true) a thread of this addon reads the socket instead of the event
 * loop: it answers the table's hits itself (one recvmmsg, one sendmmsg, no JS, no loop wakeup)
 * and queues the other datagrams for JS, which it wakes with a uv_async_t. A GC pause or a long
 * JS turn then no longer holds up a repeated question, and a stream of hits allocates nothing on
 * the JS heap (the loop's every turn does: see BENCHMARKS.md, "The answer thread").
 * The queue holds RX_QUEUE_BATCHES receive batches; when it has no room for one more the thread
 * stops reading, so datagrams wait in the kernel's buffer as they do without the thread: none is
 * dropped here, but the hits wait there too, behind the misses. With 4 batches a cache starting
 * cold under load (every name a miss at first) held every datagram for up to 0.1 s at a time in
 * its first second and the kernel's buffer overflowed; with 32 the thread goes on answering hits
 * through such a burst (BENCHMARKS.md, "A cold start's hits"). JS gets the queue one batch per
 * loop turn (on_async), so that between batches the loop reads the other sockets: the upstream's
 * replies to the misses already sent, whose answers then make their names hits; with 8 batches a
 * turn a deep queue held those replies for tens of ms. The queue's memory is mapped, not
 * committed: a slot's first page becomes resident when a datagram lands in it. The queue starts
 * again at slot 0 whenever JS empties it, so a trickle of misses keeps only its first slots
 * resident, and the pages a burst reached past the first RX_QUEUE_KEPT batches are given back
 * then (MADV_DONTNEED). */

#define RX_QUEUE_BATCHES 32
#define RX_QUEUE_KEPT 4 /* batches whose pages stay resident once touched */
#define RX_TURN_BATCHES 1 /* batches on_async hands to JS per loop turn */
#define RX_OUT_MAX (256u * 1024u) /* the answers of one batch the thread sends */

typedef struct rx_s {
  pthread_t tid;
  int started; /* the thread runs (joined in rx_stop) */
  int evfd;    /* wakes the thread: stop, resume, room in the queue */
  /* under s->mu */
  int stop, paused, want_room;
  unsigned cap, head, count; /* the queue of datagrams for JS */
  unsigned used;             /* slots [0, used) may be resident: the deepest a burst reached */
  double st[ST_COUNT];
  /* the thread's own */
  uint8_t *in;  /* slots × slot_size, mapped */
  struct mmsghdr *rm;
  struct iovec *riov;
  struct sockaddr_storage *raddr;
  uint8_t *out; /* RX_OUT_MAX, mapped */
  struct mmsghdr *sm;
  struct iovec *siov;
  /* the queue: cap entries */
  uint8_t *qdata; /* cap × slot_size, mapped: only the pages datagrams touch become resident */
  uint32_t *qlen;
  uint8_t *qtrunc;
  struct sockaddr_storage *qaddr;
  socklen_t *qnamelen;
  uv_async_t async;
} rx_t;

static void rx_wake(rx_t *r) {
  uint64_t one = 1;
  ssize_t w = write(r->evfd, &one, sizeof one);
  (void)w; /* EAGAIN: the counter is already non-zero, the thread will wake */
}

/* One receive batch on the answer thread. */
static int rx_batch(sock_t *s, rx_t *r) {
  for (unsigned i = 0; i < s->slots; i++) {
    struct msghdr *mh = &r->rm[i].msg_hdr;
    mh->msg_namelen = sizeof(struct sockaddr_storage);
    mh->msg_flags = 0;
    r->riov[i].iov_len = s->slot_size;
  }
  int n = recvmmsg(s->fd, r->rm, s->slots, MSG_DONTWAIT, NULL);
  if (n <= 0) {
    if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
      pthread_mutex_lock(&s->mu);
      r->st[ST_RECV_ERRORS]++;
      pthread_mutex_unlock(&s->mu);
    }
    return n;
  }
  unsigned sent = 0, queued = 0, truncated = 0;
  uint32_t off = 0;
  pthread_mutex_lock(&s->mu);
  fast_table_t *ft = s->fast;
  int64_t now = mono_ns();
  for (int i = 0; i < n; i++) {
    const struct msghdr *mh = &r->rm[i].msg_hdr;
    uint32_t len = r->rm[i].msg_len;
    int trunc = (mh->msg_flags & MSG_TRUNC) != 0;
    if (len > s->slot_size) len = s->slot_size;
    if (trunc) truncated++;
    const uint8_t *q = r->in + (size_t)i * s->slot_size;
    sa_family_t af = r->raddr[i].ss_family;
    if (!trunc && ft && ft->thits && ft->entries > 0 && (af == AF_INET || af == AF_INET6) && len >= 12 && len - 2 <= FAST_KEY_MAX) {
      fast_entry_t *x = fast_find(ft, q + 2, len - 2, now);
      if (x && x->alen <= RX_OUT_MAX - off) {
        uint8_t *o = r->out + off;
        memcpy(o, x->buf + x->klen, x->alen);
        o[0] = q[0];
        o[1] = q[1];
        r->siov[sent].iov_base = o;
        r->siov[sent].iov_len = x->alen;
        struct msghdr *sh = &r->sm[sent].msg_hdr;
        memset(sh, 0, sizeof *sh);
        sh->msg_name = &r->raddr[i];
        sh->msg_namelen = mh->msg_namelen;
        sh->msg_iov = &r->siov[sent];
        sh->msg_iovlen = 1;
        off += x->alen;
        sent++;
        if (x->stat < ft->nhits) ft->thits[x->stat] += 1;
        continue;
      }
    }
    /* The rx_main loop reads only with room for a whole batch, so this always fits. */
    unsigned k = (r->head + r->count) % r->cap;
    if (k >= r->used) r->used = k + 1;
    memcpy(r->qdata + (size_t)k * s->slot_size, q, len);
    r->qlen[k] = len;
    r->qtrunc[k] = (uint8_t)trunc;
    memcpy(&r->qaddr[k], &r->raddr[i], mh->msg_namelen <= sizeof r->qaddr[k] ? mh->msg_namelen : sizeof r->qaddr[k]);
    r->qaddr[k].ss_family = af;
    r->qnamelen[k] = mh->msg_namelen;
    r->count++;
    queued++;
  }
  r->st[ST_RECEIVED] += n;
  r->st[ST_BATCHES]++;
  r->st[ST_TRUNCATED] += truncated;
  pthread_mutex_unlock(&s->mu);
  if (queued) uv_async_send(&r->async);
  unsigned i = 0, ok = 0, failed = 0;
  while (i < sent) {
    int w = sendmmsg(s->fd, r->sm + i, sent - i, 0);
    if (w > 0) {
      i += (unsigned)w;
      ok += (unsigned)w;
    } else if (w < 0 && errno == EINTR) {
      continue;
    } else {
      failed++; /* as send_batch: this answer is lost, as a datagram can be */
      i++;
    }
  }
  if (sent) {
    pthread_mutex_lock(&s->mu);
    r->st[ST_SENT] += ok;
    r->st[ST_SEND_ERRORS] += failed;
    pthread_mutex_unlock(&s->mu);
  }
  return n;
}

/* Asks the kernel for a short time slice for the calling thread (EEVDF, Linux 6.12+: a task with
 * a shorter slice preempts on wakeup one with a longer). The answer thread sleeps between batches
 * and runs for microseconds: with the default slice, when it woke during a JS turn on the same
 * core it waited for the turn's slice to end. No privilege is needed; older kernels ignore it. */
#ifdef SYS_sched_setattr
struct rx_sched_attr {
  uint32_t size, sched_policy;
  uint64_t sched_flags;
  int32_t sched_nice;
  uint32_t sched_priority;
  uint64_t sched_runtime, sched_deadline, sched_period;
};
#endif
#define RX_SLICE_NS 100000u /* the shortest the kernel takes */

static void rx_short_slice(void) {
#ifdef SYS_sched_setattr
  struct rx_sched_attr a;
  memset(&a, 0, sizeof a);
  a.size = sizeof a;
  a.sched_policy = 0; /* SCHED_OTHER */
  errno = 0;
  int nice = getpriority(PRIO_PROCESS, 0);
  a.sched_nice = errno ? 0 : nice;
  a.sched_runtime = RX_SLICE_NS;
  syscall(SYS_sched_setattr, 0, &a, 0);
#endif
}

static void *rx_main(void *arg) {
  sock_t *s = (sock_t *)arg;
  rx_t *r = s->rx;
  pthread_setname_np(pthread_self(), "udp-answers"); /* as top -H and /proc show it */
  rx_short_slice();
  for (;;) {
    pthread_mutex_lock(&s->mu);
    int stop = r->stop;
    int room = r->cap - r->count >= s->slots;
    int reading = !r->paused && room;
    if (!r->paused && !room) r->want_room = 1;
    pthread_mutex_unlock(&s->mu);
    if (stop) break;
    struct pollfd p[2] = {{r->evfd, POLLIN, 0}, {reading ? s->fd : -1, POLLIN, 0}};
    int pr = poll(p, 2, -1);
    if (pr < 0) continue; /* EINTR */
    if (p[0].revents & POLLIN) {
      uint64_t v;
      ssize_t rd = read(r->evfd, &v, sizeof v);
      (void)rd;
    }
    if (reading && (p[1].revents & (POLLIN | POLLERR))) {
      pthread_mutex_lock(&s->mu);
      r->st[ST_WAKEUPS]++;
      pthread_mutex_unlock(&s->mu);
      /* Up to MAX_BATCHES_PER_WAKEUP batches, then a look at the stop flag and the queue. */
      for (int b = 0; b < MAX_BATCHES_PER_WAKEUP; b++) {
        pthread_mutex_lock(&s->mu);
        int go = !r->stop && !r->paused && r->cap - r->count >= s->slots;
        pthread_mutex_unlock(&s->mu);
        if (!go) break;
        if (rx_batch(s, r) < (int)s->slots) break; /* drained: a full batch means more may wait */
      }
    }
  }
  return NULL;
}

/* Under s->mu, when JS has taken the last queued datagram: the queue refills from slot 0, and the
 * pages a burst touched past the first RX_QUEUE_KEPT batches go back to the kernel (the thread
 * writes slots only under the mutex, so none is being written meanwhile). */
static void rx_queue_emptied(sock_t *s, rx_t *r) {
  r->head = 0;
  unsigned kept = s->slots * RX_QUEUE_KEPT;
  if (r->used > kept) {
    madvise(r->qdata + (size_t)kept * s->slot_size, (size_t)(r->used - kept) * s->slot_size, MADV_DONTNEED);
    r->used = kept;
  }
}

/* On the loop: the datagrams the thread queued go to JS as batches of up to `slots`, exactly as
 * on_readable hands them over (in, meta, onBatch, send_batch). */
static void on_async(uv_async_t *h) {
  sock_t *s = (sock_t *)h->data;
  rx_t *r = s->rx;
  if (!r) return;
  int left = 0;
  for (int round = 0; round < RX_TURN_BATCHES && !s->closed; round++) {
    pthread_mutex_lock(&s->mu);
    unsigned n = r->count < s->slots ? r->count : s->slots;
    for (unsigned i = 0; i < n; i++) {
      unsigned k = (r->head + i) % r->cap;
      uint32_t len = r->qlen[k];
      memcpy(s->in + (size_t)i * s->slot_size, r->qdata + (size_t)k * s->slot_size, len);
      s->raddr[i] = r->qaddr[k];
      s->rm[i].msg_hdr.msg_namelen = r->qnamelen[k];
      fill_meta(s->meta + (size_t)i * META_INTS, &r->qaddr[k], len, r->qtrunc[k]);
    }
    r->head = (r->head + n) % r->cap;
    r->count -= n;
    if (r->count == 0) rx_queue_emptied(s, r);
    left = r->count > 0;
    int wake = r->want_room && r->cap - r->count >= s->slots;
    if (wake) r->want_room = 0;
    pthread_mutex_unlock(&s->mu);
    if (wake) rx_wake(r);
    if (n == 0) break;
    int32_t count = s->cb_ref ? batch_callback(s, (int)n, 0, 0) : 0;
    if (!s->closed) send_batch(s, count);
    if (s->close_pending) {
      s->close_pending = 0;
      do_close(s);
      return;
    }
    if (!left) break;
  }
  if (left && !s->closed) uv_async_send(h); /* the rest next turn: upstream replies, timers and TCP get theirs */
}

static void on_async_closed(uv_handle_t *h) {
  sock_t *s = (sock_t *)h->data;
  s->async_open = 0;
  maybe_free(s);
}

/* The answer thread reads this socket (the loop does not). */
static int rx_active(const sock_t *s) { return s->rx != NULL && s->rx->started; }

static void rx_close_async(sock_t *s) {
  if (s->async_open && s->rx && !uv_is_closing((uv_handle_t *)&s->rx->async)) uv_close((uv_handle_t *)&s->rx->async, on_async_closed);
}

static void *map_zeroed(size_t len) {
  void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  return p == MAP_FAILED ? NULL : p;
}

static void rx_free(sock_t *s) {
  rx_t *r = s->rx;
  if (!r) return;
  if (r->evfd >= 0) close(r->evfd);
  if (r->in) munmap(r->in, (size_t)s->slots * s->slot_size);
  if (r->out) munmap(r->out, RX_OUT_MAX);
  if (r->qdata) munmap(r->qdata, (size_t)r->cap * s->slot_size);
  free(r->rm);
  free(r->riov);
  free(r->raddr);
  free(r->sm);
  free(r->siov);
  free(r->qlen);
  free(r->qtrunc);
  free(r->qaddr);
  free(r->qnamelen);
  free(r);
  s->rx = NULL;
}

/* Starts the thread (once per socket); 0 or an errno. */
static int rx_start(sock_t *s, uv_loop_t *loop) {
  rx_t *r = (rx_t *)calloc(1, sizeof *r);
  if (!r) return ENOMEM;
  s->rx = r;
  r->evfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  r->cap = s->slots * RX_QUEUE_BATCHES;
  r->in = map_zeroed((size_t)s->slots * s->slot_size);
  r->out = map_zeroed(RX_OUT_MAX);
  r->qdata = map_zeroed((size_t)r->cap * s->slot_size);
  r->rm = calloc(s->slots, sizeof *r->rm);
  r->riov = calloc(s->slots, sizeof *r->riov);
  r->raddr = calloc(s->slots, sizeof *r->raddr);
  r->sm = calloc(s->slots, sizeof *r->sm);
  r->siov = calloc(s->slots, sizeof *r->siov);
  r->qlen = calloc(r->cap, sizeof *r->qlen);
  r->qtrunc = calloc(r->cap, sizeof *r->qtrunc);
  r->qaddr = calloc(r->cap, sizeof *r->qaddr);
  r->qnamelen = calloc(r->cap, sizeof *r->qnamelen);
  if (r->evfd < 0 || !r->in || !r->out || !r->qdata || !r->rm || !r->riov || !r->raddr || !r->sm || !r->siov || !r->qlen || !r->qtrunc || !r->qaddr ||
      !r->qnamelen) {
    int e = r->evfd < 0 ? errno : ENOMEM;
    rx_free(s);
    return e;
  }
  for (unsigned i = 0; i < s->slots; i++) {
    r->riov[i].iov_base = r->in + (size_t)i * s->slot_size;
    r->rm[i].msg_hdr.msg_name = &r->raddr[i];
    r->rm[i].msg_hdr.msg_iov = &r->riov[i];
    r->rm[i].msg_hdr.msg_iovlen = 1;
  }
  int e = uv_async_init(loop, &r->async, on_async);
  if (e < 0) {
    rx_free(s);
    return -e;
  }
  r->async.data = s;
  s->async_open = 1;
  /* Signals stay with the loop's thread. */
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  e = pthread_create(&r->tid, NULL, rx_main, s);
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  if (e) {
    /* r stays until the handle's close callback (maybe_free frees it); start falls back to the loop. */
    uv_close((uv_handle_t *)&r->async, on_async_closed);
    return e;
  }
  r->started = 1;
  return 0;
}

/* Stops and joins the thread; the queue's datagrams are dropped (the socket is closing). */
static void rx_stop(sock_t *s) {
  rx_t *r = s->rx;
  if (!r || !r->started) return;
  pthread_mutex_lock(&s->mu);
  r->stop = 1;
  pthread_mutex_unlock(&s->mu);
  rx_wake(r);
  pthread_join(r->tid, NULL);
  r->started = 0;
}

static void rx_pause(sock_t *s, int paused) {
  rx_t *r = s->rx;
  pthread_mutex_lock(&s->mu);
  r->paused = paused;
  pthread_mutex_unlock(&s->mu);
  rx_wake(r);
  /* Paused, the socket no longer keeps the process alive, as a stopped uv_poll_t does not. */
  if (paused) uv_unref((uv_handle_t *)&r->async);
  else uv_ref((uv_handle_t *)&r->async);
}


/* ---------- connected (upstream) sockets ---------- */

/* Calls onBatch(n) for a connected socket: n datagrams, or -errno when the socket failed. */
static void conn_callback(sock_t *s, int n) {
  napi_env env = s->env;
  napi_handle_scope scope;
  if (napi_open_handle_scope(env, &scope) != napi_ok) return;
  napi_value cb, recv, argv[1], result;
  if (napi_get_reference_value(env, s->cb_ref, &cb) == napi_ok && cb != NULL) {
    napi_get_global(env, &recv);
    napi_create_int32(env, n, &argv[0]);
    s->in_batch = 1;
    napi_status st = napi_make_callback(env, s->actx, recv, cb, 1, argv, &result);
    s->in_batch = 0;
    if (st != napi_ok) {
      bool pending = false;
      napi_is_exception_pending(env, &pending);
      if (pending) {
        napi_value ex;
        napi_get_and_clear_last_exception(env, &ex);
        napi_fatal_exception(env, ex);
      }
    }
  }
  napi_close_handle_scope(env, scope);
  if (s->close_pending) {
    s->close_pending = 0;
    do_close(s);
  }
}

/* The answers of an upstream: only meta[0] (length) and meta[1] (flags) are filled, the
 * kernel already dropped datagrams from any other peer. An ICMP error (port unreachable)
 * reaches JS as a negative errno. */
static void on_conn_readable(uv_poll_t *h, int status, int events) {
  (void)events;
  sock_t *s = (sock_t *)h->data;
  s->st[ST_WAKEUPS]++;
  if (status < 0) {
    /* libuv stopped the handle on POLLERR: report the socket's error, JS closes it. */
    int err = 0;
    socklen_t el = sizeof err;
    if (getsockopt(s->fd, SOL_SOCKET, SO_ERROR, &err, &el) < 0 || err == 0) err = EIO;
    s->st[ST_RECV_ERRORS]++;
    s->polling = 0;
    conn_callback(s, -err);
    return;
  }
  for (int round = 0; round < MAX_BATCHES_PER_WAKEUP && s->polling && !s->closed; round++) {
    for (unsigned i = 0; i < s->slots; i++) {
      struct msghdr *mh = &s->rm[i].msg_hdr;
      mh->msg_name = NULL;
      mh->msg_namelen = 0;
      mh->msg_flags = 0;
      s->riov[i].iov_len = s->slot_size;
    }
    int n = recvmmsg(s->fd, s->rm, s->slots, MSG_DONTWAIT, NULL);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) break;
      s->st[ST_RECV_ERRORS]++;
      conn_callback(s, -errno);
      return;
    }
    if (n == 0) break;
    for (int i = 0; i < n; i++) {
      int32_t *m = s->meta + (size_t)i * META_INTS;
      uint32_t len = s->rm[i].msg_len;
      int trunc = (s->rm[i].msg_hdr.msg_flags & MSG_TRUNC) != 0;
      if (len > s->slot_size) len = s->slot_size;
      if (trunc) s->st[ST_TRUNCATED]++;
      m[0] = (int32_t)len;
      m[1] = trunc ? FLAG_TRUNC : 0;
    }
    s->st[ST_RECEIVED] += n;
    s->st[ST_BATCHES]++;
    conn_callback(s, n);
    if ((unsigned)n < s->slots) break;
  }
}

/* ---------- JS API ---------- */

static int32_t get_int(napi_env env, napi_value obj, const char *key, int32_t dflt) {
  napi_value v;
  bool has = false;
  if (napi_has_named_property(env, obj, key, &has) != napi_ok || !has) return dflt;
  if (napi_get_named_property(env, obj, key, &v) != napi_ok) return dflt;
  napi_valuetype t;
  napi_typeof(env, v, &t);
  if (t == napi_boolean) {
    bool b;
    napi_get_value_bool(env, v, &b);
    return b ? 1 : 0;
  }
  if (t != napi_number) return dflt;
  int32_t r;
  if (napi_get_value_int32(env, v, &r) != napi_ok) return dflt;
  return r;
}

static napi_value make_ab(napi_env env, sock_t *s, int idx, size_t len, void **data) {
  napi_value ab;
  if (napi_create_arraybuffer(env, len, data, &ab) != napi_ok) return NULL;
  napi_create_reference(env, ab, 1, &s->ab_ref[idx]);
  return ab;
}

/* Wraps a bound, non-blocking datagram socket (owned from now on) in a JS handle object. */
static napi_value wrap_fd(napi_env env, int fd, int slots, int slot_size, int out_size) {
  struct sockaddr_storage bound;
  memset(&bound, 0, sizeof bound);
  socklen_t blen = sizeof bound;
  char bound_addr[INET6_ADDRSTRLEN] = {0};
  int bound_port = 0;
  if (getsockname(fd, (struct sockaddr *)&bound, &blen) == 0) {
    if (bound.ss_family == AF_INET) {
      inet_ntop(AF_INET, &((struct sockaddr_in *)&bound)->sin_addr, bound_addr, sizeof bound_addr);
      bound_port = ntohs(((struct sockaddr_in *)&bound)->sin_port);
    } else {
      inet_ntop(AF_INET6, &((struct sockaddr_in6 *)&bound)->sin6_addr, bound_addr, sizeof bound_addr);
      bound_port = ntohs(((struct sockaddr_in6 *)&bound)->sin6_port);
    }
  }

  sock_t *s = (sock_t *)calloc(1, sizeof *s);
  if (!s) {
    close(fd);
    napi_throw_error(env, "ENOMEM", "udpbatch: out of memory");
    return NULL;
  }
  pthread_mutex_init(&s->mu, NULL);
  s->env = env;
  s->fd = fd;
  s->family = bound.ss_family;
  s->slots = (unsigned)slots;
  s->slot_size = (unsigned)slot_size;
  s->out_size = (unsigned)out_size;
  s->rm = calloc((size_t)slots, sizeof *s->rm);
  s->riov = calloc((size_t)slots, sizeof *s->riov);
  s->raddr = calloc((size_t)slots, sizeof *s->raddr);
  s->sm = calloc((size_t)slots, sizeof *s->sm);
  s->siov = calloc((size_t)slots, sizeof *s->siov);
  s->js_alive = 1;
  napi_value obj, in_ab, meta_ab, out_ab, ometa_ab;
  /* Datagrams land in their own slot of up to 64 KiB, so none is ever cut short; the slab
   * is mapped, not allocated, so only the pages datagrams touch become resident. */
  size_t in_len = (size_t)slots * (size_t)slot_size;
  void *in = (s->rm && s->riov && s->raddr && s->sm && s->siov)
                 ? mmap(NULL, in_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0)
                 : MAP_FAILED;
  if (in == MAP_FAILED) {
    close(fd);
    s->fd = -1;
    s->js_alive = 0;
    maybe_free(s);
    napi_throw_error(env, "ENOMEM", "udpbatch: out of memory");
    return NULL;
  }
  if (napi_create_external_arraybuffer(env, in, in_len, finalize_mmap, (void *)(uintptr_t)in_len, &in_ab) != napi_ok) {
    munmap(in, in_len);
    close(fd);
    s->fd = -1;
    s->js_alive = 0;
    maybe_free(s);
    napi_throw_error(env, NULL, "udpbatch: cannot create the receive buffer");
    return NULL;
  }
  s->in = (uint8_t *)in;
  napi_create_reference(env, in_ab, 1, &s->ab_ref[0]);
  meta_ab = make_ab(env, s, 1, (size_t)slots * META_INTS * 4, (void **)&s->meta);
  out_ab = make_ab(env, s, 2, (size_t)out_size, (void **)&s->out);
  ometa_ab = make_ab(env, s, 3, (size_t)slots * OUT_INTS * 4, (void **)&s->ometa);
  if (!meta_ab || !out_ab || !ometa_ab) {
    do_close(s);
    s->js_alive = 0;
    maybe_free(s);
    napi_throw_error(env, NULL, "udpbatch: cannot create buffers");
    return NULL;
  }
  for (int i = 0; i < slots; i++) {
    s->riov[i].iov_base = s->in + (size_t)i * (size_t)slot_size;
    s->riov[i].iov_len = (size_t)slot_size;
    s->rm[i].msg_hdr.msg_name = &s->raddr[i];
    s->rm[i].msg_hdr.msg_namelen = sizeof(struct sockaddr_storage);
    s->rm[i].msg_hdr.msg_iov = &s->riov[i];
    s->rm[i].msg_hdr.msg_iovlen = 1;
  }

  if (napi_create_object(env, &obj) != napi_ok) {
    do_close(s);
    s->js_alive = 0;
    maybe_free(s);
    napi_throw_error(env, NULL, "udpbatch: cannot create the socket object");
    return NULL;
  }
  napi_value pv, adv, tmp;
  napi_create_int32(env, bound_port, &pv);
  napi_create_string_utf8(env, bound_addr, NAPI_AUTO_LENGTH, &adv);
  napi_set_named_property(env, obj, "port", pv);
  napi_set_named_property(env, obj, "address", adv);
  napi_set_named_property(env, obj, "in", in_ab);
  napi_set_named_property(env, obj, "meta", meta_ab);
  napi_set_named_property(env, obj, "out", out_ab);
  napi_set_named_property(env, obj, "outMeta", ometa_ab);
  napi_create_int32(env, slots, &tmp);
  napi_set_named_property(env, obj, "slots", tmp);
  napi_create_int32(env, slot_size, &tmp);
  napi_set_named_property(env, obj, "slotSize", tmp);
  if (napi_wrap(env, obj, s, finalize_sock, NULL, NULL) != napi_ok) {
    do_close(s);
    s->js_alive = 0;
    maybe_free(s);
    napi_throw_error(env, NULL, "udpbatch: cannot wrap the socket");
    return NULL;
  }
  napi_value res_name;
  napi_create_string_utf8(env, "UDPBATCH", NAPI_AUTO_LENGTH, &res_name);
  napi_async_init(env, obj, res_name, &s->actx);
  if (napi_add_env_cleanup_hook(env, env_cleanup, s) == napi_ok) s->hook_added = 1;
  return obj;
}

/* Octets of the question name (from offset 12 of the DNS message) the steering program hashes;
 * src/server/shards.ts computes the same function and must use the same prefix. */
#define STEER_PREFIX 48
#define STEER_MAX_GROUPS 256

/* Attaches to the reuseport group of fd a classic BPF program that picks the socket by the
 * question name: FNV-1a over the lower-cased wire name up to its root label (at most
 * STEER_PREFIX octets), folded, modulo `groups`; then shard s goes to socket map[s]. cBPF
 * jumps only forward, so the loop is unrolled. Returns 0 or an errno. */
static int attach_steering(int fd, unsigned groups, const uint32_t *map) {
  enum { PER_OCTET = 9 };
  static struct sock_filter code[2 + STEER_PREFIX * PER_OCTET + 4 + 2 * STEER_MAX_GROUPS + 1];
  unsigned n = 0;
  const unsigned end = 1 + STEER_PREFIX * PER_OCTET;
  code[n++] = (struct sock_filter)BPF_STMT(BPF_LDX | BPF_W | BPF_IMM, 2166136261u);
  for (unsigned p = 0; p < STEER_PREFIX; p++) {
    code[n++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_B | BPF_ABS, 12 + p);
    code[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 0, 0, 1); /* the root label ends the name */
    code[n] = (struct sock_filter)BPF_STMT(BPF_JMP | BPF_JA, end - (n + 1));
    n++;
    code[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JGE | BPF_K, 'A', 0, 2);
    code[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JGT | BPF_K, 'Z', 1, 0);
    code[n++] = (struct sock_filter)BPF_STMT(BPF_ALU | BPF_OR | BPF_K, 0x20);
    code[n++] = (struct sock_filter)BPF_STMT(BPF_ALU | BPF_XOR | BPF_X, 0);
    code[n++] = (struct sock_filter)BPF_STMT(BPF_ALU | BPF_MUL | BPF_K, 16777619u);
    code[n++] = (struct sock_filter)BPF_STMT(BPF_MISC | BPF_TAX, 0);
  }
  code[n++] = (struct sock_filter)BPF_STMT(BPF_MISC | BPF_TXA, 0);
  code[n++] = (struct sock_filter)BPF_STMT(BPF_ALU | BPF_RSH | BPF_K, 16);
  code[n++] = (struct sock_filter)BPF_STMT(BPF_ALU | BPF_XOR | BPF_X, 0);
  code[n++] = (struct sock_filter)BPF_STMT(BPF_ALU | BPF_MOD | BPF_K, groups);
  for (unsigned s = 0; map && s < groups; s++) {
    if (map[s] == s) continue;
    code[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, s, 0, 1);
    code[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, map[s]);
  }
  code[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_A, 0);
  struct sock_fprog prog = {.len = (unsigned short)n, .filter = code};
  return setsockopt(fd, SOL_SOCKET, SO_ATTACH_REUSEPORT_CBPF, &prog, sizeof prog) < 0 ? errno : 0;
}

/* Reads the shard → socket map argument (an array of `groups` numbers); NULL when absent. */
static int get_map(napi_env env, napi_value v, unsigned groups, uint32_t *map) {
  bool is_array = false;
  if (napi_is_array(env, v, &is_array) != napi_ok || !is_array) return 0;
  uint32_t len = 0;
  napi_get_array_length(env, v, &len);
  if (len != groups) return -1;
  for (uint32_t i = 0; i < len; i++) {
    napi_value e;
    uint32_t x = 0;
    if (napi_get_element(env, v, i, &e) != napi_ok || napi_get_value_uint32(env, e, &x) != napi_ok || x >= groups) return -1;
    map[i] = x;
  }
  return 1;
}

/* open({ address, port, ipv6, ipv6Only, reusePort, spread, steer, recvBuffer, sendBuffer, slots, slotSize, outSize });
 * openFd(same options): the bound descriptor itself, owned by the caller. */
static napi_value js_open(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value argv[1];
  void *raw = NULL; /* set for openFd: return the bare descriptor */
  CHECK(napi_get_cb_info(env, info, &argc, argv, NULL, &raw));
  if (argc < 1) {
    napi_throw_type_error(env, NULL, "open(options)");
    return NULL;
  }
  napi_value o = argv[0];
  char address[INET6_ADDRSTRLEN + IF_NAMESIZE + 2] = {0};
  napi_value av;
  size_t alen = 0;
  CHECK(napi_get_named_property(env, o, "address", &av));
  if (napi_get_value_string_utf8(env, av, address, sizeof address, &alen) != napi_ok) {
    napi_throw_type_error(env, NULL, "address must be a string");
    return NULL;
  }
  int port = get_int(env, o, "port", 0);
  int ipv6 = get_int(env, o, "ipv6", 0);
  int v6only = get_int(env, o, "ipv6Only", 0);
  int reuseport = get_int(env, o, "reusePort", 0);
  int spread = get_int(env, o, "spread", 0);
  int steer = get_int(env, o, "steer", 0);
  int rcvbuf = get_int(env, o, "recvBuffer", 0);
  int sndbuf = get_int(env, o, "sendBuffer", 0);
  int slots = get_int(env, o, "slots", 64);
  int slot_size = get_int(env, o, "slotSize", 65536);
  int out_size = get_int(env, o, "outSize", 256 * 1024);
  if (steer < 0 || steer > STEER_MAX_GROUPS || (steer > 0 && !reuseport) || port < 0 || port > 65535 || slots < 1 || slots > MAX_SLOTS || slot_size < 12 || slot_size > 65536 || out_size < 512 || out_size > (64 << 20)) {
    napi_throw_range_error(env, NULL, "udpbatch: option out of range");
    return NULL;
  }

  struct sockaddr_storage ss;
  socklen_t sslen;
  memset(&ss, 0, sizeof ss);
  if (ipv6) {
    struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)&ss;
    sin6->sin6_family = AF_INET6;
    sin6->sin6_port = htons((uint16_t)port);
    char *pct = strchr(address, '%');
    if (pct) {
      *pct = 0;
      sin6->sin6_scope_id = if_nametoindex(pct + 1);
      if (sin6->sin6_scope_id == 0) sin6->sin6_scope_id = (uint32_t)atoi(pct + 1);
    }
    if (inet_pton(AF_INET6, address, &sin6->sin6_addr) != 1) {
      if (pct) *pct = '%';
      return throw_errno(env, EINVAL, "bind", address, port);
    }
    if (pct) *pct = '%';
    sslen = sizeof *sin6;
  } else {
    struct sockaddr_in *sin = (struct sockaddr_in *)&ss;
    sin->sin_family = AF_INET;
    sin->sin_port = htons((uint16_t)port);
    if (inet_pton(AF_INET, address, &sin->sin_addr) != 1) return throw_errno(env, EINVAL, "bind", address, port);
    sslen = sizeof *sin;
  }

  int fd = socket(ipv6 ? AF_INET6 : AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return throw_errno(env, errno, "socket", NULL, 0);
  int one = 1;
  if (ipv6 && v6only && setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one) < 0) {
    int e = errno;
    close(fd);
    return throw_errno(env, e, "setsockopt", NULL, 0);
  }
  if (reuseport && setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one) < 0) {
    int e = errno;
    close(fd);
    return throw_errno(env, e, "setsockopt", NULL, 0);
  }
  /* The kernel caps these at net.core.[rw]mem_max; a smaller buffer still works. */
  if (rcvbuf > 0) setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf);
  if (sndbuf > 0) setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof sndbuf);
  if (bind(fd, (struct sockaddr *)&ss, sslen) < 0) {
    int e = errno;
    close(fd);
    return throw_errno(env, e, "bind", address, port);
  }
  if (reuseport && spread > 1) {
    /* Every datagram to a random socket of the group, not by hash of the 4-tuple: a few
     * busy clients (a node-local cache, a benchmark) otherwise land on one worker. An index
     * past the group's size (a worker not yet started) falls back to the hash. */
    struct sock_filter code[] = {
        {BPF_LD | BPF_W | BPF_ABS, 0, 0, (uint32_t)(SKF_AD_OFF + SKF_AD_RANDOM)},
        {BPF_ALU | BPF_MOD | BPF_K, 0, 0, (uint32_t)spread},
        {BPF_RET | BPF_A, 0, 0, 0},
    };
    struct sock_fprog prog = {.len = 3, .filter = code};
    setsockopt(fd, SOL_SOCKET, SO_ATTACH_REUSEPORT_CBPF, &prog, sizeof prog); /* best effort */
  }
  if (steer > 0) {
    int e = attach_steering(fd, (unsigned)steer, NULL);
    if (e) {
      close(fd);
      return throw_errno(env, e, "setsockopt SO_ATTACH_REUSEPORT_CBPF", NULL, 0);
    }
  }
  if (raw) {
    /* The bare descriptor, for a process that holds the socket for others (cluster workers). */
    napi_value r;
    CHECK(napi_create_int32(env, fd, &r));
    return r;
  }
  return wrap_fd(env, fd, slots, slot_size, out_size);
}

/* adopt({ fd, slots, slotSize, outSize }): a duplicate of an already bound UDP socket (one that
 * node:dgram opened, e.g. the socket cluster workers share); the caller keeps its own fd. */
static napi_value js_adopt(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value argv[1];
  CHECK(napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  if (argc < 1) {
    napi_throw_type_error(env, NULL, "adopt(options)");
    return NULL;
  }
  napi_value o = argv[0];
  int src = get_int(env, o, "fd", -1);
  int slots = get_int(env, o, "slots", 64);
  int slot_size = get_int(env, o, "slotSize", 65536);
  int out_size = get_int(env, o, "outSize", 256 * 1024);
  if (src < 0 || slots < 1 || slots > MAX_SLOTS || slot_size < 12 || slot_size > 65536 || out_size < 512 || out_size > (64 << 20)) {
    napi_throw_range_error(env, NULL, "udpbatch: option out of range");
    return NULL;
  }
  int type = 0;
  socklen_t tl = sizeof type;
  if (getsockopt(src, SOL_SOCKET, SO_TYPE, &type, &tl) < 0) return throw_errno(env, errno, "getsockopt", NULL, 0);
  if (type != SOCK_DGRAM) return throw_errno(env, EINVAL, "adopt", NULL, 0);
  int fd = fcntl(src, F_DUPFD_CLOEXEC, 0);
  if (fd < 0) return throw_errno(env, errno, "dup", NULL, 0);
  int fl = fcntl(fd, F_GETFL);
  if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0) {
    int e = errno;
    close(fd);
    return throw_errno(env, e, "fcntl", NULL, 0);
  }
  return wrap_fd(env, fd, slots, slot_size, out_size);
}

/* steer(fd, groups, map?): (re)attaches the question-name program to fd's reuseport group;
 * map[s] is the socket that gets shard s (a stand-in while its worker is replaced). */
static napi_value js_steer(napi_env env, napi_callback_info info) {
  size_t argc = 3;
  napi_value argv[3];
  CHECK(napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  int32_t fd = -1, groups = 0;
  if (argc < 2 || napi_get_value_int32(env, argv[0], &fd) != napi_ok || napi_get_value_int32(env, argv[1], &groups) != napi_ok || fd < 0 || groups < 1 || groups > STEER_MAX_GROUPS) {
    napi_throw_range_error(env, NULL, "steer(fd, groups, map?)");
    return NULL;
  }
  uint32_t map[STEER_MAX_GROUPS];
  int has = argc >= 3 ? get_map(env, argv[2], (unsigned)groups, map) : 0;
  if (has < 0) {
    napi_throw_range_error(env, NULL, "steer: map must have one socket index below groups per shard");
    return NULL;
  }
  int e = attach_steering(fd, (unsigned)groups, has ? map : NULL);
  if (e) return throw_errno(env, e, "setsockopt SO_ATTACH_REUSEPORT_CBPF", NULL, 0);
  return NULL;
}

/* closeFd(fd): closes a descriptor openFd returned. */
static napi_value js_close_fd(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value argv[1];
  int32_t fd = -1;
  CHECK(napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  if (argc >= 1 && napi_get_value_int32(env, argv[0], &fd) == napi_ok && fd > 2) close(fd);
  return NULL;
}

/* start(sock, onBatch, thread?): begin reading; onBatch(n) returns the number of answers in
 * `out`. With thread true the answer thread takes the reading over from the loop once the table
 * keeps its first answer (fastPut): a socket whose answers are never kept (forward only) stays on
 * the loop, without the thread's hand-off. start again after pause resumes whichever reads. */
static napi_value js_start(napi_env env, napi_callback_info info) {
  napi_value argv[3];
  sock_t *s = sock_args(env, info, 3, argv);
  if (!s) return NULL;
  if (s->closed) return throw_errno(env, EBADF, "start", NULL, 0);
  napi_valuetype t;
  napi_typeof(env, argv[1], &t);
  if (t != napi_function) {
    napi_throw_type_error(env, NULL, "start(sock, onBatch, thread?)");
    return NULL;
  }
  bool want_thread = false;
  napi_typeof(env, argv[2], &t);
  if (t == napi_boolean) napi_get_value_bool(env, argv[2], &want_thread);
  if (s->cb_ref) napi_delete_reference(env, s->cb_ref);
  CHECK(napi_create_reference(env, argv[1], 1, &s->cb_ref));
  CHECK(napi_get_uv_event_loop(env, &s->loop));
  s->want_thread = want_thread && !s->connected;
  if (rx_active(s)) {
    rx_pause(s, 0);
    s->polling = 1;
    return NULL;
  }
  if (!s->handle_open) {
    int r = uv_poll_init(s->loop, &s->poll, s->fd);
    if (r < 0) return throw_errno(env, -r, "uv_poll_init", NULL, 0);
    s->poll.data = s;
    s->handle_open = 1;
  }
  int r = uv_poll_start(&s->poll, UV_READABLE, s->connected ? on_conn_readable : on_readable);
  if (r < 0) return throw_errno(env, -r, "uv_poll_start", NULL, 0);
  /* An upstream socket does not keep the process alive, as node:dgram's unref'd one did not. */
  if (s->connected) uv_unref((uv_handle_t *)&s->poll);
  s->polling = 1;
  return NULL;
}

/* The table kept its first answer: the answer thread reads from now on (the loop's reading
 * stops after the batch being handled). Where the thread cannot start, the loop goes on. */
static void maybe_hand_to_thread(sock_t *s) {
  if (!s->want_thread || s->rx || !s->polling || s->closed || !s->handle_open || !s->loop) return;
  uv_poll_stop(&s->poll);
  if (rx_start(s, s->loop) != 0) uv_poll_start(&s->poll, UV_READABLE, on_readable);
}

/* pause(sock): stop reading (queued datagrams stay in the kernel); sending still works. */
static napi_value js_pause(napi_env env, napi_callback_info info) {
  napi_value argv[1];
  sock_t *s = sock_args(env, info, 1, argv);
  if (!s) return NULL;
  if (s->handle_open && s->polling && !s->closed) uv_poll_stop(&s->poll);
  if (rx_active(s) && !s->closed) rx_pause(s, 1);
  s->polling = 0;
  return NULL;
}

static napi_value js_close(napi_env env, napi_callback_info info) {
  napi_value argv[1];
  sock_t *s = sock_args(env, info, 1, argv);
  if (!s) return NULL;
  do_close(s);
  return NULL;
}

/* sendTo(sock, data, family, port, scope, a0, a1, a2, a3): one datagram; 0 or -errno. */
static napi_value js_send_to(napi_env env, napi_callback_info info) {
  size_t argc = 9;
  napi_value argv[9];
  CHECK(napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  if (argc < 9) {
    napi_throw_type_error(env, NULL, "sendTo(sock, data, family, port, scope, a0, a1, a2, a3)");
    return NULL;
  }
  sock_t *s = unwrap(env, argv[0]);
  if (!s) return NULL;
  napi_typedarray_type tt;
  size_t length;
  void *data;
  napi_value ab;
  size_t off;
  if (napi_get_typedarray_info(env, argv[1], &tt, &length, &data, &ab, &off) != napi_ok || tt != napi_uint8_array) {
    napi_throw_type_error(env, NULL, "sendTo: data must be a Uint8Array");
    return NULL;
  }
  int32_t v[7];
  for (int i = 0; i < 7; i++) napi_get_value_int32(env, argv[2 + i], &v[i]);
  napi_value ret;
  int res = 0;
  if (s->closed || s->fd < 0) {
    res = -EBADF;
  } else {
    struct sockaddr_storage ss;
    socklen_t len;
    if (sockaddr_from_ints(&ss, &len, v[0], v[1], v[2], &v[3]) < 0) {
      res = -EINVAL;
    } else {
      ssize_t r;
      do r = sendto(s->fd, data, length, 0, (struct sockaddr *)&ss, len);
      while (r < 0 && errno == EINTR);
      if (r < 0) res = -errno;
    }
  }
  if (res == 0) s->st[ST_SENT]++;
  else s->st[ST_SEND_ERRORS]++;
  napi_create_int32(env, res, &ret);
  return ret;
}

/* ntop(family, scope, a0, a1, a2, a3): the address as text, as Node's rinfo.address has it. */
static napi_value js_ntop(napi_env env, napi_callback_info info) {
  size_t argc = 6;
  napi_value argv[6];
  CHECK(napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  int32_t v[6] = {0};
  for (size_t i = 0; i < argc && i < 6; i++) napi_get_value_int32(env, argv[i], &v[i]);
  char buf[INET6_ADDRSTRLEN + IF_NAMESIZE + 2] = {0};
  if (v[0] == 4) {
    struct in_addr ia;
    ia.s_addr = htonl((uint32_t)v[2]);
    inet_ntop(AF_INET, &ia, buf, sizeof buf);
  }
  else if (v[0] == 6) {
    inet_ntop(AF_INET6, &v[2], buf, INET6_ADDRSTRLEN);
    if (v[1] != 0) {
      /* Node (libuv) writes link-local scopes as %ifname. */
      char ifn[IF_NAMESIZE];
      size_t l = strlen(buf);
      if (if_indextoname((unsigned)v[1], ifn)) snprintf(buf + l, sizeof buf - l, "%%%s", ifn);
      else snprintf(buf + l, sizeof buf - l, "%%%d", v[1]);
    }
  }
  napi_value r;
  napi_create_string_utf8(env, buf, NAPI_AUTO_LENGTH, &r);
  return r;
}

/* Bytes of the answer thread's queue resident in memory (mincore); 0 without the thread. */
static double rx_queue_resident(const sock_t *s) {
  const rx_t *r = s->rx;
  if (!r || !r->qdata) return 0;
  size_t len = (size_t)r->cap * s->slot_size;
  size_t page = (size_t)sysconf(_SC_PAGESIZE);
  size_t pages = (len + page - 1) / page;
  unsigned char *vec = malloc(pages);
  if (!vec) return 0;
  double bytes = 0;
  if (mincore(r->qdata, len, vec) == 0)
    for (size_t i = 0; i < pages; i++)
      if (vec[i] & 1) bytes += (double)page;
  free(vec);
  return bytes;
}

/* stats(sock): [received, batches, sent, sendErrors, truncated, recvErrors, wakeups,
 * queueResidentBytes] */
static napi_value js_stats(napi_env env, napi_callback_info info) {
  napi_value argv[1];
  sock_t *s = sock_args(env, info, 1, argv);
  if (!s) return NULL;
  napi_value arr;
  CHECK(napi_create_array_with_length(env, ST_COUNT + 1, &arr));
  double st[ST_COUNT];
  memcpy(st, s->st, sizeof st);
  if (s->rx) {
    pthread_mutex_lock(&s->mu);
    for (int i = 0; i < ST_COUNT; i++) st[i] += s->rx->st[i];
    pthread_mutex_unlock(&s->mu);
  }
  for (uint32_t i = 0; i < ST_COUNT; i++) {
    napi_value n;
    napi_create_double(env, st[i], &n);
    napi_set_element(env, arr, i, n);
  }
  napi_value q;
  napi_create_double(env, rx_queue_resident(s), &q);
  napi_set_element(env, arr, ST_COUNT, q);
  return arr;
}

/* connect(sock, host, port): connects an opened socket to its upstream. The local address
 * as "ADDRESS PORT" on success, -errno on failure. */
static napi_value js_connect(napi_env env, napi_callback_info info) {
  napi_value argv[3];
  sock_t *s = sock_args(env, info, 3, argv);
  if (!s) return NULL;
  char host[INET6_ADDRSTRLEN + IF_NAMESIZE + 2] = {0};
  size_t hl = 0;
  int32_t port = 0;
  if (napi_get_value_string_utf8(env, argv[1], host, sizeof host, &hl) != napi_ok || napi_get_value_int32(env, argv[2], &port) != napi_ok || port < 0 || port > 65535) {
    napi_throw_type_error(env, NULL, "connect(sock, host, port)");
    return NULL;
  }
  int res = 0;
  struct sockaddr_storage ss;
  socklen_t sslen;
  memset(&ss, 0, sizeof ss);
  if (s->closed || s->fd < 0) {
    res = -EBADF;
  } else if (s->family == AF_INET6) {
    struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)&ss;
    sin6->sin6_family = AF_INET6;
    sin6->sin6_port = htons((uint16_t)port);
    char *pct = strchr(host, '%');
    if (pct) {
      *pct = 0;
      sin6->sin6_scope_id = if_nametoindex(pct + 1);
      if (sin6->sin6_scope_id == 0) sin6->sin6_scope_id = (uint32_t)atoi(pct + 1);
    }
    if (inet_pton(AF_INET6, host, &sin6->sin6_addr) != 1) res = -EINVAL;
    sslen = sizeof *sin6;
  } else {
    struct sockaddr_in *sin = (struct sockaddr_in *)&ss;
    sin->sin_family = AF_INET;
    sin->sin_port = htons((uint16_t)port);
    if (inet_pton(AF_INET, host, &sin->sin_addr) != 1) res = -EINVAL;
    sslen = sizeof *sin;
  }
  if (res == 0 && connect(s->fd, (struct sockaddr *)&ss, sslen) < 0) res = -errno;
  napi_value ret;
  if (res != 0) {
    CHECK(napi_create_int32(env, res, &ret));
    return ret;
  }
  s->connected = 1;
  char local[INET6_ADDRSTRLEN + 8] = {0};
  struct sockaddr_storage lb;
  socklen_t ll = sizeof lb;
  memset(&lb, 0, sizeof lb);
  if (getsockname(s->fd, (struct sockaddr *)&lb, &ll) == 0) {
    char a[INET6_ADDRSTRLEN] = {0};
    int p = 0;
    if (lb.ss_family == AF_INET) {
      inet_ntop(AF_INET, &((struct sockaddr_in *)&lb)->sin_addr, a, sizeof a);
      p = ntohs(((struct sockaddr_in *)&lb)->sin_port);
    } else {
      inet_ntop(AF_INET6, &((struct sockaddr_in6 *)&lb)->sin6_addr, a, sizeof a);
      p = ntohs(((struct sockaddr_in6 *)&lb)->sin6_port);
    }
    snprintf(local, sizeof local, "%s %d", a, p);
  }
  CHECK(napi_create_string_utf8(env, local, NAPI_AUTO_LENGTH, &ret));
  return ret;
}

/* The (data, meta, count) arguments of sendPacked and sendMany: a Uint8Array of packed
 * datagrams, an Int32Array of per-datagram fields, how many; false (a TypeError thrown) when not. */
typedef struct {
  const uint8_t *data;
  size_t dlen;
  const int32_t *meta;
  size_t mlen;
  int32_t count;
} packed_t;

static int packed_args(napi_env env, napi_value *argv, const char *usage, packed_t *p) {
  napi_typedarray_type tt, mt;
  size_t off0;
  void *dv = NULL, *mv = NULL;
  napi_value ab;
  p->count = 0;
  if (napi_get_typedarray_info(env, argv[1], &tt, &p->dlen, &dv, &ab, &off0) != napi_ok || tt != napi_uint8_array ||
      napi_get_typedarray_info(env, argv[2], &mt, &p->mlen, &mv, &ab, &off0) != napi_ok || mt != napi_int32_array ||
      napi_get_value_int32(env, argv[3], &p->count) != napi_ok) {
    napi_throw_type_error(env, NULL, usage);
    return 0;
  }
  p->data = (const uint8_t *)dv;
  p->meta = (const int32_t *)mv;
  if (p->count < 0) p->count = 0;
  return 1;
}

/* sendPacked(sock, data, meta, count): count messages packed in data (meta: offset, length
 * per message) to the connected peer, sendmmsg by sendmmsg. The number sent, or -errno when
 * the first failed (an ICMP error reported on the socket). */
static napi_value js_send_packed(napi_env env, napi_callback_info info) {
  napi_value argv[4];
  sock_t *s = sock_args(env, info, 4, argv);
  if (!s) return NULL;
  packed_t p;
  if (!packed_args(env, argv, "sendPacked(sock, Uint8Array, Int32Array, count)", &p)) return NULL;
  const uint8_t *data = p.data;
  size_t dlen = p.dlen, mlen = p.mlen;
  const int32_t *meta = p.meta;
  int32_t count = p.count;
  if ((size_t)count > mlen / 2) count = (int32_t)(mlen / 2);
  int res = 0, sent = 0;
  if (s->closed || s->fd < 0 || !s->connected) res = -EBADF;
  for (int j = 0; res == 0 && j < count;) {
    int m = 0;
    for (; j < count && (unsigned)m < s->slots; j++) {
      uint32_t off = (uint32_t)meta[2 * j], len = (uint32_t)meta[2 * j + 1];
      if (off > dlen || len > dlen - off) {
        s->st[ST_SEND_ERRORS]++;
        continue;
      }
      s->siov[m].iov_base = (void *)(data + off);
      s->siov[m].iov_len = len;
      struct msghdr *h = &s->sm[m].msg_hdr;
      memset(h, 0, sizeof *h);
      h->msg_iov = &s->siov[m];
      h->msg_iovlen = 1;
      m++;
    }
    int i = 0;
    while (i < m) {
      int r = sendmmsg(s->fd, s->sm + i, (unsigned)(m - i), 0);
      if (r > 0) {
        i += r;
        sent += r;
        s->st[ST_SENT] += r;
      } else if (r < 0 && errno == EINTR) {
        continue;
      } else if (r < 0 && sent == 0 && errno != EAGAIN && errno != ENOBUFS) {
        res = -errno;
        s->st[ST_SEND_ERRORS]++;
        break;
      } else {
        /* A full buffer: this query is lost as a datagram can be; its try times out. */
        s->st[ST_SEND_ERRORS]++;
        i++;
      }
    }
  }
  napi_value ret;
  CHECK(napi_create_int32(env, res != 0 ? res : sent, &ret));
  return ret;
}

/* sendMany(sock, data, meta, count): count datagrams packed in data, each to its own peer
 * (meta: offset, length, family, port, scope, a0, a1, a2, a3 per datagram), sendmmsg by
 * sendmmsg: the answers that complete outside a batch (forward). The number sent. */
#define MANY_INTS 9
#define MANY_CHUNK 64
static napi_value js_send_many(napi_env env, napi_callback_info info) {
  napi_value argv[4];
  sock_t *s = sock_args(env, info, 4, argv);
  if (!s) return NULL;
  packed_t p;
  if (!packed_args(env, argv, "sendMany(sock, Uint8Array, Int32Array, count)", &p)) return NULL;
  const uint8_t *data = p.data;
  size_t dlen = p.dlen, mlen = p.mlen;
  const int32_t *meta = p.meta;
  int32_t count = p.count;
  if ((size_t)count > mlen / MANY_INTS) count = (int32_t)(mlen / MANY_INTS);
  int sent = 0;
  /* Addresses of their own: the last batch's (raddr) may still be waiting for its answers. */
  struct sockaddr_storage addr[MANY_CHUNK];
  struct mmsghdr mm[MANY_CHUNK];
  struct iovec iov[MANY_CHUNK];
  for (int j = 0; !s->closed && s->fd >= 0 && j < count;) {
    int m = 0;
    for (; j < count && m < MANY_CHUNK; j++) {
      const int32_t *e = meta + (size_t)j * MANY_INTS;
      uint32_t off = (uint32_t)e[0], len = (uint32_t)e[1];
      socklen_t alen;
      if (off > dlen || len > dlen - off || sockaddr_from_ints(&addr[m], &alen, e[2], e[3], e[4], &e[5]) < 0) {
        s->st[ST_SEND_ERRORS]++;
        continue;
      }
      iov[m].iov_base = (void *)(data + off);
      iov[m].iov_len = len;
      memset(&mm[m], 0, sizeof mm[m]);
      mm[m].msg_hdr.msg_name = &addr[m];
      mm[m].msg_hdr.msg_namelen = alen;
      mm[m].msg_hdr.msg_iov = &iov[m];
      mm[m].msg_hdr.msg_iovlen = 1;
      m++;
    }
    int i = 0;
    while (i < m) {
      int r = sendmmsg(s->fd, mm + i, (unsigned)(m - i), 0);
      if (r > 0) {
        i += r;
        sent += r;
        s->st[ST_SENT] += r;
      } else if (r < 0 && errno == EINTR) {
        continue;
      } else {
        /* As send_batch: this answer is lost, as a datagram can be; go on with the next. */
        s->st[ST_SEND_ERRORS]++;
        i++;
      }
    }
  }
  napi_value ret;
  CHECK(napi_create_int32(env, sent, &ret));
  return ret;
}

/* fastEnable(sock, hits): gives the socket its answer table; hits (a Float64Array) gets one count
 * per answer the table gives, at the index JS chose for the entry (fastPut's stat). */
static napi_value js_fast_enable(napi_env env, napi_callback_info info) {
  napi_value argv[2];
  sock_t *s = sock_args(env, info, 2, argv);
  if (!s) return NULL;
  napi_typedarray_type tt;
  size_t len = 0, off = 0;
  void *data = NULL;
  napi_value ab;
  if (napi_get_typedarray_info(env, argv[1], &tt, &len, &data, &ab, &off) != napi_ok || tt != napi_float64_array) {
    napi_throw_type_error(env, NULL, "fastEnable(sock, Float64Array)");
    return NULL;
  }
  if (s->closed) return throw_errno(env, EBADF, "fastEnable", NULL, 0);
  double *thits = (double *)calloc(len ? len : 1, sizeof *thits);
  if (!thits) {
    napi_throw_error(env, "ENOMEM", "udpbatch: out of memory");
    return NULL;
  }
  pthread_mutex_lock(&s->mu);
  if (!s->fast) {
    s->fast = (fast_table_t *)calloc(1, sizeof *s->fast);
    if (!s->fast) {
      pthread_mutex_unlock(&s->mu);
      free(thits);
      napi_throw_error(env, "ENOMEM", "udpbatch: out of memory");
      return NULL;
    }
    s->fast->swept_gen = fast_gen;
  }
  fast_table_t *t = s->fast;
  if (t->hits_ref) napi_delete_reference(env, t->hits_ref);
  t->hits_ref = NULL;
  napi_status st = napi_create_reference(env, argv[1], 1, &t->hits_ref);
  if (st == napi_ok) {
    t->hits = (double *)data;
    t->nhits = (uint32_t)len;
    free(t->thits);
    t->thits = thits;
  } else {
    t->hits = NULL;
    t->nhits = 0;
    free(thits);
  }
  pthread_mutex_unlock(&s->mu);
  CHECK(st);
  return NULL;
}

/* What fastPut and fastPutQuery take after their second argument. */
typedef struct {
  const uint8_t *ans;
  size_t alen;
  double valid;
  uint32_t stat;
  const uint16_t *ttl_at;
  size_t nttl;
  uint32_t ttl_base, steps;
} fast_args_t;

/* The socket of a fastPut or fastPutQuery call (argv: its 8 arguments) and what follows its
 * second argument; NULL, with a TypeError thrown, when they are malformed. */
static sock_t *fast_call(napi_env env, napi_callback_info info, napi_value *argv, const char *usage, fast_args_t *a) {
  size_t argc = 8;
  CHECK(napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  sock_t *s = unwrap(env, argv[0]);
  if (!s) return NULL;
  memset(a, 0, sizeof *a);
  if (argc >= 8) {
    napi_valuetype vt;
    if (napi_typeof(env, argv[5], &vt) == napi_ok && vt == napi_object) {
      napi_typedarray_type ot;
      size_t olen = 0, ooff = 0;
      void *od = NULL;
      napi_value oab;
      if (napi_get_typedarray_info(env, argv[5], &ot, &olen, &od, &oab, &ooff) != napi_ok || ot != napi_uint16_array ||
          napi_get_value_uint32(env, argv[6], &a->ttl_base) != napi_ok || napi_get_value_uint32(env, argv[7], &a->steps) != napi_ok) {
        napi_throw_type_error(env, NULL, usage);
        return NULL;
      }
      a->ttl_at = (const uint16_t *)od;
      a->nttl = olen;
    }
  }
  napi_typedarray_type tt;
  size_t off = 0;
  void *ans = NULL;
  napi_value ab;
  if (argc < 5 || napi_get_typedarray_info(env, argv[2], &tt, &a->alen, &ans, &ab, &off) != napi_ok || tt != napi_uint8_array ||
      napi_get_value_double(env, argv[3], &a->valid) != napi_ok || napi_get_value_uint32(env, argv[4], &a->stat) != napi_ok) {
    napi_throw_type_error(env, NULL, usage);
    return NULL;
  }
  a->ans = (const uint8_t *)ans;
  return s;
}

/* Keeps the answer to the query `q` (len octets, from its ID on) in the socket's table. */
static int fast_put_locked(sock_t *s, const uint8_t *q, uint32_t len, const fast_args_t *a) {
  pthread_mutex_lock(&s->mu);
  int kept = fast_put(s->fast, q + 2, len - 2, a->ans, a->alen, a->valid, a->stat, a->ttl_at, a->nttl, a->ttl_base, a->steps);
  pthread_mutex_unlock(&s->mu);
  if (kept) maybe_hand_to_thread(s);
  return kept;
}

static napi_value js_bool(napi_env env, int v) {
  napi_value r;
  CHECK(napi_get_boolean(env, v != 0, &r));
  return r;
}

/* fastPut(sock, slot, answer, validMs, stat[, ttlOffsets, ttlBase, steps]): keeps `answer` (its ID
 * is patched per asker) for the query in datagram `slot` of the batch being handled; with a
 * Uint16Array of TTL offsets (plus ttlBase) and steps > 0, it goes on `steps` more seconds with
 * those TTLs one lower each second. True when kept. */
static napi_value js_fast_put(napi_env env, napi_callback_info info) {
  const char *usage = "fastPut(sock, slot, Uint8Array, validMs, stat[, Uint16Array, ttlBase, steps])";
  napi_value argv[8];
  fast_args_t a;
  sock_t *s = fast_call(env, info, argv, usage, &a);
  if (!s) return NULL;
  int32_t slot = -1;
  if (napi_get_value_int32(env, argv[1], &slot) != napi_ok) {
    napi_throw_type_error(env, NULL, usage);
    return NULL;
  }
  int kept = 0;
  /* Only while the batch is in JS: the slot still holds the query as it arrived. */
  if (s->fast && s->fast->hits && s->in_batch && !s->closed && slot >= 0 && (unsigned)slot < s->slots) {
    const int32_t *m = s->meta + (size_t)slot * META_INTS;
    uint32_t len = (uint32_t)m[0];
    if (m[1] == 0 && len >= 12 && len <= s->slot_size) kept = fast_put_locked(s, s->in + (size_t)slot * s->slot_size, len, &a);
  }
  return js_bool(env, kept);
}

/* fastPutQuery(sock, query, answer, validMs, stat[, ttlOffsets, ttlBase, steps]): as fastPut, for
 * a query given whole (from its ID on) instead of by its slot: an answer made after its batch
 * (a cache miss's, when the upstream replied) for a later repeat of that query. True when kept. */
static napi_value js_fast_put_query(napi_env env, napi_callback_info info) {
  const char *usage = "fastPutQuery(sock, Uint8Array, Uint8Array, validMs, stat[, Uint16Array, ttlBase, steps])";
  napi_value argv[8];
  fast_args_t a;
  sock_t *s = fast_call(env, info, argv, usage, &a);
  if (!s) return NULL;
  napi_typedarray_type qt;
  size_t qlen = 0, qoff = 0;
  void *q = NULL;
  napi_value qab;
  if (napi_get_typedarray_info(env, argv[1], &qt, &qlen, &q, &qab, &qoff) != napi_ok || qt != napi_uint8_array) {
    napi_throw_type_error(env, NULL, usage);
    return NULL;
  }
  int kept = 0;
  if (s->fast && s->fast->hits && !s->closed && qlen >= 12 && qlen <= s->slot_size)
    kept = fast_put_locked(s, (const uint8_t *)q, (uint32_t)qlen, &a);
  return js_bool(env, kept);
}

/* fastFlush(): every entry of every table of the process is retired (O(1)). */
static napi_value js_fast_flush(napi_env env, napi_callback_info info) {
  (void)info;
  uint32_t g = fast_gen + 1;
  __atomic_store_n(&fast_gen, g == 0 ? 1 : g, __ATOMIC_RELEASE);
  napi_value r;
  CHECK(napi_get_undefined(env, &r));
  return r;
}

/* fastStats(sock): [entries, bytes] held (retired ones until the next install frees them), and 1
 * when the answer thread reads the socket. */
static napi_value js_fast_stats(napi_env env, napi_callback_info info) {
  napi_value argv[1];
  sock_t *s = sock_args(env, info, 1, argv);
  if (!s) return NULL;
  napi_value arr, v;
  CHECK(napi_create_array_with_length(env, 3, &arr));
  pthread_mutex_lock(&s->mu);
  double entries = s->fast ? s->fast->entries : 0, bytes = s->fast ? (double)s->fast->bytes : 0;
  pthread_mutex_unlock(&s->mu);
  napi_create_double(env, entries, &v);
  napi_set_element(env, arr, 0, v);
  napi_create_double(env, bytes, &v);
  napi_set_element(env, arr, 1, v);
  napi_create_double(env, rx_active(s) ? 1 : 0, &v);
  napi_set_element(env, arr, 2, v);
  return arr;
}

/* fastCollect(sock): adds the answer thread's hit counts to the fastEnable array (and zeroes
 * its own), so that JS folds them with the loop's. */
static napi_value js_fast_collect(napi_env env, napi_callback_info info) {
  napi_value argv[1];
  sock_t *s = sock_args(env, info, 1, argv);
  if (!s) return NULL;
  pthread_mutex_lock(&s->mu);
  fast_table_t *t = s->fast;
  if (t && t->hits && t->thits)
    for (uint32_t i = 0; i < t->nhits; i++) {
      t->hits[i] += t->thits[i];
      t->thits[i] = 0;
    }
  pthread_mutex_unlock(&s->mu);
  return NULL;
}

int cdns_memory_pressure(int level); /* heap.cc */

/* memoryPressure(level): 1 starts V8's incremental memory-reducing collection now. */
static napi_value js_memory_pressure(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value argv[1];
  int32_t level = 0;
  CHECK(napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  if (argc >= 1) napi_get_value_int32(env, argv[0], &level);
  napi_value r;
  napi_create_int32(env, cdns_memory_pressure(level), &r);
  return r;
}

static napi_value init(napi_env env, napi_value exports) {
  napi_property_descriptor d[] = {
      {"open", NULL, js_open, NULL, NULL, NULL, napi_default, NULL},
      {"adopt", NULL, js_adopt, NULL, NULL, NULL, napi_default, NULL},
      {"start", NULL, js_start, NULL, NULL, NULL, napi_default, NULL},
      {"pause", NULL, js_pause, NULL, NULL, NULL, napi_default, NULL},
      {"close", NULL, js_close, NULL, NULL, NULL, napi_default, NULL},
      {"sendTo", NULL, js_send_to, NULL, NULL, NULL, napi_default, NULL},
      {"ntop", NULL, js_ntop, NULL, NULL, NULL, napi_default, NULL},
      {"stats", NULL, js_stats, NULL, NULL, NULL, napi_default, NULL},
      {"steer", NULL, js_steer, NULL, NULL, NULL, napi_default, NULL},
      {"openFd", NULL, js_open, NULL, NULL, NULL, napi_default, (void *)1},
      {"closeFd", NULL, js_close_fd, NULL, NULL, NULL, napi_default, NULL},
      {"connect", NULL, js_connect, NULL, NULL, NULL, napi_default, NULL},
      {"sendPacked", NULL, js_send_packed, NULL, NULL, NULL, napi_default, NULL},
      {"sendMany", NULL, js_send_many, NULL, NULL, NULL, napi_default, NULL},
      {"fastEnable", NULL, js_fast_enable, NULL, NULL, NULL, napi_default, NULL},
      {"fastPut", NULL, js_fast_put, NULL, NULL, NULL, napi_default, NULL},
      {"fastPutQuery", NULL, js_fast_put_query, NULL, NULL, NULL, napi_default, NULL},
      {"fastFlush", NULL, js_fast_flush, NULL, NULL, NULL, napi_default, NULL},
      {"fastStats", NULL, js_fast_stats, NULL, NULL, NULL, napi_default, NULL},
      {"fastCollect", NULL, js_fast_collect, NULL, NULL, NULL, napi_default, NULL},
      {"memoryPressure", NULL, js_memory_pressure, NULL, NULL, NULL, napi_default, NULL},
  };
  napi_define_properties(env, exports, sizeof d / sizeof d[0], d);
  napi_value v;
  napi_create_int32(env, META_INTS, &v);
  napi_set_named_property(env, exports, "META_INTS", v);
  napi_create_int32(env, OUT_INTS, &v);
  napi_set_named_property(env, exports, "OUT_INTS", v);
  napi_create_int32(env, STEER_PREFIX, &v);
  napi_set_named_property(env, exports, "STEER_PREFIX", v);
  return exports;
}

NAPI_MODULE(NODE_GYP_MODULE_NAME, init)
