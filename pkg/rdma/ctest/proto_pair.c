/* proto_pair.c - the engine C tests' shared endpoint pair (proto_pair.h). */
#define _GNU_SOURCE
#include "proto_pair.h"

#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

int failures;
const hr_provider *prov;

hr_ep_cfg cfg_of(uint32_t event, uint32_t retries)
{
	hr_ep_cfg c = {
		.slot_size = 8192, .nslots = 16, .direct_size = 65536, .resp_size = 65536,
		.eager_threshold = 4096, .inline_threshold = 128, .signal_interval = 8,
		.max_send_wr = 64, .event = event, .rfp_retries = retries, .rfp_fetch = 256,
		.max_msg = 5u << 20, .pool_size = 1u << 16,
	};
	return c;
}

void fill(uint8_t *p, uint64_t n, uint8_t seed)
{
	for (uint64_t i = 0; i < n; i++)
		p[i] = (uint8_t)(seed + i * 7);
}

/* "Slow" as the client sees it, not by a clock, so the test holds on a loaded
 * host and under emulation: while fetching, until the client has exceeded R
 * fetches; in server-reply mode, twice R fetches' time. */
static void slow_answer(struct pair *pr)
{
	hr_ep_stats s0, s;
	hr_ep_stats_get(pr->cli, &s0);
	if (s0.rfp_mode == 1) {
		uint64_t ns = 2ull * pr->retries * s0.fetch_ns;
		struct timespec ts = {(time_t)(ns / 1000000000ull), (long)(ns % 1000000000ull)};
		nanosleep(&ts, NULL);
		return;
	}
	uint64_t deadline = hr_now_ns() + 60000000000ull;
	do {
		struct timespec ts = {0, 50000};
		nanosleep(&ts, NULL);
		hr_ep_stats_get(pr->cli, &s);
	} while (s.rfp_exceeded <= atomic_load(&pr->base_exceeded) && hr_now_ns() < deadline);
}

void *server(void *arg)
{
	struct pair *pr = arg;
	uint8_t *out = malloc(5u << 20);
	uint32_t answers = 0;
	while (!atomic_load(&pr->stop)) {
		void *req;
		uint64_t len;
		int st = hr_ep_recv(pr->srv, 20, -1, 1, &req, &len);
		if (st == HR_ETIMEDOUT && !hr_ep_broken(pr->srv))
			continue;
		if (st != HR_OK)
			break;
		if (atomic_load(&pr->slow))
			slow_answer(pr);
		uint64_t d = atomic_load(&pr->delay_ns);
		uint32_t fe = atomic_load(&pr->fast_every);
		if (fe && ++answers % fe == 0)
			d = 0;
		if (d) {
			struct timespec ts = {(time_t)(d / 1000000000ull), (long)(d % 1000000000ull)};
			nanosleep(&ts, NULL);
		}
		/* The response is the request with every byte inverted. */
		const uint8_t *r = req;
		for (uint64_t i = 0; i < len; i++)
			out[i] = (uint8_t)(0xffu ^ r[i]);
		if (hr_ep_reply(pr->srv, atomic_load(&pr->proto), out, len, -1, 1) != HR_OK)
			break;
	}
	free(out);
	return NULL;
}

int connect_pair(struct pair *pr, uint32_t cev, uint32_t sev, uint32_t retries)
{
	memset(pr, 0, sizeof *pr);
	hr_dev_opts o = {.shm_size = 256ull << 20};
	int st = hr_open(prov, &o, &pr->dev);
	if (st)
		return st;
	if ((st = hr_alloc_pd(pr->dev, &pr->pd)))
		return st;
	pr->retries = retries;
	hr_ep_cfg cc = cfg_of(cev, retries), sc = cfg_of(sev, retries);
	if ((st = hr_ep_create(pr->dev, pr->pd, &cc, &pr->cli)) || (st = hr_ep_create(pr->dev, pr->pd, &sc, &pr->srv)))
		return st;
	hr_qp_attr a, b;
	hr_ep_desc da, db;
	if ((st = hr_qp_local_attr(hr_ep_qp(pr->cli), &a)) || (st = hr_qp_local_attr(hr_ep_qp(pr->srv), &b)) ||
	    (st = hr_qp_connect(hr_ep_qp(pr->cli), &b)) || (st = hr_qp_connect(hr_ep_qp(pr->srv), &a)))
		return st;
	hr_ep_local(pr->cli, &da);
	hr_ep_local(pr->srv, &db);
	if ((st = hr_ep_set_peer(pr->cli, &db)) || (st = hr_ep_set_peer(pr->srv, &da)))
		return st;
	return HR_OK;
}

void close_pair(struct pair *pr, int started)
{
	if (started) {
		atomic_store(&pr->stop, 1);
		pthread_join(pr->th, NULL);
	}
	hr_ep_destroy(pr->cli);
	hr_ep_destroy(pr->srv);
	if (pr->pd)
		hr_free_pd(pr->pd);
	if (pr->dev)
		hr_close(pr->dev);
}
