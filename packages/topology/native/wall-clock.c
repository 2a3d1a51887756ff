/*
 * wall-clock.c: an LD_PRELOAD library that moves a process's WALL clock by an offset read from
 * a file, leaving its monotonic clocks alone, as an NTP step does on a real host.
 *
 * Why not libfaketime: redis-server on Debian links jemalloc, whose initialisation calls
 * clock_gettime() before libfaketime has finished its own (dlsym -> calloc -> jemalloc): the
 * process hangs at start (libfaketime issues #130, #327, #478). This library needs neither dlsym
 * nor malloc: it reads the real clocks with the raw syscall.
 *
 * Environment: KUNCI_WALL_CLOCK_FILE names a file holding the offset in milliseconds (a signed
 * decimal integer; missing = 0). It is re-read at most once per millisecond of real time, so
 * replacing it (write a new file, rename it over the old one) steps the running process's clock.
 *
 * Moves: clock_gettime(CLOCK_REALTIME, CLOCK_REALTIME_COARSE), gettimeofday(), time().
 * Leaves: CLOCK_MONOTONIC, CLOCK_MONOTONIC_RAW, CLOCK_BOOTTIME, CPU clocks.
 * Built by packages/topology/src/wall-clock.ts with gcc -shared -fPIC.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

static volatile long long offset_ns = 0;
static volatile long long checked_at_ns = -1;

static long long real_ns(clockid_t id) {
  struct timespec ts;
  if (syscall(SYS_clock_gettime, id, &ts) != 0) return 0;
  return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static long long current_offset_ns(void) {
  long long now = real_ns(CLOCK_MONOTONIC);
  if (checked_at_ns >= 0 && now - checked_at_ns < 1000000LL) return offset_ns;
  checked_at_ns = now;
  const char *path = getenv("KUNCI_WALL_CLOCK_FILE");
  if (path == NULL) return offset_ns = 0;
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return offset_ns;
  char buf[32];
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n > 0) {
    buf[n] = '\0';
    offset_ns = strtoll(buf, NULL, 10) * 1000000LL;
  }
  return offset_ns;
}

int clock_gettime(clockid_t id, struct timespec *ts) {
  long r = syscall(SYS_clock_gettime, id, ts);
  if (r != 0 || (id != CLOCK_REALTIME && id != CLOCK_REALTIME_COARSE)) return (int)r;
  long long t = (long long)ts->tv_sec * 1000000000LL + ts->tv_nsec + current_offset_ns();
  ts->tv_sec = (time_t)(t / 1000000000LL);
  ts->tv_nsec = (long)(t % 1000000000LL);
  return 0;
}

int gettimeofday(struct timeval *restrict tv, void *restrict tz) {
  (void)tz;
  long long t = real_ns(CLOCK_REALTIME) + current_offset_ns();
  tv->tv_sec = (time_t)(t / 1000000000LL);
  tv->tv_usec = (suseconds_t)((t % 1000000000LL) / 1000);
  return 0;
}

time_t time(time_t *out) {
  time_t t = (time_t)((real_ns(CLOCK_REALTIME) + current_offset_ns()) / 1000000000LL);
  if (out != NULL) *out = t;
  return t;
}
