// Package containers starts the test servers' PostgreSQL containers with
// Testcontainers (github.com/testcontainers/testcontainers-go and its
// postgres module), as a pgserver.ContainerEngine: the fault tests' own
// (Use, from their TestMain) and the one server make test gives the
// library's and the CLI's packages (cmd/pgcontainer).
//
// It is a Go module of its own, never published, so that no program that
// imports the library downloads Testcontainers or the Docker client: the
// library's module cannot require it (a user's go mod tidy would resolve
// it), and its packages reach it only through pgserver.SetContainerEngine,
// which a test package in a module that requires this one calls from its
// TestMain (docs/adr/0086-testcontainers-in-a-module-of-its-own.md).
//
// No image registry is reachable from the machines this runs on: images
// are built locally, from the machine's PostgreSQL binaries, imported
// through the Docker API, and never pulled, and Testcontainers'
// reaper (Ryuk, an image of its own) is switched off; every container is
// removed by the server's Stop instead.
package containers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"sync"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/network"
	"github.com/moby/moby/client"
	"github.com/testcontainers/testcontainers-go"
	"github.com/testcontainers/testcontainers-go/modules/postgres"
	"github.com/testcontainers/testcontainers-go/wait"

	"github.com/pgbackoff/pgbackoff/internal/pgserver"
)

// Use makes Testcontainers start every later pgserver container. Call it
// from TestMain, before testdb starts a server.
func Use() { pgserver.SetContainerEngine(New()) }

// New is the Testcontainers engine.
func New() pgserver.ContainerEngine {
	// The reaper's image cannot be pulled here; the containers are
	// removed by pgserver's Stop, and .ci/run removes what a crash left.
	setDefault("TESTCONTAINERS_RYUK_DISABLED", "true")
	// Without it Testcontainers reaches published ports through the
	// default gateway, an address outside this machine; the ports are
	// published on 127.0.0.1 only.
	setDefault("TESTCONTAINERS_HOST_OVERRIDE", "127.0.0.1")
	return &engine{}
}

func setDefault(key, value string) {
	if _, ok := os.LookupEnv(key); !ok {
		_ = os.Setenv(key, value)
	}
}

type engine struct {
	once     sync.Once
	provider *testcontainers.DockerProvider
	err      error
}

func (e *engine) Name() string { return "Testcontainers" }

func (e *engine) docker() (*testcontainers.DockerProvider, error) {
	e.once.Do(func() { e.provider, e.err = testcontainers.NewDockerProvider() })
	return e.provider, e.err
}

func (e *engine) Available(ctx context.Context) bool {
	p, err := e.docker()
	return err == nil && p.Health(ctx) == nil
}

func (e *engine) ImageExists(ctx context.Context, image string) bool {
	p, err := e.docker()
	if err != nil {
		return false
	}
	_, err = p.Client().ImageInspect(ctx, image)
	return err == nil
}

// Pull refuses: no registry is reachable, and a pull would wait for its
// timeout before pgserver builds the local image.
func (e *engine) Pull(context.Context, string) error {
	return errors.New("images are built locally (make pg-image), never pulled by the Testcontainers engine")
}

// ImportImage makes an image from a root filesystem through the Docker
// API (what docker import does), for the local image pgserver builds from
// the machine's PostgreSQL binaries.
func (e *engine) ImportImage(ctx context.Context, tar io.Reader, tag string, changes []string) error {
	p, err := e.docker()
	if err != nil {
		return err
	}
	res, err := p.Client().ImageImport(ctx, client.ImageImportSource{Source: tar, SourceName: "-"}, tag,
		client.ImageImportOptions{Changes: changes})
	if err != nil {
		return fmt.Errorf("import image %s: %w", tag, err)
	}
	defer res.Close()
	// The engine answers with a stream of JSON messages; a failure is one
	// with an error.
	dec := json.NewDecoder(res)
	for {
		var m struct {
			Error string `json:"error"`
		}
		if err := dec.Decode(&m); err == io.EOF {
			return nil
		} else if err != nil {
			return fmt.Errorf("import image %s: read the engine's answer: %w", tag, err)
		}
		if m.Error != "" {
			return fmt.Errorf("import image %s: %s", tag, m.Error)
		}
	}
}

// Start runs the image with Testcontainers' postgres module: env and cmd
// replace the module's (pgserver sets the same user, password and
// database, and the server settings on the command line).
func (e *engine) Start(ctx context.Context, image string, env map[string]string, cmd []string) (pgserver.Container, error) {
	c, err := postgres.Run(ctx, image,
		testcontainers.WithEnv(env),
		testcontainers.WithCmd(cmd...),
		// Published on loopback only, on a port the engine chooses:
		// Testcontainers binds every interface by default.
		testcontainers.WithHostConfigModifier(func(hc *container.HostConfig) {
			hc.PortBindings = network.PortMap{
				network.MustParsePort("5432/tcp"): {{HostIP: netip.MustParseAddr("127.0.0.1")}},
			}
		}),
		// The local image has no nc or cat for the check inside the
		// container; pgserver then waits for SQL itself.
		testcontainers.WithWaitStrategy(wait.ForListeningPort("5432/tcp").SkipInternalCheck()),
	)
	if err != nil {
		if c != nil {
			_ = c.Terminate(context.WithoutCancel(ctx))
		}
		return nil, fmt.Errorf("testcontainers: %w", err)
	}
	p, err := e.docker()
	if err != nil {
		_ = c.Terminate(context.WithoutCancel(ctx))
		return nil, err
	}
	return &pgContainer{c: c, api: p.Client()}, nil
}

type pgContainer struct {
	c   testcontainers.Container
	api client.APIClient
}

func (p *pgContainer) ID() string { return p.c.GetContainerID() }

func (p *pgContainer) Address(ctx context.Context) (string, error) {
	host, err := p.c.Host(ctx)
	if err != nil {
		return "", err
	}
	port, err := p.c.MappedPort(ctx, "5432/tcp")
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("%s:%s", host, port.Port()), nil
}

// Restart sends SIGINT itself: Testcontainers' Stop sends SIGTERM, a smart
// shutdown that waits for every session to end, where a restart in the
// fault tests cuts them as a crash or a failover would.
func (p *pgContainer) Restart(ctx context.Context) error {
	id := p.ID()
	if _, err := p.api.ContainerKill(ctx, id, client.ContainerKillOptions{Signal: "INT"}); err != nil {
		return fmt.Errorf("stop the server with SIGINT: %w", err)
	}
	w := p.api.ContainerWait(ctx, id, client.ContainerWaitOptions{Condition: container.WaitConditionNotRunning})
	select {
	case <-w.Result:
	case err := <-w.Error:
		return fmt.Errorf("wait for the container to stop: %w", err)
	case <-ctx.Done():
		return ctx.Err()
	}
	if err := p.c.Start(ctx); err != nil {
		return fmt.Errorf("start the container again: %w", err)
	}
	return nil
}

func (p *pgContainer) Pause(ctx context.Context) error {
	_, err := p.api.ContainerPause(ctx, p.ID(), client.ContainerPauseOptions{})
	return err
}

func (p *pgContainer) Resume(ctx context.Context) error {
	_, err := p.api.ContainerUnpause(ctx, p.ID(), client.ContainerUnpauseOptions{})
	return err
}

func (p *pgContainer) CopyFile(ctx context.Context, body []byte, path string) error {
	return p.c.CopyToContainer(ctx, body, path, 0o644)
}

// Remove kills the server at once, as docker rm --force does: the data is
// thrown away, so a shutdown would only cost time.
func (p *pgContainer) Remove(ctx context.Context) error {
	return p.c.Terminate(ctx, testcontainers.StopTimeout(0))
}
