/* test_fork_safe.c - a child forked without exec while the parent holds
 * connected QPs and registered memory cannot disturb them. The child
 * writes over every registered buffer it can reach and exits; the parent
 * meanwhile rewrites its buffers (the write that, on a kernel without
 * copy-on-fork for pinned pages and without ibv_fork_init, moves the
 * parent's pages away from the ones the NIC uses) and keeps sending both
 * ways, and every byte arrives as sent. On shm the buffers, segments and
 * CQ rings are not in the child at all (MADV_DONTFORK); on ibv they are
 * absent (ibv_fork_init: rdma-core marks each MR MADV_DONTFORK) or a
 * private copy (the kernel copies pinned pages at fork, 5.13+). */
#define _GNU_SOURCE
#include "ctest_util.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/wait.h>

#define CHUNK 4096
#define ROUNDS 64

static void pattern(uint8_t *p, size_t n, unsigned seed)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (uint8_t)(seed * 131u + i * 7u + (i >> 8));
}

static int same(const uint8_t *p, size_t n, unsigned seed)
{
	for (size_t i = 0; i < n; i++)
		if (p[i] != (uint8_t)(seed * 131u + i * 7u + (i >> 8)))
			return 0;
	return 1;
}

/* One message from x to y: x's bytes [0, CHUNK) land in y's [CHUNK, 2*CHUNK). */
static int round_trip(struct ep *x, struct ep *y, unsigned seed, uint64_t id)
{
	hr_wc wc;
	uint32_t bad;
	pattern(x->buf, CHUNK, seed);
	memset(y->buf + CHUNK, 0, CHUNK);
	hr_recv_wr r = mk_recv(id, y, CHUNK, CHUNK);
	if (hr_post_recv(y->qp, &r, 1, &bad))
		return 0;
	hr_send_wr s = mk_send(id, HR_OP_SEND, HR_SEND_SIGNALED, x, 0, CHUNK);
	if (hr_post_send(x->qp, &s, 1, &bad))
		return 0;
	if (wait_wc(x->scq, &wc, 1, 10000) != 1 || wc.status)
		return 0;
	if (wait_wc(y->rcq, &wc, 1, 10000) != 1 || wc.status || wc.byte_len != CHUNK)
		return 0;
	return same(y->buf + CHUNK, CHUNK, seed);
}

/* What the child finds at p: 'D' not mapped (MADV_DONTFORK), 'C' mapped,
 * its own copy, which it then overwrites. A write into a pipe reads the
 * byte (EFAULT where nothing is mapped); only async-signal-safe calls: the
 * parent may have threads. */
static char probe_and_scribble(int pw, uint8_t *p, size_t n)
{
	if (write(pw, p, 1) < 0 && errno == EFAULT)
		return 'D';
	memset(p, 0xEE, n);
	return 'C';
}

void test_fork_safe(const char *prov)
{
	struct ep a, b;
	CHECK_ST(ep_open(&a, prov, 1 << 16, 7, 0), HR_OK);
	CHECK_ST(ep_open(&b, prov, 1 << 16, 7, 0), HR_OK);
	CHECK_ST(ep_connect(&a, &b), HR_OK);
	CHECK(round_trip(&a, &b, 1, 1));
	int rep[2];
	CHECK(pipe2(rep, O_CLOEXEC) == 0);
	int probe[2];
	CHECK(pipe2(probe, O_CLOEXEC) == 0);
	pid_t pid = fork();
	if (pid == 0) {
		char seen[2] = {probe_and_scribble(probe[1], a.buf, a.len), probe_and_scribble(probe[1], b.buf, b.len)};
		_exit(write(rep[1], seen, 2) == 2 ? 0 : 1);
	}
	CHECK(pid > 0);
	close(rep[1]);
	int ok = 1;
	/* The parent keeps going while the child lives and after it is gone:
	 * its own writes first (pattern() in round_trip), then the NIC's. */
	for (unsigned i = 0; i < ROUNDS; i++) {
		ok &= round_trip(&a, &b, 2 + i, 10 + i);
		ok &= round_trip(&b, &a, 1000 + i, 5000 + i);
	}
	int status = 0;
	CHECK(waitpid(pid, &status, 0) == pid);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	char seen[3] = {0};
	CHECK(read(rep[0], seen, 2) == 2);
	for (unsigned i = 0; i < ROUNDS; i++) {
		ok &= round_trip(&a, &b, 3000 + i, 9000 + i);
		ok &= round_trip(&b, &a, 4000 + i, 13000 + i);
	}
	CHECK(ok);
	CHECK((seen[0] == 'D' || seen[0] == 'C') && (seen[1] == 'D' || seen[1] == 'C'));
	if (strcmp(prov, "shm") == 0)
		CHECK(seen[0] == 'D' && seen[1] == 'D');
	printf("fork without exec: the child found the registered buffers %s (%s); fork status %s\n", seen,
	       seen[0] == 'D' ? "not mapped: MADV_DONTFORK" : "mapped: on ibv the kernel's private copy",
	       hr_fork_status_str(hr_fork_status()));
	close(rep[0]);
	close(probe[0]);
	close(probe[1]);
	ep_close(&a);
	ep_close(&b);
}
