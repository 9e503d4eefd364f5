/* Two-process busy-poll ping-pong: the raw shared-memory cache-line floor
 * (one line, and a three-line message read two ways) next to 64 B SEND/RECV
 * over the provider HATRPC_PROVIDER names (shm by default, or ibv),
 * measured the same way (fork, one process per core when possible, median
 * of several runs), with and without the receiver reading the payload, and
 * the provider's own work per message in one thread. `bench_pingpong phases [windows]`
 * alternates the two instead, to show whether the host is in a slow phase
 * (see phases()). */
#define _GNU_SOURCE
#include "ctest_util.h"

#include <sched.h>
#include <signal.h>
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

/* The line's two sides: raw_echo answers n round trips, raw_ping times
 * them (each one's ns in v, when v is not NULL). i counts round trips, so
 * the two sides stay in step across calls. */
static void raw_echo(struct lines *l, uint64_t *i, long n)
{
	for (long j = 0; j < n; j++) {
		++*i;
		while (atomic_load_explicit(&l->ping, memory_order_acquire) != *i)
			;
		atomic_store_explicit(&l->pong, *i, memory_order_release);
	}
}

static void raw_ping(struct lines *l, uint64_t *i, long n, double *v)
{
	for (long j = 0; j < n; j++) {
		uint64_t s0 = hr_now_ns();
		++*i;
		atomic_store_explicit(&l->ping, *i, memory_order_release);
		while (atomic_load_explicit(&l->pong, memory_order_acquire) != *i)
			;
		if (v)
			v[j] = (double)(hr_now_ns() - s0);
	}
}

static double raw_floor(double *runs)
{
	struct lines *l = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (l == MAP_FAILED)
		return -1;
	uint64_t i = 0;
	pid_t pid = fork();
	if (pid == 0) {
		pin(1);
		raw_echo(l, &i, (long)RUNS * (ITERS + WARM));
		_exit(0);
	}
	pin(0);
	for (int r = 0; r < RUNS; r++) {
		raw_ping(l, &i, WARM, NULL);
		uint64_t t0 = hr_now_ns();
		raw_ping(l, &i, ITERS, samples + nsamples);
		runs[r] = (double)(hr_now_ns() - t0) / ITERS;
		nsamples += ITERS;
	}
	waitpid(pid, NULL, 0);
	munmap(l, 4096);
	return median(runs, RUNS);
}

/* A message of three lines, as the shm provider moves one of 64 B with the
 * engine's header (two payload lines and the inbound entry): the flag in
 * line 0 is stored last. The receiver either reads the payload only after
 * it saw the flag (each of its misses after the flag's, as a completion
 * then its buffer) or polls all three lines together (the misses overlap,
 * as when the payload travels in the entry the receiver polls). */
struct mline {
	_Alignas(64) _Atomic uint64_t w[8];
};

struct msg3 {
	struct mline l[3];
};

struct raw3 {
	struct msg3 ping, pong;
};

static volatile uint64_t sink;

static void msg_put(struct msg3 *m, uint64_t i)
{
	for (int k = 1; k < 3; k++)
		for (int w = 0; w < 8; w++)
			atomic_store_explicit(&m->l[k].w[w], i + (uint64_t)w, memory_order_relaxed);
	atomic_store_explicit(&m->l[0].w[0], i, memory_order_release);
}

static void msg_wait(struct msg3 *m, uint64_t i, int together)
{
	uint64_t s = 0;
	if (together) {
		/* Loads after the flag's in program order: what they return is
		 * at least as new as the flag (x86 does not reorder loads). */
		for (;;) {
			uint64_t f = atomic_load_explicit(&m->l[0].w[0], memory_order_acquire);
			s = atomic_load_explicit(&m->l[1].w[7], memory_order_relaxed) +
			    atomic_load_explicit(&m->l[2].w[7], memory_order_relaxed);
			if (f == i)
				break;
		}
	} else {
		while (atomic_load_explicit(&m->l[0].w[0], memory_order_acquire) != i)
			;
	}
	for (int k = 1; k < 3; k++)
		for (int w = 0; w < 8; w++)
			s += atomic_load_explicit(&m->l[k].w[w], memory_order_relaxed);
	sink = s;
}

static double raw3_floor(int together, double *runs)
{
	struct raw3 *l = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (l == MAP_FAILED)
		return -1;
	long total = (long)RUNS * (ITERS + WARM);
	pid_t pid = fork();
	if (pid == 0) {
		pin(1);
		for (long j = 1; j <= total; j++) {
			msg_wait(&l->ping, (uint64_t)j, together);
			msg_put(&l->pong, (uint64_t)j);
		}
		_exit(0);
	}
	pin(0);
	uint64_t i = 0;
	for (int r = 0; r < RUNS; r++) {
		uint64_t t0 = 0;
		for (int j = 0; j < ITERS + WARM; j++) {
			if (j == WARM)
				t0 = hr_now_ns();
			uint64_t s0 = hr_now_ns();
			msg_put(&l->ping, ++i);
			msg_wait(&l->pong, i, together);
			if (j >= WARM)
				samples[nsamples++] = (double)(hr_now_ns() - s0);
		}
		runs[r] = (double)(hr_now_ns() - t0) / ITERS;
	}
	waitpid(pid, NULL, 0);
	munmap(l, 4096);
	return median(runs, RUNS);
}

/* One side of a SEND/RECV pair: an endpoint with 32 receives posted,
 * connected to the other process through the pipes (rfd, wfd). The child
 * sends its attributes first and a go byte once connected. */
static int pair_open(struct ep *e, int child, int rfd, int wfd)
{
	uint32_t bad;
	if (ep_open(e, prov, 1 << 20, 7, 0))
		return 2;
	for (int i = 0; i < 32; i++) {
		hr_recv_wr r = mk_recv((uint64_t)i, e, (size_t)i * 4096, 4096);
		hr_post_recv(e->qp, &r, 1, &bad);
	}
	hr_qp_attr mine, theirs;
	hr_qp_local_attr(e->qp, &mine);
	if (child) {
		if (write(wfd, &mine, sizeof(mine)) != sizeof(mine) ||
		    read(rfd, &theirs, sizeof(theirs)) != sizeof(theirs))
			return 3;
	} else if (read(rfd, &theirs, sizeof(theirs)) != sizeof(theirs) ||
		   write(wfd, &mine, sizeof(mine)) != sizeof(mine)) {
		return 3;
	}
	if (hr_qp_connect(e->qp, &theirs))
		return 4;
	char go = 1;
	if (child ? write(wfd, &go, 1) != 1 : read(rfd, &go, 1) != 1)
		return 5;
	return 0;
}

/* A flag of the bench's own, never posted: the receiver reads each
 * message's bytes (as the engine does) before answering. */
#define BENCH_READ (1u << 31)

/* Message k's send: signalled one in 16, so the send queue drains without a
 * poll per message. */
static int send_k(struct ep *e, long k, uint32_t size, uint32_t flags)
{
	uint32_t bad;
	flags &= ~BENCH_READ;
	hr_send_wr s = mk_send((uint64_t)k, HR_OP_SEND, flags | ((k & 15) == 15 ? HR_SEND_SIGNALED : 0), e,
			       200 * 1024, size);
	return hr_post_send(e->qp, &s, 1, &bad) ? 7 : 0;
}

/* Waits for the next message (its arrival time in *at, when asked; its
 * bytes read first with BENCH_READ) and posts its receive again. */
static int recv_next(struct ep *e, uint64_t *at, uint32_t flags)
{
	uint32_t bad;
	hr_wc wc[1];
	int n;
	while ((n = hr_poll_cq(e->rcq, 1, wc)) == 0)
		;
	if (n < 0 || wc[0].status)
		return 6;
	if (flags & BENCH_READ) {
		const uint8_t *p = e->buf + (size_t)wc[0].wr_id * 4096;
		uint64_t s = 0;
		for (uint32_t i = 0; i < wc[0].byte_len; i += 8) {
			uint64_t w;
			memcpy(&w, p + i, sizeof w);
			s += w;
		}
		sink = s;
	}
	if (at)
		*at = hr_now_ns();
	hr_recv_wr r = mk_recv(wc[0].wr_id, e, (size_t)wc[0].wr_id * 4096, 4096);
	hr_post_recv(e->qp, &r, 1, &bad);
	return 0;
}

static int drain_k(struct ep *e, long k)
{
	hr_wc wc[1];
	return (k & 15) == 15 && wait_wc(e->scq, wc, 1, 5000) != 1 ? 8 : 0;
}

/* The echo side of k messages: answer each as it arrives. */
static int echo_n(struct ep *e, long *k, long n, uint32_t size, uint32_t flags)
{
	for (long end = *k + n; *k < end; (*k)++) {
		int st = recv_next(e, NULL, flags);
		if (!st)
			st = send_k(e, *k, size, flags);
		if (!st)
			st = drain_k(e, *k);
		if (st)
			return st;
	}
	return 0;
}

/* One round trip from the measuring side; its time in *ns. */
static int ping_one(struct ep *e, long k, uint32_t size, uint32_t flags, double *ns)
{
	uint64_t s0 = hr_now_ns(), at = s0;
	int st = send_k(e, k, size, flags);
	if (!st)
		st = recv_next(e, &at, flags);
	*ns = (double)(at - s0);
	return st ? st : drain_k(e, k);
}

static int echo_child(int rfd, int wfd, uint32_t size, uint32_t flags)
{
	pin(1);
	struct ep c;
	int st = pair_open(&c, 1, rfd, wfd);
	long k = 0;
	if (!st)
		st = echo_n(&c, &k, (long)RUNS * (ITERS + WARM), size, flags);
	ep_close(&c);
	return st;
}

/* Forks the echo process (child(rfd, wfd)) and opens this side's end. */
static pid_t fork_pair(struct ep *a, int (*child)(int, int, uint32_t, uint32_t), uint32_t size, uint32_t flags)
{
	int p2c[2], c2p[2];
	if (pipe(p2c) || pipe(c2p))
		return -1;
	pid_t pid = fork();
	if (pid == 0)
		_exit(child(p2c[0], c2p[1], size, flags));
	pin(0);
	int st = pair_open(a, 0, c2p[0], p2c[1]);
	close(p2c[0]);
	close(p2c[1]);
	close(c2p[0]);
	close(c2p[1]);
	if (st) {
		/* The child may wait on a pipe it holds both ends of. */
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
		return -1;
	}
	return pid;
}

static double sendrecv(uint32_t size, uint32_t flags, double *runs)
{
	struct ep a;
	pid_t pid = fork_pair(&a, echo_child, size, flags);
	if (pid < 0)
		return -1;
	long k = 0;
	for (int r = 0; r < RUNS; r++) {
		uint64_t t0 = 0;
		for (int j = 0; j < ITERS + WARM; j++, k++) {
			if (j == WARM)
				t0 = hr_now_ns();
			double ns;
			if (ping_one(&a, k, size, flags, &ns))
				return -1;
			if (j >= WARM)
				samples[nsamples++] = ns;
		}
		runs[r] = (double)(hr_now_ns() - t0) / ITERS;
	}
	int st;
	waitpid(pid, &st, 0);
	ep_close(&a);
	return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? median(runs, RUNS) : -1;
}

/* The provider's own work per message, with no other core involved: two
 * connected QPs in this thread, each message a SEND from one, polled and
 * its receive posted again on the other (read when BENCH_READ), as the
 * ping-pong's one way. Mean ns a message, median of RUNS. */
static double sendrecv_local(uint32_t size, uint32_t flags, double *runs)
{
	struct ep a, b;
	uint32_t bad;
	if (ep_open(&a, prov, 1 << 20, 7, 0) || ep_open(&b, prov, 1 << 20, 7, 0))
		return -1;
	for (int i = 0; i < 32; i++) {
		hr_recv_wr r = mk_recv((uint64_t)i, &b, (size_t)i * 4096, 4096);
		hr_post_recv(b.qp, &r, 1, &bad);
	}
	if (ep_connect(&a, &b))
		return -1;
	long k = 0;
	for (int r = 0; r < RUNS; r++) {
		uint64_t t0 = 0;
		for (int j = 0; j < ITERS + WARM; j++, k++) {
			if (j == WARM)
				t0 = hr_now_ns();
			if (send_k(&a, k, size, flags) || recv_next(&b, NULL, flags) || drain_k(&a, k))
				return -1;
		}
		runs[r] = (double)(hr_now_ns() - t0) / ITERS;
	}
	ep_close(&a);
	ep_close(&b);
	return median(runs, RUNS);
}

/* Host phases: windows of PH_W raw cache-line round trips and PH_W 64 B
 * SEND/RECV round trips alternate between the same two pinned processes,
 * so each pair of windows sees one placement of the two CPUs. On a VM the
 * host moves its vCPUs, and a line's round trip can triple for seconds
 * (measured 2026-11-28: 160-180 ns, then 480-560 ns); SEND/RECV, which
 * moves several lines a message, doubles with it (~480 -> ~980 ns), and so
 * does everything built on it. A benchmark run in such a phase measures
 * the host, not the code. */
enum { PH_W = 2000 };

/* Mapped before fork_pair, so the echo child (whose signature carries
 * only sizes) finds it here. */
static struct lines *ph_lines;

static int phase_child(int rfd, int wfd, uint32_t windows, uint32_t unused)
{
	(void)unused;
	pin(1);
	struct ep c;
	int st = pair_open(&c, 1, rfd, wfd);
	uint64_t i = 0;
	long k = 0;
	for (uint32_t w = 0; w < windows && !st; w++) {
		raw_echo(ph_lines, &i, PH_W);
		st = echo_n(&c, &k, PH_W, 64, 0);
	}
	ep_close(&c);
	return st;
}

static void phase_line(const char *what, double *raw, double *shm, int n)
{
	if (n == 0) {
		printf("  %-28s     0 windows\n", what);
		return;
	}
	printf("  %-28s %5d windows: line p50 %5.0f ns, shm SEND/RECV 64 B p50 %5.0f ns (medians of windows)\n",
	       what, n, median(raw, n), median(shm, n));
}

static int phases(int windows)
{
	ph_lines = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	/* Per window: raw and shm p50s; then each split by phase (sorting for
	 * medians reorders, so the splits are copies). */
	double *raw = calloc((size_t)windows * 6 + PH_W, sizeof(double));
	uint64_t *t = calloc((size_t)windows, sizeof(uint64_t));
	if (ph_lines == MAP_FAILED || !raw || !t) {
		fprintf(stderr, "phases: out of memory\n");
		return 1;
	}
	double *shm = raw + windows, *fast_r = shm + windows, *fast_s = fast_r + windows;
	double *slow_r = fast_s + windows, *slow_s = slow_r + windows, *v = slow_s + windows;
	struct ep a;
	pid_t pid = fork_pair(&a, phase_child, (uint32_t)windows, 0);
	if (pid < 0) {
		fprintf(stderr, "phases: cannot connect a %s pair\n", prov);
		return 1;
	}
	uint64_t i = 0, t0 = hr_now_ns();
	long k = 0;
	for (int w = 0; w < windows; w++) {
		t[w] = hr_now_ns() - t0;
		raw_ping(ph_lines, &i, PH_W, v);
		raw[w] = median(v, PH_W);
		for (int j = 0; j < PH_W; j++, k++)
			if (ping_one(&a, k, 64, 0, &v[j])) {
				fprintf(stderr, "phases: SEND/RECV failed in window %d\n", w);
				kill(pid, SIGKILL);
				waitpid(pid, NULL, 0);
				return 1;
			}
		shm[w] = median(v, PH_W);
	}
	uint64_t end = hr_now_ns() - t0;
	int st;
	waitpid(pid, &st, 0);
	ep_close(&a);
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
		fprintf(stderr, "phases: the echo process failed (status %d)\n", st);
		return 1;
	}
	/* The floor is the best window, not the median: a run can be mostly
	 * in a slow phase (00:06 on 2026-11-29: 1,071 of 1,500 windows), and
	 * then its median is the slow level. */
	double best = raw[0];
	for (int w = 1; w < windows; w++)
		best = raw[w] < best ? raw[w] : best;
	printf("host phases (%s): %d windows of %d raw cache-line round trips, then %d 64 B SEND/RECV\n", prov,
	       windows, PH_W, PH_W);
	int nf = 0, ns = 0, phases_seen = 0;
	/* Runs of windows on one side of 2x the floor; each slow run is a phase. */
	for (int w = 0; w < windows;) {
		int from = w, slow = raw[w] > 2 * best;
		for (; w < windows && (raw[w] > 2 * best) == slow; w++) {
			if (slow) {
				slow_r[ns] = raw[w];
				slow_s[ns++] = shm[w];
			} else {
				fast_r[nf] = raw[w];
				fast_s[nf++] = shm[w];
			}
		}
		if (slow && ++phases_seen <= 10)
			printf("  slow phase from %.2f s to %.2f s\n", (double)t[from] / 1e9,
			       (double)(w < windows ? t[w] : end) / 1e9);
	}
	if (phases_seen > 10)
		printf("  ... %d slow phases in all\n", phases_seen);
	phase_line("line at its floor (<= 2x)", fast_r, fast_s, nf);
	phase_line("line slow (> 2x its best)", slow_r, slow_s, ns);
	free(raw);
	free(t);
	munmap(ph_lines, 4096);
	return 0;
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

int main(int argc, char **argv)
{
	const char *env = getenv("HATRPC_PROVIDER");
	if (env && strcmp(env, "ibv") == 0)
		prov = "ibv";
	if (argc > 1 && strcmp(argv[1], "phases") == 0) {
		int windows = argc > 2 ? atoi(argv[2]) : 2000;
		return phases(windows > 0 ? windows : 2000);
	}
	double runs[RUNS];
	char what[64];
	if (argc > 1 && strcmp(argv[1], "local") == 0) {
		/* Only the one-thread loop: something to profile (perf record). */
		double m = sendrecv_local(64, BENCH_READ, runs);
		printf("%s 64 B read, one thread: one way mean %.0f ns (median of runs)\n", prov, m);
		return m < 0;
	}
	double m = raw_floor(runs);
	report("raw cache-line ping-pong", m, runs);
	m = raw3_floor(0, runs);
	report("raw 3 lines, payload after", m, runs);
	m = raw3_floor(1, runs);
	report("raw 3 lines, polled together", m, runs);
	m = sendrecv(64, 0, runs);
	snprintf(what, sizeof what, "%s SEND/RECV 64 B", prov);
	report(what, m, runs);
	m = sendrecv(64, BENCH_READ, runs);
	snprintf(what, sizeof what, "%s SEND/RECV 64 B read", prov);
	report(what, m, runs);
	m = sendrecv(128, BENCH_READ, runs);
	snprintf(what, sizeof what, "%s SEND/RECV 128 B read", prov);
	report(what, m, runs);
	m = sendrecv_local(64, BENCH_READ, runs);
	snprintf(what, sizeof what, "%s 64 B read, one thread", prov);
	printf("%-28s one way mean %4.0f ns (median of runs)\n", what, m);
	m = sendrecv(64, HR_SEND_INLINE, runs);
	snprintf(what, sizeof what, "%s SEND/RECV 64 B inline", prov);
	report(what, m, runs);
	m = sendrecv(4096, 0, runs);
	snprintf(what, sizeof what, "%s SEND/RECV 4 KiB", prov);
	report(what, m, runs);
	return 0;
}
