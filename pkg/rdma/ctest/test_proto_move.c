/* test_proto_move.c - moving a spinning thread off its peer's CPU to an
 * idle one (hr_proto_move.c, hrp_move_away). Part of test_proto
 * (proto.mk). */
#define _GNU_SOURCE
#include "proto_pair.h"

#include <errno.h>
#include <sched.h>
#include <string.h>

/* Idle µs per CPU as the tests set them; -1 unknown. */
static int64_t fake_idle[4];

static int64_t fake_idle_us(int cpu)
{
	return cpu >= 0 && cpu < 4 ? fake_idle[cpu] : -1;
}

/* hrp_move_target: a CPU idle more than half a 2-50 ms window between two
 * looks at it, not the one given, in the mask; looks at least 2 ms apart,
 * the gap doubling after each that compared and found none. The times are
 * the test's own: no clock decides it. */
void test_move_target(void)
{
	const uint64_t ms = 1000000ull, t0 = 1000 * ms;
	cpu_set_t both, zero;
	CPU_ZERO(&both);
	CPU_SET(0, &both);
	CPU_SET(1, &both);
	CPU_ZERO(&zero);
	CPU_SET(0, &zero);
	static const struct {
		const char *name;
		uint64_t at_ms;  /* after t0 */
		int64_t idle0, idle1; /* µs added since the step before */
		int cpu;         /* the peer's, and this thread's */
		int only0;       /* the mask is CPU 0 alone */
		int want;
	} steps[] = {
		{"the first look has nothing to compare", 0, 0, 0, 0, 0, -1},
		{"1 ms later is no look", 1, 0, 900, 0, 0, -1},
		{"CPU 1 idle 9 of 10 ms", 10, 0, 8100, 0, 0, 1},
		{"CPU 1 idle 3 of 10 ms", 20, 0, 3000, 0, 0, -1},
		{"a window past 50 ms says nothing", 100, 0, 80000, 0, 0, -1},
		{"CPU 1 idle, but the peer is there; CPU 0 idle 6 of 10 ms", 110, 6000, 10000, 1, 0, 0},
		{"no CPU but this one in the mask", 120, 10000, 10000, 0, 1, -1},
		{"both idle (CPU 1 over 20 ms), the idlest taken", 130, 7000, 19000, 2, 0, 1},
		{"the counters unknown", 140, -1, -1, 0, 0, -1},
		{"back: no earlier look to compare with", 150, 0, 10000, 0, 0, -1},
		{"5 ms later (no gap after nothing compared): CPU 1 idle 1 of 5 ms", 155, 0, 1000, 0, 0, -1},
		{"3 ms later is inside the gap that look doubled to 4 ms", 158, 0, 3000, 0, 0, -1},
		{"and the next look compares over 10 ms", 165, 0, 7000, 0, 0, 1},
	};
	hrp_move_source(fake_idle_us);
	int64_t idle[2] = {5000, 5000};
	for (size_t i = 0; i < sizeof steps / sizeof steps[0]; i++) {
		for (int c = 0; c < 2; c++) {
			int64_t add = c ? steps[i].idle1 : steps[i].idle0;
			if (add < 0) {
				fake_idle[c] = -1;
			} else {
				idle[c] += add;
				fake_idle[c] = idle[c];
			}
		}
		int got = hrp_move_target(steps[i].cpu, steps[i].only0 ? &zero : &both, t0 + steps[i].at_ms * ms);
		if (got != steps[i].want) {
			fprintf(stderr, "test_move_target: %s: got %d, want %d\n", steps[i].name, got, steps[i].want);
			failures++;
		}
	}
	hrp_move_source(NULL);
}

/* The one CPU whose counter the test moves; the others stay at 0. */
static int idle_cpu_of_test = -1;
static int64_t idle_us_of_test;

static int64_t one_idle_us(int cpu)
{
	return cpu == idle_cpu_of_test ? idle_us_of_test : 0;
}

/* hrp_move_away on a connected pair: the server's thread noted the CPU
 * this thread is on, and another CPU it may run on is idle (the test's
 * counters): this thread moves there, keeps its whole affinity mask, and
 * the server sees the CPU it moved to; a second try within 5 ms does not
 * move. ibv knows no peer's CPU: nothing moves there. The kernel may move
 * this thread itself between the test's pinning and the call: then the
 * try is made again, up to 100 times. */
/* Set through hrp_move_affinity by move_away_case(1): the second call of
 * a move (the restore of the mask it had) fails; the others are made. */
static int aff_calls;
static cpu_set_t aff_last;

static int restore_fails(pid_t pid, size_t size, const cpu_set_t *mask)
{
	if (++aff_calls == 2) {
		errno = EINVAL;
		return -1;
	}
	aff_last = *mask;
	return sched_setaffinity(pid, size, mask);
}

static void move_away_case(int fail_restore);

void test_move_away(void)
{
	move_away_case(0);
	move_away_case(1);
}

/* fail_restore: the mask cannot be restored after the move; the thread
 * then gets every CPU (the kernel's allowed ones), not the one it moved
 * to alone. */
static void move_away_case(int fail_restore)
{
	cpu_set_t old, one, both;
	CHECK(pthread_getaffinity_np(pthread_self(), sizeof old, &old) == 0);
	int cpus[2], ncpu = 0;
	for (int c = 0; c < CPU_SETSIZE && ncpu < 2; c++)
		if (CPU_ISSET(c, &old))
			cpus[ncpu++] = c;
	struct pair pr;
	CHECK_ST(connect_pair(&pr, 1, 1, 5));
	/* One call first: shm takes a peer's noted CPU only once a message
	 * has validated the connection. Then the server's thread stops, and
	 * this thread notes the CPU for it. */
	atomic_store(&pr.proto, HR_PROTO_EAGER);
	int st = pthread_create(&pr.th, NULL, server, &pr) == 0 ? HR_OK : HR_EINVAL;
	int started = st == HR_OK;
	uint8_t req[32] = {1, 2, 3};
	void *resp;
	uint64_t rl;
	if (started)
		st = hr_ep_call(pr.cli, HR_PROTO_EAGER, req, sizeof req, 10000, 1, &resp, &rl);
	atomic_store(&pr.stop, 1);
	if (started)
		pthread_join(pr.th, NULL);
	if (st != HR_OK)
		close_pair(&pr, 0);
	CHECK_ST(st);
	CPU_ZERO(&one);
	CPU_SET(cpus[0], &one);
	both = one;
	if (ncpu > 1)
		CPU_SET(cpus[1], &both);
	idle_cpu_of_test = ncpu > 1 ? cpus[1] : -1;
	int moved = 0, tries = 0, pinned = 1;
	for (; tries < 100 && !moved && pinned; tries++) {
		pinned = pthread_setaffinity_np(pthread_self(), sizeof one, &one) == 0;
		/* The server's side notes its thread's CPU (this one's). */
		hr_qp_note_cpu(pr.srv->qp);
		pinned = pinned && pthread_setaffinity_np(pthread_self(), sizeof both, &both) == 0;
		/* The first look, 10 ms before the one the move makes (a
		 * window of 2-50 ms); the idle CPU's counter then grows by
		 * more than the window. */
		hrp_move_source(one_idle_us);
		idle_us_of_test = 0;
		hrp_move_target(-1, &both, hr_now_ns() - 10000000ull);
		idle_us_of_test = 1000000;
		pr.cli->moved_ns = 0;
		aff_calls = 0;
		hrp_move_affinity(fail_restore ? restore_fails : NULL);
		moved = pinned && hrp_move_away(pr.cli);
		hrp_move_affinity(NULL);
		if (!moved && ncpu > 1 && strcmp(prov->name, "shm") != 0)
			break;
	}
	int cpu_after = sched_getcpu();
	cpu_set_t now;
	int got_mask = pthread_getaffinity_np(pthread_self(), sizeof now, &now) == 0;
	int again = moved && hrp_move_away(pr.cli);
	int seen = hr_qp_peer_cpu(pr.srv->qp);
	hr_ep_stats es;
	hr_ep_stats_get(pr.cli, &es);
	hrp_move_source(NULL);
	close_pair(&pr, 0);
	int restored = pthread_setaffinity_np(pthread_self(), sizeof old, &old) == 0;
	CHECK(pinned && restored && got_mask);
	if (ncpu < 2 || strcmp(prov->name, "shm") != 0) {
		/* One CPU: nowhere to go. ibv: the peer's CPU is unknown. */
		CHECK(!moved && es.spin_moves == 0);
		return;
	}
	CHECK(moved);
	CHECK(cpu_after == cpus[1]);
	if (fail_restore) {
		/* Moved, restore refused, then every CPU asked for. */
		CHECK(aff_calls == 3);
		CHECK(CPU_COUNT(&aff_last) == CPU_SETSIZE);
		CHECK(CPU_ISSET(cpus[0], &now) && CPU_ISSET(cpus[1], &now));
		CHECK(CPU_COUNT(&now) == CPU_COUNT(&old));
		CHECK(seen == cpus[1]);
		return;
	}
	CHECK(CPU_EQUAL(&now, &both));
	CHECK(seen == cpus[1]);
	CHECK(!again);
	CHECK(es.spin_moves == 1);
}
