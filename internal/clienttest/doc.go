// Package clienttest runs the test suites of pgbackoff's clients in other
// languages (clients/) against a fresh database from the project's own
// server finder (internal/testdb), so that `make test` covers them. It has
// no non-test code.
package clienttest
