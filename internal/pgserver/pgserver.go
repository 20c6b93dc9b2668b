// Package pgserver provides a PostgreSQL server for tests, benchmarks and the
// demo: an existing one named by URL, a container started by Testcontainers,
// or a temporary cluster made with the machine's own PostgreSQL binaries.
package pgserver

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver for the container's wait strategy
	"github.com/moby/moby/api/types/network"
	"github.com/testcontainers/testcontainers-go"
	tcpostgres "github.com/testcontainers/testcontainers-go/modules/postgres"
	"github.com/testcontainers/testcontainers-go/wait"
)

// DefaultImage is the image started when BACKOFF_TEST_PG_IMAGE is not set.
const DefaultImage = "postgres:17-alpine"

// Server is a running PostgreSQL and how to stop it.
type Server struct {
	// URL connects as a superuser to the maintenance database.
	URL string
	// Kind says where the server came from: "url", "testcontainers" or "local".
	Kind string
	// Container is set when Kind is "testcontainers", for tests that restart
	// or pause the server.
	Container *tcpostgres.PostgresContainer
	// Skipped says, for a server Start chose, why it did not take the
	// earlier choices (e.g. "no Docker engine answers for Testcontainers"), so
	// a caller can tell its user.
	Skipped []string

	stop    func(context.Context) error
	restart func(context.Context) error
}

// Restart stops a local server (fast shutdown: sessions are disconnected)
// and starts it again on the same port and data directory.
func (s *Server) Restart(ctx context.Context) error {
	if s == nil || s.restart == nil {
		return errors.New("restart: only a local cluster started by this package can be restarted")
	}
	return s.restart(ctx)
}

// Stop stops a server this package started; a server given by URL is left
// alone.
func (s *Server) Stop(ctx context.Context) error {
	if s == nil || s.stop == nil {
		return nil
	}
	return s.stop(ctx)
}

// FromURL wraps an existing server.
func FromURL(url string) *Server { return &Server{URL: url, Kind: "url"} }

// Image is the image StartContainer uses: BACKOFF_TEST_PG_IMAGE or
// DefaultImage.
func Image() string {
	if img := os.Getenv("BACKOFF_TEST_PG_IMAGE"); img != "" {
		return img
	}
	return DefaultImage
}

// StartContainer starts PostgreSQL from image with Testcontainers; extra
// server settings are given as "name=value".
func StartContainer(ctx context.Context, image string, settings ...string) (*Server, error) {
	containerDefaults()
	var args []string
	for _, s := range settings {
		args = append(args, "-c", s)
	}
	c, err := tcpostgres.Run(ctx, image,
		tcpostgres.WithDatabase("postgres"),
		tcpostgres.WithUsername("postgres"),
		tcpostgres.WithPassword("postgres"),
		testcontainers.WithCmdArgs(args...),
		// A SQL probe works for the official images (whose init server
		// listens on no TCP port) and for images without nc or cat.
		testcontainers.WithWaitStrategy(wait.ForSQL("5432/tcp", "pgx", func(host string, port network.Port) string {
			return fmt.Sprintf("postgres://postgres:postgres@%s:%s/postgres?sslmode=disable", host, port.Port())
		}).WithStartupTimeout(2*time.Minute).WithPollInterval(200*time.Millisecond)),
	)
	if err != nil {
		if c != nil {
			_ = testcontainers.TerminateContainer(c)
		}
		return nil, fmt.Errorf("start %s with Testcontainers: %w", image, err)
	}
	url, err := c.ConnectionString(ctx, "sslmode=disable")
	if err != nil {
		_ = testcontainers.TerminateContainer(c)
		return nil, fmt.Errorf("container connection string: %w", err)
	}
	return &Server{URL: url, Kind: "testcontainers", Container: c, stop: func(context.Context) error {
		return testcontainers.TerminateContainer(c)
	}}, nil
}

// DockerAvailable reports whether a Docker engine answers.
func DockerAvailable(ctx context.Context) bool {
	containerDefaults() // before Testcontainers reads its configuration, once per process
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	p, err := testcontainers.NewDockerProvider()
	if err != nil {
		return false
	}
	defer p.Close()
	return p.Health(ctx) == nil
}

// Start picks a server the way the demo and the benchmarks do: url when
// given; else Testcontainers when Docker answers; else a temporary local
// cluster. settings apply to servers it starts.
func Start(ctx context.Context, url string, settings ...string) (*Server, error) {
	if url != "" {
		return FromURL(url), nil
	}
	var errs []error
	if DockerAvailable(ctx) {
		s, err := StartContainer(ctx, Image(), settings...)
		if err == nil {
			return s, nil
		}
		errs = append(errs, err)
	} else {
		errs = append(errs, errors.New("no Docker engine answers for Testcontainers"))
	}
	s, err := StartLocal(ctx, settings...)
	if err == nil {
		for _, e := range errs {
			s.Skipped = append(s.Skipped, e.Error())
		}
		return s, nil
	}
	return nil, fmt.Errorf("no PostgreSQL: pass a database URL, start Docker, or install PostgreSQL server binaries: %w", errors.Join(append(errs, err)...))
}

// containerDefaults sets Testcontainers' defaults for machines without an
// image registry or a routable gateway; an explicit setting in the
// environment wins. Testcontainers reads them once, at its first use.
func containerDefaults() {
	setDefaultEnv("TESTCONTAINERS_RYUK_DISABLED", "true")
	setDefaultEnv("TESTCONTAINERS_HOST_OVERRIDE", "127.0.0.1")
}

func setDefaultEnv(key, value string) {
	if _, ok := os.LookupEnv(key); !ok {
		os.Setenv(key, value)
	}
}
