// Package examples holds runnable examples of pgbackoff: from outside Go, a
// psql worker loop (psql/) and a Python worker (python/), whose tests in
// this package run both against a real PostgreSQL so they stay true; a
// workflow orchestrator that acquires steps by id (workflow/, its own
// package and tests); and backoff.toml, the example configuration that
// `backoffctl demo` applies (built in as Config).
package examples
