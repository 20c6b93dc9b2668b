package pgserver

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

// StartLocal makes a temporary cluster with the machine's PostgreSQL server
// binaries (initdb in a temporary directory, removed by Stop) and starts it
// on a free loopback port. As root, the server runs as the "postgres" OS
// user, since PostgreSQL refuses to run as root.
func StartLocal(ctx context.Context, settings ...string) (*Server, error) {
	bin, err := findBinaries()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "pgbackoff-pg-")
	if err != nil {
		return nil, err
	}
	cred, err := serverCredential()
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	if cred != nil {
		if err := os.Chown(dir, int(cred.Uid), int(cred.Gid)); err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
	}
	// run runs a server binary; stopping uses the context Stop is given, not
	// the (maybe cancelled) one the server was started with.
	runCtx := func(ctx context.Context, name string, args ...string) error {
		cmd := exec.CommandContext(ctx, filepath.Join(bin, name), args...)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		if err != nil {
			return fmt.Errorf("%s: %w: %s", name, err, strings.TrimSpace(string(out)))
		}
		return nil
	}
	run := func(name string, args ...string) error { return runCtx(ctx, name, args...) }
	data := filepath.Join(dir, "data")
	if err := run("initdb", "-D", data, "-U", "postgres", "--auth=trust", "--encoding=UTF8", "--locale=C", "--no-sync"); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	port, err := freePort()
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	opts := []string{"-p " + strconv.Itoa(port), "-c listen_addresses=127.0.0.1", "-c unix_socket_directories=" + dir}
	for _, s := range settings {
		opts = append(opts, "-c "+s)
	}
	if err := run("pg_ctl", "-D", data, "-l", filepath.Join(dir, "server.log"), "-w", "-t", "60", "-o", strings.Join(opts, " "), "start"); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	url := fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", port)
	if err := ping(ctx, url); err != nil {
		_ = run("pg_ctl", "-D", data, "-m", "immediate", "stop")
		os.RemoveAll(dir)
		return nil, err
	}
	return &Server{URL: url, Kind: "local", restart: func(ctx context.Context) error {
		if err := runCtx(ctx, "pg_ctl", "-D", data, "-m", "fast", "-w", "stop"); err != nil {
			return err
		}
		return runCtx(ctx, "pg_ctl", "-D", data, "-l", filepath.Join(dir, "server.log"), "-w", "-t", "60", "-o", strings.Join(opts, " "), "start")
	}, stop: func(ctx context.Context) error {
		if err := runCtx(ctx, "pg_ctl", "-D", data, "-m", "fast", "-w", "stop"); err != nil {
			// Keep the directory of a server that may still run.
			return fmt.Errorf("stop the local cluster in %s: %w", dir, err)
		}
		return os.RemoveAll(dir)
	}}, nil
}

// findBinaries locates initdb and pg_ctl: PG_BINDIR, then the newest
// /usr/lib/postgresql/*/bin, then PATH.
func findBinaries() (string, error) {
	if d := os.Getenv("PG_BINDIR"); d != "" {
		return d, nil
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return versionOf(dirs[i]) > versionOf(dirs[j]) })
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "initdb")); err == nil {
			return d, nil
		}
	}
	if p, err := exec.LookPath("initdb"); err == nil {
		return filepath.Dir(p), nil
	}
	return "", errors.New("no PostgreSQL server binaries (initdb) found; set PG_BINDIR")
}

func versionOf(binDir string) int {
	v, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return v
}

// serverCredential is the OS user the server runs as: nil (the current
// user) unless we are root, then "postgres".
func serverCredential() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("running as root needs a \"postgres\" OS user for the server: %w", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func ping(ctx context.Context, url string) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return fmt.Errorf("connect to the local cluster: %w", err)
	}
	return conn.Close(ctx)
}
