// Package ycsb is the workload side of the hatkv benchmark: YCSB property
// files (Properties, with -P/-p semantics and the core workloads A-F
// embedded by name), the CoreWorkload key, value and operation generators
// ported from YCSB (uniform, zipfian, scrambled zipfian with FNV-1a 64,
// skewed latest, hotspot; DiscreteGenerator for the operation mix), the
// HatRPC extension operations MultiRead and MultiUpdate
// (multireadproportion, multiupdateproportion, batchsize), a
// multi-threaded Run loop against a DB interface, and per-operation
// HdrHistogram measurements rendered as text, CSV, JSON or an SVG plot.
//
// Keys follow YCSB ("user" + FNV-hashed record number) but are zero-padded
// to keylength bytes (24 by default, the HatRPC paper's key size); set
// keylength=0 for YCSB's exact keys. Random generators take an explicit
// *rand.Rand per client thread, so a run is reproducible from its seed.
//
// ScrambledZipfian uses YCSB's precomputed zeta for 10^10 items
// (26.46902820178302); some YCSB revisions declare ITEM_COUNT as 10^16
// while keeping that zeta, which does not match it, so 10^10 is used.
package ycsb
