/* Steps the wall clock of the process it is preloaded into, and only the wall clock (chaos/clock_step.py).

   CLOCK_REALTIME reads (clock_gettime, gettimeofday, time) get an offset in milliseconds read from the file named
   by INSYNC_CLOCK_STEP_FILE, read again at most every REREAD_NS of monotonic time, so a harness can step a running
   process forward and back. CLOCK_MONOTONIC and every other clock are left alone, as a real step leaves them.
   Waits whose deadline is a wall time (pthread_cond_timedwait on a condition variable with the default clock,
   sem_timedwait, clock_nanosleep on CLOCK_REALTIME) get the deadline taken back to the kernel's wall time, as the
   kernel would see it after a real step; without that, a library that computes a deadline from the faked time
   (librdkafka's timed waits) would wait minutes or spin. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdlib.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#define NS_PER_S 1000000000LL
#define REREAD_NS (50LL * 1000 * 1000)
/* A deadline above this many seconds is a wall time; a monotonic one is an uptime, far below it. */
#define WALL_DEADLINE_MIN_S 1000000000LL

static long long offset_ns;
static long long next_read_ns;

static int (*real_clock_gettime)(clockid_t, struct timespec *);

static long long monotonic_ns(void) {
    struct timespec ts;
    real_clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * NS_PER_S + ts.tv_nsec;
}

/* Only async-signal-safe calls: a JVM reads the clock from signal handlers too. */
static long long current_offset_ns(void) {
    if (real_clock_gettime == NULL)
        real_clock_gettime = (int (*)(clockid_t, struct timespec *))dlsym(RTLD_NEXT, "clock_gettime");
    long long now = monotonic_ns();
    if (now < __atomic_load_n(&next_read_ns, __ATOMIC_RELAXED))
        return __atomic_load_n(&offset_ns, __ATOMIC_RELAXED);
    __atomic_store_n(&next_read_ns, now + REREAD_NS, __ATOMIC_RELAXED);
    const char *path = getenv("INSYNC_CLOCK_STEP_FILE");
    int fd = path == NULL ? -1 : open(path, O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        char text[32] = {0};
        ssize_t got = read(fd, text, sizeof text - 1);
        close(fd);
        if (got > 0)
            __atomic_store_n(&offset_ns, strtoll(text, NULL, 10) * 1000000LL, __ATOMIC_RELAXED);
    }
    return __atomic_load_n(&offset_ns, __ATOMIC_RELAXED);
}

static void shift(struct timespec *ts, long long by_ns) {
    long long ns = ts->tv_sec * NS_PER_S + ts->tv_nsec + by_ns;
    ts->tv_sec = ns / NS_PER_S;
    ts->tv_nsec = ns % NS_PER_S;
}

int clock_gettime(clockid_t clock, struct timespec *ts) {
    long long by_ns = current_offset_ns();
    int result = real_clock_gettime(clock, ts);
    if (result == 0 && (clock == CLOCK_REALTIME || clock == CLOCK_REALTIME_COARSE))
        shift(ts, by_ns);
    return result;
}

int gettimeofday(struct timeval *tv, void *zone) {
    (void)zone;
    struct timespec ts;
    int result = clock_gettime(CLOCK_REALTIME, &ts);
    if (result == 0 && tv != NULL) {
        tv->tv_sec = ts.tv_sec;
        tv->tv_usec = ts.tv_nsec / 1000;
    }
    return result;
}

time_t time(time_t *out) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    if (out != NULL)
        *out = ts.tv_sec;
    return ts.tv_sec;
}

/* The kernel's wall time for a deadline computed from the faked one. */
static struct timespec real_deadline(const struct timespec *deadline) {
    struct timespec real = *deadline;
    if (real.tv_sec >= WALL_DEADLINE_MIN_S)
        shift(&real, -current_offset_ns());
    return real;
}

int pthread_cond_timedwait(pthread_cond_t *cond, pthread_mutex_t *mutex, const struct timespec *deadline) {
    static int (*real)(pthread_cond_t *, pthread_mutex_t *, const struct timespec *);
    if (real == NULL)
        real = (int (*)(pthread_cond_t *, pthread_mutex_t *, const struct timespec *))dlvsym(
            RTLD_NEXT, "pthread_cond_timedwait", "GLIBC_2.3.2");
    struct timespec real_ts = real_deadline(deadline);
    return real(cond, mutex, &real_ts);
}

int sem_timedwait(sem_t *sem, const struct timespec *deadline) {
    static int (*real)(sem_t *, const struct timespec *);
    if (real == NULL)
        real = (int (*)(sem_t *, const struct timespec *))dlsym(RTLD_NEXT, "sem_timedwait");
    struct timespec real_ts = real_deadline(deadline);
    return real(sem, &real_ts);
}

int clock_nanosleep(clockid_t clock, int flags, const struct timespec *request, struct timespec *remain) {
    static int (*real)(clockid_t, int, const struct timespec *, struct timespec *);
    if (real == NULL)
        real = (int (*)(clockid_t, int, const struct timespec *, struct timespec *))dlsym(RTLD_NEXT,
                                                                                          "clock_nanosleep");
    if (clock == CLOCK_REALTIME && (flags & TIMER_ABSTIME)) {
        struct timespec real_ts = real_deadline(request);
        return real(clock, flags, &real_ts, remain);
    }
    return real(clock, flags, request, remain);
}
