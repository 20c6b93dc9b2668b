// Package docstest holds the tests that keep the repository's words and
// records usable without its history: no text cites a document, a work
// round, a session or an issue that is not in the repository, and the index
// of architecture decision records (docs/adr/README.md) matches the records'
// headers. It has no code of its own.
package docstest
