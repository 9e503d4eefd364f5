/* test_shm_attack.c - shm only: a same-uid attacker process, connected like
 * any client to one QP of a server whose receive CQ also serves another
 * client's QP, cannot read that client's completions in anything it can map
 * (the segments its connection maps, /dev/shm) and cannot make the server
 * report a completion it forged: what it writes into the memory it shares
 * with the server reaches, at most, its own QP, which goes to the error
 * state, while the other client is served as before. It finds no device
 * segment of the server to map, no fd of the server it can open, and cannot
 * wake or silence the completion channel of another client's server CQ: a
 * blocked get_cq_event there sees neither a spurious event from anything the
 * attacker rings nor loses the one the victim's send causes. */
#define _GNU_SOURCE
#include "ctest_util.h"
#include "../shm_internal.h"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/prctl.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/wait.h>

#define NRECV 4

struct report {
	int found;      /* the victim's marker was in a mapping */
	int nmaps;      /* server segments the attacker's device mapped */
	uint64_t bytes; /* resident bytes scanned */
	int forged;     /* the forgeries were written */
};

/* What the attacker reached when it went for the victim's channel. */
struct chan_report {
	int procfds;  /* the server's fds it opened through /proc */
	int brokered; /* fds the server's broker gave it for guessed ids */
	int rung;     /* wake-ups it wrote into the one pipe it holds */
};

/* Ring everything it holds, and reach for everything else of the server. */
static void chan_attack(struct shm_qp *q, pid_t server, struct chan_report *r)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/fd", (int)server);
	DIR *dp = opendir(path);
	struct dirent *de;
	while (dp && (de = readdir(dp))) {
		if (de->d_name[0] == '.')
			continue;
		char fp[384];
		snprintf(fp, sizeof(fp), "%s/%s", path, de->d_name);
		int fd = open(fp, O_RDWR | O_NONBLOCK | O_CLOEXEC);
		if (fd >= 0) {
			r->procfds++;
			close(fd);
		}
	}
	if (dp)
		closedir(dp);
	for (int i = 0; i < 16; i++) {
		uint64_t id;
		if (getrandom(&id, sizeof(id), 0) != sizeof(id))
			continue;
		int fd = shm_fdpass_fetch((uint32_t)server, id);
		if (fd >= 0) {
			r->brokered++;
			close(fd);
		}
	}
	/* Its own QP's wake pipe, with its fired flag set and its ring armed
	 * as if a completion had come: the server's channel for that QP's
	 * CQ is the only one this reaches. */
	struct shm_icq_sh *ic = (struct shm_icq_sh *)(q->rbase + q->t_cq_off);
	for (int i = 0; i < 64 && q->t_wake >= 0; i++) {
		atomic_store(&ic->armed, 1);
		atomic_store(&ic->fired, 1);
		char b = 1;
		if (write(q->t_wake, &b, 1) == 1)
			r->rung++;
	}
}

/* Scan the resident pages (mincore: reading a hole would allocate it). */
static int scan_map(const uint8_t *p, uint64_t len, uint64_t mark, uint64_t *bytes)
{
	long ps = sysconf(_SC_PAGESIZE);
	uint64_t npg = len / (uint64_t)ps;
	unsigned char *vec = malloc(npg);
	int found = 0;
	if (!vec || mincore((void *)p, len, vec) != 0) {
		free(vec);
		return 0;
	}
	for (uint64_t i = 0; i < npg; i++) {
		if (!(vec[i] & 1))
			continue;
		/* the marker is 8-byte aligned wherever a completion would hold it */
		const uint64_t *w = (const uint64_t *)(p + i * (uint64_t)ps);
		for (long k = 0; k < ps / 8; k++)
			found |= w[k] == mark;
		*bytes += (uint64_t)ps;
	}
	free(vec);
	return found;
}

static int scan_dev_shm(uint64_t mark, uint64_t *bytes)
{
	DIR *d = opendir("/dev/shm");
	int found = 0;
	struct dirent *de;
	while (d && (de = readdir(d))) {
		char path[512];
		snprintf(path, sizeof(path), "/dev/shm/%s", de->d_name);
		int fd = open(path, O_RDONLY | O_CLOEXEC);
		struct stat sb;
		if (fd < 0)
			continue;
		if (fstat(fd, &sb) == 0 && S_ISREG(sb.st_mode) && sb.st_size > 0) {
			void *m = mmap(NULL, (size_t)sb.st_size, PROT_READ, MAP_SHARED, fd, 0);
			if (m != MAP_FAILED) {
				found |= scan_map(m, (uint64_t)sb.st_size & ~4095ull, mark, bytes);
				munmap(m, (size_t)sb.st_size);
			}
		}
		close(fd);
	}
	if (d)
		closedir(d);
	return found;
}

/* The attacker: connect, send once legitimately, then read everything it
 * maps, then forge (1) the wr_ids of the receives the server posted on its
 * QP, then send; (2) a completion of its own making in its QP's inbound
 * ring, naming a receive that was never posted. */
static int attacker(int rd, int wr, uint64_t vmark, uint64_t fmark)
{
	struct ep c;
	if (ep_open(&c, "shm", 1 << 16, 7, 0))
		return 2;
	hr_qp_attr mine, theirs;
	hr_qp_local_attr(c.qp, &mine);
	if (write(wr, &mine, sizeof(mine)) != sizeof(mine) || read(rd, &theirs, sizeof(theirs)) != sizeof(theirs))
		return 3;
	char go = 1;
	if (hr_qp_connect(c.qp, &theirs) || read(rd, &go, 1) != 1) /* the server connected too */
		return 4;
	uint32_t bad;
	hr_wc wc;
	hr_send_wr s = mk_send(1, HR_OP_SEND, HR_SEND_SIGNALED, &c, 0, 16);
	if (hr_post_send(c.qp, &s, 1, &bad) || wait_wc(c.scq, &wc, 1, 10000) != 1 || wc.status)
		return 5;
	if (write(wr, &go, 1) != 1 || read(rd, &go, 1) != 1) /* the victim has been served meanwhile */
		return 6;

	struct report rep = {0};
	struct shm_dev *cd = (struct shm_dev *)c.dev;
	for (struct shm_peer *p = cd->peers; p; p = p->next) {
		rep.found |= scan_map(p->base, p->size, vmark, &rep.bytes);
		rep.nmaps++;
	}
	rep.found |= scan_dev_shm(vmark, &rep.bytes);

	/* (1) The receive ring is ours to write: name other wr_ids. */
	struct shm_qp *q = (struct shm_qp *)c.qp;
	struct shm_qp_ent *ent = &q->rhdr->qp[theirs.qpn & (SHM_MAX_QP - 1)];
	struct shm_qp_sh *tsh = (struct shm_qp_sh *)(q->rbase + ent->off);
	struct shm_rq_sh *rq = (struct shm_rq_sh *)(q->rbase + tsh->rq_off);
	for (uint32_t i = 0; i < rq->cap; i++)
		rq->e[i].wr_id = fmark;
	s.wr_id = 2;
	if (hr_post_send(c.qp, &s, 1, &bad) || wait_wc(c.scq, &wc, 1, 10000) != 1 || wc.status)
		return 7;
	/* (2) A completion of our making, after the honest one. */
	struct shm_icq_sh *ic = (struct shm_icq_sh *)(q->rbase + tsh->icq_off);
	uint64_t t = atomic_load(&ic->tail);
	struct shm_icqe *e = &ic->e[t & (ic->cap - 1)];
	e->rslot = fmark;
	e->byte_len = 7;
	e->imm = (uint32_t)fmark;
	e->status = HR_OK;
	e->opcode = HR_WC_RECV;
	e->flags = HR_WC_WITH_IMM;
	atomic_store(&e->seq, t + 1);
	atomic_store(&ic->tail, t + 1);
	rep.forged = 1;
	if (write(wr, &rep, sizeof(rep)) != sizeof(rep) || read(rd, &go, 1) != 1)
		return 8;

	/* (3) The victim's server CQ is armed and waited on: try to wake it,
	 * and, once the victim has sent, to silence it. */
	if (drop_ptrace_cap() != 0)
		return 9;
	pid_t server = getppid();
	struct chan_report cr = {0};
	for (int round = 0; round < 2; round++) {
		chan_attack(q, server, &cr);
		if (write(wr, &cr, sizeof(cr)) != sizeof(cr) || read(rd, &go, 1) != 1)
			return 10;
	}
	ep_close(&c);
	return 0;
}

struct waiter {
	hr_chan *ch;
	hr_cq *got;
	int st;
	_Atomic int sent; /* the victim has sent */
	int sent_seen;    /* ... already when the waiter returned */
};

static void *wait_event(void *arg)
{
	struct waiter *w = arg;
	w->st = hr_get_cq_event(w->ch, 20000, &w->got);
	w->sent_seen = atomic_load(&w->sent);
	return NULL;
}

/* Poll the server's CQ for n completions, each from qpn. */
static int server_wait(hr_cq *cq, hr_wc *wc, int n)
{
	return wait_wc(cq, wc, n, 10000);
}

void test_shm_attack(void)
{
	uint64_t vmark, fmark;
	CHECK(getrandom(&vmark, sizeof(vmark), 0) == sizeof(vmark));
	CHECK(getrandom(&fmark, sizeof(fmark), 0) == sizeof(fmark));
	vmark |= 1ull << 63; /* never a small number found by chance */
	fmark |= 1ull << 63;

	/* The attacker is forked first: a process with threads cannot fork
	 * one that starts threads under ThreadSanitizer. */
	int p2c[2], c2p[2];
	CHECK(pipe(p2c) == 0 && pipe(c2p) == 0);
	pid_t pid = fork();
	if (pid == 0) {
		close(p2c[1]);
		close(c2p[0]);
		_exit(attacker(p2c[0], c2p[1], vmark, fmark));
	}
	/* Our copies of the child's ends go: its exit ends our reads. */
	close(p2c[0]);
	close(c2p[1]);
	/* The server is non-dumpable, as pkg/server makes it: its segments and
	 * wake pipes reach a peer only through its fd broker. */
	CHECK(prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) == 0);
	/* The server: one receive CQ for two QPs, each in a PD of its own. */
	hr_dev_opts o = {.gid_index = -1, .shm_size = 64u << 20, .rnr_timer_us = 20, .peer_check_ms = 2};
	hr_dev *sd;
	hr_pd *pv, *pa;
	hr_cq *scq, *rcq, *vcq;
	hr_chan *rch, *vch;
	hr_qp *qv, *qa, *qv2;
	CHECK_ST(hr_open(hr_provider_by_name("shm"), &o, &sd), HR_OK);
	/* Nothing device-wide is shared. */
	CHECK(((struct shm_dev *)sd)->seg.fd < 0);
	CHECK_ST(hr_alloc_pd(sd, &pv), HR_OK);
	CHECK_ST(hr_alloc_pd(sd, &pa), HR_OK);
	CHECK_ST(hr_create_chan(sd, &rch), HR_OK);
	CHECK_ST(hr_create_chan(sd, &vch), HR_OK);
	CHECK_ST(hr_create_cq(sd, 64, NULL, &scq), HR_OK);
	CHECK_ST(hr_create_cq(sd, 64, rch, &rcq), HR_OK);
	CHECK_ST(hr_create_cq(sd, 64, vch, &vcq), HR_OK);
	hr_qp_init in = {.send_cq = scq, .recv_cq = rcq, .max_send_wr = 16, .max_recv_wr = NRECV, .max_sge = 1,
			 .rnr_retry = 7};
	CHECK_ST(hr_create_qp(pv, &in, &qv), HR_OK);
	CHECK_ST(hr_create_qp(pa, &in, &qa), HR_OK);
	/* The victim's second connection: a server CQ of its own, on a
	 * channel of its own. */
	hr_qp_init in2 = in;
	in2.recv_cq = vcq;
	CHECK_ST(hr_create_qp(pv, &in2, &qv2), HR_OK);
	void *bv, *ba;
	hr_mr *mv, *ma;
	CHECK_ST(hr_alloc_buf(pv, 4096, &bv), HR_OK);
	CHECK_ST(hr_alloc_buf(pa, 4096, &ba), HR_OK);
	CHECK_ST(hr_reg_mr(pv, bv, 4096, 15, &mv), HR_OK);
	CHECK_ST(hr_reg_mr(pa, ba, 4096, 15, &ma), HR_OK);
	uint32_t bad;
	for (int i = 0; i < NRECV; i++) {
		hr_recv_wr r = {.wr_id = vmark + (uint64_t)i, .num_sge = 1,
				.sg = {{.addr = (uint64_t)(uintptr_t)bv + (uint64_t)i * 256, .length = 256, .lkey = mv->lkey}}};
		CHECK_ST(hr_post_recv(qv, &r, 1, &bad), HR_OK);
		r = (hr_recv_wr){.wr_id = 100 + (uint64_t)i, .num_sge = 1,
				 .sg = {{.addr = (uint64_t)(uintptr_t)ba + (uint64_t)i * 256, .length = 256, .lkey = ma->lkey}}};
		CHECK_ST(hr_post_recv(qa, &r, 1, &bad), HR_OK);
		r = (hr_recv_wr){.wr_id = 200 + (uint64_t)i, .num_sge = 1,
				 .sg = {{.addr = (uint64_t)(uintptr_t)bv + 2048 + (uint64_t)i * 256, .length = 256,
					 .lkey = mv->lkey}}};
		CHECK_ST(hr_post_recv(qv2, &r, 1, &bad), HR_OK);
	}
	hr_qp_attr av, aa, ac, av2;
	hr_qp_local_attr(qv, &av);
	hr_qp_local_attr(qa, &aa);
	hr_qp_local_attr(qv2, &av2);

	/* The victim, a client in this process. */
	struct ep v;
	CHECK_ST(ep_open(&v, "shm", 1 << 16, 7, 0), HR_OK);
	hr_qp_attr vm;
	hr_qp_local_attr(v.qp, &vm);
	CHECK_ST(hr_qp_connect(v.qp, &av), HR_OK);
	CHECK_ST(hr_qp_connect(qv, &vm), HR_OK);
	struct ep v2;
	CHECK_ST(ep_open(&v2, "shm", 1 << 16, 7, 0), HR_OK);
	hr_qp_local_attr(v2.qp, &vm);
	CHECK_ST(hr_qp_connect(v2.qp, &av2), HR_OK);
	CHECK_ST(hr_qp_connect(qv2, &vm), HR_OK);

	CHECK(read(c2p[0], &ac, sizeof(ac)) == sizeof(ac));
	CHECK(write(p2c[1], &aa, sizeof(aa)) == sizeof(aa));
	CHECK_ST(hr_qp_connect(qa, &ac), HR_OK);
	char go = 1;
	CHECK(write(p2c[1], &go, 1) == 1);
	CHECK(read(c2p[0], &go, 1) == 1);
	hr_wc wc[8];
	CHECK(server_wait(rcq, wc, 1) == 1);
	CHECK(wc[0].qp_num == aa.qpn && wc[0].wr_id == 100 && wc[0].status == HR_OK);

	/* The victim's traffic: its completions pass through the CQ the
	 * attacker's QP shares. */
	for (int i = 0; i < 2; i++) {
		hr_send_wr s = mk_send(1, HR_OP_SEND_WITH_IMM, HR_SEND_SIGNALED, &v, 0, 32);
		s.imm = (uint32_t)vmark;
		CHECK_ST(hr_post_send(v.qp, &s, 1, &bad), HR_OK);
		CHECK(wait_wc(v.scq, wc, 1, 10000) == 1);
		CHECK(server_wait(rcq, wc, 1) == 1);
		CHECK(wc[0].qp_num == av.qpn && wc[0].wr_id == vmark + (uint64_t)i && wc[0].byte_len == 32);
	}
	CHECK(write(p2c[1], &go, 1) == 1);
	struct report rep;
	CHECK(read(c2p[0], &rep, sizeof(rep)) == sizeof(rep));
	CHECK(!rep.found);
	/* The scan does find the marker where it is: the victim's receives in
	 * its own PD's segment, which the attacker never maps. */
	uint64_t seen = 0;
	struct shm_seg *vseg = &((struct shm_pd *)pv)->seg;
	CHECK(scan_map(vseg->base, vseg->size, vmark, &seen) && seen > 0);
	CHECK(rep.nmaps == 1 && rep.bytes > 0 && rep.forged); /* its QP's PD segment, nothing device-wide */

	/* The honest send completes the receive the server posted, by the
	 * server's record; the forged entry fails the attacker's QP only: its
	 * other receives flush. */
	CHECK(server_wait(rcq, wc, 3) == 3);
	CHECK(wc[0].qp_num == aa.qpn && wc[0].wr_id == 101 && wc[0].status == HR_OK && wc[0].byte_len == 16);
	for (int i = 1; i < 3; i++)
		CHECK(wc[i].qp_num == aa.qpn && wc[i].wr_id == 101 + (uint64_t)i && wc[i].status == HR_EFLUSH);
	for (int i = 0; i < 3; i++)
		CHECK(wc[i].wr_id != fmark && wc[i].imm != (uint32_t)fmark);
	CHECK(hr_qp_state(qa) == HR_QPS_ERR);
	CHECK(hr_poll_cq(rcq, 8, wc) == 0);

	/* The victim is served as before. */
	hr_send_wr s = mk_send(3, HR_OP_SEND, HR_SEND_SIGNALED, &v, 0, 8);
	CHECK_ST(hr_post_send(v.qp, &s, 1, &bad), HR_OK);
	CHECK(wait_wc(v.scq, wc, 1, 10000) == 1 && wc[0].status == HR_OK);
	CHECK(server_wait(rcq, wc, 1) == 1);
	CHECK(wc[0].qp_num == av.qpn && wc[0].wr_id == vmark + 2 && wc[0].status == HR_OK);
	CHECK(hr_qp_state(qv) == HR_QPS_RTS);

	/* The victim's CQ armed, its channel waited on (a thread blocked in
	 * get_cq_event) while the attacker rings what it holds and reaches
	 * for the rest: the waiter wakes only for the victim's send, which
	 * it gets even though the attacker has another go after it. */
	struct waiter w = {.ch = vch};
	struct chan_report cr;
	CHECK_ST(hr_arm_cq(vcq, 0), HR_OK);
	pthread_t wt;
	CHECK(pthread_create(&wt, NULL, wait_event, &w) == 0);
	CHECK(write(p2c[1], &go, 1) == 1);
	CHECK(read(c2p[0], &cr, sizeof(cr)) == sizeof(cr));
	CHECK(cr.procfds == 0 && cr.brokered == 0 && cr.rung > 0);
	struct pollfd pf = {.fd = hr_chan_fd(vch), .events = POLLIN};
	CHECK(poll(&pf, 1, 0) == 0);
	/* What the attacker rang reached only its own QP's channel. */
	hr_cq *ev = NULL;
	CHECK_ST(hr_get_cq_event(rch, 0, &ev), HR_ETIMEDOUT);
	atomic_store(&w.sent, 1);
	s = mk_send(4, HR_OP_SEND, HR_SEND_SIGNALED, &v2, 0, 24);
	CHECK_ST(hr_post_send(v2.qp, &s, 1, &bad), HR_OK);
	CHECK(wait_wc(v2.scq, wc, 1, 10000) == 1 && wc[0].status == HR_OK);
	CHECK(write(p2c[1], &go, 1) == 1);
	CHECK(read(c2p[0], &cr, sizeof(cr)) == sizeof(cr));
	CHECK(cr.procfds == 0 && cr.brokered == 0);
	CHECK(pthread_join(wt, NULL) == 0);
	CHECK_ST(w.st, HR_OK);
	CHECK(w.got == vcq && w.sent_seen);
	hr_ack_cq_events(vcq, 1);
	/* The event taken, the channel's fd is quiet again. */
	CHECK(poll(&pf, 1, 0) == 0);
	CHECK(hr_poll_cq(vcq, 8, wc) == 1);
	CHECK(wc[0].qp_num == av2.qpn && wc[0].wr_id == 200 && wc[0].byte_len == 24 && wc[0].status == HR_OK);

	CHECK(write(p2c[1], &go, 1) == 1);
	int status;
	CHECK(waitpid(pid, &status, 0) == pid);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
		fprintf(stderr, "attacker exit status %d\n", status);
	ep_close(&v);
	ep_close(&v2);
	CHECK_ST(hr_destroy_qp(qv), HR_OK);
	CHECK_ST(hr_destroy_qp(qa), HR_OK);
	CHECK_ST(hr_destroy_qp(qv2), HR_OK);
	hr_dereg_mr(mv);
	hr_dereg_mr(ma);
	hr_free_buf(pv, bv, 4096);
	hr_free_buf(pa, ba, 4096);
	CHECK_ST(hr_destroy_cq(scq), HR_OK);
	CHECK_ST(hr_destroy_cq(rcq), HR_OK);
	CHECK_ST(hr_destroy_cq(vcq), HR_OK);
	CHECK_ST(hr_destroy_chan(rch), HR_OK);
	CHECK_ST(hr_destroy_chan(vch), HR_OK);
	CHECK_ST(hr_free_pd(pv), HR_OK);
	CHECK_ST(hr_free_pd(pa), HR_OK);
	hr_close(sd);
	close(p2c[1]);
	close(c2p[0]);
	CHECK(prctl(PR_SET_DUMPABLE, 1, 0, 0, 0) == 0);
}
