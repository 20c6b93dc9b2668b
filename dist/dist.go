// Package dist holds the one install file, dist/backoff.sql: the whole
// schema backoff as plain SQL, generated from sql/migrations by `make
// generate` (docs/adr/0031-one-install-file.md).
//
// It exists for programs and tests that install the schema without the
// migrator: running the file needs only a connection, where the migrator
// (package migrations) needs tern and its template libraries. The tests of
// package client build their template database from it, so a program that
// imports client resolves none of the migrator's modules
// (docs/adr/0085-client-importers-resolve-few-modules.md).
package dist

import (
	_ "embed"
	"regexp"
	"strconv"
)

// BackoffSQL is dist/backoff.sql. Run it in one transaction, as `psql -1`
// does; it sets its own search_path.
//
//go:embed backoff.sql
var BackoffSQL string

var sourcesLine = regexp.MustCompile(`(?m)^-- Sources: sha256 ([0-9a-f]{64})$`)

// SourcesDigest is the digest of sql/ the file was generated from (see
// package sql's Digest); "" if the file records none.
func SourcesDigest() string {
	if m := sourcesLine.FindStringSubmatch(BackoffSQL); m != nil {
		return m[1]
	}
	return ""
}

var versionLine = regexp.MustCompile(`(?m)^INSERT INTO backoff\.schema_migrations \(version\) VALUES \(([0-9]+)\);$`)

// SchemaVersion is the migration version the file installs, the number it
// records in backoff.schema_migrations; 0 if the file records none.
func SchemaVersion() int32 {
	m := versionLine.FindStringSubmatch(BackoffSQL)
	if m == nil {
		return 0
	}
	v, _ := strconv.ParseInt(m[1], 10, 32)
	return int32(v)
}
