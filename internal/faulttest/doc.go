// Package faulttest holds pgbackoff's fault tests: real worker processes
// and a real PostgreSQL in a Docker container that the tests kill,
// restart, pause and cut off (docs/reliability.md,
// docs/adr/0018-fault-tests.md). Each test ends by accounting for every
// job: lost = 0 and double completions = 0.
//
// The tests restart and pause the package's container, so they run one
// after another (no t.Parallel) and need the container: with
// TEST_DATABASE_URL they skip, unless CI is set. TestSettleReplyLost needs
// only its proxy and a server, and runs with TEST_DATABASE_URL too.
//
// It is a Go module of its own (beside the library, joined by go.work) so
// that it can start its container with Testcontainers
// (internal/containers) without the library's module requiring it
// (docs/adr/0086-testcontainers-in-a-module-of-its-own.md).
package faulttest
