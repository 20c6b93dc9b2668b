package cli

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/pgbackoff/pgbackoff/client"
	"github.com/pgbackoff/pgbackoff/client/ops"
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
	var hosts []string
	cmd := &cobra.Command{
		Use:   "ui",
		Short: "Serve the operator web UI (read-only unless --allow-actions)",
		Long: `ui serves pgbackoff's web UI: queues, jobs, each job's retry timeline,
dead letters grouped by cause, and the policies (docs/ui.md).

It is read-only unless --allow-actions is given. It listens on loopback by
default; a non-loopback --listen is refused unless authentication comes
from the environment: ` + envUIUser + ` and ` + envUIPassword + ` (basic auth)
and/or ` + envUIToken + ` (a token). What it may do in the database is what
its role may: connect as a backoff_admin member to act.

Every page needs a secret, on loopback too: without basic auth or
` + envUIToken + `, ui makes a random token at start and prints the address
that opens it (http://127.0.0.1:8080/?token=...); opening it sets a
cookie in that browser. With ` + envUIToken + ` set, open the address with
?token= and that token, or send "Authorization: Bearer TOKEN" (scripts).

It answers only to requests naming it by a loopback name (localhost,
127.0.0.1, [::1]), by the --listen host, or by a name given with
--allow-host (beyond loopback: the names it is reached by); a listen on
every address (0.0.0.0 or [::]) also answers to this machine's addresses.
A page of another site whose name resolves to this machine (DNS
rebinding) is refused.`,
		Example: `  backoffctl ui --database-url postgres://localhost/app
  backoffctl ui --listen 127.0.0.1:8080 --allow-actions
  BACKOFF_UI_TOKEN=s3cret backoffctl ui --listen 0.0.0.0:8080 --allow-host ops.example.com`,
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
			if opts.Hosts, err = uiHosts(host, hosts); err != nil {
				return err
			}
			// On loopback too: any local process, and any page a browser
			// here opens, can reach a loopback port.
			tokenShown := "?token=$" + envUIToken
			if opts.BasicUser == "" && opts.BearerToken == "" {
				b := make([]byte, 32)
				if _, err := rand.Read(b); err != nil {
					return fmt.Errorf("make the UI's token: %w", err)
				}
				opts.BearerToken = base64.RawURLEncoding.EncodeToString(b)
				tokenShown = "?token=" + opts.BearerToken
			} else if opts.BearerToken == "" {
				tokenShown = ""
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
			h, err := webui.New(c, ops.New(pool), opts)
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
			fmt.Fprintf(cmd.OutOrStdout(), "backoffctl ui: serving http://%s/%s (%s); Ctrl-C stops\n", ln.Addr(), tokenShown, mode)
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
	cmd.Flags().StringSliceVar(&hosts, "allow-host", nil, "a host name (or address) the UI is reached by, besides loopback names and the --listen host (repeatable)")
	return cmd
}

// uiHosts are the hosts the UI answers to besides loopback names: the
// --listen host, each --allow-host, and with a listen on every address
// (0.0.0.0, [::]) this machine's addresses (an address, unlike a name,
// cannot be pointed elsewhere by another site's DNS).
func uiHosts(listenHost string, allowed []string) ([]string, error) {
	var out []string
	for _, h := range allowed {
		h = strings.TrimSpace(h)
		if h == "" || strings.ContainsAny(h, "/ ") {
			return nil, usagef("--allow-host %q: want a host name or address", h)
		}
		out = append(out, h)
	}
	ip := net.ParseIP(listenHost)
	switch {
	case listenHost == "" || (ip != nil && ip.IsUnspecified()):
		addrs, err := net.InterfaceAddrs()
		if err != nil {
			return nil, fmt.Errorf("list this machine's addresses: %w", err)
		}
		for _, a := range addrs {
			if n, ok := a.(*net.IPNet); ok {
				out = append(out, n.IP.String())
			}
		}
	default:
		out = append(out, listenHost)
	}
	return out, nil
}

// loopback: host names this machine only.
func loopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
