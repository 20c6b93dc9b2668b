package main

import (
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// The CLI reaches the library through its public packages only
// (docs/adr/0077-cli-imports-public-packages.md): no file of this module
// imports a package under the library's internal/, except that tests may
// use the test harness, internal/testdb.
func TestImportsOnlyPublicLibraryPackages(t *testing.T) {
	const lib = "github.com/pgbackoff/pgbackoff/"
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") {
			return err
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			if !strings.HasPrefix(p, lib+"internal/") {
				continue
			}
			if strings.HasSuffix(path, "_test.go") && p == lib+"internal/testdb" {
				continue
			}
			t.Errorf("%s imports %s: the CLI uses the library's public packages only", path, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
