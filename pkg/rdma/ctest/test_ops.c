/* C unit tests of the provider registry and its defaults (hr_core.c,
 * hr_default_ops.c): what a provider leaves unset answers HR_ENOTSUP. */
#include "ctest_util.h"

#include <string.h>

static int query_ok(hr_dev *d, hr_dev_info *out)
{
	(void)d;
	memset(out, 0, sizeof(*out));
	return HR_OK;
}

void test_default_ops(void)
{
	/* A provider with nothing but a name: every op is a default. */
	const hr_provider bare = {.name = "bare"};
	hr_provider p;
	hr_set_ops(&p, &bare);
	CHECK(strcmp(p.name, "bare") == 0);
	struct hr_obj h = {.prov = &p}; /* a handle of that provider */
	hr_dev *dev = (hr_dev *)&h;
	hr_dev *d = NULL;
	hr_pd *pd = NULL;
	hr_dev_info info;
	hr_counters c;
	hr_wc wc;
	CHECK_ST(hr_open(&p, &(hr_dev_opts){.gid_index = -1}, &d), HR_ENOTSUP);
	CHECK(d == NULL);
	CHECK_ST(hr_query(dev, &info), HR_ENOTSUP);
	CHECK_ST(hr_alloc_pd(dev, &pd), HR_ENOTSUP);
	CHECK_ST(hr_dev_counters(dev, &c), HR_ENOTSUP);
	CHECK_ST(hr_post_send((hr_qp *)&h, NULL, 0, NULL), HR_ENOTSUP);
	CHECK(hr_poll_cq((hr_cq *)&h, 1, &wc) == -HR_ENOTSUP);
	CHECK(hr_poll_spin((hr_cq *)&h, 1, &wc, 1000) == -HR_ENOTSUP);
	CHECK(hr_chan_fd((hr_chan *)&h) == -HR_ENOTSUP);
	CHECK(hr_cq_depth((hr_cq *)&h) == -HR_ENOTSUP);
	CHECK(hr_qp_state((hr_qp *)&h) == -HR_ENOTSUP);
	CHECK(hr_qp_peer_cpu((hr_qp *)&h) == -1); /* unknown, not an error */
	CHECK(hr_qp_note_cpu((hr_qp *)&h) == HR_OK); /* nothing to publish */
	hr_ack_cq_events((hr_cq *)&h, 1); /* void defaults do nothing */
	hr_close(dev);

	/* A provider's own ops win over the defaults. */
	const hr_provider part = {.name = "part", .query = query_ok};
	hr_set_ops(&p, &part);
	CHECK(p.query == query_ok);
	CHECK_ST(hr_query(dev, &info), HR_OK);
	CHECK_ST(hr_alloc_pd(dev, &pd), HR_ENOTSUP);

	/* The registry: found by name, in order, every op set. */
	int n = 0;
	for (const char *name; (name = hr_provider_name(n)) != NULL; n++) {
		const hr_provider *r = hr_provider_by_name(name);
		CHECK(r != NULL && strcmp(r->name, name) == 0);
		CHECK(r->open && r->close && r->post_send && r->poll_cq && r->cq_depth);
	}
	CHECK(n == 2);
	CHECK(strcmp(hr_provider_name(0), "ibv") == 0);
	CHECK(hr_provider_name(-1) == NULL);
	CHECK(hr_provider_by_name(NULL) == NULL);
	CHECK(hr_provider_by_name("bare") == NULL);
}
