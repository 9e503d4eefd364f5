/* Shared helpers for the C unit tests and benches. */
#ifndef CTEST_UTIL_H
#define CTEST_UTIL_H

#include "../hr.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

extern int ct_failures, ct_checks;

#define CHECK(cond)                                                                          \
	do {                                                                                 \
		ct_checks++;                                                                 \
		if (!(cond)) {                                                               \
			ct_failures++;                                                       \
			fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
		}                                                                            \
	} while (0)

#define CHECK_ST(expr, want)                                                                        \
	do {                                                                                        \
		int st_ = (expr);                                                                   \
		ct_checks++;                                                                        \
		if (st_ != (want)) {                                                                \
			ct_failures++;                                                              \
			fprintf(stderr, "%s:%d: %s = %d (%s), want %s\n", __FILE__, __LINE__, #expr, \
				st_, hr_status_str(st_), #want);                                    \
		}                                                                                   \
	} while (0)

/* One endpoint: device objects plus one registered buffer. */
struct ep {
	hr_dev *dev;
	hr_pd *pd;
	hr_chan *ch;
	hr_cq *scq, *rcq;
	hr_qp *qp;
	hr_mr *mr;
	uint8_t *buf;
	size_t len;
};

int ep_open(struct ep *e, const char *prov, size_t buflen, uint32_t rnr_retry, int events);
void ep_close(struct ep *e);
int ep_connect(struct ep *a, struct ep *b);
/* Busy-poll up to timeout_ms for n completions; returns how many arrived. */
int wait_wc(hr_cq *cq, hr_wc *wc, int n, int timeout_ms);
hr_send_wr mk_send(uint64_t id, uint32_t op, uint32_t flags, struct ep *e, size_t off, uint32_t len);
hr_recv_wr mk_recv(uint64_t id, struct ep *e, size_t off, uint32_t len);
/* Take CAP_SYS_PTRACE out of the effective set: even root is then refused
 * /proc/<pid>/fd of a non-dumpable process. */
int drop_ptrace_cap(void);

#endif
