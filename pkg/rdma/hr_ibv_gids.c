/* hr_ibv_gids.c - every verbs port and its valid GID entries in one pass.
 *
 * The address-driven device choice (pkg/fastpath) needs each port's GID
 * table with types and netdevs. Read from sysfs that is three files per
 * slot and Soft-RoCE has 1024 slots a port: under emulation, with ten
 * processes choosing at once, the reads alone outlasted connection dial
 * timeouts. ibv_query_gid_table is one ioctl per device returning only
 * the valid entries (rdma-core falls back to sysfs on kernels without it). */
#define _GNU_SOURCE
#include "hr.h"

#include <infiniband/verbs.h>
#include <stdlib.h>
#include <string.h>

int hr_ibv_ports_read(hr_port_row *ports, int max_ports, int *nports,
		      hr_gid_row *gids, int max_gids, int *ngids)
{
	*nports = 0;
	*ngids = 0;
	int ndev = 0;
	struct ibv_device **list = ibv_get_device_list(&ndev);
	if (!list)
		return ndev == 0 ? HR_OK : HR_ENODEV;
	int st = HR_OK;
	for (int i = 0; i < ndev && st == HR_OK; i++) {
		struct ibv_context *ctx = ibv_open_device(list[i]);
		if (!ctx)
			continue; /* a device going away while read */
		struct ibv_device_attr da;
		if (ibv_query_device(ctx, &da) != 0) {
			ibv_close_device(ctx);
			continue;
		}
		size_t total = 0;
		int first = *nports;
		for (uint32_t p = 1; p <= da.phys_port_cnt; p++) {
			struct ibv_port_attr pa;
			if (ibv_query_port(ctx, (uint8_t)p, &pa) != 0)
				continue;
			if (*nports >= max_ports) {
				st = HR_ENORES;
				break;
			}
			hr_port_row *r = &ports[(*nports)++];
			memset(r, 0, sizeof(*r));
			strncpy(r->dev, ibv_get_device_name(list[i]), sizeof(r->dev) - 1);
			r->port = p;
			r->state = pa.state;
			r->link_layer = pa.link_layer;
			total += (size_t)pa.gid_tbl_len;
		}
		if (st == HR_OK && total > 0) {
			struct ibv_gid_entry *es = calloc(total, sizeof(*es));
			ssize_t n = es ? ibv_query_gid_table(ctx, es, total, 0) : -1;
			if (!es)
				st = HR_ENOMEM;
			for (ssize_t k = 0; k < n && st == HR_OK; k++) {
				int row = -1;
				for (int q = first; q < *nports; q++)
					if (ports[q].port == es[k].port_num)
						row = q;
				if (row < 0)
					continue;
				if (*ngids >= max_gids) {
					st = HR_ENORES;
					break;
				}
				hr_gid_row *g = &gids[(*ngids)++];
				g->port_row = (uint32_t)row;
				g->index = es[k].gid_index;
				g->type = es[k].gid_type;
				g->ifindex = es[k].ndev_ifindex;
				memcpy(g->gid, es[k].gid.raw, 16);
			}
			free(es);
		}
		ibv_close_device(ctx);
	}
	ibv_free_device_list(list);
	return st;
}
