// Package pgserver is the one place that finds a PostgreSQL server for the
// tests (internal/testdb), the demo (backoffctl demo) and the benchmarks
// (bench). Start tries, in order:
//
//  1. a server given by URL (the caller's flag, else TEST_DATABASE_URL, else
//     DATABASE_URL: see URLFromEnv);
//  2. a container, when the program chose a ContainerEngine (engine.go:
//     Testcontainers for the tests, from internal/containers; the docker
//     command for the demo and the benchmarks, StartWithEngine), a Docker
//     engine answers and an image can be had: BACKOFF_TEST_PG_IMAGE when
//     set; else postgres:17-alpine when present or pullable (the
//     Testcontainers engine never pulls); else the image
//     pgbackoff/postgres:<major>-local, built in seconds from this machine's
//     Debian PostgreSQL binaries (build-pg-image.sh) and kept (see
//     ChooseImage);
//  3. a temporary cluster made with the machine's PostgreSQL server binaries
//     (see FindBinaries: BACKOFF_PG_BINDIR, PATH, pg_config --bindir, the
//     Debian, PGDG and Homebrew locations), run as the "postgres" OS user
//     when the caller is root;
//  4. otherwise an error whose first line says what to install.
//
// BACKOFF_PG_SERVER=local or =docker skips the other kinds (CI uses it to
// choose per run).
package pgserver

import (
	"bufio"
	"context"
	_ "embed" // build-pg-image.sh
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

// DefaultImage is the image tried first when BACKOFF_TEST_PG_IMAGE is not
// set.
const DefaultImage = "postgres:17-alpine"

// InstallHint is the one line that tells a user without any server what to
// do.
const InstallHint = "install PostgreSQL's server binaries (Debian/Ubuntu: apt-get install postgresql; " +
	"macOS: brew install postgresql@17) or start Docker, or set TEST_DATABASE_URL"

// TestSettings are the settings of the servers the tests start (a
// package's own, or the container make test shares between packages):
// throwaway servers, so no durability.
var TestSettings = []string{"max_connections=300", "fsync=off", "synchronous_commit=off", "full_page_writes=off"}

// Kinds of server.
const (
	KindURL    = "url"
	KindDocker = "docker"
	KindLocal  = "local"
)

// Server is a running PostgreSQL and how to stop it.
type Server struct {
	// URL connects as a superuser to the maintenance database.
	URL string
	// Kind says where the server came from: KindURL, KindDocker or
	// KindLocal.
	Kind string
	// Source names the environment variable or flag a KindURL server came
	// from, the image of a container, the binary directory of a local
	// cluster.
	Source string
	// ContainerID is the container's id when Kind is KindDocker.
	ContainerID string
	// Skipped says, for a server Start chose, why it did not take the
	// earlier choices (e.g. "no Docker engine answers"), so a caller can
	// tell its user.
	Skipped []string

	stop      func(context.Context) error
	local     *localCluster
	container Container
	engine    string // the ContainerEngine's Name, for Describe
}

// Stop stops a server this package started; a server given by URL is left
// alone.
func (s *Server) Stop(ctx context.Context) error {
	if s == nil || s.stop == nil {
		return nil
	}
	return s.stop(ctx)
}

// Describe is one line saying which server this is, for a person: e.g.
// "a temporary local cluster from /usr/lib/postgresql/15/bin".
func (s *Server) Describe() string {
	switch s.Kind {
	case KindDocker:
		return "a Docker container from image " + s.Source + " (" + s.engine + ")"
	case KindLocal:
		if s.local != nil && s.local.memory {
			return "a temporary local cluster from " + s.Source + ", in memory (" + filepath.Dir(s.local.dir) + ")"
		}
		return "a temporary local cluster from " + s.Source
	default:
		return "the server at " + hostOf(s.URL) + " (" + s.Source + ")"
	}
}

// Version asks the server for its version, e.g. "15.14".
func (s *Server) Version(ctx context.Context) (string, error) {
	conn, err := pgx.Connect(ctx, s.URL)
	if err != nil {
		return "", fmt.Errorf("connect to read the server version: %w", err)
	}
	defer conn.Close(ctx)
	var v string
	if err := conn.QueryRow(ctx, "SHOW server_version").Scan(&v); err != nil {
		return "", fmt.Errorf("read the server version: %w", err)
	}
	if i := strings.IndexByte(v, ' '); i > 0 {
		v = v[:i]
	}
	return v, nil
}

// Controllable reports whether Restart, Pause and Resume work: for a server
// this package started, not for one given by URL.
func (s *Server) Controllable() bool { return s.Kind == KindDocker || s.Kind == KindLocal }

// Restart stops the server with PostgreSQL's fast shutdown (SIGINT: sessions
// are cut, a checkpoint is written) and starts it again. A container's
// published port may change: s.URL is updated.
func (s *Server) Restart(ctx context.Context) error {
	switch s.Kind {
	case KindLocal:
		return s.local.restart(ctx)
	case KindDocker:
		if err := s.container.Restart(ctx); err != nil {
			return err
		}
		u, err := containerReady(ctx, s.container)
		if err != nil {
			return fmt.Errorf("after restart: %w", err)
		}
		s.URL = u
		return nil
	}
	return errors.New("restart: a server given by URL is not this package's to restart")
}

// Pause freezes every process of the server (docker pause; SIGSTOP for a
// local cluster) until Resume.
func (s *Server) Pause(ctx context.Context) error {
	switch s.Kind {
	case KindLocal:
		return s.local.signalAll(stopSignal)
	case KindDocker:
		// runc's cgroup freezer gives up ("unable to freeze") when the
		// machine is busy; a retry a moment later succeeds.
		var err error
		for try := 0; try < 5; try++ {
			if err = s.container.Pause(ctx); err == nil {
				return nil
			}
			time.Sleep(200 * time.Millisecond)
		}
		return err
	}
	return errors.New("pause: a server given by URL is not this package's to pause")
}

// Resume undoes Pause.
func (s *Server) Resume(ctx context.Context) error {
	switch s.Kind {
	case KindLocal:
		return s.local.signalAll(contSignal)
	case KindDocker:
		return s.container.Resume(ctx)
	}
	return errors.New("resume: a server given by URL is not this package's to resume")
}

// URLFromEnv returns the server named by the environment, TEST_DATABASE_URL
// then DATABASE_URL, and the name of the variable it came from; "", "" when
// neither is set.
func URLFromEnv() (string, string) {
	for _, k := range []string{"TEST_DATABASE_URL", "DATABASE_URL"} {
		if v := os.Getenv(k); v != "" {
			return v, k
		}
	}
	return "", ""
}

// FromURL wraps an existing server; source names where the URL came from.
func FromURL(u, source string) *Server { return &Server{URL: u, Kind: KindURL, Source: source} }

// Start picks a server: url when given (source names where it came from);
// else a Docker container, through the ContainerEngine a harness chose
// (SetContainerEngine), when a Docker engine answers and an image can be
// had; else a temporary local cluster; else an error whose first line says
// what to install. settings ("name=value") apply to servers it starts.
func Start(ctx context.Context, url, source string, settings ...string) (*Server, error) {
	return StartWithEngine(ctx, engine, url, source, settings...)
}

// StartWithEngine is Start with the containers started by e instead (nil:
// none). The demo and the benchmarks pass DockerCommand(): their modules
// cannot require Testcontainers (ADR 0086).
func StartWithEngine(ctx context.Context, e ContainerEngine, url, source string, settings ...string) (*Server, error) {
	if url != "" {
		return FromURL(url, source), nil
	}
	only := os.Getenv("BACKOFF_PG_SERVER")
	switch only {
	case "", "docker", "local":
	default:
		return nil, fmt.Errorf("BACKOFF_PG_SERVER=%q: want docker, local or nothing", only)
	}
	var skipped []string
	if only != "local" {
		s, err := startDocker(ctx, e, settings)
		if err == nil {
			return s, nil
		}
		if only == "docker" {
			return nil, fmt.Errorf("BACKOFF_PG_SERVER=docker: %w", err)
		}
		skipped = append(skipped, err.Error())
	}
	s, err := StartLocal(ctx, settings...)
	if err == nil {
		s.Skipped = skipped
		return s, nil
	}
	if only == "local" {
		return nil, fmt.Errorf("BACKOFF_PG_SERVER=local: %w", err)
	}
	skipped = append(skipped, err.Error())
	return nil, fmt.Errorf("no PostgreSQL server: %s\n(%s)", InstallHint, strings.Join(skipped, "; "))
}

// startDocker starts a container with e when a Docker engine answers and an
// image can be had.
func startDocker(ctx context.Context, e ContainerEngine, settings []string) (*Server, error) {
	if e == nil {
		return nil, errors.New(NoEngine)
	}
	if !dockerAnswers(ctx, e) {
		return nil, errors.New("no Docker engine answers")
	}
	image, err := chooseImage(ctx, e)
	if err != nil {
		return nil, err
	}
	return startContainer(ctx, e, image, settings)
}

// NoEngine is why a test package started no container itself: the tests'
// containers are started with Testcontainers, by make test (one server for
// the library's and the CLI's packages, given as TEST_DATABASE_URL) and by
// the test modules that require internal/containers.
const NoEngine = "no container engine here (make test starts the tests' container with Testcontainers when Docker answers)"

// ChooseImage picks the container's image: BACKOFF_TEST_PG_IMAGE when
// set; else DefaultImage when present; else pgbackoff/postgres:<major>-local
// when built before; else DefaultImage when it can be pulled (20 s at most);
// else pgbackoff/postgres:<major>-local, built from this machine's Debian
// PostgreSQL binaries (build-pg-image.sh, a few seconds). It asks the
// engine SetContainerEngine chose.
func ChooseImage(ctx context.Context) (string, error) {
	if engine == nil {
		return "", errors.New(NoEngine)
	}
	return chooseImage(ctx, engine)
}

func chooseImage(ctx context.Context, engine ContainerEngine) (string, error) {
	if img := os.Getenv("BACKOFF_TEST_PG_IMAGE"); img != "" {
		return img, nil
	}
	if engine.ImageExists(ctx, DefaultImage) {
		return DefaultImage, nil
	}
	major := DebianMajor()
	local := "pgbackoff/postgres:" + major + "-local"
	if major != "" && engine.ImageExists(ctx, local) {
		return local, nil // built before: no registry to wait for again
	}
	// Test packages run in parallel: one of them pulls or builds, the
	// others wait for it and find the image.
	unlock, err := lockFile(filepath.Join(os.TempDir(), "pgbackoff-pg-image.lock"))
	if err != nil {
		return "", err
	}
	defer unlock()
	if major != "" && engine.ImageExists(ctx, local) {
		return local, nil
	}
	pctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	err = engine.Pull(pctx, DefaultImage)
	cancel()
	if err == nil {
		return DefaultImage, nil
	}
	if major == "" {
		return "", fmt.Errorf("%s cannot be pulled and no Debian PostgreSQL binaries (/usr/lib/postgresql/*/bin) can make a local image", DefaultImage)
	}
	if err := buildImage(ctx, engine, local, major); err != nil {
		return "", fmt.Errorf("%s cannot be pulled; build %s: %w", DefaultImage, local, err)
	}
	return local, nil
}

// lockFile takes an exclusive lock on path (created if missing) until
// unlock is called.
func lockFile(path string) (unlock func(), err error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o666)
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	return func() { f.Close() }, nil
}

//go:embed build-pg-image.sh
var buildImageScript string

// BuildImage builds the image tag from this machine's Debian PostgreSQL
// major binaries (see buildImage) with the engine SetContainerEngine chose.
func BuildImage(ctx context.Context, tag, major string) error {
	if engine == nil {
		return errors.New(NoEngine)
	}
	return buildImage(ctx, engine, tag, major)
}

// buildImage builds a PostgreSQL image tagged tag from this machine's
// Debian PostgreSQL major binaries (/usr/lib/postgresql/<major>), for
// machines that cannot pull images: build-pg-image.sh assembles its root
// filesystem and names its settings, and e imports them.
func buildImage(ctx context.Context, e ContainerEngine, tag, major string) error {
	script := func(arg string) *exec.Cmd {
		cmd := exec.CommandContext(ctx, "bash", "-s", "--", arg)
		cmd.Stdin = strings.NewReader(buildImageScript)
		cmd.Env = append(os.Environ(), "PG_MAJOR="+major)
		return cmd
	}
	out, err := script("--changes").Output()
	if err != nil {
		return fmt.Errorf("build-pg-image.sh --changes: %w%s", err, stderrOf(err))
	}
	changes := strings.Split(strings.TrimSpace(string(out)), "\n")
	cmd := script("--tar")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	tar, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("build-pg-image.sh --tar: %w", err)
	}
	// The script writes nothing until the root filesystem is assembled: a
	// script that failed before must not leave an empty image behind.
	r := bufio.NewReaderSize(tar, 64*1024)
	importErr := errors.New("build-pg-image.sh --tar wrote nothing")
	if _, err := r.Peek(1); err == nil {
		importErr = e.ImportImage(ctx, r, tag, changes)
	}
	_, _ = io.Copy(io.Discard, r) // let the script end
	if err := cmd.Wait(); err != nil {
		return fmt.Errorf("build-pg-image.sh --tar: %w: %s", err, strings.TrimSpace(stderr.String()))
	}
	return importErr
}

// StartContainer starts PostgreSQL from image with the container engine
// SetContainerEngine chose, its port published on 127.0.0.1, and waits
// until it answers SQL; extra server settings are given as "name=value".
func StartContainer(ctx context.Context, image string, settings ...string) (*Server, error) {
	if engine == nil {
		return nil, errors.New(NoEngine)
	}
	return startContainer(ctx, engine, image, settings)
}

func startContainer(ctx context.Context, engine ContainerEngine, image string, settings []string) (*Server, error) {
	cmd := []string{"postgres", "-c", "fsync=off"}
	for _, s := range settings {
		cmd = append(cmd, "-c", s)
	}
	env := map[string]string{"POSTGRES_USER": "postgres", "POSTGRES_PASSWORD": "postgres", "POSTGRES_DB": "postgres"}
	c, err := engine.Start(ctx, image, env, cmd)
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", image, err)
	}
	u, err := containerReady(ctx, c)
	if err != nil {
		_ = c.Remove(context.WithoutCancel(ctx))
		return nil, fmt.Errorf("start %s: %w", image, err)
	}
	return &Server{URL: u, Kind: KindDocker, Source: image, ContainerID: c.ID(), stop: c.Remove, container: c, engine: engine.Name()}, nil
}

// containerReady waits (2 minutes at most) until the container's server
// answers SQL on its published port and returns its URL. A SQL probe works
// for the official images, whose init server listens on no TCP port, and
// for images without nc or cat.
func containerReady(ctx context.Context, c Container) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	var last error
	for {
		addr, err := c.Address(ctx)
		if err == nil {
			u := "postgres://postgres:postgres@" + addr + "/postgres?sslmode=disable&connect_timeout=5"
			var conn *pgx.Conn
			if conn, err = pgx.Connect(ctx, u); err == nil {
				err = conn.Ping(ctx)
				conn.Close(ctx)
				if err == nil {
					return u, nil
				}
			}
		}
		last = err
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("container %.12s does not answer SQL: %w", c.ID(), last)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// stderrOf is ": <stderr>" of a failed command, or "".
func stderrOf(err error) string {
	var ee *exec.ExitError
	if errors.As(err, &ee) && len(ee.Stderr) > 0 {
		return ": " + strings.TrimSpace(string(ee.Stderr))
	}
	return ""
}

// dockerAnswers is engineAnswers; a test replaces it.
var dockerAnswers = engineAnswers

// DockerAvailable reports whether a Docker engine answers the container
// engine SetContainerEngine chose (false when none was chosen).
func DockerAvailable(ctx context.Context) bool {
	return engine != nil && engineAnswers(ctx, engine)
}

func engineAnswers(ctx context.Context, e ContainerEngine) bool {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	return e.Available(ctx)
}

func dockerCLI(ctx context.Context, args ...string) error {
	out, err := exec.CommandContext(ctx, "docker", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("docker %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// hostOf is the host:port of a URL or keyword/value connection string,
// without credentials.
func hostOf(s string) string {
	if u, err := url.Parse(s); err == nil && u.Host != "" {
		return u.Host
	}
	for _, f := range strings.Fields(s) {
		if strings.HasPrefix(f, "host=") {
			return strings.TrimPrefix(f, "host=")
		}
	}
	return "a server"
}

// InstallExtensionFiles puts extension files (name -> content, e.g.
// "backoff.control") into the server's extension directory (pg_config
// SHAREDIR/extension), for a test of CREATE EXTENSION: copied into a
// container; written beside a local cluster's binaries and put back as they
// were (removed, or their old content restored) when the server stops. A
// server given by URL is not this package's to change: the caller installs
// the files there itself (make install-extension).
func (s *Server) InstallExtensionFiles(ctx context.Context, files map[string][]byte) error {
	if !s.Controllable() {
		return errors.New("install extension files: a server given by URL is not this package's to change")
	}
	conn, err := pgx.Connect(ctx, s.URL)
	if err != nil {
		return fmt.Errorf("install extension files: %w", err)
	}
	var sharedir string
	err = conn.QueryRow(ctx, "SELECT setting FROM pg_catalog.pg_config WHERE name = 'SHAREDIR'").Scan(&sharedir)
	conn.Close(ctx)
	if err != nil {
		return fmt.Errorf("install extension files: read SHAREDIR: %w", err)
	}
	dir := sharedir + "/extension/"
	for name, body := range files {
		if s.Kind == KindDocker {
			if err := s.container.CopyFile(ctx, body, dir+name); err != nil {
				return fmt.Errorf("install extension file %s: %w", name, err)
			}
			continue
		}
		path := dir + name
		old, readErr := os.ReadFile(path)
		if err := os.WriteFile(path, body, 0o644); err != nil {
			return fmt.Errorf("install extension file: %w", err)
		}
		restore := func() error { return os.Remove(path) }
		if readErr == nil {
			restore = func() error { return os.WriteFile(path, old, 0o644) }
		}
		stop := s.stop
		s.stop = func(ctx context.Context) error { return errors.Join(stop(ctx), restore()) }
	}
	return nil
}
