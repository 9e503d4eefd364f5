/* hr_proto_move.c - moving a spinning thread off the CPU its peer's
 * thread is on, when another CPU it may run on is idle (see
 * hrp_move_away in hr_proto_int.h). */
#define _GNU_SOURCE
#include "hr_proto_int.h"

#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* An endpoint moves its thread at most once in this long: a move that did
 * not hold (the kernel placed the two together again) is not retried at
 * every wait. */
#define EP_MOVE_EVERY_NS 5000000ull

/* A CPU's idle time is compared over a window of 2-50 ms between two
 * looks at it: shorter says nothing at the cpuidle counters' microseconds,
 * longer reaches back past the placement being judged (while the two
 * threads ran apart both CPUs were busy). */
#define MOVE_WINDOW_MIN_NS 2000000ull
#define MOVE_WINDOW_MAX_NS 50000000ull

/* Looks are at least MOVE_WINDOW_MIN_NS apart, process-wide; each that
 * compared and found no idle CPU doubles that gap up to MOVE_GAP_MAX_NS
 * (a pair that shares a CPU on a host with none idle hands off at every
 * wait, and a look costs a few file reads a CPU); any other resets it. */
#define MOVE_GAP_MAX_NS 32000000ull

/* The CPUs a look covers: the given CPU and the next ones of the mask,
 * at most MOVE_LOOK_CPUS of them below MOVE_CPUS, so a look on a large
 * host stays a few dozen reads. */
#define MOVE_CPUS 1024
#define MOVE_LOOK_CPUS 8

/* A CPU's time in its idle states, in µs, from the kernel's cpuidle
 * counters (/sys/devices/system/cpu/cpuN/cpuidle/stateK/time); -1 where
 * the host has none (no cpuidle driver: nothing moves there). */
static int64_t cpuidle_us(int cpu)
{
	uint64_t sum = 0;
	for (int st = 0; st < 16; st++) {
		char path[80], buf[32];
		snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu%d/cpuidle/state%d/time", cpu, st);
		int fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			return st ? (int64_t)sum : -1;
		ssize_t n = read(fd, buf, sizeof buf - 1);
		close(fd);
		if (n <= 0)
			return -1;
		buf[n] = 0;
		sum += strtoull(buf, NULL, 10);
	}
	return (int64_t)sum;
}

/* Process-wide: the CPUs are the host's, whichever endpoint looks. */
static struct {
	pthread_mutex_t mu;
	int64_t (*idle_us)(int cpu);
	uint64_t last_ns;          /* the last look, 0: none */
	uint64_t gap_ns;           /* the least time to the next: 0 is MOVE_WINDOW_MIN_NS */
	int64_t idle[MOVE_CPUS];   /* each CPU's idle µs at its last look, -1 unknown */
	uint64_t at[MOVE_CPUS];    /* when that was, 0: never */
} mv = {.mu = PTHREAD_MUTEX_INITIALIZER, .idle_us = cpuidle_us};

void hrp_move_source(int64_t (*idle_us)(int cpu))
{
	pthread_mutex_lock(&mv.mu);
	mv.idle_us = idle_us ? idle_us : cpuidle_us;
	mv.last_ns = 0;
	mv.gap_ns = 0;
	memset(mv.at, 0, sizeof mv.at);
	pthread_mutex_unlock(&mv.mu);
}

int hrp_move_target(int cpu, const cpu_set_t *mask, uint64_t now)
{
	pthread_mutex_lock(&mv.mu);
	uint64_t gap = mv.gap_ns ? mv.gap_ns : MOVE_WINDOW_MIN_NS;
	if (mv.last_ns && now - mv.last_ns < gap) {
		pthread_mutex_unlock(&mv.mu);
		return -1;
	}
	mv.last_ns = now;
	int best = -1, looked = 0, compared = 0;
	double most = 0.5; /* idle more than half the window */
	int from = cpu >= 0 && cpu < MOVE_CPUS ? cpu : 0;
	for (int i = 0; i < MOVE_CPUS && looked < MOVE_LOOK_CPUS; i++) {
		int c = (from + i) % MOVE_CPUS;
		if (!CPU_ISSET(c, mask))
			continue;
		looked++;
		int64_t us = mv.idle_us(c);
		uint64_t age = now - mv.at[c];
		if (c != cpu && us >= 0 && mv.at[c] && mv.idle[c] >= 0 && us >= mv.idle[c] &&
		    age >= MOVE_WINDOW_MIN_NS && age <= MOVE_WINDOW_MAX_NS) {
			compared = 1;
			double f = (double)(us - mv.idle[c]) * 1000.0 / (double)age;
			if (f > most) {
				most = f;
				best = c;
			}
		}
		mv.idle[c] = us;
		mv.at[c] = now;
	}
	/* A look with nothing to compare with (the first, or the last
	 * too long ago) is the start of a window: the next may come soon. */
	if (best >= 0 || !compared)
		mv.gap_ns = 0;
	else if (gap < MOVE_GAP_MAX_NS)
		mv.gap_ns = gap * 2;
	pthread_mutex_unlock(&mv.mu);
	return best;
}

static int (*move_setaffinity)(pid_t, size_t, const cpu_set_t *) = sched_setaffinity;

void hrp_move_affinity(int (*set)(pid_t pid, size_t size, const cpu_set_t *mask))
{
	move_setaffinity = set ? set : sched_setaffinity;
}

int hrp_move_away(hr_ep *ep)
{
	int peer = hr_qp_peer_cpu(ep->qp);
	if (peer < 0 || peer != sched_getcpu())
		return 0;
	uint64_t now = hr_now_ns();
	if (ep->moved_ns && now - ep->moved_ns < EP_MOVE_EVERY_NS)
		return 0;
	cpu_set_t mask, to;
	if (sched_getaffinity(0, sizeof mask, &mask) != 0 || CPU_COUNT(&mask) < 2)
		return 0;
	int c = hrp_move_target(peer, &mask, now);
	if (c < 0)
		return 0;
	ep->moved_ns = now;
	/* To that CPU, then back to the mask as it was: the thread stays
	 * where the first call put it, and keeps every CPU it had. */
	CPU_ZERO(&to);
	CPU_SET(c, &to);
	if (move_setaffinity(0, sizeof to, &to) != 0)
		return 0;
	if (move_setaffinity(0, sizeof mask, &mask) != 0) {
		/* The mask it had is no longer allowed (its cpuset shrank in
		 * between): every CPU, which the kernel narrows to those
		 * allowed, rather than a thread of the runtime's pinned to c
		 * for good. */
		memset(&to, 0xff, sizeof to);
		move_setaffinity(0, sizeof to, &to);
	}
	hr_qp_note_cpu(ep->qp);
	ep->st.spin_moves++;
	return 1;
}
