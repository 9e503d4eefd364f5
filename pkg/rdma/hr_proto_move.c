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
#include <unistd.h>

/* An endpoint moves its thread at most once in this long: a move that did
 * not hold (the kernel placed the two together again) is not retried at
 * every wait. */
#define EP_MOVE_EVERY_NS 5000000ull

/* The idle time of the CPUs is compared over a window of 2-50 ms between
 * two looks: shorter says nothing at the cpuidle counters' microseconds,
 * longer reaches back past the placement being judged (while the two
 * threads ran apart both CPUs were busy). */
#define MOVE_WINDOW_MIN_NS 2000000ull
#define MOVE_WINDOW_MAX_NS 50000000ull

/* The CPUs a look covers; a thread allowed on others never moves there. */
#define MOVE_CPUS 256

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
	uint64_t t_ns;               /* the last look, 0: none */
	int64_t idle[MOVE_CPUS];     /* each CPU's idle µs then, -1 unknown */
} mv = {PTHREAD_MUTEX_INITIALIZER, cpuidle_us, 0, {0}};

void hrp_move_source(int64_t (*idle_us)(int cpu))
{
	pthread_mutex_lock(&mv.mu);
	mv.idle_us = idle_us ? idle_us : cpuidle_us;
	mv.t_ns = 0;
	pthread_mutex_unlock(&mv.mu);
}

int hrp_move_target(int cpu, const cpu_set_t *mask, uint64_t now)
{
	int best = -1;
	pthread_mutex_lock(&mv.mu);
	uint64_t age = now - mv.t_ns;
	if (mv.t_ns && age < MOVE_WINDOW_MIN_NS) {
		pthread_mutex_unlock(&mv.mu);
		return -1;
	}
	int window = mv.t_ns && age <= MOVE_WINDOW_MAX_NS;
	double most = 0.5; /* idle more than half the window */
	for (int c = 0; c < MOVE_CPUS; c++) {
		if (!CPU_ISSET(c, mask))
			continue;
		int64_t us = mv.idle_us(c);
		if (window && c != cpu && us >= 0 && mv.idle[c] >= 0 && us >= mv.idle[c]) {
			double f = (double)(us - mv.idle[c]) * 1000.0 / (double)age;
			if (f > most) {
				most = f;
				best = c;
			}
		}
		mv.idle[c] = us;
	}
	mv.t_ns = now;
	pthread_mutex_unlock(&mv.mu);
	return best;
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
	if (sched_setaffinity(0, sizeof to, &to) != 0)
		return 0;
	sched_setaffinity(0, sizeof mask, &mask);
	hr_qp_note_cpu(ep->qp);
	ep->st.spin_moves++;
	return 1;
}
