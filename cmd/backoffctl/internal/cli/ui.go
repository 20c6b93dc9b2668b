package cli

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/pgbackoff/pgbackoff/client"
	"github.com/pgbackoff/pgbackoff/webui"
)

func init() { register(newUICommand) }

// The environment variables that configure the UI's authentication.
const (
	envUIUser     = "BACKOFF_UI_USER"
	envUIPassword = "BACKOFF_UI_PASSWORD"
	envUIToken    = "BACKOFF_UI_TOKEN"
)

func newUICommand() *cobra.Command {
	var listen string
	var allow bool
	cmd := &cobra.Command{
		Use:   "ui",
		Short: "Serve the operator web UI (read-only unless --allow-actions)",
		Long: `ui serves pgbackoff's web UI: queues, jobs, each job's retry timeline,
dead letters grouped by cause, and the policies (docs/ui.md).

It is read-only unless --allow-actions is given. It listens on loopback by
default; a non-loopback --listen is refused unless authentication comes
from the environment: ` + envUIUser + ` and ` + envUIPassword + ` (basic auth)
and/or ` + envUIToken + ` (Authorization: Bearer). What it may do in the
database is what its role may: connect as a backoff_admin member to act.`,
		Example: `  backoffctl ui --database-url postgres://localhost/app
  backoffctl ui --listen 127.0.0.1:8080 --allow-actions
  BACKOFF_UI_TOKEN=s3cret backoffctl ui --listen 0.0.0.0:8080`,
		Args: exactArgs(0, ""),
		RunE: func(cmd *cobra.Command, _ []string) error {
			opts := webui.Options{AllowActions: allow, BasicUser: os.Getenv(envUIUser),
				BasicPassword: os.Getenv(envUIPassword), BearerToken: os.Getenv(envUIToken)}
			if (opts.BasicUser == "") != (opts.BasicPassword == "") {
				return usagef("set both %s and %s for basic auth, or neither", envUIUser, envUIPassword)
			}
			host, _, err := net.SplitHostPort(listen)
			if err != nil {
				return usagef("--listen %q: want HOST:PORT: %v", listen, err)
			}
			if !loopback(host) && opts.BasicUser == "" && opts.BearerToken == "" {
				return usagef("--listen %q is not a loopback address: set %s and %s, or %s, to require authentication",
					listen, envUIUser, envUIPassword, envUIToken)
			}
			cfg, err := connConfig(cmd)
			if err != nil {
				return err
			}
			cfg.RuntimeParams["application_name"] = "backoffctl ui"
			ctx := cmd.Context()
			pool, err := connectPool(ctx, cfg, 4)
			if err != nil {
				return err
			}
			defer pool.Close()
			c, err := client.New(ctx, pool)
			if err != nil {
				return err
			}
			h, err := webui.New(c, opts)
			if err != nil {
				return err
			}
			ln, err := net.Listen("tcp", listen)
			if err != nil {
				return fmt.Errorf("listen on %s: %w", listen, err)
			}
			mode := "read-only"
			if allow {
				mode = "actions enabled"
			}
			fmt.Fprintf(cmd.OutOrStdout(), "backoffctl ui: serving http://%s/ (%s); Ctrl-C stops\n", ln.Addr(), mode)
			srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
			go func() {
				<-ctx.Done()
				sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				_ = srv.Shutdown(sctx)
			}()
			if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				return fmt.Errorf("serve the UI: %w", err)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&listen, "listen", "127.0.0.1:8080", "address to listen on (beyond loopback only with authentication)")
	cmd.Flags().BoolVar(&allow, "allow-actions", false, "enable replay, cancel, pause/resume, bulk actions and enqueue")
	return cmd
}

// loopback: host names this machine only.
func loopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
