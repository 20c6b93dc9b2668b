// Package cli implements backoffctl, the operator's command line. Every
// command writes to the writers it is given, so tests compare exact output.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/spf13/cobra"

	"github.com/pgbackoff/pgbackoff"
	"github.com/pgbackoff/pgbackoff/client"
	"github.com/pgbackoff/pgbackoff/cmd/backoffctl/internal/config"
)

// Exit codes.
const (
	ExitOK      = 0
	ExitFailure = 1 // the command ran and failed (database, config, state)
	ExitUsage   = 2 // the command line itself is wrong
)

// usageError marks an error in the command line (unknown flag, missing
// argument), which exits with ExitUsage.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

func usagef(format string, args ...any) error {
	return usageError{fmt.Errorf(format, args...)}
}

// Main runs backoffctl with args (without the program name) and returns the
// process exit code. Errors are printed as one line on stderr.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	root := newRootCommand()
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return ExitOK
	}
	var cfgErr *config.Errors
	if errors.As(err, &cfgErr) {
		// One line per problem, FILE:LINE: key: message, like a compiler.
		for _, p := range cfgErr.Problems {
			fmt.Fprintln(stderr, oneLine(p.String()))
		}
		fmt.Fprintf(stderr, "backoffctl: %s: %d problem(s)\n", cfgErr.File, len(cfgErr.Problems))
		return ExitFailure
	}
	fmt.Fprintln(stderr, "backoffctl: "+esc(oneLine(describe(err))))
	if isUsage(err) {
		return ExitUsage
	}
	return ExitFailure
}

func newRootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:   "backoffctl",
		Short: "Operate pgbackoff: migrations, policies, jobs and dead letters",
		Long: `backoffctl installs and operates pgbackoff, the retry and backoff layer
that lives in PostgreSQL.

The database comes from --database-url, or DATABASE_URL when the flag is absent.`,
		Version:       pgbackoff.Version,
		SilenceErrors: true,
		SilenceUsage:  true,
	}
	root.SetVersionTemplate("backoffctl {{.Version}}\n")
	root.PersistentFlags().String("database-url", "", "PostgreSQL connection URL (default $DATABASE_URL)")
	root.PersistentFlags().StringP("output", "o", "text", "output format: text (aligned tables for people) or json (for scripts)")
	root.PersistentFlags().String("now", "", "pretend the time is this RFC 3339 timestamp (passed as p_now; for tests and simulations)")
	_ = root.PersistentFlags().MarkHidden("now")
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	// cobra's own help command prints an unknown topic raw (a terminal
	// escape in an argument reached the terminal); this one answers with a
	// usage error, escaped like every error line.
	root.SetHelpCommand(&cobra.Command{
		Use:   "help [command]",
		Short: "Help about any command",
		RunE: func(c *cobra.Command, args []string) error {
			cmd, rest, err := c.Root().Find(args)
			if cmd == nil || err != nil || len(rest) > 0 {
				return usagef("unknown help topic %q", strings.Join(args, " "))
			}
			return cmd.Help()
		},
	})
	root.AddCommand(newMigrateCommand())
	for _, add := range extraCommands {
		root.AddCommand(add())
	}
	return root
}

// extraCommands lets each command file register itself, so that adding a
// command touches one file.
var extraCommands []func() *cobra.Command

func register(cmd func() *cobra.Command) { extraCommands = append(extraCommands, cmd) }

// groupCommand is a command that only holds subcommands: without one it
// prints its help; with an unknown one it is a usage error.
func groupCommand(cmd *cobra.Command) *cobra.Command {
	cmd.Args = cobra.ArbitraryArgs
	cmd.RunE = func(c *cobra.Command, args []string) error {
		if len(args) > 0 {
			return usagef("unknown command %q for %q", args[0], c.CommandPath())
		}
		return c.Help()
	}
	return cmd
}

// exactArgs is cobra.ExactArgs with a usage-error result. A command that
// takes no argument but has --config, given one, was most likely given
// its file the way most tools take one: the message says how to pass it.
func exactArgs(n int, names string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) == n {
			return nil
		}
		if n == 0 {
			hint := ""
			if len(args) == 1 && cmd.Flags().Lookup("config") != nil {
				hint = fmt.Sprintf("; use --config %s", args[0])
			}
			quoted := make([]string, len(args))
			for i, a := range args {
				quoted[i] = strconv.Quote(a)
			}
			name := strings.TrimPrefix(cmd.CommandPath(), cmd.Root().Name()+" ")
			return usagef("%s takes no arguments, got %s%s", name, strings.Join(quoted, " "), hint)
		}
		if names != "" {
			names = " " + names
		}
		return usagef("expected %d argument(s)%s, got %d", n, names, len(args))
	}
}

func isUsage(err error) bool {
	var ue usageError
	if errors.As(err, &ue) {
		return true
	}
	// cobra's own command-line errors.
	msg := err.Error()
	return strings.HasPrefix(msg, "unknown command") || strings.HasPrefix(msg, "unknown flag") ||
		strings.HasPrefix(msg, "accepts ") || strings.HasPrefix(msg, "requires ")
}

// describe renders an error for an operator: a PostgreSQL error shows its
// SQLSTATE next to its message.
func describe(err error) string {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		msg := err.Error()
		// pgx prints "ERROR: msg (SQLSTATE X)"; keep the caller's context and
		// put the code first, where scripts look for it.
		detail := ""
		if pgErr.Detail != "" {
			detail = " (" + pgErr.Detail + ")"
		}
		if i := strings.Index(msg, pgErr.Error()); i > 0 {
			// The SQLSTATE says what the client's sentinel says ("pgbackoff:
			// transition not allowed"): keep the code, drop the sentinel.
			prefix := msg[:i]
			for _, s := range clientSentinels {
				prefix = strings.Replace(prefix, s.Error()+": ", "", 1)
			}
			return fmt.Sprintf("%sSQLSTATE %s: %s%s", prefix, pgErr.Code, pgErr.Message, detail)
		}
		return fmt.Sprintf("SQLSTATE %s: %s%s", pgErr.Code, pgErr.Message, detail)
	}
	return err.Error()
}

// clientSentinels are the client's errors that stand for a SQLSTATE.
var clientSentinels = []error{client.ErrInvalidArgument, client.ErrJobNotFound, client.ErrStaleAttempt,
	client.ErrInvalidTransition, client.ErrNotReady}

func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}
