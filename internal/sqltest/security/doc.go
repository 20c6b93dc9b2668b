// Package security holds the tests of pgbackoff's privilege model against a
// real PostgreSQL (migration 003, docs/adr/0017-least-privilege-and-security-definer.md):
// what each of backoff_producer, backoff_worker and backoff_admin may and may
// not do, that every public function is SECURITY DEFINER with a pinned
// search_path and owned by a role that is not a superuser, and that a
// function or operator planted earlier on a caller's search_path is never
// called by pgbackoff's functions. It also holds the bounded randomized
// argument "fuzz" of the SQL functions and the round-trip tests of hostile
// text through SQL and the Go client (docs/reliability.md).
package security
