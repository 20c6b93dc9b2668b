// Package pgserver finds a PostgreSQL to try pgbackoff on: the server a
// URL names, else a throwaway one that Stop removes, a container started
// with the docker command or else a temporary cluster made with the
// machine's PostgreSQL server binaries. backoffctl demo runs on it; the
// benchmarks of pgbackoff find their servers the same way, in the same
// code, and so do its tests, except that their containers are started
// with Testcontainers instead of the docker command.
//
// BACKOFF_PG_SERVER=docker or =local takes only that kind;
// BACKOFF_TEST_PG_IMAGE names the container's image and BACKOFF_PG_BINDIR
// the binaries of a local cluster.
package pgserver

import (
	"context"

	"github.com/pgbackoff/pgbackoff/internal/pgserver"
)

// Kinds of server.
const (
	KindURL    = pgserver.KindURL    // given by a URL; Stop leaves it alone
	KindDocker = pgserver.KindDocker // a container this package started
	KindLocal  = pgserver.KindLocal  // a temporary local cluster this package started
)

// Server is a running PostgreSQL and how to stop it.
type Server struct {
	// URL connects as a superuser to the maintenance database.
	URL string
	// Kind says where the server came from: KindURL, KindDocker or
	// KindLocal.
	Kind string
	// Source names where a KindURL server came from (a flag, a variable),
	// the image of a container, the binary directory of a local cluster.
	Source string
	// Skipped says why Start did not take the kinds it tried first (e.g.
	// "no Docker engine answers"), so that a caller can tell its user.
	Skipped []string

	srv *pgserver.Server
}

// URLFromEnv returns the server the environment names, TEST_DATABASE_URL
// then DATABASE_URL, and the name of the variable it came from; "", ""
// when neither is set.
func URLFromEnv() (url, source string) { return pgserver.URLFromEnv() }

// Start returns the server url names when url is not empty (source says
// where it came from); else it starts a container when a Docker engine
// answers and an image can be had, else a temporary local cluster, else it
// returns an error whose first line says what to install. settings
// ("name=value") apply to a server it starts.
func Start(ctx context.Context, url, source string, settings ...string) (*Server, error) {
	// The docker command: this package is the CLI's, whose module cannot
	// require Testcontainers (docs/adr/0088-tests-start-containers-with-testcontainers.md).
	s, err := pgserver.StartWithEngine(ctx, pgserver.DockerCommand(), url, source, settings...)
	if err != nil {
		return nil, err
	}
	return &Server{URL: s.URL, Kind: s.Kind, Source: s.Source, Skipped: s.Skipped, srv: s}, nil
}

// Stop stops and removes a server Start started; one given by URL is left
// alone.
func (s *Server) Stop(ctx context.Context) error { return s.srv.Stop(ctx) }

// Describe is one line saying which server this is, for a person: e.g.
// "a temporary local cluster from /usr/lib/postgresql/15/bin".
func (s *Server) Describe() string { return s.srv.Describe() }
