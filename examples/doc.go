// Package examples holds runnable examples of pgbackoff used from outside
// Go: a psql worker loop (psql/) and a Python worker (python/). The tests
// in this package run both against a real PostgreSQL, so they stay true.
package examples
