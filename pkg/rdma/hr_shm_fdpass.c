/* hr_shm_fdpass.c - shm provider: handing a segment's fd to a peer without
 * /proc/<pid>/fd.
 *
 * A peer maps our segment by opening /proc/<our pid>/fd/<fd>. A process
 * made non-dumpable (prctl PR_SET_DUMPABLE 0: the server does that so that
 * no same-uid process can open its segments or read its memory through
 * /proc) refuses that to every process without CAP_SYS_PTRACE, its own
 * clients included. For such a process a broker thread listens on the
 * abstract unix socket "hatrpc-shm-<pid>" and passes (SCM_RIGHTS) the fd of
 * the segment whose 64-bit random id a peer names, to peers of its own
 * uid. The id is the capability: only the bootstrap of the connection the
 * segment serves carries it, and the process's memory, where it also
 * lives, is closed to others. The peer checks the broker's credentials
 * (SO_PEERCRED: the pid it expects) so no squatter can pass it a segment
 * of its own; the segment's header is checked after mapping as before.
 *
 * The same holds for a QP's wake pipe (hr_shm_cq.c), named by an id of its
 * own. Every segment and wake pipe is registered; the broker runs only in a non-dumpable
 * process, from the first segment registered after the flag was cleared
 * until the last segment is gone. */
#define _GNU_SOURCE
#include "shm_internal.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

struct fp_ent {
	uint64_t id;
	int fd;
};

/* life orders broker starts and stops (and is never taken by the broker);
 * mu guards the table, which the broker reads. */
static pthread_mutex_t fp_life = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t fp_mu = PTHREAD_MUTEX_INITIALIZER;
static struct fp_ent *fp_tab;
static size_t fp_n, fp_cap;
static int fp_lfd = -1, fp_stop = -1;
static pthread_t fp_thread;
static int fp_running;

static socklen_t fp_addr(struct sockaddr_un *a, uint32_t pid)
{
	memset(a, 0, sizeof(*a));
	a->sun_family = AF_UNIX;
	/* abstract: sun_path[0] == 0, no file, gone with the socket */
	int n = snprintf(a->sun_path + 1, sizeof(a->sun_path) - 1, "hatrpc-shm-%u", pid);
	return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)n);
}

static void fp_timeouts(int s)
{
	struct timeval tv = {.tv_sec = 2};
	(void)setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	(void)setsockopt(s, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
}

/* One request: a peer of our uid names a segment id; the answer is one
 * byte, with the segment's fd attached when the id is ours. */
static void fp_serve(int c)
{
	struct ucred cr;
	socklen_t cl = sizeof(cr);
	uint64_t id;
	fp_timeouts(c);
	if (getsockopt(c, SOL_SOCKET, SO_PEERCRED, &cr, &cl) != 0 || cr.uid != geteuid())
		return;
	if (recv(c, &id, sizeof(id), 0) != (ssize_t)sizeof(id))
		return;
	char ok = 0;
	struct iovec iov = {.iov_base = &ok, .iov_len = 1};
	union {
		struct cmsghdr h;
		char buf[CMSG_SPACE(sizeof(int))];
	} u;
	struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1};
	pthread_mutex_lock(&fp_mu);
	for (size_t i = 0; i < fp_n; i++) {
		if (fp_tab[i].id != id)
			continue;
		ok = 1;
		memset(&u, 0, sizeof(u));
		m.msg_control = u.buf;
		m.msg_controllen = sizeof(u.buf);
		struct cmsghdr *h = CMSG_FIRSTHDR(&m);
		h->cmsg_level = SOL_SOCKET;
		h->cmsg_type = SCM_RIGHTS;
		h->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(h), &fp_tab[i].fd, sizeof(int));
		break;
	}
	/* under the lock: the fd is not closed while it is being sent */
	(void)sendmsg(c, &m, MSG_NOSIGNAL);
	pthread_mutex_unlock(&fp_mu);
}

static void *fp_loop(void *arg)
{
	(void)arg;
	for (;;) {
		struct pollfd p[2] = {{.fd = fp_lfd, .events = POLLIN}, {.fd = fp_stop, .events = POLLIN}};
		if (poll(p, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			return NULL;
		}
		if (p[1].revents)
			return NULL;
		if (!p[0].revents)
			continue;
		int c = accept4(fp_lfd, NULL, NULL, SOCK_CLOEXEC);
		if (c < 0)
			continue;
		fp_serve(c);
		close(c);
	}
}

/* Called with fp_life held. A failure leaves the process as before the
 * broker: peers cannot open its segments and fall back (bad peer). */
static void fp_start(void)
{
	struct sockaddr_un a;
	socklen_t al = fp_addr(&a, (uint32_t)getpid());
	int l = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (l < 0)
		return;
	int e = eventfd(0, EFD_CLOEXEC);
	if (e < 0 || bind(l, (struct sockaddr *)&a, al) != 0 || listen(l, 64) != 0) {
		close(l);
		if (e >= 0)
			close(e);
		return;
	}
	fp_lfd = l;
	fp_stop = e;
	if (pthread_create(&fp_thread, NULL, fp_loop, NULL) != 0) {
		close(l);
		close(e);
		fp_lfd = fp_stop = -1;
		return;
	}
	fp_running = 1;
}

void shm_fdpass_add(uint64_t id, int fd)
{
	pthread_mutex_lock(&fp_life);
	pthread_mutex_lock(&fp_mu);
	if (fp_n == fp_cap) {
		size_t cap = fp_cap ? 2 * fp_cap : 16;
		struct fp_ent *t = realloc(fp_tab, cap * sizeof(*t));
		if (!t) {
			/* unregistered: only /proc reaches this segment */
			pthread_mutex_unlock(&fp_mu);
			pthread_mutex_unlock(&fp_life);
			return;
		}
		fp_tab = t;
		fp_cap = cap;
	}
	fp_tab[fp_n++] = (struct fp_ent){.id = id, .fd = fd};
	pthread_mutex_unlock(&fp_mu);
	if (!fp_running && prctl(PR_GET_DUMPABLE, 0, 0, 0, 0) == 0)
		fp_start();
	pthread_mutex_unlock(&fp_life);
}

void shm_fdpass_del(int fd)
{
	pthread_mutex_lock(&fp_life);
	pthread_mutex_lock(&fp_mu);
	for (size_t i = 0; i < fp_n; i++) {
		if (fp_tab[i].fd == fd) {
			fp_tab[i] = fp_tab[--fp_n];
			break;
		}
	}
	int stop = fp_n == 0 && fp_running;
	pthread_mutex_unlock(&fp_mu);
	if (stop) {
		uint64_t one = 1;
		(void)!write(fp_stop, &one, sizeof(one));
		pthread_join(fp_thread, NULL);
		close(fp_lfd);
		close(fp_stop);
		fp_lfd = fp_stop = -1;
		fp_running = 0;
	}
	if (fp_n == 0) {
		free(fp_tab);
		fp_tab = NULL;
		fp_cap = 0;
	}
	pthread_mutex_unlock(&fp_life);
}

/* The fd process pid registered under id, from its broker, or -1. */
int shm_fdpass_fetch(uint32_t pid, uint64_t id)
{
	struct sockaddr_un a;
	socklen_t al = fp_addr(&a, pid);
	int s = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (s < 0)
		return -1;
	fp_timeouts(s);
	struct ucred cr;
	socklen_t cl = sizeof(cr);
	int fd = -1;
	if (connect(s, (struct sockaddr *)&a, al) != 0 ||
	    getsockopt(s, SOL_SOCKET, SO_PEERCRED, &cr, &cl) != 0 ||
	    cr.pid != (pid_t)pid || cr.uid != geteuid() ||
	    send(s, &id, sizeof(id), MSG_NOSIGNAL) != (ssize_t)sizeof(id))
		goto out;
	char ok = 0;
	struct iovec iov = {.iov_base = &ok, .iov_len = 1};
	union {
		struct cmsghdr h;
		char buf[CMSG_SPACE(sizeof(int))];
	} u;
	struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf, .msg_controllen = sizeof(u.buf)};
	if (recvmsg(s, &m, MSG_CMSG_CLOEXEC) != 1 || !ok)
		goto out;
	struct cmsghdr *h = CMSG_FIRSTHDR(&m);
	if (h && h->cmsg_level == SOL_SOCKET && h->cmsg_type == SCM_RIGHTS && h->cmsg_len == CMSG_LEN(sizeof(int)))
		memcpy(&fd, CMSG_DATA(h), sizeof(int));
out:
	close(s);
	return fd;
}
