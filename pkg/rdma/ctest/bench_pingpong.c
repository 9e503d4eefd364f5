/* Two-process busy-poll ping-pong: the raw shared-memory cache-line floor
 * next to 64 B SEND/RECV over the provider HATRPC_PROVIDER names (shm by
 * default, or ibv), measured the same way (fork, one process per core when
 * possible, median of several runs). */
#define _GNU_SOURCE
#include "ctest_util.h"

#include <sched.h>
#include <stdatomic.h>
#include <sys/mman.h>
#include <sys/wait.h>

enum { RUNS = 7, ITERS = 100000, WARM = 10000 };

static const char *prov = "shm";

/* Per-iteration round trips: on a shared, oversubscribed machine the mean
 * is dominated by preemptions, so we report the sample median (and p90). */
static double samples[RUNS * ITERS];
static int nsamples;

static void pin(int cpu)
{
	cpu_set_t s;
	CPU_ZERO(&s);
	CPU_SET(cpu % (int)sysconf(_SC_NPROCESSORS_ONLN), &s);
	sched_setaffinity(0, sizeof(s), &s);
}

static int cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof(*v), cmp_d);
	return v[n / 2];
}

struct lines {
	_Alignas(64) _Atomic uint64_t ping;
	_Alignas(64) _Atomic uint64_t pong;
};

static double raw_floor(double *runs)
{
	struct lines *l = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (l == MAP_FAILED)
		return -1;
	pid_t pid = fork();
	if (pid == 0) {
		pin(1);
		for (uint64_t i = 1; i <= (uint64_t)(RUNS * (ITERS + WARM)); i++) {
			while (atomic_load_explicit(&l->ping, memory_order_acquire) != i)
				;
			atomic_store_explicit(&l->pong, i, memory_order_release);
		}
		_exit(0);
	}
	pin(0);
	uint64_t i = 0;
	for (int r = 0; r < RUNS; r++) {
		uint64_t t0 = 0;
		for (int k = 0; k < ITERS + WARM; k++) {
			if (k == WARM)
				t0 = hr_now_ns();
			uint64_t s0 = hr_now_ns();
			i++;
			atomic_store_explicit(&l->ping, i, memory_order_release);
			while (atomic_load_explicit(&l->pong, memory_order_acquire) != i)
				;
			if (k >= WARM)
				samples[nsamples++] = (double)(hr_now_ns() - s0);
		}
		runs[r] = (double)(hr_now_ns() - t0) / ITERS;
	}
	waitpid(pid, NULL, 0);
	munmap(l, 4096);
	return median(runs, RUNS);
}

/* The echo side of the SEND/RECV ping-pong. */
static int echo_child(int rfd, int wfd, uint32_t size, uint32_t flags)
{
	pin(1);
	struct ep c;
	uint32_t bad;
	if (ep_open(&c, prov, 1 << 20, 7, 0))
		return 2;
	for (int i = 0; i < 32; i++) {
		hr_recv_wr r = mk_recv((uint64_t)i, &c, (size_t)i * 4096, 4096);
		hr_post_recv(c.qp, &r, 1, &bad);
	}
	hr_qp_attr mine, theirs;
	hr_qp_local_attr(c.qp, &mine);
	if (write(wfd, &mine, sizeof(mine)) != sizeof(mine) || read(rfd, &theirs, sizeof(theirs)) != sizeof(theirs))
		return 3;
	if (hr_qp_connect(c.qp, &theirs))
		return 4;
	char go = 1;
	if (write(wfd, &go, 1) != 1)
		return 5;
	hr_wc wc[4];
	for (long k = 0; k < (long)RUNS * (ITERS + WARM); k++) {
		int n;
		while ((n = hr_poll_cq(c.rcq, 1, wc)) == 0)
			;
		if (n < 0 || wc[0].status)
			return 6;
		hr_recv_wr r = mk_recv(wc[0].wr_id, &c, (size_t)wc[0].wr_id * 4096, 4096);
		hr_post_recv(c.qp, &r, 1, &bad);
		/* Signal one in 16 so the send queue drains without a poll per message. */
		hr_send_wr s = mk_send((uint64_t)k, HR_OP_SEND, flags | ((k & 15) == 15 ? HR_SEND_SIGNALED : 0), &c,
				       200 * 1024, size);
		if (hr_post_send(c.qp, &s, 1, &bad))
			return 7;
		if ((k & 15) == 15 && wait_wc(c.scq, wc, 1, 5000) != 1)
			return 8;
	}
	ep_close(&c);
	return 0;
}

static double sendrecv(uint32_t size, uint32_t flags, double *runs)
{
	int p2c[2], c2p[2];
	if (pipe(p2c) || pipe(c2p))
		return -1;
	pid_t pid = fork();
	if (pid == 0)
		_exit(echo_child(p2c[0], c2p[1], size, flags));
	pin(0);
	struct ep a;
	uint32_t bad;
	if (ep_open(&a, prov, 1 << 20, 7, 0))
		return -1;
	for (int i = 0; i < 32; i++) {
		hr_recv_wr r = mk_recv((uint64_t)i, &a, (size_t)i * 4096, 4096);
		hr_post_recv(a.qp, &r, 1, &bad);
	}
	hr_qp_attr mine, theirs;
	hr_qp_local_attr(a.qp, &mine);
	if (read(c2p[0], &theirs, sizeof(theirs)) != sizeof(theirs) || write(p2c[1], &mine, sizeof(mine)) != sizeof(mine))
		return -1;
	if (hr_qp_connect(a.qp, &theirs))
		return -1;
	char go;
	if (read(c2p[0], &go, 1) != 1)
		return -1;
	hr_wc wc[4];
	long k = 0;
	for (int r = 0; r < RUNS; r++) {
		uint64_t t0 = 0;
		for (int j = 0; j < ITERS + WARM; j++, k++) {
			if (j == WARM)
				t0 = hr_now_ns();
			uint64_t s0 = hr_now_ns();
			hr_send_wr s = mk_send((uint64_t)k, HR_OP_SEND, flags | ((k & 15) == 15 ? HR_SEND_SIGNALED : 0),
					       &a, 200 * 1024, size);
			if (hr_post_send(a.qp, &s, 1, &bad))
				return -1;
			int n;
			while ((n = hr_poll_cq(a.rcq, 1, wc)) == 0)
				;
			if (n < 0 || wc[0].status)
				return -1;
			if (j >= WARM)
				samples[nsamples++] = (double)(hr_now_ns() - s0);
			hr_recv_wr rr = mk_recv(wc[0].wr_id, &a, (size_t)wc[0].wr_id * 4096, 4096);
			hr_post_recv(a.qp, &rr, 1, &bad);
			if ((k & 15) == 15 && wait_wc(a.scq, wc, 1, 5000) != 1)
				return -1;
		}
		runs[r] = (double)(hr_now_ns() - t0) / ITERS;
	}
	int st;
	waitpid(pid, &st, 0);
	ep_close(&a);
	close(p2c[0]);
	close(p2c[1]);
	close(c2p[0]);
	close(c2p[1]);
	return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? median(runs, RUNS) : -1;
}

static void report(const char *name, double med, double *runs)
{
	qsort(samples, (size_t)nsamples, sizeof(double), cmp_d);
	double p50 = nsamples ? samples[nsamples / 2] : -1, p90 = nsamples ? samples[nsamples * 9 / 10] : -1;
	double best = runs[0];
	for (int i = 1; i < RUNS; i++)
		best = runs[i] < best ? runs[i] : best;
	printf("%-28s RTT p50 %7.0f ns  p90 %8.0f ns | run means: median %8.0f ns, best %8.0f ns\n", name, p50,
	       p90, med, best);
	nsamples = 0;
}

int main(void)
{
	const char *env = getenv("HATRPC_PROVIDER");
	if (env && strcmp(env, "ibv") == 0)
		prov = "ibv";
	double runs[RUNS];
	char what[64];
	double m = raw_floor(runs);
	report("raw cache-line ping-pong", m, runs);
	m = sendrecv(64, 0, runs);
	snprintf(what, sizeof what, "%s SEND/RECV 64 B", prov);
	report(what, m, runs);
	m = sendrecv(64, HR_SEND_INLINE, runs);
	snprintf(what, sizeof what, "%s SEND/RECV 64 B inline", prov);
	report(what, m, runs);
	m = sendrecv(4096, 0, runs);
	snprintf(what, sizeof what, "%s SEND/RECV 4 KiB", prov);
	report(what, m, runs);
	return 0;
}
