/* hr_shm_cq.c - shm provider: completion channels and completion queues.
 *
 * A CQ's ring is private to its owner; only the owner's threads produce
 * into it (send completions). Receive completions are produced by the
 * remote initiator into the target QP's inbound ring (shm_icq_sh), which
 * lives in the QP's PD segment, so a peer reaches the completions of its own
 * connection only — as on a NIC, where no peer touches the server's CQ. The
 * owner's poll drains its ring and then the inbound rings of the QPs that
 * use the CQ for receives, and reports nothing it did not validate: the
 * receive a completion names must be the next one posted on that QP (or an
 * outstanding one of its SRQ), wr_id and the buffer length come from the
 * owner's own record, and the QP number from the ring's QP. An entry that
 * fails puts that QP — the sender's own connection — into the error state. */
#define _GNU_SOURCE
#include "shm_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- completion channels: an epoll set of wake-up fds ----
 *
 * The channel's fd is the epoll fd: readable while a wake-up is unread
 * (possibly once more after its event was taken: readiness is a hint, as
 * the flags below are the events). Local completions ring the channel's
 * eventfd; a peer rings the wake pipe of the QP it is connected to, which
 * it can do for no other QP — so no peer can wake, or silence, a channel
 * through another's connection. */

int shm_create_chan(hr_dev *hd, hr_chan **out)
{
	struct shm_chan *c = calloc(1, sizeof(*c));
	if (!c)
		return HR_ENOMEM;
	c->prov = &hr_shm_provider;
	c->dev = (struct shm_dev *)hd;
	c->epfd = epoll_create1(EPOLL_CLOEXEC);
	c->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	struct epoll_event ev = {.events = EPOLLIN, .data.fd = c->efd};
	if (c->epfd < 0 || c->efd < 0 || epoll_ctl(c->epfd, EPOLL_CTL_ADD, c->efd, &ev) != 0) {
		if (c->epfd >= 0)
			close(c->epfd);
		if (c->efd >= 0)
			close(c->efd);
		free(c);
		return HR_EIO;
	}
	pthread_mutex_init(&c->lock, NULL);
	*out = (hr_chan *)c;
	return HR_OK;
}

int shm_destroy_chan(hr_chan *hc)
{
	struct shm_chan *c = (struct shm_chan *)hc;
	if (c->cqs)
		return HR_ESTATE;
	close(c->epfd);
	close(c->efd);
	pthread_mutex_destroy(&c->lock);
	free(c);
	return HR_OK;
}

int shm_chan_fd(hr_chan *hc) { return ((struct shm_chan *)hc)->epfd; }

static void chan_ring(struct shm_cq *cq)
{
	atomic_store(&cq->pending, 1);
	uint64_t one = 1;
	(void)!write(cq->chan->efd, &one, sizeof(one));
}

/* ---- wake pipes ---- */

/* A pipe per QP whose receive CQ has a channel, held as one read-write
 * fd (a FIFO open of its read end through /proc): that fd is in the
 * channel's set and is what a peer opens or is passed. A peer's reference
 * is read-write too, so the pipe always has a reader: the peer's write
 * never raises SIGPIPE, even after we closed ours. */
int shm_wake_create(struct shm_qp *qp)
{
	qp->wake_rw = -1;
	if (!qp->rcq->chan)
		return HR_OK;
	int p[2];
	if (pipe2(p, O_CLOEXEC | O_NONBLOCK) != 0)
		return HR_EIO;
	char path[64];
	snprintf(path, sizeof(path), "/proc/self/fd/%d", p[0]);
	int rw = open(path, O_RDWR | O_CLOEXEC | O_NONBLOCK);
	close(p[0]);
	close(p[1]);
	struct stat sb;
	struct epoll_event ev = {.events = EPOLLIN, .data.fd = rw};
	if (rw < 0 || fstat(rw, &sb) != 0 || getrandom(&qp->wake_id, sizeof(qp->wake_id), 0) != sizeof(qp->wake_id) ||
	    epoll_ctl(qp->rcq->chan->epfd, EPOLL_CTL_ADD, rw, &ev) != 0) {
		if (rw >= 0)
			close(rw);
		return HR_EIO;
	}
	qp->wake_rw = rw;
	qp->wake_ino = (uint64_t)sb.st_ino;
	shm_fdpass_add(qp->wake_id, rw);
	return HR_OK;
}

/* Out of the set before the close: a peer that was passed our file
 * description keeps it open, and epoll drops an entry only when the last
 * reference to the description goes. */
void shm_wake_destroy(struct shm_qp *qp)
{
	if (qp->wake_rw < 0)
		return;
	struct shm_chan *c = qp->rcq->chan;
	shm_fdpass_del(qp->wake_rw);
	pthread_mutex_lock(&c->lock);
	(void)epoll_ctl(c->epfd, EPOLL_CTL_DEL, qp->wake_rw, NULL);
	close(qp->wake_rw);
	c->gen++;
	pthread_mutex_unlock(&c->lock);
	qp->wake_rw = -1;
}

/* The peer's wake pipe for the QP we connect to: through /proc, or its
 * broker when it is non-dumpable; it must be the pipe the bootstrap names
 * (inode), not whatever holds that fd number now. */
int shm_wake_open(uint32_t pid, int fd, uint64_t id, uint64_t ino)
{
	if (fd < 0)
		return -1;
	char path[64];
	snprintf(path, sizeof(path), "/proc/%u/fd/%d", pid, fd);
	int w = open(path, O_RDWR | O_CLOEXEC | O_NONBLOCK);
	if (w < 0 && (errno == EACCES || errno == EPERM))
		w = shm_fdpass_fetch(pid, id);
	struct stat sb;
	if (w >= 0 && (fstat(w, &sb) != 0 || !S_ISFIFO(sb.st_mode) || (uint64_t)sb.st_ino != ino ||
		       (fcntl(w, F_GETFL) & O_ACCMODE) != O_RDWR)) {
		close(w);
		w = -1;
	}
	return w;
}

/* Full pipe: a wake-up is already unread. */
void shm_wake_ring(int fd)
{
	char b = 1;
	(void)!write(fd, &b, 1);
}

static void chan_drain(int fd)
{
	char buf[64];
	while (read(fd, buf, sizeof(buf)) == (ssize_t)sizeof(buf))
		;
}

/* ---- completion queues ---- */

int shm_create_cq(hr_dev *hd, uint32_t depth, hr_chan *hc, hr_cq **out)
{
	struct shm_dev *d = (struct shm_dev *)hd;
	if (depth == 0 || depth > SHM_MAX_CQE)
		return HR_EINVAL;
	uint32_t cap = 1;
	while (cap < depth)
		cap <<= 1;
	struct shm_cq *cq = calloc(1, sizeof(*cq));
	if (!cq)
		return HR_ENOMEM;
	cq->prov = &hr_shm_provider;
	cq->dev = d;
	cq->bytes = sizeof(struct shm_cq_sh) + (uint64_t)cap * sizeof(struct shm_cqe);
	/* Private and zeroed, pages on touch: no other process maps it. */
	void *m = mmap(NULL, cq->bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (m == MAP_FAILED) {
		free(cq);
		return HR_ENOMEM;
	}
	if (shm_dontfork(m, cq->bytes) != 0) {
		munmap(m, cq->bytes);
		free(cq);
		return HR_EIO;
	}
	cq->sh = m;
	cq->cap = cap;
	pthread_spin_init(&cq->qlock, PTHREAD_PROCESS_PRIVATE);
	if (hc) {
		struct shm_chan *c = (struct shm_chan *)hc;
		cq->chan = c;
		pthread_mutex_lock(&c->lock);
		cq->chan_next = c->cqs;
		c->cqs = cq;
		pthread_mutex_unlock(&c->lock);
	}
	*out = (hr_cq *)cq;
	return HR_OK;
}

int shm_destroy_cq(hr_cq *hcq)
{
	struct shm_cq *cq = (struct shm_cq *)hcq;
	if (atomic_load(&cq->refs) > 0)
		return HR_ESTATE; /* QPs still use it, as ibv's EBUSY */
	if (cq->chan) {
		struct shm_chan *c = cq->chan;
		pthread_mutex_lock(&c->lock);
		for (struct shm_cq **pp = &c->cqs; *pp; pp = &(*pp)->chan_next) {
			if (*pp == cq) {
				*pp = cq->chan_next;
				break;
			}
		}
		pthread_mutex_unlock(&c->lock);
	}
	munmap(cq->sh, cq->bytes);
	free(cq->rqps);
	pthread_spin_destroy(&cq->qlock);
	free(cq);
	return HR_OK;
}

int shm_cq_attach(struct shm_cq *cq, struct shm_qp *qp)
{
	pthread_spin_lock(&cq->qlock);
	if (cq->nrqps == cq->caprqps) {
		uint32_t nc = cq->caprqps ? cq->caprqps * 2 : 4;
		struct shm_qp **n = realloc(cq->rqps, nc * sizeof(*n));
		if (!n) {
			pthread_spin_unlock(&cq->qlock);
			return HR_ENOMEM;
		}
		cq->rqps = n;
		cq->caprqps = nc;
	}
	/* A CQ armed now reports this QP's completions too. */
	atomic_store(&qp->icq->armed, atomic_load(&cq->armed));
	cq->rqps[cq->nrqps++] = qp;
	pthread_spin_unlock(&cq->qlock);
	return HR_OK;
}

void shm_cq_detach(struct shm_cq *cq, struct shm_qp *qp)
{
	pthread_spin_lock(&cq->qlock);
	for (uint32_t i = 0; i < cq->nrqps; i++) {
		if (cq->rqps[i] == qp) {
			cq->rqps[i] = cq->rqps[--cq->nrqps];
			break;
		}
	}
	pthread_spin_unlock(&cq->qlock);
}

/* An overrun CQ reports the overflow from then on. Its producer calls this
 * after moving its QP to the error state, so whoever polls the overflow finds
 * the QP in error (as on ibv). */
void shm_cq_overflowed(struct shm_cq *cq)
{
	atomic_store(&cq->sh->overflow, 1);
}

/* A full CQ returns HR_ECQ_OVERFLOW; the caller then fails its QP and calls
 * shm_cq_overflowed. Local completions are never solicited. */
int shm_cq_push(struct shm_cq *cq, const hr_wc *wc, int is_send, uint64_t sq_idx, uint64_t *head_cache)
{
	struct shm_cq_sh *r = cq->sh;
	uint32_t cap = cq->cap;
	uint64_t t = atomic_load_explicit(&r->tail, memory_order_relaxed);
	uint64_t local_cache = 0, *hc = head_cache ? head_cache : &local_cache;
	for (;;) {
		if (!head_cache || t - *hc >= cap)
			*hc = atomic_load_explicit(&r->head, memory_order_acquire);
		if (t - *hc >= cap)
			return HR_ECQ_OVERFLOW; /* the caller fails its QP, then publishes */
		if (atomic_compare_exchange_weak_explicit(&r->tail, &t, t + 1, memory_order_acq_rel,
							  memory_order_relaxed))
			break;
	}
	struct shm_cqe *e = &r->e[t & (cap - 1)];
	e->wc = *wc;
	e->is_send = (uint32_t)is_send;
	e->sq_idx = sq_idx;
	atomic_store_explicit(&e->seq, t + 1, memory_order_release);

	uint32_t a = atomic_load_explicit(&cq->armed, memory_order_relaxed);
	if (a == 0 || (a == 2 && wc->status == HR_OK))
		return HR_OK;
	if (atomic_exchange(&cq->armed, 0) != 0 && cq->chan)
		chan_ring(cq);
	return HR_OK;
}

void shm_cq_fire_local(struct shm_cq *cq)
{
	if (atomic_load(&cq->armed) && atomic_exchange(&cq->armed, 0) != 0 && cq->chan)
		chan_ring(cq);
}

int shm_poll_cq(hr_cq *hcq, int n, hr_wc *wc)
{
	struct shm_cq *cq = (struct shm_cq *)hcq;
	struct shm_cq_sh *sh = cq->sh;
	uint64_t h = cq->cons;
	int got = 0;
	while (got < n) {
		struct shm_cqe *e = &sh->e[h & (cq->cap - 1)];
		if (atomic_load_explicit(&e->seq, memory_order_acquire) != h + 1)
			break;
		wc[got] = e->wc;
		if (e->is_send)
			shm_qp_retire(cq->dev, e->wc.qp_num, e->sq_idx);
		got++;
		h++;
	}
	if (got) {
		cq->cons = h;
		atomic_store_explicit(&sh->head, h, memory_order_release);
	}
	if (got < n) {
		pthread_spin_lock(&cq->qlock);
		uint32_t nq = cq->nrqps;
		/* Round robin: one busy QP does not starve the others. */
		for (uint32_t i = 0; i < nq && got < n; i++)
			got += shm_icq_drain(cq->rqps[(cq->rr + i) % nq], n - got, wc + got);
		if (nq)
			cq->rr = (cq->rr + 1) % nq;
		pthread_spin_unlock(&cq->qlock);
	}
	if (got)
		return got;
	if (atomic_load_explicit(&sh->overflow, memory_order_acquire))
		return -HR_ECQ_OVERFLOW;
	return 0;
}

int shm_arm_cq(hr_cq *hcq, int solicited_only)
{
	struct shm_cq *cq = (struct shm_cq *)hcq;
	if (!cq->chan)
		return HR_EINVAL;
	uint32_t a = solicited_only ? 2u : 1u;
	pthread_spin_lock(&cq->qlock);
	for (uint32_t i = 0; i < cq->nrqps; i++) {
		struct shm_icq_sh *ic = cq->rqps[i]->icq;
		atomic_store(&ic->fired, 0);
		atomic_store(&ic->armed, a);
	}
	atomic_store(&cq->armed, a);
	pthread_spin_unlock(&cq->qlock);
	return HR_OK;
}

/* Did a peer ring for this armed CQ? Its fired flags are only hints (a
 * peer can set its own): the event is taken only if the CQ is still armed,
 * and then every inbound ring is disarmed. */
static int cq_take_remote_event(struct shm_cq *cq)
{
	if (!atomic_load(&cq->armed))
		return 0;
	int hit = 0;
	pthread_spin_lock(&cq->qlock);
	for (uint32_t i = 0; i < cq->nrqps; i++)
		if (atomic_load(&cq->rqps[i]->icq->fired) && atomic_exchange(&cq->rqps[i]->icq->fired, 0))
			hit = 1;
	if (hit && atomic_exchange(&cq->armed, 0) == 0)
		hit = 0; /* a local completion took the arming: its pending flag is the event */
	if (hit)
		for (uint32_t i = 0; i < cq->nrqps; i++)
			atomic_store(&cq->rqps[i]->icq->armed, 0);
	pthread_spin_unlock(&cq->qlock);
	return hit;
}

/* Is another event waiting (flags only: nothing is taken)? */
static int chan_more(struct shm_chan *c)
{
	for (struct shm_cq *cq = c->cqs; cq; cq = cq->chan_next) {
		if (atomic_load(&cq->pending))
			return 1;
		if (!atomic_load(&cq->armed))
			continue;
		int hit = 0;
		pthread_spin_lock(&cq->qlock);
		for (uint32_t i = 0; i < cq->nrqps && !hit; i++)
			hit = atomic_load(&cq->rqps[i]->icq->fired) != 0;
		pthread_spin_unlock(&cq->qlock);
		if (hit)
			return 1;
	}
	return 0;
}

/* An event was taken: the channel's fd is readable afterwards only if
 * another one waits. Wake-ups written before the drain had their flags set
 * before, so chan_more sees them; later ones keep the fd readable. */
static void chan_settle(struct shm_chan *c)
{
	struct epoll_event ev[16];
	pthread_mutex_lock(&c->lock);
	int n, rounds = 0;
	do { /* bounded: a peer writing without pause cannot hold us here */
		n = epoll_wait(c->epfd, ev, 16, 0);
		for (int i = 0; i < n; i++)
			chan_drain(ev[i].data.fd);
	} while (n == 16 && ++rounds < 64);
	int more = chan_more(c);
	pthread_mutex_unlock(&c->lock);
	if (more) {
		uint64_t one = 1;
		(void)!write(c->efd, &one, sizeof(one));
	}
}

/* Wake-ups are drained only after epoll reported them and before the
 * flags are looked at again: a flag set before its wake-up was written is
 * always seen. */
int shm_get_cq_event(hr_chan *hc, int timeout_ms, hr_cq **out)
{
	struct shm_chan *c = (struct shm_chan *)hc;
	uint64_t deadline = timeout_ms < 0 ? UINT64_MAX : hr_now_ns() + (uint64_t)timeout_ms * 1000000ull;
	for (;;) {
		struct shm_cq *found = NULL;
		pthread_mutex_lock(&c->lock);
		for (struct shm_cq *cq = c->cqs; cq && !found; cq = cq->chan_next)
			if (atomic_exchange(&cq->pending, 0) || cq_take_remote_event(cq))
				found = cq;
		pthread_mutex_unlock(&c->lock);
		if (found) {
			chan_settle(c);
			*out = (hr_cq *)found;
			return HR_OK;
		}
		int left = -1;
		if (deadline != UINT64_MAX) {
			uint64_t now = hr_now_ns();
			if (now >= deadline)
				return HR_ETIMEDOUT;
			left = (int)((deadline - now + 999999) / 1000000);
		}
		struct epoll_event ev[16];
		pthread_mutex_lock(&c->lock);
		uint64_t gen = c->gen;
		pthread_mutex_unlock(&c->lock);
		int n = epoll_wait(c->epfd, ev, 16, left);
		/* A QP destroyed meanwhile may have closed a reported fd (and its
		 * number been reused): drain only if none was. */
		pthread_mutex_lock(&c->lock);
		for (int i = 0; i < n && c->gen == gen; i++)
			chan_drain(ev[i].data.fd);
		pthread_mutex_unlock(&c->lock);
	}
}

void shm_ack_cq_events(hr_cq *hcq, unsigned n) { ((struct shm_cq *)hcq)->events_acked += n; }

int shm_cq_depth(hr_cq *hcq) { return (int)((struct shm_cq *)hcq)->cap; }

/* ---- inbound completions ---- */

/* What a responder reports: a receive's completion, successful or failed
 * by the responder's checks. Anything else is not from an honest peer. */
static int icqe_sane(const struct shm_icqe *c)
{
	if (c->opcode != HR_WC_RECV && c->opcode != HR_WC_RECV_RDMA_WITH_IMM)
		return 0;
	return c->status == HR_OK || c->status == HR_ELOCAL_PROT || c->status == HR_ELOCAL_LEN;
}

static void icqe_to_wc(struct shm_qp *qp, const struct shm_icqe *c, const struct shm_rshadow *r, hr_wc *wc)
{
	int imm = c->opcode == HR_WC_RECV_RDMA_WITH_IMM || (c->flags & HR_WC_WITH_IMM);
	*wc = (hr_wc){.wr_id = r->wr_id, .status = c->status, .opcode = c->opcode,
		      .byte_len = c->status == HR_OK ? c->byte_len : 0, .imm = imm ? c->imm : 0,
		      .qp_num = qp->qpn, .flags = imm ? HR_WC_WITH_IMM : 0};
}

/* A SEND's length cannot exceed the receive's buffers; a WRITE with
 * immediate names no buffer. */
static int icqe_len_ok(const struct shm_icqe *c, const struct shm_rshadow *r)
{
	return c->status != HR_OK || c->opcode != HR_WC_RECV || c->byte_len <= r->len;
}

static int icqe_read(struct shm_qp *qp, struct shm_icqe *c)
{
	struct shm_icqe *e = &qp->icq->e[qp->icq_cons & (qp->icq_cap - 1)];
	if (atomic_load_explicit(&e->seq, memory_order_acquire) != qp->icq_cons + 1)
		return 0;
	/* One copy, then only the copy is looked at. */
	volatile struct shm_icqe *v = e;
	c->rslot = v->rslot;
	c->lw = v->lw;
	c->sw = v->sw;
	qp->icq_cons++;
	return 1;
}

static void icq_corrupt(struct shm_qp *qp)
{
	qp->icq_bad = 1;
	shm_qp_to_error(qp);
}

/* The QP is in error: take every receive the peer has not consumed (the
 * shared ring's head is the peer's, so what it names is checked against
 * what was posted). They complete flushed, in order after the peer's. */
static void own_take_rest(struct shm_qp *qp, uint64_t done, uint64_t posted)
{
	struct shm_rwqe w;
	uint64_t s;
	for (uint32_t i = 0; i < qp->max_recv && shm_rq_pop(qp->rq, qp->max_recv, &w, &s) == 0; i++) {
		struct shm_rshadow *r = &qp->rshadow[s % qp->max_recv];
		if (s >= done && s < posted && r->slot == s)
			r->done = 1;
	}
}

static int own_drain(struct shm_qp *qp, int n, hr_wc *wc)
{
	uint64_t done = atomic_load_explicit(&qp->rq_done, memory_order_relaxed);
	uint64_t posted = atomic_load_explicit(&qp->rq_posted, memory_order_acquire);
	uint64_t cons0 = qp->icq_cons;
	int got = 0;
	if (done == posted)
		return 0;
	if (!qp->icq_bad && atomic_load(&qp->sh->state) == HR_QPS_ERR)
		own_take_rest(qp, done, posted);
	while (got < n && done < posted) {
		struct shm_rshadow *r = &qp->rshadow[done % qp->max_recv];
		struct shm_icqe c;
		if (qp->icq_bad || r->done) {
			wc[got] = (hr_wc){.wr_id = r->wr_id, .status = HR_EFLUSH, .opcode = HR_WC_RECV,
					  .qp_num = qp->qpn};
			cnt_add(&qp->sh->completions, 1);
			cnt_add(&qp->sh->errors, 1);
		} else if (!icqe_read(qp, &c)) {
			break;
		} else if (c.rslot != done || !icqe_sane(&c) || !icqe_len_ok(&c, r)) {
			icq_corrupt(qp); /* this receive and the rest flush */
			continue;
		} else {
			icqe_to_wc(qp, &c, r, &wc[got]);
		}
		r->done = 0;
		done++;
		got++;
	}
	if (qp->icq_cons != cons0)
		atomic_store_explicit(&qp->icq->head, qp->icq_cons, memory_order_release);
	if (got)
		atomic_store_explicit(&qp->rq_done, done, memory_order_release);
	return got;
}

/* An SRQ receive: it must be posted and not completed yet. Completions of
 * an SRQ's receives come through all its QPs, so the slot becomes reusable
 * once every earlier one was polled too. */
int shm_srq_complete(struct shm_srq *s, uint64_t slot, struct shm_rshadow *out)
{
	int ok = 0;
	pthread_mutex_lock(&s->lock);
	struct shm_rshadow *r = &s->shadow[slot % s->cap];
	if (slot >= s->done && slot < s->posted && r->slot == slot && !r->done) {
		r->done = 1;
		*out = *r;
		ok = 1;
		while (s->done < s->posted && s->shadow[s->done % s->cap].done) {
			s->shadow[s->done % s->cap].done = 0;
			s->done++;
		}
	}
	pthread_mutex_unlock(&s->lock);
	return ok;
}

static int srq_drain(struct shm_qp *qp, int n, hr_wc *wc)
{
	uint64_t cons0 = qp->icq_cons;
	int got = 0;
	struct shm_icqe c;
	while (got < n && !qp->icq_bad && icqe_read(qp, &c)) {
		struct shm_rshadow r;
		if (!icqe_sane(&c) || !shm_srq_complete(qp->srq, c.rslot, &r) || !icqe_len_ok(&c, &r)) {
			icq_corrupt(qp);
			break;
		}
		icqe_to_wc(qp, &c, &r, &wc[got++]);
	}
	if (qp->icq_cons != cons0)
		atomic_store_explicit(&qp->icq->head, qp->icq_cons, memory_order_release);
	return got;
}

/* Under the receive CQ's qlock: the QP's inbound ring has one consumer. */
int shm_icq_drain(struct shm_qp *qp, int n, hr_wc *wc)
{
	return qp->srq ? srq_drain(qp, n, wc) : own_drain(qp, n, wc);
}
