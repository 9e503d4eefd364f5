/* test_proto.c - C unit tests of the HatRPC engine (hr_proto*.c) on the shm
 * provider HATRPC_PROVIDER names (shm by default, or ibv): every protocol, both polling modes, 0 B to 4 MiB with the bytes
 * checked, the RFP server-reply switch, and timeouts; the adaptive spin's
 * tests are in test_proto_spin.c. Run by proto.mk (also under ASan+UBSan). */
#define _GNU_SOURCE
#include "proto_pair.h"

#include <pthread.h>
#include <sched.h>
#include <stddef.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static void test_protocols(uint32_t event)
{
	static const uint64_t sizes[] = {0, 1, 64, 4096, 4097, 8193, 65536, 65537, 1u << 20, 4u << 20};
	uint8_t *req = malloc(4u << 20);
	for (uint32_t proto = 0; proto < HR_PROTO_COUNT; proto++) {
		struct pair pr;
		int st = connect_pair(&pr, event, event, 1u << 20);
		if (st == HR_OK) {
			atomic_store(&pr.proto, proto);
			st = pthread_create(&pr.th, NULL, server, &pr) ? HR_EIO : HR_OK;
		}
		if (st != HR_OK) {
			fprintf(stderr, "setup %u: %s\n", proto, hr_status_str(st));
			failures++;
			close_pair(&pr, 0);
			continue;
		}
		for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
			uint64_t n = sizes[i];
			fill(req, n, (uint8_t)(proto * 13 + i));
			void *resp;
			uint64_t rl;
			st = hr_ep_call(pr.cli, proto, req, n, 10000, 1, &resp, &rl);
			int ok = st == HR_OK && rl == n;
			for (uint64_t k = 0; ok && k < n; k++)
				{
				unsigned got = ((const uint8_t *)resp)[k], want = 0xffu ^ req[k];
				ok = got == want;
			}
			if (!ok) {
				fprintf(stderr, "proto %u event %u size %llu: %s len %llu\n", proto, event,
					(unsigned long long)n, hr_status_str(st), (unsigned long long)rl);
				failures++;
				break;
			}
		}
		close_pair(&pr, 1);
	}
	free(req);
}

static void test_rfp_switch(void)
{
	struct pair pr;
	/* R = 20000 READs: far above the fast server's microseconds; the slow
	 * server waits for the client (slow_answer). */
	CHECK_ST(connect_pair(&pr, 0, 0, 20000));
	atomic_store(&pr.proto, HR_PROTO_RFP);
	CHECK(pthread_create(&pr.th, NULL, server, &pr) == 0);
	uint8_t req[32] = {1, 2, 3};
	void *resp;
	uint64_t rl;
	hr_ep_stats s;
	atomic_store(&pr.slow, 1);
	for (int i = 0; i < 2; i++) {
		hr_ep_stats_get(pr.cli, &s);
		atomic_store(&pr.base_exceeded, s.rfp_exceeded);
		int st = hr_ep_call(pr.cli, HR_PROTO_RFP, req, sizeof req, 10000, 1, &resp, &rl);
		if (st != HR_OK) {
			fprintf(stderr, "rfp slow call: %s\n", hr_status_str(st));
			failures++;
			close_pair(&pr, 1);
			return;
		}
	}
	hr_ep_stats_get(pr.cli, &s);
	int to_reply = s.rfp_mode == 1 && s.rfp_to_reply == 1;
	atomic_store(&pr.slow, 0);
	int st = hr_ep_call(pr.cli, HR_PROTO_RFP, req, sizeof req, 10000, 1, &resp, &rl);
	hr_ep_stats_get(pr.cli, &s);
	close_pair(&pr, 1);
	CHECK(to_reply);
	CHECK_ST(st);
	CHECK(s.rfp_reply_calls == 1 && s.rfp_to_fetch == 1 && s.rfp_mode == 0);
}

/* A call the server never answers times out, and not before its timeout:
 * the deadline is fixed at the wait's first clock read, which must not
 * make it fire early. Timeout 0 gives up before sending. */
static void test_timeout(uint32_t event)
{
	struct pair pr;
	CHECK_ST(connect_pair(&pr, event, 0, 5));
	void *resp;
	uint64_t rl;
	uint8_t b[8] = {0};
	int zero = hr_ep_call(pr.cli, HR_PROTO_EAGER, b, sizeof b, 0, 1, &resp, &rl);
	int zero_broken = hr_ep_broken(pr.cli);
	uint64_t t0 = hr_now_ns();
	int st = hr_ep_call(pr.cli, HR_PROTO_EAGER, b, sizeof b, 20, 1, &resp, &rl);
	uint64_t waited = hr_now_ns() - t0;
	int broken = hr_ep_broken(pr.cli);
	int again = hr_ep_call(pr.cli, HR_PROTO_EAGER, b, sizeof b, 20, 2, &resp, &rl);
	/* The server side: an idle wait is benign. */
	void *req;
	uint64_t len;
	int idle = hr_ep_recv(pr.srv, 0, 5, 1, &req, &len);
	close_pair(&pr, 0);
	CHECK(zero == HR_ETIMEDOUT && zero_broken == 0);
	CHECK(st == HR_ETIMEDOUT && broken == HR_ETIMEDOUT && again == HR_ESTATE);
	CHECK(waited >= 20 * 1000000ull);
	CHECK(idle == HR_OK || idle == HR_ETIMEDOUT);
}

static void test_bad_config(void)
{
	hr_dev *d;
	hr_dev_opts o = {0};
	CHECK_ST(hr_open(prov, &o, &d));
	hr_pd *pd;
	int st = hr_alloc_pd(d, &pd);
	hr_ep_cfg c = cfg_of(0, 5);
	c.signal_interval = c.max_send_wr;
	hr_ep *ep = NULL;
	int bad = st == HR_OK ? hr_ep_create(d, pd, &c, &ep) : st;
	if (st == HR_OK)
		hr_free_pd(pd);
	hr_close(d);
	CHECK(st == HR_OK && bad == HR_EINVAL && ep == NULL);
}

/* ---- torn and corrupted memory-polled messages: the sums that stayed
 * (hr_msg) must still refuse every message that has not fully landed. ---- */

#define TORN_N 200 /* payload: past F = 256 with header and tail, so a fetch reads twice */

/* A whole memory-polled message of type, seq and flags into m (header,
 * TORN_N payload bytes, tail); returns its length. */
static uint64_t torn_msg(uint8_t *m, uint32_t type, uint64_t seq, uint32_t flags, uint8_t seed)
{
	hr_msg h;
	memset(&h, 0, sizeof h);
	h.type = type;
	h.flags = flags;
	h.len = TORN_N;
	h.seq = seq;
	h.proto = HR_PROTO_RFP;
	fill(m + HR_MSG_HDR, TORN_N, seed);
	h.canary = hrp_sum(m + HR_MSG_HDR, TORN_N, seq);
	memcpy(m + HR_MSG_HDR + TORN_N, &h.canary, HR_MSG_TAIL);
	h.sum = hrp_msg_sum(&h);
	memcpy(m, &h, sizeof h);
	return HR_MSG_HDR + TORN_N + HR_MSG_TAIL;
}

/* A busy-polling server finds RFP requests by reading its pre-known buffer
 * with no completion: a request whose WRITE has landed only in part, in
 * any byte order, or whose bytes differ from what was summed, is not taken
 * (its receive just idles, the endpoint intact); the whole one is. */
static void test_torn_rfp_request(void)
{
	struct pair pr;
	CHECK_ST(connect_pair(&pr, 0, 0, 5));
	hr_ep_desc ds;
	hr_ep_local(pr.srv, &ds);
	uint8_t *dbuf = (uint8_t *)(uintptr_t)ds.direct_addr;
	uint8_t m[HR_MSG_HDR + TORN_N + HR_MSG_TAIL], stale[sizeof m];
	uint64_t total = torn_msg(m, HRM_DATA, 1, HRM_F_FETCH, 5);
	/* What the buffer held before differs in every byte, so a part not
	 * yet landed is a part that is wrong. */
	for (uint64_t k = 0; k < total; k++)
		stale[k] = (uint8_t)(m[k] ^ 0x5a);
	void *req;
	uint64_t len;
	int taken = 0, st;
	char what[96];
	/* Landed in part: a prefix, a suffix, every 8-byte word but one. */
	for (uint64_t k = 0; k < total && !taken; k += 4) {
		for (int form = 0; form < 3 && !taken; form++) {
			memcpy(dbuf, stale, total);
			if (form == 0) {
				memcpy(dbuf, m, k);
				snprintf(what, sizeof what, "first %llu bytes", (unsigned long long)k);
			} else if (form == 1) {
				memcpy(dbuf + k, m + k, total - k);
				if (k == 0)
					continue; /* the whole message */
				snprintf(what, sizeof what, "from byte %llu on", (unsigned long long)k);
			} else {
				if (k % 8 != 0)
					continue;
				memcpy(dbuf, m, total);
				memcpy(dbuf + k, stale + k, 8);
				snprintf(what, sizeof what, "all but bytes %llu-%llu", (unsigned long long)k,
					 (unsigned long long)k + 7);
			}
			st = hr_ep_recv(pr.srv, 1, -1, 1, &req, &len);
			taken = st == HR_OK;
		}
	}
	/* Corrupted whole: every byte of the header and tail, every 16th of
	 * the payload, one bit flipped. */
	for (uint64_t k = 0; k < total && !taken; k++) {
		if (k >= HR_MSG_HDR && k < HR_MSG_HDR + TORN_N && k % 16 != 0)
			continue;
		memcpy(dbuf, m, total);
		dbuf[k] ^= 0x10;
		snprintf(what, sizeof what, "byte %llu flipped", (unsigned long long)k);
		st = hr_ep_recv(pr.srv, 1, -1, 1, &req, &len);
		taken = st == HR_OK;
	}
	if (taken)
		fprintf(stderr, "torn RFP request taken: %s\n", what);
	int broken = hr_ep_broken(pr.srv);
	memcpy(dbuf, m, total);
	st = hr_ep_recv(pr.srv, 10000, -1, 1, &req, &len);
	int same = st == HR_OK && len == TORN_N && memcmp(req, m + HR_MSG_HDR, TORN_N) == 0;
	close_pair(&pr, 0);
	CHECK(!taken && broken == HR_OK);
	CHECK_ST(st);
	CHECK(same);
}

struct fetcher {
	struct pair *pr;
	uint8_t req[16];
	void *resp;
	uint64_t rl;
	int st;
	atomic_int done;
};

static void *fetch_call(void *arg)
{
	struct fetcher *f = arg;
	f->st = hr_ep_call(f->pr->cli, HR_PROTO_RFP, f->req, sizeof f->req, 60000, 1, &f->resp, &f->rl);
	atomic_store(&f->done, 1);
	return NULL;
}

/* Whether the fetching call is still going after two more fetch READs than
 * when asked: one of them started after the caller's last store, so it saw
 * the response as it now is (a READ racing a store may see either). */
static int still_fetching(struct fetcher *f)
{
	hr_ep_stats s;
	hr_ep_stats_get(f->pr->cli, &s);
	uint64_t want = s.rfp_fetches + 2, deadline = hr_now_ns() + 60000000000ull;
	while (!atomic_load(&f->done) && hr_now_ns() < deadline) {
		hr_ep_stats_get(f->pr->cli, &s);
		if (s.rfp_fetches >= want)
			return 1;
		sched_yield();
	}
	return 0;
}

/* An RFP client READs the server's response buffer while the server may
 * still be copying into it: a response whose payload or tail is not all
 * there yet, or whose header is not (its sum last), is fetched again, and
 * the whole one is taken. The server here is this thread, publishing by
 * hand, each stage adding bytes (a READ racing a stage sees bytes of it or
 * of the one before, never a whole response early). */
static void test_torn_rfp_response(void)
{
	struct pair pr;
	CHECK_ST(connect_pair(&pr, 0, 0, 1u << 20));
	hr_ep_desc ds;
	hr_ep_local(pr.srv, &ds);
	uint8_t *rbuf = (uint8_t *)(uintptr_t)ds.resp_addr;
	uint8_t m[HR_MSG_HDR + TORN_N + HR_MSG_TAIL];
	int ok = 1;
	for (uint64_t seq = 1; seq <= 2 && ok; seq++) {
		uint64_t total = torn_msg(m, HRM_RESP, seq, 0, (uint8_t)(3 * seq));
		memset(rbuf, 0xee, total);
		atomic_thread_fence(memory_order_seq_cst);
		struct fetcher f = {.pr = &pr};
		if (pthread_create(&pr.th, NULL, fetch_call, &f) != 0) {
			ok = 0;
			break;
		}
		ok = still_fetching(&f);
		if (seq == 1) {
			/* The header first, then the payload 8 bytes at a time,
			 * then the tail. */
			memcpy(rbuf, m, HR_MSG_HDR);
			for (uint64_t k = HR_MSG_HDR; ok && k < total; k += 8) {
				atomic_thread_fence(memory_order_seq_cst);
				ok = still_fetching(&f);
				memcpy(rbuf + k, m + k, 8);
			}
		} else {
			/* Payload and tail first, then the header without its
			 * sum and with a field that differs from the summed
			 * one, then the sum, then that field. */
			hr_msg h;
			memcpy(&h, m, sizeof h);
			h.server_ns = 77;
			memcpy(rbuf + HR_MSG_HDR, m + HR_MSG_HDR, total - HR_MSG_HDR);
			memcpy(rbuf, &h, offsetof(hr_msg, sum));
			atomic_thread_fence(memory_order_seq_cst);
			ok = ok && still_fetching(&f);
			memcpy(rbuf + offsetof(hr_msg, sum), &h.sum, sizeof h.sum);
			atomic_thread_fence(memory_order_seq_cst);
			ok = ok && still_fetching(&f);
			memcpy(rbuf + offsetof(hr_msg, server_ns), m + offsetof(hr_msg, server_ns), sizeof h.server_ns);
		}
		atomic_thread_fence(memory_order_seq_cst);
		if (!ok)
			fprintf(stderr, "torn RFP response %llu fetched before it was whole\n", (unsigned long long)seq);
		pthread_join(pr.th, NULL);
		int same = f.st == HR_OK && f.rl == TORN_N && memcmp(f.resp, m + HR_MSG_HDR, TORN_N) == 0;
		if (!same)
			fprintf(stderr, "torn RFP response %llu: %s len %llu\n", (unsigned long long)seq,
				hr_status_str(f.st), (unsigned long long)f.rl);
		ok = ok && same;
	}
	close_pair(&pr, 0);
	CHECK(ok);
}

/* ---- two processes: the server endpoint lives in a forked child with its
 * own shm device; descriptors travel over a socketpair. ---- */

static const uint64_t xsizes[] = {0, 100, 5000, 70000, 3u << 20};
#define NX (sizeof xsizes / sizeof *xsizes)

struct xdesc {
	hr_qp_attr qp;
	hr_ep_desc ep;
};

static int xfer(int fd, const struct xdesc *mine, struct xdesc *peer)
{
	if (write(fd, mine, sizeof *mine) != (ssize_t)sizeof *mine)
		return HR_EIO;
	size_t got = 0;
	while (got < sizeof *peer) {
		ssize_t n = read(fd, (char *)peer + got, sizeof *peer - got);
		if (n <= 0)
			return HR_EIO;
		got += (size_t)n;
	}
	return HR_OK;
}

/* Opens a device and an endpoint and connects it to the peer over fd. */
static int xside(int fd, uint32_t event, hr_dev **dev, hr_pd **pd, hr_ep **ep)
{
	hr_dev_opts o = {.shm_size = 128ull << 20};
	int st = hr_open(prov, &o, dev);
	if (st || (st = hr_alloc_pd(*dev, pd)))
		return st;
	hr_ep_cfg c = cfg_of(event, 1u << 20);
	if ((st = hr_ep_create(*dev, *pd, &c, ep)))
		return st;
	struct xdesc mine, peer;
	memset(&mine, 0, sizeof mine);
	if ((st = hr_qp_local_attr(hr_ep_qp(*ep), &mine.qp)))
		return st;
	hr_ep_local(*ep, &mine.ep);
	if ((st = xfer(fd, &mine, &peer)) || (st = hr_qp_connect(hr_ep_qp(*ep), &peer.qp)) ||
	    (st = hr_ep_set_peer(*ep, &peer.ep)))
		return st;
	/* Both sides RTS before anyone sends. */
	char b = 'R';
	if (write(fd, &b, 1) != 1 || read(fd, &b, 1) != 1)
		return HR_EIO;
	return HR_OK;
}

static void xclose(hr_dev *dev, hr_pd *pd, hr_ep *ep)
{
	hr_ep_destroy(ep);
	if (pd)
		hr_free_pd(pd);
	if (dev)
		hr_close(dev);
}

static int xchild(int fd, uint32_t event)
{
	hr_dev *dev = NULL;
	hr_pd *pd = NULL;
	hr_ep *ep = NULL;
	int st = xside(fd, event, &dev, &pd, &ep);
	uint8_t *out = malloc(3u << 20);
	for (uint32_t proto = 0; st == HR_OK && proto < HR_PROTO_COUNT; proto++) {
		for (size_t i = 0; st == HR_OK && i < NX; i++) {
			void *req;
			uint64_t len;
			if ((st = hr_ep_recv(ep, 10000, 10000, 1, &req, &len)))
				break;
			for (uint64_t k = 0; k < len; k++)
				out[k] = (uint8_t)(0xffu ^ ((const uint8_t *)req)[k]);
			st = hr_ep_reply(ep, proto, out, len, 10000, 1);
		}
	}
	/* Wait for the parent to finish reading before the memory goes. */
	char b;
	if (read(fd, &b, 1) != 1 && st == HR_OK)
		st = HR_EIO;
	free(out);
	xclose(dev, pd, ep);
	return st;
}

static void test_cross_process(uint32_t event)
{
	int sv[2];
	CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
	pid_t pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		close(sv[0]);
		_exit(xchild(sv[1], event));
	}
	close(sv[1]);
	hr_dev *dev = NULL;
	hr_pd *pd = NULL;
	hr_ep *ep = NULL;
	int st = xside(sv[0], event, &dev, &pd, &ep);
	uint8_t *req = malloc(3u << 20);
	for (uint32_t proto = 0; st == HR_OK && proto < HR_PROTO_COUNT; proto++) {
		for (size_t i = 0; st == HR_OK && i < NX; i++) {
			uint64_t n = xsizes[i];
			fill(req, n, (uint8_t)(proto + i));
			void *resp;
			uint64_t rl;
			st = hr_ep_call(ep, proto, req, n, 10000, 1, &resp, &rl);
			if (st == HR_OK && rl != n)
				st = HR_EIO;
			for (uint64_t k = 0; st == HR_OK && k < n; k++) {
				unsigned got = ((const uint8_t *)resp)[k], want = 0xffu ^ req[k];
				if (got != want)
					st = HR_EIO;
			}
			if (st != HR_OK)
				fprintf(stderr, "cross-process proto %u size %llu: %s\n", proto,
					(unsigned long long)n, hr_status_str(st));
		}
	}
	char b = 'D';
	if (write(sv[0], &b, 1) != 1 && st == HR_OK)
		st = HR_EIO;
	int ws = 0;
	waitpid(pid, &ws, 0);
	close(sv[0]);
	free(req);
	xclose(dev, pd, ep);
	CHECK_ST(st);
	CHECK(WIFEXITED(ws) && WEXITSTATUS(ws) == 0);
}

/* The spare staging buffer (hr_ep_tx_spare): a server that fills each
 * reply in the lease for the one after it, before the one in hand goes
 * out, as a runtime's other thread would while the exchange runs. Every
 * reply arrives whole with its own bytes, the lease filled ahead is not
 * touched by the exchange that runs meanwhile, and a reply from the spare
 * goes without a copy: the staging buffer is then where it was filled. */
struct spare_srv {
	struct pair *pr;
	uint64_t n;
	int calls, bad, swapped; /* bad: the lease filled ahead changed; swapped: replies sent in place */
};

static void *spare_server(void *arg)
{
	struct spare_srv *ss = arg;
	hr_ep *srv = ss->pr->srv;
	uint8_t *next = NULL;
	for (int k = 0; k < ss->calls; k++) {
		void *req;
		uint64_t len;
		if (hr_ep_recv(srv, 10000, -1, 1, &req, &len) != HR_OK)
			break;
		uint8_t *out = next ? next : hr_ep_reply_buf(srv, ss->n);
		if (!out)
			break;
		if (!next)
			fill(out, ss->n, (uint8_t)k);
		hr_ep_lease_view v;
		hr_ep_leases(srv, &v);
		int from_spare = v.spare && out == v.spare;
		next = from_spare ? hr_ep_tx(srv, ss->n) : hr_ep_tx_spare(srv, ss->n);
		if (next)
			fill(next, ss->n, (uint8_t)(k + 1));
		if (hr_ep_reply(srv, atomic_load(&ss->pr->proto), out, ss->n, -1, 1) != HR_OK)
			break;
		hr_ep_leases(srv, &v);
		if (from_spare && v.tx == out && v.spare != out)
			ss->swapped++;
		for (uint64_t i = 0; next && i < ss->n && !ss->bad; i++)
			ss->bad += next[i] != (uint8_t)(k + 1 + i * 7);
	}
	return NULL;
}

static void test_spare(uint32_t event)
{
	static const uint64_t sizes[] = {64, 5000, 65536, 1u << 20};
	uint8_t req[16] = {0};
	for (uint32_t proto = 0; proto < HR_PROTO_COUNT; proto++) {
		for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
			struct pair pr;
			struct spare_srv ss = {.pr = &pr, .n = sizes[i], .calls = 6};
			CHECK_ST(connect_pair(&pr, event, event, 1u << 20));
			atomic_store(&pr.proto, proto);
			int ok = pthread_create(&pr.th, NULL, spare_server, &ss) == 0;
			CHECK(ok);
			for (int k = 0; ok && k < ss.calls; k++) {
				void *resp;
				uint64_t rl;
				int st = hr_ep_call(pr.cli, proto, req, sizeof req, 10000, 1, &resp, &rl);
				ok = st == HR_OK && rl == ss.n;
				for (uint64_t j = 0; ok && j < rl; j++)
					ok = ((const uint8_t *)resp)[j] == (uint8_t)(k + j * 7);
				if (!ok)
					fprintf(stderr, "spare: proto %u event %u size %llu call %d: %s\n", proto, event,
						(unsigned long long)ss.n, k, hr_status_str(st));
			}
			pthread_join(pr.th, NULL);
			close_pair(&pr, 0);
			CHECK(ok);
			CHECK(ss.bad == 0);
			/* Every reply but the first went from the lease filled
			 * ahead, the spare by then: it swapped in each time. An
			 * RFP reply that fits the response buffer is copied there
			 * for fetching instead (never staged). */
			CHECK(ss.swapped == (proto == HR_PROTO_RFP && ss.n <= cfg_of(0, 0).resp_size ? 0 : ss.calls - 1));
		}
	}
}

int main(void)
{
	const char *env = getenv("HATRPC_PROVIDER");
	prov = hr_provider_by_name(env && strcmp(env, "ibv") == 0 ? "ibv" : "shm");
	test_protocols(0);
	test_protocols(1);
	test_rfp_switch();
	test_timeout(0);
	test_timeout(1);
	test_spin_skip();
	test_spin_handoff(HANDOFF_ONE_CPU);
	test_spin_handoff(HANDOFF_AWAY);
	test_spin_handoff(HANDOFF_UNKNOWN);
	test_spin_handoff(HANDOFF_AWAY_ROW);
	test_spin_handoff(HANDOFF_MOVED);
	test_move_target();
	test_move_away();
	test_bad_config();
	test_torn_rfp_request();
	test_torn_rfp_response();
	test_cross_process(0);
	test_cross_process(1);
	test_spare(0);
	test_spare(1);
	if (failures) {
		fprintf(stderr, "test_proto: %d failure(s)\n", failures);
		return 1;
	}
	printf("test_proto: ok (provider %s)\n", prov->name);
	return 0;
}
