// Package sql embeds pgbackoff's SQL: the numbered migrations and the
// function files they install. It holds no logic; internal/migrations turns
// these files into tern migrations.
package sql

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"io/fs"
	"sort"
)

// Files holds migrations/ (numbered tern migrations and released function
// snapshots) and functions/ (the working copy of every function, one per
// file, plus install.sql listing them in dependency order). "all:" keeps
// the private functions, whose files start with "_".
//
//go:embed all:migrations all:functions
var Files embed.FS

// Digest is a SHA-256 over the path and content of every embedded file, in
// path order. dist/backoff.sql records the digest of the files it was
// generated from, so that a harness that installs that file instead of
// running the migrations (internal/testdb) can tell that sql/ changed
// since the last `make generate`.
func Digest() string {
	var paths []string
	_ = fs.WalkDir(Files, ".", func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			paths = append(paths, path)
		}
		return err
	})
	sort.Strings(paths)
	h := sha256.New()
	for _, p := range paths {
		body, _ := fs.ReadFile(Files, p)
		fmt.Fprintf(h, "%s\x00%d\x00", p, len(body))
		h.Write(body)
	}
	return hex.EncodeToString(h.Sum(nil))
}
