// Package etcd is service discovery through etcd for pkg/cluster and
// pkg/server: a Resolver (a cluster.Watcher) that watches a service's
// prefix and pushes every change to a cluster.Client, and a Registrar
// (a server.Registrar) that announces a server under that prefix with a
// lease it keeps alive, and withdraws it on Shutdown.
//
// The layout is etcd's own naming/endpoints (the one gRPC-Go's etcd
// resolver reads): the server at addr of service S is the key "S/addr"
// whose value is the JSON {"Op":0,"Addr":"addr","Metadata":...}, so
// servers registered by endpoints.Manager (or etcdctl) are found here and
// the other way round. Entries whose value is not that (not JSON, no
// address, no port, an unspecified host) are skipped and logged once per
// key. Both take a *clientv3.Client the caller configures (endpoints,
// TLS, auth, keep-alive) and closes after them.
//
// See docs/design/cluster.md (Registries).
package etcd
