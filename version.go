// Package pgbackoff holds what the whole repository shares: the release
// version. The SQL lives in sql/, the Go client in client/, the CLI in
// cmd/backoffctl (a module of its own).
package pgbackoff

// Version is the release of pgbackoff this tree is: one version for the SQL
// schema (the extension's default_version and dist/backoff.sql), the Go
// library and the backoffctl CLI. `make release VERSION=…` rewrites it;
// TestVersionIsOne keeps every other place equal to it.
const Version = "0.1.0"
