/* hr_shm_dev.c - shm provider: the device. Segment creation, the segment
 * allocator (one per segment: the device's and each PD's), peer mappings, and
 * the service thread that runs RNR retries and dead-peer detection. */
#define _GNU_SOURCE
#include "shm_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

/* ---- futex on shared memory (not FUTEX_PRIVATE: waiters may be in other
 * processes mapping the same page) ---- */

void shm_futex_wake(_Atomic uint32_t *w)
{
	syscall(SYS_futex, (uint32_t *)w, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

int shm_futex_wait(_Atomic uint32_t *w, uint32_t val, int64_t timeout_us)
{
	struct timespec ts, *tp = NULL;
	if (timeout_us >= 0) {
		ts.tv_sec = (time_t)(timeout_us / 1000000);
		ts.tv_nsec = (long)(timeout_us % 1000000) * 1000L;
		tp = &ts;
	}
	long r = syscall(SYS_futex, (uint32_t *)w, FUTEX_WAIT, val, tp, NULL, 0);
	if (r == -1 && errno == ETIMEDOUT)
		return HR_ETIMEDOUT;
	return HR_OK;
}

void shm_kick(struct shm_hdr *h)
{
	atomic_fetch_add(&h->svc_word, 1);
	shm_futex_wake(&h->svc_word);
}

/* ---- segment allocator (owner only, under dev->lock) ---- */

static int freel_insert(struct shm_seg *d, size_t at, uint64_t off, uint64_t len)
{
	if (d->nfree == d->capfree) {
		size_t nc = d->capfree ? d->capfree * 2 : 64;
		struct shm_extent *n = realloc(d->freel, nc * sizeof(*n));
		if (!n)
			return -1;
		d->freel = n;
		d->capfree = nc;
	}
	memmove(&d->freel[at + 1], &d->freel[at], (d->nfree - at) * sizeof(*d->freel));
	d->freel[at].off = off;
	d->freel[at].len = len;
	d->nfree++;
	return 0;
}

/* Returns a segment offset or 0 (offset 0 is the header, never handed out). */
uint64_t shm_alloc(struct shm_seg *d, uint64_t len, uint64_t align)
{
	len = (len + CACHELINE - 1) & ~(uint64_t)(CACHELINE - 1);
	for (size_t i = 0; i < d->nfree; i++) {
		struct shm_extent *e = &d->freel[i];
		uint64_t start = (e->off + align - 1) & ~(align - 1);
		uint64_t end = e->off + e->len;
		if (start + len > end)
			continue;
		uint64_t pre = start - e->off, post = end - (start + len);
		if (pre && post) {
			e->len = pre;
			if (freel_insert(d, i + 1, start + len, post))
				return 0;
		} else if (pre) {
			e->len = pre;
		} else if (post) {
			e->off = start + len;
			e->len = post;
		} else {
			memmove(e, e + 1, (d->nfree - i - 1) * sizeof(*e));
			d->nfree--;
		}
		return start;
	}
	return 0;
}

void shm_free(struct shm_seg *d, uint64_t off, uint64_t len)
{
	len = (len + CACHELINE - 1) & ~(uint64_t)(CACHELINE - 1);
	/* Give the pages back so a long-lived segment does not pin memory, and
	 * zero what stays: freed memory keeps nothing of its last owner (a peer
	 * that maps the segment must not find a departed client's payloads),
	 * and every allocation starts zeroed. */
	uint64_t ps = (uint64_t)sysconf(_SC_PAGESIZE);
	uint64_t a = (off + ps - 1) & ~(ps - 1), b = (off + len) & ~(ps - 1);
	if (b > a && fallocate(d->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)a, (off_t)(b - a)) == 0) {
		memset(d->base + off, 0, a - off);
		memset(d->base + b, 0, off + len - b);
	} else {
		memset(d->base + off, 0, len);
	}
	size_t i = 0;
	while (i < d->nfree && d->freel[i].off < off)
		i++;
	uint64_t lo = off, hi = off + len; /* the free extent off joins */
	if (i > 0 && d->freel[i - 1].off + d->freel[i - 1].len == off) {
		lo = d->freel[i - 1].off;
		d->freel[i - 1].len += len;
		if (i < d->nfree && off + len == d->freel[i].off) {
			hi = d->freel[i].off + d->freel[i].len;
			d->freel[i - 1].len += d->freel[i].len;
			memmove(&d->freel[i], &d->freel[i + 1], (d->nfree - i - 1) * sizeof(*d->freel));
			d->nfree--;
		}
	} else if (i < d->nfree && off + len == d->freel[i].off) {
		hi = d->freel[i].off + d->freel[i].len;
		d->freel[i].off = off;
		d->freel[i].len += len;
	} else if (freel_insert(d, i, off, len)) {
		return; /* on allocation failure the extent leaks; the segment stays consistent */
	}
	/* A page that neighbours still shared is whole-free now that they are
	 * gone too: give it back (it holds only zeros). */
	uint64_t la = (lo + ps - 1) & ~(ps - 1), hb = hi & ~(ps - 1);
	if (hb > la && (la < a || hb > b))
		(void)fallocate(d->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)la, (off_t)(hb - la));
}

/* Every segment mapping (our own, a peer's) and CQ ring is left out of a
 * fork()ed child's address space: MAP_SHARED pages would stay shared with
 * the child, so a child forked without exec (system() in an old libc, a C
 * library that forks) could write into live QPs, rings and buffers. With
 * MADV_DONTFORK the child has no mapping there at all. os/exec does not
 * need it (vfork-style clone, then exec), but costs nothing with it. */
int shm_dontfork(void *p, uint64_t size)
{
	return madvise(p, size, MADV_DONTFORK) == 0 ? 0 : -1;
}

/* A new segment of size bytes (virtual: MAP_NORESERVE, pages allocated on
 * touch), owner-only, with its header initialized and alive. A private one
 * (the device's) is anonymous memory no other process can reach. */
int shm_seg_create(struct shm_seg *s, uint64_t size, int private_)
{
	memset(s, 0, sizeof(*s));
	s->fd = -1;
	s->base = MAP_FAILED;
	uint64_t hdr_sz = (sizeof(struct shm_hdr) + 4095) & ~4095ull;
	int st = HR_EIO;
	if (private_) {
		s->base = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
		if (s->base == MAP_FAILED || shm_dontfork(s->base, size) != 0)
			goto fail;
		goto init;
	}
	s->fd = memfd_create("hatrpc-shm", MFD_CLOEXEC);
	if (s->fd < 0)
		goto fail;
	/* memfds are created 0777: owner only (peers of the same uid still
	 * reach it through /proc/<pid>/fd, unless the process is non-dumpable:
	 * hr_shm_fdpass.c). */
	if (fchmod(s->fd, 0600) != 0)
		goto fail;
	if (ftruncate(s->fd, (off_t)size) != 0)
		goto fail;
	s->base = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, s->fd, 0);
	if (s->base == MAP_FAILED || shm_dontfork(s->base, size) != 0)
		goto fail;
init:
	s->size = size;
	s->hdr = (struct shm_hdr *)s->base;
	s->hdr->magic = SHM_MAGIC;
	s->hdr->version = SHM_VERSION;
	s->hdr->size = size;
	s->hdr->pid = (uint32_t)getpid();
	if (getrandom(&s->hdr->seg_id, sizeof(s->hdr->seg_id), 0) != sizeof(s->hdr->seg_id))
		goto fail;
	st = HR_ENOMEM;
	if (freel_insert(s, 0, hdr_sz, size - hdr_sz))
		goto fail;
	atomic_store(&s->hdr->alive, 1);
	if (s->fd >= 0)
		shm_fdpass_add(s->hdr->seg_id, s->fd);
	return HR_OK;
fail:
	shm_seg_destroy(s);
	return st;
}

/* Peers that still map the segment see it dead; its memory goes when the
 * last of them unmaps it. */
void shm_seg_destroy(struct shm_seg *s)
{
	if (s->base != MAP_FAILED && s->base) {
		atomic_store(&s->hdr->alive, 0);
		munmap(s->base, s->size);
		/* Whatever is left (leaked by a peer that died mid-copy) is
		 * zeroed for peers that still map it; the header stays. */
		uint64_t hdr_sz = (sizeof(struct shm_hdr) + 4095) & ~4095ull;
		if (s->fd >= 0 && s->size > hdr_sz)
			(void)fallocate(s->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)hdr_sz,
					(off_t)(s->size - hdr_sz));
	}
	s->base = MAP_FAILED;
	if (s->fd >= 0) {
		shm_fdpass_del(s->fd);
		close(s->fd);
	}
	s->fd = -1;
	free(s->freel);
	s->freel = NULL;
	s->nfree = s->capfree = 0;
}

/* ---- peers ---- */

struct shm_peer *shm_peer_get(struct shm_dev *d, uint32_t pid, int fd, uint64_t seg_id,
			      uint64_t size, int *st)
{
	pthread_mutex_lock(&d->lock);
	for (struct shm_peer *p = d->peers; p; p = p->next) {
		if (p->pid == pid && p->seg_id == seg_id) {
			p->refs++;
			pthread_mutex_unlock(&d->lock);
			*st = HR_OK;
			return p;
		}
	}
	pthread_mutex_unlock(&d->lock);

	*st = HR_EPEER;
	if (fd < 0 || size < sizeof(struct shm_hdr) || size > (1ull << 40))
		return NULL;
	char path[64];
	snprintf(path, sizeof(path), "/proc/%u/fd/%d", pid, fd);
	int mfd = open(path, O_RDWR | O_CLOEXEC);
	if (mfd < 0 && (errno == EACCES || errno == EPERM))
		mfd = shm_fdpass_fetch(pid, seg_id); /* a non-dumpable peer */
	if (mfd < 0)
		return NULL;
	struct stat sb;
	if (fstat(mfd, &sb) != 0 || (uint64_t)sb.st_size != size) {
		close(mfd);
		return NULL;
	}
	void *m = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, mfd, 0);
	close(mfd);
	if (m == MAP_FAILED)
		return NULL;
	if (shm_dontfork(m, size) != 0) {
		munmap(m, size);
		return NULL;
	}
	struct shm_hdr *h = m;
	/* The id guards against a recycled pid or fd number. */
	if (h->magic != SHM_MAGIC || h->version != SHM_VERSION || h->seg_id != seg_id || h->size != size) {
		munmap(m, size);
		return NULL;
	}
	struct shm_peer *p = calloc(1, sizeof(*p));
	if (!p) {
		munmap(m, size);
		*st = HR_ENOMEM;
		return NULL;
	}
	p->pid = pid;
	p->seg_id = seg_id;
	p->base = m;
	p->size = size;
	p->refs = 1;
	p->pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
	pthread_mutex_lock(&d->lock);
	p->id = ++d->next_peer_id;
	p->next = d->peers;
	d->peers = p;
	if (p->pidfd >= 0 && d->epfd >= 0) {
		struct epoll_event ev = {.events = EPOLLIN, .data.u64 = p->id};
		if (epoll_ctl(d->epfd, EPOLL_CTL_ADD, p->pidfd, &ev) != 0) {
			close(p->pidfd); /* watched by kill(pid, 0) instead */
			p->pidfd = -1;
		}
	}
	pthread_mutex_unlock(&d->lock);
	shm_kick(d->seg.hdr); /* start watching the peer */
	*st = HR_OK;
	return p;
}

void shm_peer_put(struct shm_dev *d, struct shm_peer *p)
{
	pthread_mutex_lock(&d->lock);
	if (--p->refs > 0) {
		pthread_mutex_unlock(&d->lock);
		return;
	}
	for (struct shm_peer **pp = &d->peers; *pp; pp = &(*pp)->next) {
		if (*pp == p) {
			*pp = p->next;
			break;
		}
	}
	if (p->pidfd >= 0) {
		if (d->epfd >= 0)
			(void)epoll_ctl(d->epfd, EPOLL_CTL_DEL, p->pidfd, NULL);
		close(p->pidfd);
	}
	pthread_mutex_unlock(&d->lock);
	munmap(p->base, p->size);
	free(p);
}

/* The watcher: a peer's pidfd becomes readable when the process exits. The
 * peer is looked up by id under dev->lock (it may have been put since the
 * event was read) and its pidfd leaves the set (it stays readable). */
static void *watch_main(void *arg)
{
	struct shm_dev *d = arg;
	struct epoll_event ev[64];
	for (;;) {
		int n = epoll_wait(d->epfd, ev, 64, -1);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 || atomic_load(&d->stop))
			return NULL;
		int died = 0;
		pthread_mutex_lock(&d->lock);
		for (int i = 0; i < n; i++) {
			for (struct shm_peer *p = d->peers; p; p = p->next) {
				if (p->id != ev[i].data.u64 || ev[i].data.u64 == 0)
					continue;
				atomic_store(&p->dead, 1);
				(void)epoll_ctl(d->epfd, EPOLL_CTL_DEL, p->pidfd, NULL);
				died = 1;
				break;
			}
		}
		pthread_mutex_unlock(&d->lock);
		if (died)
			shm_kick(d->seg.hdr); /* the service thread fails their work */
	}
}

/* ---- service thread: RNR retries, dead peers ---- */

/* Every pass looks at every peer: its alive flag (a device closed in a live
 * process), and, for a peer without a watched pidfd, kill(pid, 0). Exits of
 * watched peers come from the watcher. */
static int svc_check_peers(struct shm_dev *d)
{
	int unwatched = 0;
	for (struct shm_peer *p = d->peers; p; p = p->next) {
		if (atomic_load(&p->dead))
			continue;
		struct shm_hdr *h = (struct shm_hdr *)p->base;
		if (!atomic_load(&h->alive)) {
			atomic_store(&p->dead, 1);
			continue;
		}
		if (p->pidfd < 0) {
			unwatched = 1;
			if (kill((pid_t)p->pid, 0) != 0 && errno == ESRCH)
				atomic_store(&p->dead, 1);
		}
	}
	return unwatched;
}

static void *svc_main(void *arg)
{
	struct shm_dev *d = arg;
	while (!atomic_load(&d->stop)) {
		uint32_t seen = atomic_load(&d->seg.hdr->svc_word);
		uint64_t now = hr_now_ns(), next = UINT64_MAX;

		pthread_mutex_lock(&d->lock);
		/* Only peers the watcher cannot see need a timed look. */
		int have_peers = d->peers != NULL && svc_check_peers(d);
		/* dev->lock before qp->lock: posting never takes dev->lock. */
		for (int i = 0; i < SHM_MAX_QP; i++) {
			struct shm_qp *qp = atomic_load(&d->qps[i]);
			if (!qp)
				continue;
			int dead = qp->peer && atomic_load(&qp->peer->dead);
			int err = atomic_load(&qp->sh->state) == HR_QPS_ERR;
			if (!atomic_load(&qp->pending) && !dead && !err)
				continue;
			pthread_mutex_lock(&qp->lock);
			if (err)
				shm_qp_sweep(qp);
			if (qp->sq_next != qp->sq_tail) {
				if (qp->rnr_deadline <= now || dead || err)
					shm_qp_progress(qp);
				if (qp->sq_next != qp->sq_tail && qp->rnr_deadline && qp->rnr_deadline < next)
					next = qp->rnr_deadline;
			} else {
				atomic_store(&qp->pending, 0);
			}
			pthread_mutex_unlock(&qp->lock);
		}
		pthread_mutex_unlock(&d->lock);

		int64_t tmo = 1000000;
		if (have_peers && (int64_t)d->peer_ms * 1000 < tmo)
			tmo = (int64_t)d->peer_ms * 1000;
		if (next != UINT64_MAX) {
			now = hr_now_ns();
			int64_t t = next <= now ? 0 : (int64_t)((next - now + 999) / 1000);
			if (t < tmo)
				tmo = t;
		}
		if (tmo > 0)
			shm_futex_wait(&d->seg.hdr->svc_word, seen, tmo);
		else
			sched_yield();
	}
	return NULL;
}

/* ---- device ---- */

int shm_dev_open(const hr_dev_opts *o, hr_dev **out)
{
	struct shm_dev *d = calloc(1, sizeof(*d));
	if (!d)
		return HR_ENOMEM;
	d->prov = &hr_shm_provider;
	d->seg.fd = -1;
	d->seg.base = MAP_FAILED;
	d->epfd = d->wake_efd = -1;
	pthread_mutex_init(&d->lock, NULL);
	d->size = (o && o->shm_size) ? o->shm_size : SHM_DEFAULT_SIZE;
	d->rnr_us = (o && o->rnr_timer_us) ? o->rnr_timer_us : SHM_DEFAULT_RNR_US;
	d->peer_ms = (o && o->peer_check_ms) ? o->peer_check_ms : SHM_DEFAULT_PEER_MS;
	uint64_t hdr_sz = (sizeof(struct shm_hdr) + 4095) & ~4095ull;
	int st = HR_EINVAL;
	if (d->size < hdr_sz + (1u << 20) || d->size > (1ull << 40))
		goto fail;
	/* The device's own header (the service thread's futex) is private:
	 * peers map only the PD segments of QPs they are connected to. */
	if ((st = shm_seg_create(&d->seg, hdr_sz + 4096, 1)) != HR_OK)
		goto fail;
	for (int i = 0; i < SHM_MAX_MR; i++)
		d->mr_gen[i] = 1;
	for (int i = 0; i < SHM_MAX_QP; i++)
		d->qp_gen[i] = 1;
	st = HR_EIO;
	if (pthread_create(&d->svc, NULL, svc_main, d) != 0)
		goto fail;
	d->svc_started = 1;
	/* Without the watcher, every peer is looked at by kill(pid, 0). */
	d->epfd = epoll_create1(EPOLL_CLOEXEC);
	d->wake_efd = eventfd(0, EFD_CLOEXEC);
	if (d->epfd >= 0 && d->wake_efd >= 0) {
		struct epoll_event ev = {.events = EPOLLIN, .data.u64 = 0};
		if (epoll_ctl(d->epfd, EPOLL_CTL_ADD, d->wake_efd, &ev) == 0 &&
		    pthread_create(&d->watch, NULL, watch_main, d) == 0)
			d->watch_started = 1;
	}
	if (!d->watch_started && d->epfd >= 0) {
		close(d->epfd);
		d->epfd = -1;
	}
	*out = (hr_dev *)d;
	return HR_OK;
fail:
	shm_dev_close((hr_dev *)d);
	return st;
}

void shm_dev_close(hr_dev *hd)
{
	struct shm_dev *d = (struct shm_dev *)hd;
	if (d->svc_started) {
		atomic_store(&d->stop, 1);
		shm_kick(d->seg.hdr);
		pthread_join(d->svc, NULL);
	}
	if (d->watch_started) {
		atomic_store(&d->stop, 1);
		uint64_t one = 1;
		ssize_t r = write(d->wake_efd, &one, sizeof(one));
		(void)r;
		pthread_join(d->watch, NULL);
	}
	if (d->epfd >= 0)
		close(d->epfd);
	if (d->wake_efd >= 0)
		close(d->wake_efd);
	/* Peers that still map a PD left open see it dead. */
	for (struct shm_pd *pd = d->pds; pd; pd = pd->next)
		atomic_store(&pd->seg.hdr->alive, 0);
	shm_seg_destroy(&d->seg);
	while (d->peers) {
		struct shm_peer *p = d->peers;
		d->peers = p->next;
		if (p->pidfd >= 0)
			close(p->pidfd);
		munmap(p->base, p->size);
		free(p);
	}
	pthread_mutex_destroy(&d->lock);
	free(d);
}
