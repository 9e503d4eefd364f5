#define _GNU_SOURCE
#include "ctest_util.h"

#include <linux/capability.h>
#include <sys/syscall.h>
#include <unistd.h>

int ct_failures, ct_checks;

int ep_open(struct ep *e, const char *prov, size_t buflen, uint32_t rnr_retry, int events)
{
	memset(e, 0, sizeof(*e));
	hr_dev_opts o = {.gid_index = -1, .shm_size = 64u << 20, .rnr_timer_us = 20, .peer_check_ms = 2};
	int st = hr_open(hr_provider_by_name(prov), &o, &e->dev);
	if (st)
		return st;
	if ((st = hr_alloc_pd(e->dev, &e->pd)))
		return st;
	if (events && (st = hr_create_chan(e->dev, &e->ch)))
		return st;
	if ((st = hr_create_cq(e->dev, 256, e->ch, &e->scq)) || (st = hr_create_cq(e->dev, 256, e->ch, &e->rcq)))
		return st;
	hr_qp_init in = {.send_cq = e->scq, .recv_cq = e->rcq, .max_send_wr = 64, .max_recv_wr = 64,
			 .max_sge = 2, .max_inline = 64, .rnr_retry = rnr_retry};
	if ((st = hr_create_qp(e->pd, &in, &e->qp)))
		return st;
	void *p;
	if ((st = hr_alloc_buf(e->pd, buflen, &p)))
		return st;
	e->buf = p;
	e->len = buflen;
	return hr_reg_mr(e->pd, p, buflen, 15, &e->mr);
}

void ep_close(struct ep *e)
{
	if (e->mr)
		hr_dereg_mr(e->mr);
	if (e->buf)
		hr_free_buf(e->pd, e->buf, e->len);
	if (e->qp)
		hr_destroy_qp(e->qp);
	if (e->scq)
		hr_destroy_cq(e->scq);
	if (e->rcq)
		hr_destroy_cq(e->rcq);
	if (e->ch)
		hr_destroy_chan(e->ch);
	if (e->pd)
		hr_free_pd(e->pd);
	if (e->dev)
		hr_close(e->dev);
	memset(e, 0, sizeof(*e));
}

int ep_connect(struct ep *a, struct ep *b)
{
	hr_qp_attr aa, ba;
	int st;
	if ((st = hr_qp_local_attr(a->qp, &aa)) || (st = hr_qp_local_attr(b->qp, &ba)))
		return st;
	if ((st = hr_qp_connect(a->qp, &ba)))
		return st;
	return hr_qp_connect(b->qp, &aa);
}

int wait_wc(hr_cq *cq, hr_wc *wc, int n, int timeout_ms)
{
	int got = 0;
	uint64_t deadline = hr_now_ns() + (uint64_t)timeout_ms * 1000000ull;
	while (got < n && hr_now_ns() < deadline) {
		int k = hr_poll_spin(cq, n - got, wc + got, 1000000);
		if (k < 0)
			return k;
		got += k;
	}
	return got;
}

hr_send_wr mk_send(uint64_t id, uint32_t op, uint32_t flags, struct ep *e, size_t off, uint32_t len)
{
	hr_send_wr w;
	memset(&w, 0, sizeof(w));
	w.wr_id = id;
	w.opcode = op;
	w.flags = flags;
	w.num_sge = 1;
	w.sg[0].addr = (uint64_t)(uintptr_t)(e->buf + off);
	w.sg[0].length = len;
	w.sg[0].lkey = e->mr->lkey;
	return w;
}

hr_recv_wr mk_recv(uint64_t id, struct ep *e, size_t off, uint32_t len)
{
	hr_recv_wr w;
	memset(&w, 0, sizeof(w));
	w.wr_id = id;
	w.num_sge = 1;
	w.sg[0].addr = (uint64_t)(uintptr_t)(e->buf + off);
	w.sg[0].length = len;
	w.sg[0].lkey = e->mr->lkey;
	return w;
}

/* drop_ptrace_cap takes CAP_SYS_PTRACE out of the effective set, so that
 * even root is refused /proc/<pid>/fd of a non-dumpable process. */
int drop_ptrace_cap(void)
{
	struct __user_cap_header_struct h = {.version = _LINUX_CAPABILITY_VERSION_3};
	struct __user_cap_data_struct d[2];
	if (syscall(SYS_capget, &h, d) != 0)
		return -1;
	d[CAP_SYS_PTRACE / 32].effective &= ~(1u << (CAP_SYS_PTRACE % 32));
	return (int)syscall(SYS_capset, &h, d);
}
