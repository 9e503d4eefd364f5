// Package emul emulates the RDMA protocols of four systems HatRPC is
// compared with (HatRPC §5.4) on the same engine (pkg/rdma's RPCEndpoint)
// and the same HatKV store, so a YCSB run compares only how requests and
// responses travel:
//
//   - AR-gRPC: eager (SEND into a pre-posted slot) below 4 KiB, Read-RNDV
//     (RTS, the receiver READs, FIN) from 4 KiB, in both directions.
//   - HERD: the request is one RDMA WRITE into the server's pre-known
//     buffer, which a busy server polls (no completion, no receive; an
//     event-driven server cannot watch memory and gets WRITE_WITH_IMM), the
//     response one SEND (eager; beyond a 4 KiB slot the engine falls back
//     to Write-RNDV). Busy: the engine's RFP request path with the client
//     held in server-reply mode (R = 1, warm-up pings in Dial); event:
//     Direct-WriteIMM (the same verbs, without RFP's mode machine).
//   - RFP: the request is written (RDMA_WRITE to a busy server's polled
//     buffer; WRITE_WITH_IMM to an event-driven one) and the client
//     fetches the response with RDMA READs; the server posts nothing.
//     R = 2^20 keeps the client in fetch mode on shm.
//   - Pilaf: GET is three RDMA READs against an index the server exports
//     (bucket, entry, value; each validated by a checksum, a torn or
//     changing read restarts); writes and scans are RPCs (Hybrid), after
//     which the server republishes the keys in the index.
//
// Requests and responses use a compact private binary encoding (codec.go)
// with records in kvstore's stored form. The server's index is kept for
// writes through every emulation, so a load phase through any of them
// fills it; NewServer also fills it from the store's contents.
package emul
