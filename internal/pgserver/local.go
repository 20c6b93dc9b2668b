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
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

const (
	stopSignal = syscall.SIGSTOP
	contSignal = syscall.SIGCONT
)

// Binaries is a directory of PostgreSQL server binaries (initdb, pg_ctl,
// postgres) and the version they are.
type Binaries struct {
	Dir     string // e.g. /usr/lib/postgresql/15/bin
	Version string // e.g. "15.14"
	Major   int    // e.g. 15
}

// String is the directory and version, for messages.
func (b Binaries) String() string { return fmt.Sprintf("PostgreSQL %s (%s)", b.Version, b.Dir) }

// HasExtension reports whether the extension's control file is installed
// for these binaries (e.g. pg_cron from Debian's postgresql-15-cron).
func (b Binaries) HasExtension(name string) bool {
	for _, share := range []string{
		filepath.Join(b.Dir, "..", "share", "postgresql"), // npm builds, PGDG, source builds
		filepath.Join(b.Dir, "..", "share"),
		fmt.Sprintf("/usr/share/postgresql/%d", b.Major), // Debian
	} {
		if _, err := os.Stat(filepath.Join(share, "extension", name+".control")); err == nil {
			return true
		}
	}
	return false
}

// BinDirEnv names a directory of PostgreSQL server binaries to use before
// any other (CI points it at each version's build in turn).
const BinDirEnv = "BACKOFF_PG_BINDIR"

// FindBinaries locates the PostgreSQL server binaries for a local cluster:
// $BACKOFF_PG_BINDIR; else initdb on PATH; else `pg_config --bindir`; else
// the newest of the usual locations: Debian's /usr/lib/postgresql/*/bin,
// PGDG's /usr/pgsql-*/bin, Homebrew's postgresql@* and Postgres.app.
func FindBinaries() (Binaries, error) {
	if d := os.Getenv(BinDirEnv); d != "" {
		if !hasServer(d) {
			return Binaries{}, fmt.Errorf("%s=%s has no initdb, pg_ctl and postgres", BinDirEnv, d)
		}
		return describe(d)
	}
	if p, err := exec.LookPath("initdb"); err == nil {
		if r, err := filepath.EvalSymlinks(p); err == nil && hasServer(filepath.Dir(r)) {
			return describe(filepath.Dir(r))
		}
		if hasServer(filepath.Dir(p)) {
			return describe(filepath.Dir(p))
		}
	}
	if out, err := exec.Command("pg_config", "--bindir").Output(); err == nil {
		if d := strings.TrimSpace(string(out)); hasServer(d) {
			return describe(d)
		}
	}
	var dirs []string
	for _, pattern := range []string{
		"/usr/lib/postgresql/*/bin",
		"/usr/pgsql-*/bin",
		"/opt/homebrew/opt/postgresql@*/bin",
		"/usr/local/opt/postgresql@*/bin",
		"/Applications/Postgres.app/Contents/Versions/*/bin",
	} {
		found, _ := filepath.Glob(pattern)
		dirs = append(dirs, found...)
	}
	sort.SliceStable(dirs, func(i, j int) bool { return majorInPath(dirs[i]) > majorInPath(dirs[j]) })
	for _, d := range dirs {
		if hasServer(d) {
			return describe(d)
		}
	}
	return Binaries{}, errors.New("no PostgreSQL server binaries (initdb, pg_ctl, postgres) on PATH, from pg_config, " +
		"in /usr/lib/postgresql/*/bin, /usr/pgsql-*/bin or Homebrew; set " + BinDirEnv + " to their directory")
}

func hasServer(dir string) bool {
	for _, name := range []string{"initdb", "pg_ctl", "postgres"} {
		if fi, err := os.Stat(filepath.Join(dir, name)); err != nil || fi.IsDir() {
			return false
		}
	}
	return true
}

var versionRE = regexp.MustCompile(`\(PostgreSQL\) (\d+)(\.\d+)?`)

// describe runs `postgres --version` in dir.
func describe(dir string) (Binaries, error) {
	out, err := exec.Command(filepath.Join(dir, "postgres"), "--version").CombinedOutput()
	if err != nil {
		return Binaries{}, fmt.Errorf("%s --version: %w: %s", filepath.Join(dir, "postgres"), err, strings.TrimSpace(string(out)))
	}
	m := versionRE.FindStringSubmatch(string(out))
	if m == nil {
		return Binaries{}, fmt.Errorf("%s --version: unexpected output %q", filepath.Join(dir, "postgres"), strings.TrimSpace(string(out)))
	}
	major, _ := strconv.Atoi(m[1])
	return Binaries{Dir: dir, Version: m[1] + m[2], Major: major}, nil
}

var majorRE = regexp.MustCompile(`(?:postgresql[@/-]|pgsql-|Versions/)(\d+)`)

func majorInPath(dir string) int {
	m := majorRE.FindStringSubmatch(dir)
	if m == nil {
		return 0
	}
	v, _ := strconv.Atoi(m[1])
	return v
}

// DebianMajor is the newest Debian PostgreSQL major whose binaries and data
// files are installed (what build-pg-image.sh can package), or "".
func DebianMajor() string {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	best := 0
	for _, d := range dirs {
		v := majorInPath(d)
		if _, err := os.Stat(fmt.Sprintf("/usr/share/postgresql/%d", v)); err == nil && hasServer(d) && v > best {
			best = v
		}
	}
	if best == 0 {
		return ""
	}
	return strconv.Itoa(best)
}

// InMemory, set before Start, makes a local cluster's directory in
// MemoryDir when there is one. The tests set it (internal/testdb): their
// servers are thrown away, and on a virtual disk CREATE DATABASE, which
// writes a thousand small files, takes ten times as long as in memory
// (about 300 ms against 25 ms a copy of the migrated template), and every
// test makes one. The benchmarks leave it unset: a run with fsync on must
// reach a disk. A container keeps its data where the engine puts it: a
// tmpfs mount would not survive the restarts the fault tests make.
var InMemory bool

// memoryRoom is the free space a memory file system needs to hold a test
// cluster: the largest tests seed a million rows, and WAL is kept up to
// max_wal_size (1 GB) between checkpoints.
const memoryRoom = 4 << 30

// MemoryDir is a directory on a memory file system (tmpfs) with room for a
// test cluster, /dev/shm on Linux, or "" when there is none (the cluster
// then goes to os.TempDir()).
func MemoryDir() string {
	const dir = "/dev/shm"
	var fs syscall.Statfs_t
	if err := syscall.Statfs(dir, &fs); err != nil {
		return ""
	}
	const tmpfsMagic = 0x01021994
	if int64(fs.Type) != tmpfsMagic || int64(fs.Bavail)*int64(fs.Bsize) < memoryRoom {
		return ""
	}
	if err := syscall.Access(dir, 2 /* W_OK */); err != nil {
		return ""
	}
	return dir
}

// localCluster is a temporary cluster in dir.
type localCluster struct {
	bin  Binaries
	dir  string
	data string
	opts string
	cred *syscall.Credential
	// memory: dir is on a memory file system (InMemory).
	memory bool
}

// StartLocal makes a temporary cluster with the machine's PostgreSQL server
// binaries (FindBinaries; initdb in a temporary directory, removed by Stop)
// and starts it on a free loopback port with the given settings
// ("name=value"). As root, the server runs as the "postgres" OS user, since
// PostgreSQL refuses to run as root.
func StartLocal(ctx context.Context, settings ...string) (*Server, error) {
	bin, err := FindBinaries()
	if err != nil {
		return nil, err
	}
	return StartLocalWith(ctx, bin, settings...)
}

// StartLocalWith is StartLocal with the given binaries.
func StartLocalWith(ctx context.Context, bin Binaries, settings ...string) (*Server, error) {
	cred, err := serverCredential()
	if err != nil {
		return nil, err
	}
	parent := ""
	if InMemory {
		parent = MemoryDir()
	}
	dir, err := os.MkdirTemp(parent, "pgbackoff-pg-")
	if err != nil {
		return nil, err
	}
	if cred != nil {
		if err := os.Chown(dir, int(cred.Uid), int(cred.Gid)); err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
	}
	lc := &localCluster{bin: bin, dir: dir, data: filepath.Join(dir, "data"), cred: cred, memory: parent != ""}
	if err := lc.run(ctx, "initdb", "-D", lc.data, "-U", "postgres", "--auth=trust", "--encoding=UTF8", "--locale=C", "--no-sync"); err != nil {
		os.RemoveAll(dir)
		if cred != nil {
			err = fmt.Errorf("%w (the server runs as the postgres OS user: it needs to read and run %s)", err, bin.Dir)
		}
		return nil, err
	}
	// A free port can be taken by another process between freePort and the
	// server's bind (several test packages start clusters at once): try a
	// few.
	var port int
	for try := 0; ; try++ {
		if port, err = freePort(); err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
		opts := []string{"-p " + strconv.Itoa(port), "-c listen_addresses=127.0.0.1", "-c unix_socket_directories=" + dir}
		for _, s := range settings {
			opts = append(opts, "-c "+s)
		}
		lc.opts = strings.Join(opts, " ")
		if err = lc.start(ctx); err == nil {
			break
		}
		if try == 2 {
			os.RemoveAll(dir)
			return nil, err
		}
	}
	u := fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", port)
	if err := ping(ctx, u); err != nil {
		_ = lc.run(ctx, "pg_ctl", "-D", lc.data, "-m", "immediate", "stop")
		os.RemoveAll(dir)
		return nil, err
	}
	return &Server{URL: u, Kind: KindLocal, Source: bin.Dir, local: lc, stop: lc.stop}, nil
}

// run runs a server binary as the server's OS user.
func (lc *localCluster) run(ctx context.Context, name string, args ...string) error {
	cmd := exec.CommandContext(ctx, filepath.Join(lc.bin.Dir, name), args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: lc.cred}
	cmd.Dir = lc.dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s: %w: %s", name, err, strings.TrimSpace(string(out)))
	}
	return nil
}

func (lc *localCluster) start(ctx context.Context) error {
	err := lc.run(ctx, "pg_ctl", "-D", lc.data, "-l", filepath.Join(lc.dir, "server.log"), "-w", "-t", "60", "-o", lc.opts, "start")
	if err != nil {
		if log, rerr := os.ReadFile(filepath.Join(lc.dir, "server.log")); rerr == nil {
			err = fmt.Errorf("%w\n%s", err, lastLines(string(log), 5))
		}
	}
	return err
}

// stop stops the server (fast shutdown) and removes its directory. Stopping
// uses the context Stop is given, not the (maybe cancelled) one the server
// was started with.
func (lc *localCluster) stop(ctx context.Context) error {
	_ = lc.signalAll(contSignal) // a paused server cannot shut down
	if err := lc.run(ctx, "pg_ctl", "-D", lc.data, "-m", "fast", "-w", "stop"); err != nil {
		// Keep the directory of a server that may still run.
		return fmt.Errorf("stop the local cluster in %s: %w", lc.dir, err)
	}
	return os.RemoveAll(lc.dir)
}

// restart is a fast shutdown and a start on the same port.
func (lc *localCluster) restart(ctx context.Context) error {
	if err := lc.run(ctx, "pg_ctl", "-D", lc.data, "-m", "fast", "-w", "stop"); err != nil {
		return fmt.Errorf("restart: %w", err)
	}
	if err := lc.start(ctx); err != nil {
		return fmt.Errorf("restart: %w", err)
	}
	return nil
}

// signalAll sends sig to the postmaster and every process it started (what
// docker pause freezes for a container).
func (lc *localCluster) signalAll(sig syscall.Signal) error {
	b, err := os.ReadFile(filepath.Join(lc.data, "postmaster.pid"))
	if err != nil {
		return fmt.Errorf("read postmaster.pid: %w", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(strings.SplitN(string(b), "\n", 2)[0]))
	if err != nil {
		return fmt.Errorf("postmaster.pid: %w", err)
	}
	pids := append([]int{pid}, childrenOf(pid)...)
	for _, p := range pids {
		if err := syscall.Kill(p, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
			return fmt.Errorf("signal %d: %w", p, err)
		}
	}
	return nil
}

// childrenOf lists the processes whose parent is pid (from /proc).
func childrenOf(pid int) []int {
	entries, _ := os.ReadDir("/proc")
	var kids []int
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...; comm may contain spaces and parentheses.
		s := string(stat)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(s[i+1:])
		if len(f) >= 2 {
			if ppid, _ := strconv.Atoi(f[1]); ppid == pid {
				kids = append(kids, p)
			}
		}
	}
	return kids
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// serverCredential is the OS user the server runs as: nil (the current
// user) unless we are root, then "postgres".
func serverCredential() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("running as root needs a \"postgres\" OS user for the server (PostgreSQL refuses to run as root): %w", err)
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
