// Package fastpath is the glue between the RPC runtime (pkg/client,
// pkg/server) and the HatRPC engine (pkg/rdma's RPCEndpoint): the shared
// verbs device of a process, the translation of a function's resolved hints
// into an endpoint configuration and a protocol per message size, the
// compatibility check of a client plan against a server plan, the liveness
// link of a lane, and the adaptive poller that moves event-polling
// endpoints between spinning and blocking with the CPU load.
//
// A lane is one RPCEndpoint pair serving one function of one client
// connection: one call at a time, the whole exchange in C. The TCP
// connection that bootstrapped the pair stays open as the lane's liveness
// link: when either process dies the kernel closes it, and the other side
// aborts the endpoint instead of waiting in C for a peer that is gone.
package fastpath
