package cli

import (
	"context"
	"io"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/spf13/cobra"

	"github.com/pgbackoff/pgbackoff/client"
	"github.com/pgbackoff/pgbackoff/client/ops"
	"github.com/pgbackoff/pgbackoff/client/policy"
	"github.com/pgbackoff/pgbackoff/cmd/backoffctl/internal/config"
)

// What the demo command (cmd/backoffctl/internal/demo) uses of the CLI:
// the command plumbing, the connection helpers, the table output and the
// `stats`, `jobs show` and `config apply` pieces it shows. Nothing else is
// exported; the commands themselves stay unexported.

// Register adds a command to every root command Main builds. Call it
// before Main (cmd/backoffctl's main registers the demo).
func Register(cmd func() *cobra.Command) { register(cmd) }

// UsageErrorf returns an error in the command line: Main prints it and
// exits with ExitUsage.
func UsageErrorf(format string, args ...any) error { return usagef(format, args...) }

// ExactArgs is cobra.ExactArgs with a usage-error result.
func ExactArgs(n int, names string) cobra.PositionalArgs { return exactArgs(n, names) }

// WantJSON reports whether --output asks for JSON (a usage error for an
// unknown format).
func WantJSON(cmd *cobra.Command) (bool, error) { return wantJSON(cmd) }

// ParseConnConfig parses a connection URL or keyword/value string the way
// every command does.
func ParseConnConfig(u string) (*pgx.ConnConfig, error) { return parseConnConfig(u) }

// ConnectPool opens a pool of at most maxConns connections with cfg.
func ConnectPool(ctx context.Context, cfg *pgx.ConnConfig, maxConns int32) (*pgxpool.Pool, error) {
	return connectPool(ctx, cfg, maxConns)
}

// RootCause drops pgx's wrapping down to the innermost error.
func RootCause(err error) error { return rootCause(err) }

// OneLine folds s onto one line, as every error line is printed.
func OneLine(s string) string { return oneLine(s) }

// NewTable returns an aligned-column writer; call Flush when done.
func NewTable(w io.Writer) *tabwriter.Writer { return newTable(w) }

// Row writes one table row, every cell escaped.
func Row(w io.Writer, cells ...string) { row(w, cells...) }

// FormatDelay renders a delay the way the tables do.
func FormatDelay(d time.Duration) string { return formatDelay(d) }

// StatsRow is one row of backoff.stats, as `backoffctl stats` prints it.
type StatsRow = statsRow

// ReadStats reads backoff.stats with a retries/dead-letters window of win.
func ReadStats(ctx context.Context, c *client.Client, o *ops.Client, win time.Duration) ([]StatsRow, error) {
	return readStats(ctx, c, o, win)
}

// WriteStats prints stats as `backoffctl stats` does.
func WriteStats(w io.Writer, stats []StatsRow, window time.Duration) { writeStats(w, stats, window) }

// WriteJobDetail prints a job as `backoffctl jobs show` does.
func WriteJobDetail(w io.Writer, d ops.JobDetail, now time.Time) { writeJob(w, jobRowOf(d), now) }

// ApplyConfig is `config apply` (without --prune) inside tx.
func ApplyConfig(ctx context.Context, tx pgx.Tx, cfg *config.Config) error {
	st, err := readState(ctx, tx)
	if err != nil {
		return err
	}
	return applyChanges(ctx, tx, planChanges(cfg, st), false)
}

// ReadPolicies returns the policies the database holds by name, and the
// policy each queue row names.
func ReadPolicies(ctx context.Context, db client.DB) (policies map[string]policy.Policy, queues map[string]string, err error) {
	st, err := readState(ctx, db)
	if err != nil {
		return nil, nil, err
	}
	return st.Policies, st.Queues, nil
}

// SortedNames returns the keys of m in order.
func SortedNames[V any](m map[string]V) []string { return sortedNames(m) }
