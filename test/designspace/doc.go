// Package designspace holds the design-space test: for a sample of hint
// sets that covers every value of every planning hint on both sides, and
// for message sizes on both sides of every row boundary of the plan, it
// makes real calls through a server and a client in one process and
// checks that the route (tcp, lane, FLOCK) and the engine protocol each
// side's counters saw are the ones the plan says (expected). It runs on
// the provider HATRPC_PROVIDER names (shm by default, ibv on the
// Soft-RoCE guest of make test-rdma).
package designspace
