// Command pgcontainer starts one PostgreSQL in a container with
// Testcontainers (package containers: the local image, published on
// 127.0.0.1 only, no reaper), for the tests of the library's and the CLI's
// modules, which cannot require Testcontainers themselves
// (docs/adr/0088-tests-start-containers-with-testcontainers.md). The
// server runs with the tests' settings (pgserver.TestSettings) and has the
// files of CREATE EXTENSION backoff, rendered from this tree.
//
//	pgcontainer
//
// prints the server's superuser URL on a line of its own on stdout and
// keeps the container until it is stopped (SIGINT, SIGTERM, SIGHUP) or its
// parent process exits; then it removes the container.
//
//	pgcontainer -- COMMAND [ARG...]
//
// runs COMMAND with TEST_DATABASE_URL set to the server's URL, removes the
// container when COMMAND ends and exits with its status (make test runs
// the library's and the CLI's packages so). It starts no container, and
// runs COMMAND as it is, when the tests are given a server
// (TEST_DATABASE_URL, DATABASE_URL) or told to start local clusters
// (BACKOFF_PG_SERVER=local), and when no Docker engine answers, unless
// BACKOFF_PG_SERVER=docker: then it fails.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
	"time"

	tclog "github.com/testcontainers/testcontainers-go/log"

	"github.com/pgbackoff/pgbackoff/internal/containers"
	"github.com/pgbackoff/pgbackoff/internal/distribution"
	"github.com/pgbackoff/pgbackoff/internal/pgserver"
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

// exitNoDocker is the exit status when no Docker engine answers and no
// command was given.
const exitNoDocker = 3

func run(args []string, stdout, stderr io.Writer) int {
	var command []string
	switch {
	case len(args) == 0:
	case args[0] == "--" && len(args) > 1:
		command = args[1:]
	default:
		fmt.Fprintln(stderr, "usage: pgcontainer [-- COMMAND [ARG...]]")
		return 2
	}
	if command != nil {
		if u, source := pgserver.URLFromEnv(); u != "" {
			fmt.Fprintf(stderr, "pgcontainer: no container: the tests use the server of %s\n", source)
			return runCommand(command, nil, stderr)
		}
		if os.Getenv("BACKOFF_PG_SERVER") == "local" {
			return runCommand(command, nil, stderr)
		}
	}

	ctx := context.Background()
	// Testcontainers' own lines (creating, starting, waiting) would run
	// into the tests' output; this command says in one line what it started.
	tclog.SetDefault(tclog.NewNoopLogger())
	containers.Use()
	if !pgserver.DockerAvailable(ctx) {
		why := "no Docker engine answers Testcontainers"
		switch {
		case command == nil:
			fmt.Fprintln(stderr, "pgcontainer: "+why)
			return exitNoDocker
		case os.Getenv("BACKOFF_PG_SERVER") == "docker":
			fmt.Fprintf(stderr, "pgcontainer: BACKOFF_PG_SERVER=docker: %s\n", why)
			return 1
		}
		fmt.Fprintf(stderr, "pgcontainer: no container (%s): each test package starts a local cluster\n", why)
		return runCommand(command, nil, stderr)
	}

	srv, err := start(ctx)
	if err != nil {
		fmt.Fprintf(stderr, "pgcontainer: %v\n", err)
		return 1
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := srv.Stop(ctx); err != nil {
			fmt.Fprintf(stderr, "pgcontainer: remove the container: %v\n", err)
		}
	}()
	version, err := srv.Version(ctx)
	if err != nil {
		fmt.Fprintf(stderr, "pgcontainer: %v\n", err)
		return 1
	}
	fmt.Fprintf(stderr, "pgcontainer: PostgreSQL %s, %s, container %.12s\n", version, srv.Describe(), srv.ContainerID)

	if command != nil {
		return runCommand(command, []string{"TEST_DATABASE_URL=" + srv.URL}, stderr)
	}
	fmt.Fprintln(stdout, srv.URL)
	waitForStop()
	return 0
}

// start starts the container and installs the extension files.
func start(ctx context.Context) (*pgserver.Server, error) {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	image, err := pgserver.ChooseImage(ctx)
	if err != nil {
		return nil, err
	}
	srv, err := pgserver.StartContainer(ctx, image, pgserver.TestSettings...)
	if err != nil {
		return nil, err
	}
	files, err := distribution.ExtensionFiles()
	if err == nil {
		err = srv.InstallExtensionFiles(ctx, files)
	}
	if err != nil {
		_ = srv.Stop(context.WithoutCancel(ctx))
		return nil, err
	}
	return srv, nil
}

// runCommand runs command with env added to this process's environment,
// passes on the signals that would stop this process, and returns its exit
// status.
func runCommand(command, env []string, stderr io.Writer) int {
	cmd := exec.Command(command[0], command[1:]...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	sig := make(chan os.Signal, 4)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(sig)
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(stderr, "pgcontainer: %v\n", err)
		return 1
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	for {
		select {
		case s := <-sig:
			_ = cmd.Process.Signal(s)
		case err := <-done:
			var exit *exec.ExitError
			switch {
			case err == nil:
				return 0
			case errors.As(err, &exit) && exit.ExitCode() > 0:
				return exit.ExitCode()
			default:
				fmt.Fprintf(stderr, "pgcontainer: %s: %v\n", command[0], err)
				return 1
			}
		}
	}
}

// waitForStop returns on SIGINT, SIGTERM or SIGHUP, or when the parent
// process has exited (this process is then another's child).
func waitForStop() {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(sig)
	parent := os.Getppid()
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-sig:
			return
		case <-tick.C:
			if os.Getppid() != parent {
				return
			}
		}
	}
}
