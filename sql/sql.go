// Package sql embeds pgbackoff's SQL: the numbered migrations and the
// function files they install. It holds no logic; internal/migrations turns
// these files into tern migrations.
package sql

import "embed"

// Files holds migrations/ (numbered tern migrations and released function
// snapshots) and functions/ (the working copy of every function, one per
// file, plus install.sql listing them in dependency order). "all:" keeps
// the private functions, whose files start with "_".
//
//go:embed all:migrations all:functions
var Files embed.FS
