/* C unit tests of the provider table. They run against the provider named
 * by HATRPC_PROVIDER (default shm), in one process and across fork(). */
#define _GNU_SOURCE
#include "ctest_util.h"

#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <dirent.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>

static const char *prov = "shm";

void test_shm_attack(void); /* test_shm_attack.c */
void test_shm_window(void); /* test_shm_window.c */
void test_fork_safe(const char *prov); /* test_fork_safe.c */
void test_default_ops(void); /* test_ops.c */

/* Checks of what only shm can observe (hr.h: on ibv the responder of a
 * one-sided operation never sees it in software). Counted in the summary. */
static int shm_only;
#define CHECK_SHM_ONLY(cond)                                                                       \
	do {                                                                                       \
		shm_only++;                                                                        \
		if (strcmp(prov, "shm") == 0)                                                      \
			CHECK(cond);                                                               \
	} while (0)

static void test_status_strings(void)
{
	for (int s = 0; s < HR_STATUS_MAX; s++)
		CHECK(strcmp(hr_status_str(s), "unknown status") != 0);
	CHECK(strcmp(hr_status_str(HR_STATUS_MAX), "unknown status") == 0);
	CHECK(strcmp(hr_status_str(-HR_EFLUSH), hr_status_str(HR_EFLUSH)) == 0);
	CHECK(hr_provider_by_name("nope") == NULL);
}

static void test_ibv_no_device(void)
{
	hr_dev *d = NULL;
	hr_dev_opts o = {.gid_index = -1};
	int st = hr_open(hr_provider_by_name("ibv"), &o, &d);
	if (access("/sys/class/infiniband", F_OK) != 0) {
		CHECK_ST(st, HR_ENODEV);
		CHECK(d == NULL);
	} else if (st == HR_OK) {
		hr_close(d);
	}
}

static void test_opcodes(void)
{
	struct ep a, b;
	CHECK_ST(ep_open(&a, prov, 1 << 20, 7, 0), HR_OK);
	CHECK_ST(ep_open(&b, prov, 1 << 20, 7, 0), HR_OK);
	CHECK_ST(ep_connect(&a, &b), HR_OK);
	uint32_t sizes[] = {1, 64, 4096, 128 << 10};
	uint32_t ops[] = {HR_OP_SEND, HR_OP_SEND_WITH_IMM, HR_OP_RDMA_WRITE, HR_OP_RDMA_WRITE_WITH_IMM, HR_OP_RDMA_READ};
	hr_wc wc[4];
	uint32_t bad;
	for (unsigned oi = 0; oi < 5; oi++) {
		for (unsigned si = 0; si < 4; si++) {
			uint32_t op = ops[oi], n = sizes[si];
			for (uint32_t i = 0; i < n; i++)
				a.buf[i] = (uint8_t)(i * 13 + oi);
			memset(b.buf, 0, n);
			if (op == HR_OP_RDMA_READ) {
				memcpy(b.buf, a.buf, n);
				memset(a.buf, 0, n);
			}
			int recv = op != HR_OP_RDMA_WRITE && op != HR_OP_RDMA_READ;
			if (recv) {
				hr_recv_wr r = mk_recv(77, &b, 512 << 10, 256 << 10);
				if (op != HR_OP_RDMA_WRITE_WITH_IMM)
					r.sg[0].addr = (uint64_t)(uintptr_t)b.buf;
				CHECK_ST(hr_post_recv(b.qp, &r, 1, &bad), HR_OK);
			}
			hr_send_wr w = mk_send(n, op, HR_SEND_SIGNALED, &a, 0, n);
			w.remote_addr = (uint64_t)(uintptr_t)b.buf;
			w.rkey = b.mr->rkey;
			w.imm = 0x5150 + n;
			CHECK_ST(hr_post_send(a.qp, &w, 1, &bad), HR_OK);
			CHECK(wait_wc(a.scq, wc, 1, 5000) == 1);
			CHECK_ST((int)wc[0].status, HR_OK);
			/* Verbs complete the WITH_IMM sends as SEND / RDMA_WRITE, and
			 * define byte_len on the send side only for READ (and atomics). */
			uint32_t want = op == HR_OP_SEND_WITH_IMM	     ? HR_OP_SEND
					: op == HR_OP_RDMA_WRITE_WITH_IMM ? HR_OP_RDMA_WRITE
									  : op;
			CHECK(wc[0].opcode == want && wc[0].wr_id == n);
			if (op == HR_OP_RDMA_READ)
				CHECK(wc[0].byte_len == n);
			if (recv) {
				CHECK(wait_wc(b.rcq, wc, 1, 5000) == 1);
				CHECK_ST((int)wc[0].status, HR_OK);
				CHECK(wc[0].wr_id == 77 && wc[0].byte_len == n);
				CHECK(wc[0].opcode == (op == HR_OP_RDMA_WRITE_WITH_IMM ? HR_WC_RECV_RDMA_WITH_IMM : HR_WC_RECV));
				if (op != HR_OP_SEND)
					CHECK((wc[0].flags & HR_WC_WITH_IMM) && wc[0].imm == 0x5150 + n);
			}
			CHECK(memcmp(a.buf, b.buf, n) == 0);
		}
	}
	/* atomics */
	uint64_t v = 40;
	memcpy(b.buf + 64, &v, 8);
	hr_send_wr f = mk_send(1, HR_OP_ATOMIC_FETCH_AND_ADD, HR_SEND_SIGNALED, &a, 128, 8);
	f.remote_addr = (uint64_t)(uintptr_t)(b.buf + 64);
	f.rkey = b.mr->rkey;
	f.compare_add = 2;
	hr_send_wr c = f;
	c.opcode = HR_OP_ATOMIC_CMP_AND_SWP;
	c.sg[0].addr += 8;
	c.compare_add = 42;
	c.swap = 7;
	hr_send_wr chain[2] = {f, c};
	CHECK_ST(hr_post_send(a.qp, chain, 2, &bad), HR_OK);
	CHECK(wait_wc(a.scq, wc, 2, 5000) == 2);
	uint64_t old1, old2, now;
	memcpy(&old1, a.buf + 128, 8);
	memcpy(&old2, a.buf + 136, 8);
	memcpy(&now, b.buf + 64, 8);
	CHECK(old1 == 40 && old2 == 42 && now == 7);
	hr_counters cnt;
	CHECK_ST(hr_qp_counters(b.qp, &cnt), HR_OK);
	CHECK(cnt.inbound[HR_OP_SEND] == 4 && cnt.inbound[HR_OP_SEND_WITH_IMM] == 4 &&
	      cnt.inbound[HR_OP_RDMA_WRITE_WITH_IMM] == 4);
	CHECK_SHM_ONLY(cnt.inbound[HR_OP_RDMA_WRITE] == 4 && cnt.inbound[HR_OP_ATOMIC_CMP_AND_SWP] == 1);
	CHECK_ST(hr_qp_counters(a.qp, &cnt), HR_OK);
	CHECK(cnt.posted[HR_OP_SEND] == 4 && cnt.completions == 22 && cnt.errors == 0);
	ep_close(&a);
	ep_close(&b);
}

/* The CPU a peer's thread noted, as the target QP sees it (the engine's
 * handoff rule, hr_proto_int.h): unknown before the peer noted one after
 * its first post and on ibv, else the CPU of its last hr_qp_note_cpu,
 * from each CPU it is pinned to in turn; posting alone publishes nothing. */
static void test_peer_cpu(void)
{
	struct ep a, b;
	CHECK_ST(ep_open(&a, prov, 1 << 16, 7, 0), HR_OK);
	CHECK_ST(ep_open(&b, prov, 1 << 16, 7, 0), HR_OK);
	CHECK_ST(ep_connect(&a, &b), HR_OK);
	CHECK(hr_qp_peer_cpu(b.qp) == -1 && hr_qp_peer_cpu(a.qp) == -1);
	cpu_set_t old;
	CHECK(pthread_getaffinity_np(pthread_self(), sizeof old, &old) == 0);
	int pinned = 0;
	for (int c = 0; c < CPU_SETSIZE && pinned < 4; c++) {
		if (!CPU_ISSET(c, &old))
			continue;
		cpu_set_t one;
		CPU_ZERO(&one);
		CPU_SET(c, &one);
		CHECK(pthread_setaffinity_np(pthread_self(), sizeof one, &one) == 0);
		pinned++;
		hr_wc wc[1];
		uint32_t bad;
		hr_send_wr w = mk_send(c, HR_OP_RDMA_WRITE, HR_SEND_SIGNALED, &a, 0, 64);
		w.remote_addr = (uint64_t)(uintptr_t)b.buf;
		w.rkey = b.mr->rkey;
		CHECK_ST(hr_post_send(a.qp, &w, 1, &bad), HR_OK);
		CHECK(wait_wc(a.scq, wc, 1, 5000) == 1);
		if (pinned == 1)
			CHECK(hr_qp_peer_cpu(b.qp) == -1); /* a post publishes nothing */
		CHECK_ST(hr_qp_note_cpu(a.qp), HR_OK);
		CHECK_ST(hr_qp_note_cpu(a.qp), HR_OK); /* the same CPU again: no change */
		if (strcmp(prov, "shm") == 0)
			CHECK(hr_qp_peer_cpu(b.qp) == c);
		else
			CHECK(hr_qp_peer_cpu(b.qp) == -1);
		CHECK(hr_qp_peer_cpu(a.qp) == -1); /* b never posted */
	}
	CHECK(pthread_setaffinity_np(pthread_self(), sizeof old, &old) == 0);
	CHECK(pinned > 0);
	ep_close(&a);
	ep_close(&b);
}

static void test_errors(void)
{
	struct ep a, b;
	hr_wc wc[4];
	uint32_t bad;
	/* bad rkey: remote access error, then flush */
	CHECK_ST(ep_open(&a, prov, 1 << 16, 1, 0), HR_OK);
	CHECK_ST(ep_open(&b, prov, 1 << 16, 7, 0), HR_OK);
	CHECK_ST(ep_connect(&a, &b), HR_OK);
	hr_send_wr w[2] = {mk_send(1, HR_OP_RDMA_WRITE, HR_SEND_SIGNALED, &a, 0, 64),
			   mk_send(2, HR_OP_RDMA_READ, 0, &a, 0, 64)};
	w[0].remote_addr = w[1].remote_addr = (uint64_t)(uintptr_t)b.buf + b.len - 32;
	w[0].rkey = w[1].rkey = b.mr->rkey;
	CHECK_ST(hr_post_send(a.qp, w, 2, &bad), HR_OK);
	CHECK(wait_wc(a.scq, wc, 2, 5000) == 2);
	CHECK_ST((int)wc[0].status, HR_EREMOTE_ACCESS);
	CHECK_ST((int)wc[1].status, HR_EFLUSH);
	CHECK(hr_qp_state(a.qp) == HR_QPS_ERR);
	ep_close(&a);
	ep_close(&b);

	/* RNR retry exceeded (rnr_retry 1) */
	CHECK_ST(ep_open(&a, prov, 1 << 16, 1, 0), HR_OK);
	CHECK_ST(ep_open(&b, prov, 1 << 16, 7, 0), HR_OK);
	CHECK_ST(ep_connect(&a, &b), HR_OK);
	hr_send_wr s = mk_send(5, HR_OP_SEND, HR_SEND_SIGNALED, &a, 0, 8);
	CHECK_ST(hr_post_send(a.qp, &s, 1, &bad), HR_OK);
	CHECK(wait_wc(a.scq, wc, 1, 5000) == 1);
	CHECK_ST((int)wc[0].status, HR_ERNR_RETRY);
	/* Work posted to the failed QP is accepted and flushed, signaled or not
	 * (how a failed QP's send queue drains is the device's business; the
	 * depth of a healthy one is TestSelectiveSignalingAndDepth's). */
	hr_qp_caps caps;
	CHECK_ST(hr_query_qp_caps(a.qp, &caps), HR_OK);
	CHECK(caps.max_send_wr >= 64);
	hr_send_wr many[8];
	for (uint32_t i = 0; i < 8; i++)
		many[i] = mk_send((uint64_t)i, HR_OP_SEND, 0, &a, 0, 8);
	CHECK_ST(hr_post_send(a.qp, many, 8, &bad), HR_OK);
	for (int got = 0; got < 8;) {
		int n = wait_wc(a.scq, wc, 4, 5000);
		CHECK(n > 0);
		if (n <= 0)
			break;
		for (int i = 0; i < n; i++) {
			CHECK_ST((int)wc[i].status, HR_EFLUSH);
			CHECK(wc[i].wr_id == (uint64_t)(got + i));
		}
		got += n;
	}
	/* inline over the limit */
	CHECK_ST(hr_query_qp_caps(b.qp, &caps), HR_OK);
	hr_send_wr big = mk_send(9, HR_OP_SEND, HR_SEND_INLINE, &b, 0, caps.max_inline + 1);
	CHECK_ST(hr_post_send(b.qp, &big, 1, &bad), HR_EINVAL);
	/* the peer of a failed QP gets no answer */
	hr_send_wr bw = mk_send(9, HR_OP_RDMA_WRITE, HR_SEND_SIGNALED, &b, 0, 8);
	bw.remote_addr = (uint64_t)(uintptr_t)a.buf;
	bw.rkey = a.mr->rkey;
	CHECK_ST(hr_post_send(b.qp, &bw, 1, &bad), HR_OK);
	CHECK(wait_wc(b.scq, wc, 1, 5000) == 1);
	CHECK_ST((int)wc[0].status, HR_ERETRY_EXC);
	ep_close(&a);
	ep_close(&b);
}

/* Inline data is the caller's at post time only, from memory no key
 * names, in two SGEs: whether the SEND finds a receive posted or waits in
 * the send queue for one (RNR), what arrives is what the buffers held when
 * the post returned. */
static void test_inline_paths(void)
{
	struct ep a, b;
	hr_wc wc;
	uint32_t bad;
	CHECK_ST(ep_open(&a, prov, 1 << 16, 7, 0), HR_OK);
	CHECK_ST(ep_open(&b, prov, 1 << 16, 7, 0), HR_OK);
	CHECK_ST(ep_connect(&a, &b), HR_OK);
	for (int round = 0; round < 2; round++) {
		uint8_t d1[24], d2[40];
		memset(d1, 0x10 + round, sizeof d1);
		memset(d2, 0x20 + round, sizeof d2);
		hr_recv_wr r = mk_recv((uint64_t)round, &b, 4096, 4096);
		if (round == 0)
			CHECK_ST(hr_post_recv(b.qp, &r, 1, &bad), HR_OK);
		hr_send_wr s = {.wr_id = 10 + (uint64_t)round, .opcode = HR_OP_SEND,
				.flags = HR_SEND_SIGNALED | HR_SEND_INLINE, .num_sge = 2};
		s.sg[0] = (hr_sge){.addr = (uint64_t)(uintptr_t)d1, .length = sizeof d1};
		s.sg[1] = (hr_sge){.addr = (uint64_t)(uintptr_t)d2, .length = sizeof d2};
		CHECK_ST(hr_post_send(a.qp, &s, 1, &bad), HR_OK);
		memset(d1, 0xee, sizeof d1);
		memset(d2, 0xee, sizeof d2);
		if (round == 1)
			CHECK_ST(hr_post_recv(b.qp, &r, 1, &bad), HR_OK);
		CHECK(wait_wc(a.scq, &wc, 1, 5000) == 1);
		CHECK_ST((int)wc.status, HR_OK);
		CHECK(wc.wr_id == 10 + (uint64_t)round);
		CHECK(wait_wc(b.rcq, &wc, 1, 5000) == 1);
		CHECK_ST((int)wc.status, HR_OK);
		CHECK(wc.byte_len == sizeof d1 + sizeof d2);
		int ok = 1;
		for (size_t i = 0; i < sizeof d1 + sizeof d2; i++)
			ok &= b.buf[4096 + i] == (i < sizeof d1 ? 0x10 : 0x20) + round;
		CHECK(ok);
	}
	ep_close(&a);
	ep_close(&b);
}

/* Many threads post on their own QPs into one shared CQ: the multi-producer
 * ring must deliver every completion exactly once. */
struct mt_arg {
	struct ep *e;
	hr_qp *qp;
	int id;
	_Atomic int *polled; /* this producer's completions the poller has taken */
};

/* Completions a producer may have outstanding: a send queue slot is free
 * once its completion is generated, not polled (rxe), so without credits
 * the producers could overrun a CQ the poller has not kept up with, which
 * verbs leave to the application to prevent: T * MT_CREDITS <= the CQ. */
enum { MT_CREDITS = 64 };

static void *mt_post(void *p)
{
	struct mt_arg *a = p;
	uint32_t bad;
	for (int i = 0; i < 2000; i++) {
		while (i - atomic_load(a->polled) >= MT_CREDITS)
			sched_yield();
		hr_send_wr w = mk_send(((uint64_t)a->id << 32) | (uint64_t)i, HR_OP_RDMA_WRITE, HR_SEND_SIGNALED, a->e,
				       (size_t)a->id * 64, 8);
		w.remote_addr = (uint64_t)(uintptr_t)(a->e->buf + 4096 + a->id * 64);
		w.rkey = a->e->mr->rkey;
		while (hr_post_send(a->qp, &w, 1, &bad) == HR_ENORES)
			;
	}
	return NULL;
}

static void test_multi_producer(void)
{
	struct ep e;
	CHECK_ST(ep_open(&e, prov, 1 << 16, 7, 0), HR_OK);
	enum { T = 4 };
	hr_qp *qps[T], *peers[T];
	hr_cq *cq;
	CHECK_ST(hr_create_cq(e.dev, 1024, NULL, &cq), HR_OK);
	for (int i = 0; i < T; i++) {
		hr_qp_init in = {.send_cq = cq, .recv_cq = e.rcq, .max_send_wr = 64, .max_recv_wr = 4, .max_sge = 1};
		CHECK_ST(hr_create_qp(e.pd, &in, &qps[i]), HR_OK);
		CHECK_ST(hr_create_qp(e.pd, &in, &peers[i]), HR_OK);
		hr_qp_attr x, y;
		hr_qp_local_attr(qps[i], &x);
		hr_qp_local_attr(peers[i], &y);
		CHECK_ST(hr_qp_connect(qps[i], &y), HR_OK);
		CHECK_ST(hr_qp_connect(peers[i], &x), HR_OK);
	}
	pthread_t th[T];
	struct mt_arg args[T];
	_Atomic int polled[T];
	for (int i = 0; i < T; i++)
		atomic_init(&polled[i], 0);
	for (int i = 0; i < T; i++) {
		args[i] = (struct mt_arg){&e, qps[i], i, &polled[i]};
		pthread_create(&th[i], NULL, mt_post, &args[i]);
	}
	int seen[T] = {0}, total = 0, order_ok = 1;
	hr_wc wc[64];
	uint64_t deadline = hr_now_ns() + 20000000000ull;
	while (total < T * 2000 && hr_now_ns() < deadline) {
		int n = hr_poll_cq(cq, 64, wc);
		if (n < 0) {
			CHECK(n >= 0);
			break;
		}
		for (int i = 0; i < n; i++) {
			int id = (int)(wc[i].wr_id >> 32);
			if ((int)(wc[i].wr_id & 0xffffffff) != seen[id])
				order_ok = 0;
			seen[id]++;
			atomic_fetch_add(&polled[id], 1);
			if (wc[i].status != HR_OK)
				order_ok = 0;
		}
		total += n > 0 ? n : 0;
	}
	/* On a failure or the deadline the producers may wait for credits the
	 * poller no longer gives: release them so they can be joined. */
	for (int i = 0; i < T; i++)
		atomic_store(&polled[i], 1 << 30);
	for (int i = 0; i < T; i++)
		pthread_join(th[i], NULL);
	CHECK(total == T * 2000);
	CHECK(order_ok);
	for (int i = 0; i < T; i++) {
		hr_destroy_qp(qps[i]);
		hr_destroy_qp(peers[i]);
	}
	CHECK_ST(hr_destroy_cq(cq), HR_OK);
	ep_close(&e);
}

/* Across fork: the child opens its own device, the endpoints are swapped
 * over pipes, then the child echoes and finally dies; the parent must see
 * the death as retry-exceeded within a bounded time. guarded: the parent
 * is non-dumpable and the child may not ptrace it, so /proc/<parent>/fd is
 * closed to the child (checked) and it gets the parent's segments from
 * the parent's fd broker (hr_shm_fdpass.c). */
static void test_fork(int guarded)
{
	int p2c[2], c2p[2];
	CHECK(pipe(p2c) == 0 && pipe(c2p) == 0);
	if (guarded)
		CHECK(prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) == 0);
	pid_t pid = fork();
	if (pid == 0) {
		if (guarded) {
			char path[64];
			snprintf(path, sizeof(path), "/proc/%d/fd", (int)getppid());
			DIR *dp;
			if (drop_ptrace_cap() != 0)
				_exit(10);
			/* root may list the directory (it owns it), not open
			 * what it holds */
			if ((dp = opendir(path)) != NULL) {
				struct dirent *e;
				int opened = 0;
				while ((e = readdir(dp)) != NULL) {
					char fp[384];
					if (e->d_name[0] == '.')
						continue;
					snprintf(fp, sizeof(fp), "%s/%s", path, e->d_name);
					int fd = open(fp, O_RDONLY | O_CLOEXEC);
					if (fd >= 0) {
						opened++;
						close(fd);
					}
				}
				closedir(dp);
				if (opened)
					_exit(11); /* the parent's fds are open to us */
			}
		}
		struct ep c;
		if (ep_open(&c, prov, 1 << 16, 7, 1))
			_exit(2);
		hr_recv_wr r = mk_recv(1, &c, 0, 4096);
		uint32_t bad;
		hr_post_recv(c.qp, &r, 1, &bad);
		hr_qp_attr mine, theirs;
		hr_qp_local_attr(c.qp, &mine);
		if (write(c2p[1], &mine, sizeof(mine)) != sizeof(mine) ||
		    read(p2c[0], &theirs, sizeof(theirs)) != sizeof(theirs))
			_exit(3);
		if (hr_qp_connect(c.qp, &theirs))
			_exit(4);
		char go = 1;
		if (write(c2p[1], &go, 1) != 1)
			_exit(5);
		hr_wc wc;
		/* event mode: block on the channel */
		if (hr_wait_cq(c.rcq, c.ch, 1, &wc, 10000) != 1 || wc.status)
			_exit(6);
		hr_send_wr s = mk_send(2, HR_OP_SEND, HR_SEND_SIGNALED, &c, 0, wc.byte_len);
		hr_post_send(c.qp, &s, 1, &bad);
		if (wait_wc(c.scq, &wc, 1, 5000) != 1 || wc.status)
			_exit(7);
		char done;
		if (read(p2c[0], &done, 1) != 1)
			_exit(8);
		_exit(0); /* dies without closing anything */
	}
	close(p2c[0]); /* a child that exits early fails our reads, not hangs them */
	close(c2p[1]);
	struct ep a;
	CHECK_ST(ep_open(&a, prov, 1 << 16, 7, 0), HR_OK);
	hr_recv_wr r = mk_recv(3, &a, 8192, 4096);
	uint32_t bad;
	CHECK_ST(hr_post_recv(a.qp, &r, 1, &bad), HR_OK);
	hr_qp_attr mine, theirs;
	hr_qp_local_attr(a.qp, &mine);
	CHECK(read(c2p[0], &theirs, sizeof(theirs)) == sizeof(theirs));
	CHECK(write(p2c[1], &mine, sizeof(mine)) == sizeof(mine));
	CHECK_ST(hr_qp_connect(a.qp, &theirs), HR_OK);
	char go;
	CHECK(read(c2p[0], &go, 1) == 1);
	memcpy(a.buf, "hello across processes", 23);
	hr_send_wr s = mk_send(1, HR_OP_SEND, HR_SEND_SIGNALED, &a, 0, 23);
	CHECK_ST(hr_post_send(a.qp, &s, 1, &bad), HR_OK);
	hr_wc wc[2];
	CHECK(wait_wc(a.scq, wc, 1, 5000) == 1);
	CHECK_ST((int)wc[0].status, HR_OK);
	CHECK(wait_wc(a.rcq, wc, 1, 5000) == 1);
	CHECK(wc[0].byte_len == 23 && memcmp(a.buf + 8192, "hello across processes", 23) == 0);
	char done = 1;
	CHECK(write(p2c[1], &done, 1) == 1);
	int status;
	CHECK(waitpid(pid, &status, 0) == pid);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	/* The peer is gone: the next send fails with retry exceeded, quickly. */
	uint64_t t0 = hr_now_ns();
	CHECK_ST(hr_post_send(a.qp, &s, 1, &bad), HR_OK);
	CHECK(wait_wc(a.scq, wc, 1, 5000) == 1);
	CHECK_ST((int)wc[0].status, HR_ERETRY_EXC);
	CHECK(hr_now_ns() - t0 < 2000000000ull);
	ep_close(&a);
	close(p2c[1]);
	close(c2p[0]);
	if (guarded)
		CHECK(prctl(PR_SET_DUMPABLE, 1, 0, 0, 0) == 0);
}

int main(void)
{
	const char *env = getenv("HATRPC_PROVIDER");
	if (env && strcmp(env, "ibv") == 0)
		prov = "ibv";
	test_status_strings();
	test_ibv_no_device();
	test_default_ops();
	struct ep probe;
	int st = ep_open(&probe, prov, 4096, 7, 0);
	ep_close(&probe);
	if (st == HR_OK) {
		test_opcodes();
		test_peer_cpu();
		test_errors();
		test_inline_paths();
		test_multi_producer();
		test_fork(0);
		test_fork(1);
		test_fork_safe(prov);
		if (strcmp(prov, "shm") == 0) {
			test_shm_attack();
			test_shm_window();
		}
	} else {
		/* Only the ibv provider without hardware gets here. */
		CHECK_ST(st, HR_ENODEV);
	}
	printf("%s: %d checks, %d failures (provider %s; %d shm-only checks%s)\n", ct_failures ? "FAIL" : "PASS",
	       ct_checks, ct_failures, prov, shm_only, strcmp(prov, "shm") == 0 ? "" : " not applicable");
	return ct_failures ? 1 : 0;
}
