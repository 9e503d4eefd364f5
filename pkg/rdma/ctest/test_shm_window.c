/* test_shm_window.c - shm only: deregistering an MR waits out the remote
 * accesses that may have seen its key, through the in-flight windows of
 * the PD's QPs (there is no per-MR pin). An initiator stopped inside a
 * window is simulated by opening the target QP's window by hand, as
 * exec_wr does: deregistration returns only once the window moves, at
 * once if the initiator's process is dead, and fails after the drain wait
 * if the window never moves. A QP whose window is open is not reused. */
#define _GNU_SOURCE
#include "ctest_util.h"
#include "../shm_internal.h"

#include <pthread.h>
#include <stdatomic.h>
#include <time.h>

struct dereg_arg {
	hr_mr *mr;
	int st;
	_Atomic int done;
};

static void *dereg_thread(void *p)
{
	struct dereg_arg *a = p;
	a->st = hr_dereg_mr(a->mr);
	atomic_store(&a->done, 1);
	return NULL;
}

static void sleep_ms(int ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
	nanosleep(&ts, NULL);
}

static hr_mr *extra_mr(struct ep *e, void **buf)
{
	hr_mr *mr = NULL;
	if (hr_alloc_buf(e->pd, 4096, buf) != HR_OK)
		return NULL;
	if (hr_reg_mr(e->pd, *buf, 4096, HR_ACCESS_LOCAL_WRITE | HR_ACCESS_REMOTE_WRITE, &mr) != HR_OK) {
		hr_free_buf(e->pd, *buf, 4096);
		return NULL;
	}
	return mr;
}

void test_shm_window(void)
{
	struct ep a, b;
	hr_wc wc;
	uint32_t bad;
	CHECK_ST(ep_open(&a, "shm", 1 << 16, 7, 0), HR_OK);
	CHECK_ST(ep_open(&b, "shm", 1 << 16, 7, 0), HR_OK);
	CHECK_ST(ep_connect(&a, &b), HR_OK);
	struct shm_qp *bq = (struct shm_qp *)b.qp;
	_Atomic uint32_t *win = &bq->pdp->seg.hdr->qp[bq->idx].inflight;

	/* Real traffic leaves the window shut, having moved by two per WR. */
	uint32_t w0 = atomic_load(win);
	hr_send_wr w = mk_send(1, HR_OP_RDMA_WRITE, HR_SEND_SIGNALED, &a, 0, 64);
	w.remote_addr = (uint64_t)(uintptr_t)b.buf;
	w.rkey = b.mr->rkey;
	CHECK_ST(hr_post_send(a.qp, &w, 1, &bad), HR_OK);
	CHECK(wait_wc(a.scq, &wc, 1, 5000) == 1);
	CHECK_ST((int)wc.status, HR_OK);
	CHECK(atomic_load(win) == w0 + 2);

	/* An open window holds deregistration until it moves. */
	void *buf;
	struct dereg_arg da = {.mr = extra_mr(&b, &buf)};
	CHECK(da.mr != NULL);
	uint32_t v = atomic_fetch_add(win, 1) + 1;
	pthread_t th;
	CHECK(pthread_create(&th, NULL, dereg_thread, &da) == 0);
	sleep_ms(50);
	CHECK(!atomic_load(&da.done));
	atomic_store(win, v + 1);
	pthread_join(th, NULL);
	CHECK_ST(da.st, HR_OK);
	hr_free_buf(b.pd, buf, 4096);

	/* The initiator's process died inside the window: nothing waits. */
	struct shm_peer *peer = atomic_load(&bq->peer);
	CHECK(peer != NULL);
	hr_mr *mr = extra_mr(&b, &buf);
	CHECK(mr != NULL);
	v = atomic_fetch_add(win, 1) + 1;
	atomic_store(&peer->dead, 1);
	uint64_t t0 = hr_now_ns();
	CHECK_ST(hr_dereg_mr(mr), HR_OK);
	CHECK(hr_now_ns() - t0 < SHM_DRAIN_WAIT_NS / 2);
	atomic_store(&peer->dead, 0);
	hr_free_buf(b.pd, buf, 4096);

	/* A live initiator that never leaves: the drain wait runs out. */
	mr = extra_mr(&b, &buf);
	CHECK(mr != NULL);
	t0 = hr_now_ns();
	CHECK_ST(hr_dereg_mr(mr), HR_EIO);
	CHECK(hr_now_ns() - t0 >= SHM_DRAIN_WAIT_NS);
	hr_free_buf(b.pd, buf, 4096);

	/* Another PD's MR does not wait for this PD's windows. */
	hr_pd *pd2;
	CHECK_ST(hr_alloc_pd(b.dev, &pd2), HR_OK);
	void *buf2;
	hr_mr *mr2 = NULL;
	CHECK_ST(hr_alloc_buf(pd2, 4096, &buf2), HR_OK);
	CHECK_ST(hr_reg_mr(pd2, buf2, 4096, HR_ACCESS_LOCAL_WRITE | HR_ACCESS_REMOTE_WRITE, &mr2), HR_OK);
	t0 = hr_now_ns();
	CHECK_ST(hr_dereg_mr(mr2), HR_OK);
	CHECK(hr_now_ns() - t0 < SHM_DRAIN_WAIT_NS / 2);
	hr_free_buf(pd2, buf2, 4096);
	CHECK_ST(hr_free_pd(pd2), HR_OK);

	atomic_store(win, v + 1);
	ep_close(&a);
	ep_close(&b);
}
