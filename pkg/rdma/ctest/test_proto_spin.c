/* test_proto_spin.c - the engine's adaptive spin (hr_proto_int.h,
 * hrp_wait_begin / hrp_wait_end): spins that never catch their answer, and
 * handoffs at a spin's yield, with the peer on this CPU, elsewhere or
 * unknown. Part of test_proto (proto.mk). */
#define _GNU_SOURCE
#include "proto_pair.h"

#include <sched.h>
#include <string.h>

/* An event-mode client whose spins never catch the answer (the server
 * holds it 2 ms, the spin is 10 us) blocks at once after 4 such waits,
 * spinning on one wait in 8 to probe; once a probe's answer comes within
 * the spin (1 s now, the server answering at once), it spins on every
 * wait again. No clock decides it: a 10 us spin cannot see an answer the
 * server sends 2 ms later, and a 1 s one sees any answer (on a loaded host
 * after yields that may hand the CPU over, which also stop spinning). */
void test_spin_skip(void)
{
	struct pair pr;
	CHECK_ST(connect_pair(&pr, 1, 0, 5));
	atomic_store(&pr.proto, HR_PROTO_EAGER);
	CHECK(pthread_create(&pr.th, NULL, server, &pr) == 0);
	uint8_t req[32] = {1, 2, 3};
	void *resp;
	uint64_t rl;
	hr_ep_stats slow, probed, fast;
	hr_ep_set_spin(pr.cli, 10000);
	atomic_store(&pr.delay_ns, 2000000);
	int st = HR_OK;
	for (int i = 0; i < 12 && st == HR_OK; i++)
		st = hr_ep_call(pr.cli, HR_PROTO_EAGER, req, sizeof req, 10000, 1, &resp, &rl);
	hr_ep_stats_get(pr.cli, &slow);
	atomic_store(&pr.delay_ns, 0);
	hr_ep_set_spin(pr.cli, 1000000000ull);
	for (int i = 0; i < 8 && st == HR_OK; i++)
		st = hr_ep_call(pr.cli, HR_PROTO_EAGER, req, sizeof req, 10000, 1, &resp, &rl);
	hr_ep_stats_get(pr.cli, &probed);
	for (int i = 0; i < 16 && st == HR_OK; i++)
		st = hr_ep_call(pr.cli, HR_PROTO_EAGER, req, sizeof req, 10000, 1, &resp, &rl);
	hr_ep_stats_get(pr.cli, &fast);
	close_pair(&pr, 1);
	CHECK_ST(st);
	/* Waits 1-4 spin and miss, 5-11 skip, 12 probes (and misses). */
	CHECK(slow.spin_skips == 7);
	/* At most 7 more skips before the next probe, which is answered,
	 * unless a spin's yield handed the CPU to another thread (a loaded
	 * host: the skipping then goes on by design, test_spin_handoff). */
	CHECK(probed.spin_skips <= 14 || probed.spin_handoffs > 0);
	CHECK(fast.spin_skips == probed.spin_skips || fast.spin_handoffs > probed.spin_handoffs);
}

/* The first n CPUs this thread may run on into cpus; returns how many. */
static int allowed_cpus(const cpu_set_t *set, int *cpus, int n)
{
	int k = 0;
	for (int c = 0; c < CPU_SETSIZE && k < n; c++)
		if (CPU_ISSET(c, set))
			cpus[k++] = c;
	return k;
}

static void pin_set(cpu_set_t *s, int cpu)
{
	CPU_ZERO(s);
	CPU_SET(cpu, s);
}

/* A thread that wants the client's CPU all the time: each of the client's
 * yields hands the CPU to it. */
static void *hog(void *arg)
{
	atomic_int *stop = arg;
	while (!atomic_load_explicit(stop, memory_order_relaxed))
		;
	return NULL;
}

/* Unknown, as on ibv (swapped into the shm table by HANDOFF_UNKNOWN). */
static int cpu_unknown(hr_qp *qp)
{
	(void)qp;
	return -1;
}

/* A lane's client and server threads on one CPU (HANDOFF_ONE_CPU: pinned
 * to it here, as an oversubscribed host may place them), both spinning:
 * neither can see its answer before it yields the CPU to the other. A wait
 * answered while its yield had handed the CPU over, the peer's last post
 * made from this CPU, makes the endpoint's next waits block at once
 * instead of spinning in turns. HANDOFF_AWAY: the client's yields hand its
 * CPU to a hog while the server, on another CPU, holds the first three of
 * four answers for 200 us (past a spin's first yield): up to three
 * handoffs in a row, which block the fourth call under the old rule (two
 * in a row), but the peer's CPU says they were not to it and it takes
 * four such, so nothing blocks (on shm; ibv does not know the peer's
 * CPU). HANDOFF_UNKNOWN holds every answer with the peer's CPU unknown:
 * two in a row block, as before. HANDOFF_AWAY_ROW holds every answer: a
 * thread that takes this CPU at every wait is contention, and the
 * endpoint blocks wherever the peer is. The spins are 1 s, so without a
 * handoff that counts no wait sleeps and none skips its spin; no clock
 * decides it. HANDOFF_MOVED: once skipping began on one CPU, the server
 * moves to another; a skipping wait that sees the peer's last post made
 * there probes at once, spins and ends the skipping (within a call or
 * two, not at a probe backed off to one wait in up to 256). Also on the
 * test's failure paths the main thread gets its CPUs back. */
void test_spin_handoff(int place)
{
	/* The placements beside a hog test what the peer's published CPU
	 * changes, and only shm publishes it: ibv's peer is unknown, the rule
	 * HANDOFF_ONE_CPU tests. In the ibv VM's emulated CPUs a hog pinned
	 * beside the client did not take the CPU at its yields as a host's
	 * does (CI on 2026-12-06: no handoff in HANDOFF_AWAY's four calls,
	 * none in a row in the 64 of HANDOFF_UNKNOWN and HANDOFF_AWAY_ROW). */
	int hogs = place == HANDOFF_AWAY || place == HANDOFF_UNKNOWN || place == HANDOFF_AWAY_ROW;
	if (hogs && strcmp(prov->name, "shm") != 0) {
		printf("test_spin_handoff(%d): beside a hog: shm only (the peer's CPU)\n", place);
		return;
	}
	cpu_set_t old, one, other;
	CHECK(pthread_getaffinity_np(pthread_self(), sizeof old, &old) == 0);
	int cpus[2];
	int ncpu = allowed_cpus(&old, cpus, 2);
	CHECK(ncpu > 0);
	if (place != HANDOFF_ONE_CPU && ncpu < 2) {
		printf("test_spin_handoff(%d): one CPU allowed, no other CPU for the peer\n", place);
		return;
	}
	pin_set(&one, cpus[0]);
	pin_set(&other, place == HANDOFF_ONE_CPU || place == HANDOFF_MOVED ? cpus[0] : cpus[1]);
	hr_provider *full = (hr_provider *)(uintptr_t)prov; /* hr_<name>_provider is not const */
	int (*peer_cpu)(hr_qp *) = full->qp_peer_cpu;
	if (place == HANDOFF_UNKNOWN)
		full->qp_peer_cpu = cpu_unknown;
	struct pair pr;
	int cst = connect_pair(&pr, 1, 1, 5);
	if (cst != HR_OK)
		full->qp_peer_cpu = peer_cpu;
	CHECK_ST(cst);
	hr_ep_set_spin(pr.cli, 1000000000ull);
	hr_ep_set_spin(pr.srv, 1000000000ull);
	atomic_store(&pr.proto, HR_PROTO_EAGER);
	if (hogs)
		atomic_store(&pr.delay_ns, 200000ull);
	int calls = 64;
	if (place == HANDOFF_AWAY) {
		calls = 4;
		atomic_store(&pr.fast_every, 4);
	}
	atomic_int hog_stop = 0;
	pthread_t hog_th;
	pthread_attr_t at, hat;
	int hogged = 0;
	int started = pthread_attr_init(&at) == 0 && pthread_attr_setaffinity_np(&at, sizeof other, &other) == 0 &&
		      pthread_attr_init(&hat) == 0 && pthread_attr_setaffinity_np(&hat, sizeof one, &one) == 0 &&
		      pthread_setaffinity_np(pthread_self(), sizeof one, &one) == 0 &&
		      pthread_create(&pr.th, &at, server, &pr) == 0;
	if (started && hogs)
		started = hogged = pthread_create(&hog_th, &hat, hog, &hog_stop) == 0;
	uint8_t req[32] = {1, 2, 3};
	void *resp;
	uint64_t rl;
	int st = HR_OK;
	for (int i = 0; i < calls && started && st == HR_OK; i++)
		st = hr_ep_call(pr.cli, HR_PROTO_EAGER, req, sizeof req, 10000, 1, &resp, &rl);
	int known = hr_qp_peer_cpu(pr.cli->qp) >= 0;
	hr_ep_stats c0, s0;
	hr_ep_stats_get(pr.cli, &c0);
	hr_ep_stats_get(pr.srv, &s0);
	if (place == HANDOFF_MOVED && started) {
		cpu_set_t away;
		pin_set(&away, cpus[1]);
		started = pthread_setaffinity_np(pr.th, sizeof away, &away) == 0;
		for (int i = 0; i < 64 && started && st == HR_OK; i++)
			st = hr_ep_call(pr.cli, HR_PROTO_EAGER, req, sizeof req, 10000, 1, &resp, &rl);
	}
	if (hogged) {
		atomic_store(&hog_stop, 1);
		pthread_join(hog_th, NULL);
	}
	atomic_store(&pr.stop, 1);
	pthread_join(pr.th, NULL);
	hr_ep_stats c, s;
	hr_ep_stats_get(pr.cli, &c);
	hr_ep_stats_get(pr.srv, &s);
	close_pair(&pr, 0);
	full->qp_peer_cpu = peer_cpu;
	pthread_attr_destroy(&at);
	pthread_attr_destroy(&hat);
	int restored = pthread_setaffinity_np(pthread_self(), sizeof old, &old) == 0;
	CHECK(started && restored);
	CHECK_ST(st);
	if (place == HANDOFF_ONE_CPU || place == HANDOFF_MOVED) {
		CHECK(c0.spin_handoffs + s0.spin_handoffs > 0);
		CHECK(c0.spin_skips + s0.spin_skips > 0);
	}
	if (place == HANDOFF_ONE_CPU)
		return;
	if (place == HANDOFF_MOVED) {
		/* ibv knows no peer's CPU: its skipping ends at a probe. */
		/* A probe that handed the CPU to any thread (another
		 * process's, on a loaded host) keeps the skipping by design. */
		if (known && c.spin_handoffs == c0.spin_handoffs && s.spin_handoffs == s0.spin_handoffs)
			CHECK(c.spin_skips - c0.spin_skips + s.spin_skips - s0.spin_skips <= 4);
		return;
	}
	CHECK(known == (place != HANDOFF_UNKNOWN && strcmp(prov->name, "shm") == 0));
	CHECK(c.spin_handoffs > 0);
	if (place == HANDOFF_AWAY) {
		/* Three handoffs at most, all elsewhere: none counts. */
		if (known)
			CHECK(c.spin_skips == 0);
		return;
	}
	CHECK(c.spin_skips > 0);
}
