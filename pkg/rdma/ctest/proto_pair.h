/* proto_pair.h - what the engine's C tests (test_proto.c, test_proto_spin.c)
 * share: the checks, the provider under test and a connected client and
 * server endpoint pair whose server thread answers every call. */
#ifndef HR_PROTO_PAIR_H
#define HR_PROTO_PAIR_H

#include "../hr_proto_int.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>

extern int failures;
extern const hr_provider *prov;


#define CHECK(c)                                                                         \
	do {                                                                             \
		if (!(c)) {                                                              \
			fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #c); \
			failures++;                                                      \
			return;                                                          \
		}                                                                        \
	} while (0)

#define CHECK_ST(x)                                                                        \
	do {                                                                               \
		int st_ = (x);                                                             \
		if (st_ != HR_OK) {                                                        \
			fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, hr_status_str(st_)); \
			failures++;                                                        \
			return;                                                            \
		}                                                                          \
	} while (0)


struct pair {
	hr_dev *dev;
	hr_pd *pd;
	hr_ep *cli, *srv;
	pthread_t th;
	atomic_int stop;
	atomic_uint proto; /* server's response protocol */
	atomic_int slow; /* hold each answer until the client counts it slow */
	uint32_t retries;
	atomic_ullong base_exceeded; /* the client's count before the call */
	atomic_ullong delay_ns; /* hold each answer this long */
	atomic_uint fast_every; /* but every n-th (n > 0) */
};

hr_ep_cfg cfg_of(uint32_t event, uint32_t retries);
void fill(uint8_t *p, uint64_t n, uint8_t seed);
void *server(void *arg);
int connect_pair(struct pair *pr, uint32_t cev, uint32_t sev, uint32_t retries);
void close_pair(struct pair *pr, int started);

/* test_proto_spin.c */
/* test_spin_handoff's placements. */
enum {
	HANDOFF_ONE_CPU, /* client and server on one CPU */
	HANDOFF_AWAY,    /* client beside a hog, server on another CPU */
	HANDOFF_UNKNOWN, /* the same, the peer's CPU unknown to the engine */
	HANDOFF_AWAY_ROW, /* HANDOFF_AWAY, every answer held */
	HANDOFF_MOVED,   /* HANDOFF_ONE_CPU, then the server on another CPU */
};
void test_spin_skip(void);
void test_spin_handoff(int place);

/* test_proto_move.c */
void test_move_target(void);
void test_move_away(void);

#endif
