// delay-link: TCP links that hold every byte on its way to the server for a fixed time, to the
// microsecond. A Node proxy cannot: its timers fire on libuv's whole milliseconds, so a 1 ms delay
// is 1-2 ms depending on where in the millisecond a chunk arrived, and clients whose operations
// take slightly different CPU fall into different phases of that clock (the lock bench saw C=1
// ratios of 0.85-1.00 between rounds from that alone). This keeps a queue per connection, one
// timerfd armed at the earliest due chunk on the monotonic clock, and a timer slack of 1 ns.
//
//   delay-link HOST PORT DELAY_US [HOST PORT DELAY_US ...]
//
// Listens on 127.0.0.1, one ephemeral port per target, prints {"ready":true,"ports":[...]} and
// forwards until SIGTERM/SIGINT or until stdin closes (whoever started it went away). Only the
// way to the server is delayed: a round trip gains DELAY_US. The way back is forwarded at once.
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

enum kind { K_LISTEN, K_CLIENT, K_SERVER, K_TIMER, K_STDIN, K_SIGNAL };

struct tag {
  enum kind kind;
  void *ptr;
};

struct chunk {
  struct chunk *next;
  uint64_t due_ns;
  size_t len;
  char data[];
};

struct link {
  struct tag tag;
  int listen_fd;
  int port;
  uint64_t delay_ns;
  struct sockaddr_storage target;
  socklen_t target_len;
};

struct pair {
  struct tag client_tag, server_tag;
  int cfd, sfd;
  struct link *link;
  struct chunk *head, *tail;
  int client_done; // the client closed its side: close the pair once its queue is written
  int dead;        // closed; freed after the current batch of events, which may still name it
  struct pair *prev, *next;
};

static int ep;
static int timer_fd;
static struct pair *pairs;
static struct pair *graveyard;

static void die(const char *what) {
  fprintf(stderr, "delay-link: %s: %s\n", what, strerror(errno));
  exit(1);
}

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int try_watch(int fd, struct tag *tag) {
  struct epoll_event ev = {.events = EPOLLIN | EPOLLRDHUP, .data.ptr = tag};
  return epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev);
}

static void watch(int fd, struct tag *tag) {
  if (try_watch(fd, tag) < 0) die("epoll_ctl");
}

static void nonblocking_nodelay(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  int fl = fcntl(fd, F_GETFL);
  fcntl(fd, F_SETFL, fl | O_NONBLOCK);
}

// Writes all of buf; waits for room when the socket is full (rare on loopback, and then the
// link is as slow as its reader, as a real one would be). Returns -1 when the peer is gone.
static int write_all(int fd, const char *buf, size_t len) {
  while (len > 0) {
    ssize_t n = write(fd, buf, len);
    if (n > 0) {
      buf += n;
      len -= (size_t)n;
    } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      struct pollfd p = {.fd = fd, .events = POLLOUT};
      if (poll(&p, 1, 5000) <= 0) return -1;
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else {
      return -1;
    }
  }
  return 0;
}

static void close_pair(struct pair *p) {
  close(p->cfd); // closing removes the fds from the epoll set
  close(p->sfd);
  for (struct chunk *c = p->head; c;) {
    struct chunk *next = c->next;
    free(c);
    c = next;
  }
  p->head = p->tail = NULL;
  if (p->prev) p->prev->next = p->next;
  else pairs = p->next;
  if (p->next) p->next->prev = p->prev;
  p->dead = 1;
  p->next = graveyard;
  graveyard = p;
}

static void accept_on(struct link *l) {
  for (;;) {
    int cfd = accept4(l->listen_fd, NULL, NULL, SOCK_CLOEXEC);
    if (cfd < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return;
      die("accept");
    }
    int sfd = socket(l->target.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    // A blocking connect: the target is local, and a link that cannot reach it refuses the
    // client at once, as a dead server would.
    if (sfd < 0 || connect(sfd, (struct sockaddr *)&l->target, l->target_len) < 0) {
      if (sfd >= 0) close(sfd);
      close(cfd);
      continue;
    }
    nonblocking_nodelay(cfd);
    nonblocking_nodelay(sfd);
    struct pair *p = calloc(1, sizeof *p);
    if (!p) die("calloc");
    p->cfd = cfd;
    p->sfd = sfd;
    p->link = l;
    p->client_tag = (struct tag){K_CLIENT, p};
    p->server_tag = (struct tag){K_SERVER, p};
    p->next = pairs;
    if (pairs) pairs->prev = p;
    pairs = p;
    watch(cfd, &p->client_tag);
    watch(sfd, &p->server_tag);
  }
}

// Client bytes: queued with their due time. Returns -1 when the pair must close now.
static int from_client(struct pair *p) {
  char buf[65536];
  for (;;) {
    ssize_t n = read(p->cfd, buf, sizeof buf);
    if (n > 0) {
      struct chunk *c = malloc(sizeof *c + (size_t)n);
      if (!c) die("malloc");
      c->next = NULL;
      c->due_ns = now_ns() + p->link->delay_ns;
      c->len = (size_t)n;
      memcpy(c->data, buf, (size_t)n);
      if (p->tail) p->tail->next = c;
      else p->head = c;
      p->tail = c;
    } else if (n == 0) {
      p->client_done = 1;
      epoll_ctl(ep, EPOLL_CTL_DEL, p->cfd, NULL);
      return p->head ? 0 : -1;
    } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
      return 0;
    } else if (errno != EINTR) {
      return -1;
    }
  }
}

// Server bytes: straight back to the client.
static int from_server(struct pair *p) {
  char buf[65536];
  for (;;) {
    ssize_t n = read(p->sfd, buf, sizeof buf);
    if (n > 0) {
      if (p->client_done || write_all(p->cfd, buf, (size_t)n) < 0) return -1;
    } else if (n == 0) {
      return -1;
    } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
      return 0;
    } else if (errno != EINTR) {
      return -1;
    }
  }
}

// Writes every chunk that is due and arms the timer at the earliest one that is not.
static void flush_due(void) {
  uint64_t now = now_ns();
  uint64_t next = 0;
  for (struct pair *p = pairs, *following; p; p = following) {
    following = p->next;
    int gone = 0;
    while (p->head && p->head->due_ns <= now) {
      struct chunk *c = p->head;
      if (write_all(p->sfd, c->data, c->len) < 0) {
        gone = 1;
        break;
      }
      p->head = c->next;
      if (!p->head) p->tail = NULL;
      free(c);
    }
    if (gone || (p->client_done && !p->head)) {
      close_pair(p);
      continue;
    }
    if (p->head && (next == 0 || p->head->due_ns < next)) next = p->head->due_ns;
  }
  struct itimerspec when = {0};
  if (next != 0) {
    when.it_value.tv_sec = (time_t)(next / 1000000000u);
    when.it_value.tv_nsec = (long)(next % 1000000000u);
  }
  if (timerfd_settime(timer_fd, TFD_TIMER_ABSTIME, &when, NULL) < 0) die("timerfd_settime");
}

static int listen_local(void) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) die("socket");
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = 0};
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (bind(fd, (struct sockaddr *)&a, sizeof a) < 0) die("bind");
  if (listen(fd, 512) < 0) die("listen");
  return fd;
}

int main(int argc, char **argv) {
  if (argc < 4 || (argc - 1) % 3 != 0) {
    fprintf(stderr, "usage: delay-link HOST PORT DELAY_US [HOST PORT DELAY_US ...]\n");
    return 2;
  }
  // The kernel may otherwise fire a timer up to 50 us late to batch wake-ups.
  prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
  signal(SIGPIPE, SIG_IGN);
  ep = epoll_create1(EPOLL_CLOEXEC);
  if (ep < 0) die("epoll_create1");

  int count = (argc - 1) / 3;
  struct link *links = calloc((size_t)count, sizeof *links);
  if (!links) die("calloc");
  for (int i = 0; i < count; i++) {
    struct link *l = &links[i];
    const char *host = argv[1 + 3 * i], *port = argv[2 + 3 * i];
    char *end;
    double us = strtod(argv[3 + 3 * i], &end);
    if (*end != '\0' || !(us >= 0 && us <= 10e6)) {
      fprintf(stderr, "delay-link: DELAY_US must be a number of microseconds in [0, 1e7], got %s\n",
              argv[3 + 3 * i]);
      return 2;
    }
    l->delay_ns = (uint64_t)(us * 1000.0);
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *res;
    int rc = getaddrinfo(host, port, &hints, &res);
    if (rc != 0) {
      fprintf(stderr, "delay-link: cannot resolve %s:%s: %s\n", host, port, gai_strerror(rc));
      return 2;
    }
    memcpy(&l->target, res->ai_addr, res->ai_addrlen);
    l->target_len = res->ai_addrlen;
    freeaddrinfo(res);
    l->listen_fd = listen_local();
    struct sockaddr_in bound;
    socklen_t len = sizeof bound;
    if (getsockname(l->listen_fd, (struct sockaddr *)&bound, &len) < 0) die("getsockname");
    l->port = ntohs(bound.sin_port);
    l->tag = (struct tag){K_LISTEN, l};
    watch(l->listen_fd, &l->tag);
  }

  timer_fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
  if (timer_fd < 0) die("timerfd_create");
  struct tag timer_tag = {K_TIMER, NULL}, stdin_tag = {K_STDIN, NULL}, signal_tag = {K_SIGNAL, NULL};
  watch(timer_fd, &timer_tag);
  // stdin is how a parent that dies unannounced stops us; one that is not a pipe (/dev/null)
  // cannot be watched, and then only a signal stops us.
  try_watch(STDIN_FILENO, &stdin_tag);
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGTERM);
  sigaddset(&stop, SIGINT);
  sigprocmask(SIG_BLOCK, &stop, NULL);
  int sig_fd = signalfd(-1, &stop, SFD_CLOEXEC);
  if (sig_fd < 0) die("signalfd");
  watch(sig_fd, &signal_tag);

  printf("{\"ready\":true,\"ports\":[");
  for (int i = 0; i < count; i++) printf("%s%d", i ? "," : "", links[i].port);
  printf("]}\n");
  fflush(stdout);

  struct epoll_event events[64];
  for (;;) {
    int n = epoll_wait(ep, events, 64, -1);
    if (n < 0) {
      if (errno == EINTR) continue;
      die("epoll_wait");
    }
    for (int i = 0; i < n; i++) {
      struct tag *t = events[i].data.ptr;
      switch (t->kind) {
        case K_LISTEN:
          accept_on(t->ptr);
          break;
        case K_CLIENT:
        case K_SERVER: {
          struct pair *p = t->ptr;
          if (p->dead) break; // closed earlier in this batch of events
          if ((t->kind == K_CLIENT ? from_client(p) : from_server(p)) < 0) close_pair(p);
          break;
        }
        case K_TIMER: {
          uint64_t expirations;
          ssize_t ignored = read(timer_fd, &expirations, sizeof expirations);
          (void)ignored;
          break;
        }
        case K_STDIN: {
          char buf[256];
          ssize_t r = read(STDIN_FILENO, buf, sizeof buf);
          if (r <= 0) return 0;
          break;
        }
        case K_SIGNAL:
          return 0;
      }
    }
    flush_due();
    while (graveyard) {
      struct pair *p = graveyard;
      graveyard = p->next;
      free(p);
    }
  }
}
