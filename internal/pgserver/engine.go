package pgserver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
)

// ContainerEngine starts the containers of KindDocker servers. There is
// none by default: the tests' containers are started with Testcontainers
// (internal/containers, a module of its own that no importer downloads),
// whose harness sets it (SetContainerEngine; its pgcontainer command starts
// the server make test gives the library's and the CLI's packages); the
// demo and the benchmarks pass the docker command (DockerCommand), which
// needs no Docker library in the library's module, whose requirements
// every program that imports client resolves (ADR 0070,
// docs/adr/0086-testcontainers-in-a-module-of-its-own.md,
// docs/adr/0088-tests-start-containers-with-testcontainers.md).
type ContainerEngine interface {
	// Name says which engine this is, for Describe.
	Name() string
	// Available reports whether a Docker engine answers.
	Available(ctx context.Context) bool
	// ImageExists reports whether the engine has image without pulling.
	ImageExists(ctx context.Context, image string) bool
	// Pull fetches image from its registry.
	Pull(ctx context.Context, image string) error
	// ImportImage makes the image tag from a root filesystem (a tar) and
	// settings (Dockerfile instructions, as docker import --change takes
	// them).
	ImportImage(ctx context.Context, tar io.Reader, tag string, changes []string) error
	// Start runs image with env and the command cmd, port 5432 published
	// on 127.0.0.1 only, and returns once the container runs (not once
	// its server answers: the caller probes with SQL).
	Start(ctx context.Context, image string, env map[string]string, cmd []string) (Container, error)
}

// Container is one running container of a ContainerEngine.
type Container interface {
	ID() string
	// Address is the host:port on 127.0.0.1 that the container's port
	// 5432 is published on; it may change when the container restarts.
	Address(ctx context.Context) (string, error)
	// Restart stops the server with PostgreSQL's fast shutdown (SIGINT to
	// the postmaster, the container's main process), waits until the
	// container has stopped, and starts it again.
	Restart(ctx context.Context) error
	// Pause freezes every process of the container; Resume thaws them.
	Pause(ctx context.Context) error
	Resume(ctx context.Context) error
	// CopyFile writes body to path in the container, readable by all.
	CopyFile(ctx context.Context, body []byte, path string) error
	// Remove stops and removes the container and its volumes.
	Remove(ctx context.Context) error
}

// engine starts the containers of Start, ChooseImage and StartContainer;
// nil: none.
var engine ContainerEngine

// SetContainerEngine makes e start the containers of every later Start. A
// test harness calls it once, before any server starts (in TestMain).
func SetContainerEngine(e ContainerEngine) { engine = e }

// DockerCommand is the engine of the docker command, for the programs
// whose modules cannot require Testcontainers (backoffctl demo, the
// benchmarks; StartWithEngine).
func DockerCommand() ContainerEngine { return dockerCommand{} }

// dockerCommand is the ContainerEngine of the docker command.
type dockerCommand struct{}

func (dockerCommand) Name() string { return "docker command" }

func (dockerCommand) Available(ctx context.Context) bool {
	if _, err := exec.LookPath("docker"); err != nil {
		return false
	}
	return dockerCLI(ctx, "info", "--format", "{{.ServerVersion}}") == nil
}

func (dockerCommand) ImageExists(ctx context.Context, image string) bool {
	return dockerCLI(ctx, "image", "inspect", image) == nil
}

func (dockerCommand) Pull(ctx context.Context, image string) error {
	return dockerCLI(ctx, "pull", "-q", image)
}

func (dockerCommand) ImportImage(ctx context.Context, tar io.Reader, tag string, changes []string) error {
	args := []string{"import"}
	for _, c := range changes {
		args = append(args, "--change", c)
	}
	cmd := exec.CommandContext(ctx, "docker", append(args, "-", tag)...)
	cmd.Stdin = tar
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("docker import: %w: %s", err, strings.TrimSpace(string(out)))
	}
	return nil
}

func (dockerCommand) Start(ctx context.Context, image string, env map[string]string, cmd []string) (Container, error) {
	args := []string{"run", "--detach", "--publish", "127.0.0.1::5432"}
	for k, v := range env {
		args = append(args, "--env", k+"="+v)
	}
	args = append(append(args, image), cmd...)
	out, err := exec.CommandContext(ctx, "docker", args...).Output()
	if err != nil {
		return nil, fmt.Errorf("docker run: %w%s", err, stderrOf(err))
	}
	return dockerContainer(strings.TrimSpace(string(out))), nil
}

type dockerContainer string

func (c dockerContainer) ID() string { return string(c) }

func (c dockerContainer) Address(ctx context.Context) (string, error) {
	out, err := exec.CommandContext(ctx, "docker", "port", string(c), "5432/tcp").Output()
	if err != nil {
		return "", fmt.Errorf("docker port: %w%s", err, stderrOf(err))
	}
	// One line per address family, e.g. "127.0.0.1:32768".
	addr, _, _ := strings.Cut(strings.TrimSpace(string(out)), "\n")
	if addr == "" {
		return "", errors.New("docker port: the container publishes no port yet")
	}
	return addr, nil
}

func (c dockerContainer) Restart(ctx context.Context) error {
	if err := dockerCLI(ctx, "kill", "--signal=INT", string(c)); err != nil {
		return err
	}
	if err := dockerCLI(ctx, "wait", string(c)); err != nil {
		return err
	}
	if err := dockerCLI(ctx, "start", string(c)); err != nil {
		return fmt.Errorf("start the container again: %w", err)
	}
	return nil
}

func (c dockerContainer) Pause(ctx context.Context) error { return dockerCLI(ctx, "pause", string(c)) }
func (c dockerContainer) Resume(ctx context.Context) error {
	return dockerCLI(ctx, "unpause", string(c))
}

func (c dockerContainer) Remove(ctx context.Context) error {
	return dockerCLI(ctx, "rm", "--force", "--volumes", string(c))
}

func (c dockerContainer) CopyFile(ctx context.Context, body []byte, path string) error {
	f, err := os.CreateTemp("", "pgserver-*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	if _, err := f.Write(body); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Chmod(f.Name(), 0o644); err != nil {
		return err
	}
	return dockerCLI(ctx, "cp", f.Name(), string(c)+":"+path)
}
