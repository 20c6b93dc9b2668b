// Command backoffctl operates pgbackoff: migrations, policies, jobs, dead
// letters and a demo. See `backoffctl --help`.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/pgbackoff/pgbackoff/cmd/backoffctl/internal/cli"
	"github.com/pgbackoff/pgbackoff/cmd/backoffctl/internal/demo"
)

func main() {
	cli.Register(demo.NewCommand)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Main(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
