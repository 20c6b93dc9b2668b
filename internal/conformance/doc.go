// Package conformance runs the cross-language conformance suite
// (conformance/, docs/adr/0069): every scenario of
// conformance/scenarios.json against the Go, Python and TypeScript
// adapters, each on a fresh database, with the end state of every job
// checked from SQL; and the mixed run, where workers of the three languages
// share queues, are killed and restarted, and no job may be lost or done
// twice. With BACKOFF_CONFORMANCE_SHARDED=1 both run through a PL/Proxy
// router over three shards (internal/shardcluster) instead. Its one
// non-test file builds the adapters, for the tests and the per-language
// lines of the benchmarks (bench/).
package conformance
