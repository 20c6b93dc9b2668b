package cli

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/spf13/cobra"

	"github.com/pgbackoff/pgbackoff/cmd/backoffctl/internal/config"
)

func init() { register(newConfigCommand) }

func newConfigCommand() *cobra.Command {
	cmd := groupCommand(&cobra.Command{
		Use:   "config",
		Short: "Validate, show, diff and apply backoff.toml",
		Long: `backoff.toml is the single source of truth for retry policies and queue
mappings. "validate" checks it (every problem at once, as FILE:LINE: key:
message), "show" prints the effective configuration after the --env overlay,
"diff" compares it with the database, and "apply" writes it in one
transaction.

Omitted policy keys take the defaults of the Go policy package; the shipped
profiles aggressive, moderate and conservative exist even when the file does
not define them. Durations are Go duration strings ("500ms", "30s", "1h30m").`,
		Example: `  backoffctl config validate
  backoffctl config show --env test
  backoffctl config diff --config deploy/backoff.toml --env production
  backoffctl config apply --config deploy/backoff.toml --env production`,
	})
	cmd.AddCommand(newConfigValidateCommand(), newConfigShowCommand(), newConfigDiffCommand(), newConfigApplyCommand())
	return cmd
}

// configFlags adds --config and --env to cmd.
func configFlags(cmd *cobra.Command, file, env *string) {
	cmd.Flags().StringVar(file, "config", config.DefaultFile, "configuration file")
	cmd.Flags().StringVar(env, "env", "", "environment overlay to apply ([env.NAME] in the file)")
}

func newConfigValidateCommand() *cobra.Command {
	var file, env string
	cmd := &cobra.Command{
		Use:   "validate",
		Short: "Check the configuration file and report every problem",
		Long: `Check the configuration file: TOML syntax, known keys, types, ranges and
references, in the base file and in every [env.NAME] overlay. Every problem
is printed on its own line as FILE:LINE: key: message, and the exit code is 1.`,
		Example: `  backoffctl config validate
  backoffctl config validate --config examples/backoff.toml --env test`,
		Args: exactArgs(0, ""),
		RunE: withOutput(func(cmd *cobra.Command, _ []string, jsonOut bool) error {
			c, err := config.Load(file, env)
			if err != nil {
				return err
			}
			if jsonOut {
				return writeJSON(cmd.OutOrStdout(), map[string]any{
					"file": c.File, "env": c.Env, "valid": true, "version": c.Version,
					"policies": len(c.Policies), "queues": len(c.Queues), "environments": c.Envs,
				})
			}
			envs := "none"
			if len(c.Envs) > 0 {
				envs = strings.Join(c.Envs, ", ")
			}
			schedules := ""
			if len(c.Schedules) > 0 {
				schedules = fmt.Sprintf(", %d schedules", len(c.Schedules))
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s: valid (version %d, %d policies, %d queues%s, environments: %s)\n",
				c.File, c.Version, len(c.Policies), len(c.Queues), schedules, envs)
			return nil
		}),
	}
	configFlags(cmd, &file, &env)
	return cmd
}

func newConfigShowCommand() *cobra.Command {
	var file, env string
	cmd := &cobra.Command{
		Use:   "show",
		Short: "Print the effective configuration after the --env overlay",
		Long: `Print the effective configuration as TOML: the --env overlay merged in,
every omitted key written out with its default, and the shipped profiles the
file does not redefine. The output is itself a valid configuration file.`,
		Example: `  backoffctl config show
  backoffctl config show --env test > effective.toml`,
		Args: exactArgs(0, ""),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if _, err := wantJSON(cmd); err != nil {
				return err
			}
			c, err := config.Load(file, env)
			if err != nil {
				return err
			}
			return config.Write(cmd.OutOrStdout(), c)
		},
	}
	configFlags(cmd, &file, &env)
	return cmd
}

func newConfigDiffCommand() *cobra.Command {
	var file, env string
	var exitCode bool
	cmd := &cobra.Command{
		Use:   "diff",
		Short: "Show, field by field, what apply would change in the database",
		Long: `Compare the effective configuration with the policies and queues in the
database and print each difference: "+" a row apply would add, "~" a row it
would update (with old -> new for each field), and rows only in the database,
which apply keeps (apply --prune deletes them, except a paused queue and the
policy it uses). A paused queue is marked "paused". Nothing is written.

With --exit-code it exits 1 when there is any difference (what apply would
add or update, and rows only in the database) and 0 when it prints "no
differences", so that a deploy or CI step can gate on it. Without the flag
it exits 0 either way.`,
		Example: `  backoffctl config diff --env production
  backoffctl config diff --exit-code || echo "database drifted from backoff.toml"`,
		Args: exactArgs(0, ""),
		RunE: withOutput(func(cmd *cobra.Command, _ []string, jsonOut bool) error {
			c, err := config.Load(file, env)
			if err != nil {
				return err
			}
			return withTargets(cmd, func(ctx context.Context, targets []target) error {
				// Behind a router, each shard is compared on its own: a shard
				// that drifted shows under its own heading.
				total := 0
				var perShard []map[string]any
				for i, tg := range targets {
					st, err := readState(ctx, tg.conn)
					if err != nil {
						return fmt.Errorf("%s: %w", tg.label, err)
					}
					if tg.label != "" {
						st.shard, st.shards, st.layout = i, len(targets), tg.layout
					}
					changes := planChanges(c, st)
					total += len(changes)
					if changes == nil {
						changes = []change{}
					}
					switch {
					case jsonOut && tg.label != "":
						perShard = append(perShard, map[string]any{"shard": tg.label, "changes": changes})
					case jsonOut:
						if err := writeJSON(cmd.OutOrStdout(), changes); err != nil {
							return err
						}
					default:
						if tg.label != "" {
							fmt.Fprintf(cmd.OutOrStdout(), "%s:\n", tg.label)
						}
						writeChanges(cmd.OutOrStdout(), changes, false)
					}
				}
				if perShard != nil {
					if err := writeJSON(cmd.OutOrStdout(), perShard); err != nil {
						return err
					}
				}
				if exitCode && total > 0 {
					return fmt.Errorf("the database differs from %s in %d row(s)", c.File, total)
				}
				return nil
			})
		}),
	}
	configFlags(cmd, &file, &env)
	cmd.Flags().BoolVar(&exitCode, "exit-code", false, "exit 1 when there are differences, 0 when there are none")
	return cmd
}

func newConfigApplyCommand() *cobra.Command {
	var file, env string
	var prune bool
	cmd := &cobra.Command{
		Use:   "apply",
		Short: "Write the policies and queues of the configuration into the database",
		Long: `Write every policy and queue mapping of the effective configuration into
backoff.policies and backoff.queues, in one transaction: either all of it is
applied or none. The 'default' policy row is written as a copy of
default_policy. Applying the same file twice changes nothing the second time
and prints "no change".

Policies and queues that are only in the database are kept; with --prune they
are deleted, except a policy that jobs which may still run (or be replayed)
name, which stops the apply. A queue's paused flag is never changed: a paused
queue that the configuration does not list is kept even with --prune (deleting
its row would un-pause it), and so is the policy it uses; apply says so, one
line each ("kept queue ...: paused; resume it first or add it to the
config"), and exits 0.

A [settings] table (max_clock_skew, time_injection, max_payload_bytes,
require_queue_grants) is written into the one row of backoff.settings;
without [settings] that row is left as it is. [schedules.NAME] tables are
written with backoff.put_schedule (docs/schedules.md): a schedule whose
timing is unchanged keeps its next fire time and counters; one whose queue
changed is dropped and put again; enabled = true or false resumes or pauses
it, and without enabled an operator's pause stays; --prune drops the
schedules the file does not list. When --prune revokes the last
queue grant of a role, apply warns what the role may then do: every queue,
or none with require_queue_grants on (the default).`,
		Example: `  backoffctl config apply --env production
  backoffctl config apply --config deploy/backoff.toml --prune`,
		Args: exactArgs(0, ""),
		RunE: withOutput(func(cmd *cobra.Command, _ []string, jsonOut bool) error {
			c, err := config.Load(file, env)
			if err != nil {
				return err
			}
			now, err := nowFlag(cmd)
			if err != nil {
				return err
			}
			return withTargets(cmd, func(ctx context.Context, targets []target) error {
				results, err := applyAll(ctx, targets, c, prune, now)
				if err != nil {
					return fmt.Errorf("apply %s: %w", c.File, err)
				}
				w := cmd.OutOrStdout()
				var perShard []map[string]any
				for i, changes := range results {
					label := targets[i].label
					if jsonOut {
						if changes == nil {
							changes = []change{}
						}
						out := map[string]any{"file": c.File, "env": c.Env, "changed": pending(changes) > 0 || prune && deletable(changes) > 0, "changes": changes, "pruned": prune}
						if label == "" {
							return writeJSON(w, out)
						}
						out["shard"] = label
						perShard = append(perShard, out)
						continue
					}
					if label != "" {
						fmt.Fprintf(w, "%s:\n", label)
					}
					writeApplied(w, c, changes, prune)
				}
				if perShard != nil {
					return writeJSON(w, perShard)
				}
				return nil
			})
		}),
	}
	configFlags(cmd, &file, &env)
	cmd.Flags().BoolVar(&prune, "prune", false, "delete policies, queues and schedules that are not in the configuration")
	return cmd
}

// applyAll applies c to every target, each in its own transaction, and
// commits them only once every target has applied: an error anywhere rolls
// every target back. (A failure between two commits leaves the shards
// apart; config diff then shows which one drifted.)
// now (--now, nil: the database's clock) is when a new or retimed schedule
// starts counting its slots.
func applyAll(ctx context.Context, targets []target, c *config.Config, prune bool, now *time.Time) ([][]change, error) {
	var txs []pgx.Tx
	rollback := func() {
		for _, tx := range txs {
			_ = tx.Rollback(ctx)
		}
	}
	results := make([][]change, len(targets))
	for i, tg := range targets {
		where := ""
		if tg.label != "" {
			where = tg.label + ": "
		}
		tx, err := tg.conn.Begin(ctx)
		if err != nil {
			rollback()
			return nil, fmt.Errorf("%s%w", where, err)
		}
		txs = append(txs, tx)
		// Serialize concurrent applies; readers (claim, fail) are not blocked.
		if _, err := tx.Exec(ctx, `LOCK TABLE backoff.policies, backoff.queues IN SHARE ROW EXCLUSIVE MODE`); err != nil {
			rollback()
			return nil, fmt.Errorf("%slock policies: %w", where, err)
		}
		st, err := readState(ctx, tx)
		if err != nil {
			rollback()
			return nil, fmt.Errorf("%s%w", where, err)
		}
		if tg.label != "" {
			st.shard, st.shards, st.layout = i, len(targets), tg.layout
		}
		st.now = now
		results[i] = planChanges(c, st)
		if err := applyChanges(ctx, tx, results[i], prune); err != nil {
			rollback()
			return nil, fmt.Errorf("%s%w", where, err)
		}
	}
	for i, tx := range txs {
		if err := tx.Commit(ctx); err != nil {
			for _, rest := range txs[i+1:] {
				_ = rest.Rollback(ctx)
			}
			if i == 0 {
				return nil, err
			}
			return nil, fmt.Errorf("%s: commit failed after %d shard(s) committed (run config diff, then apply again): %w", targets[i].label, i, err)
		}
	}
	return results, nil
}

// writeApplied prints the outcome of an apply for people.
func writeApplied(w io.Writer, c *config.Config, changes []change, prune bool) {
	if pending(changes) == 0 && (!prune || deletable(changes) == 0) {
		fmt.Fprintf(w, "no change: the database matches %s\n", c.File)
		writeExtras(w, changes, prune)
		return
	}
	writeChanges(w, changes, prune)
	added, updated := 0, 0
	for _, ch := range changes {
		switch ch.Kind {
		case changeAdd:
			added++
		case changeUpdate:
			updated++
		}
	}
	deleted := 0
	if prune {
		deleted = deletable(changes)
	}
	fmt.Fprintf(w, "applied %s: %d added, %d updated, %d deleted\n", c.File, added, updated, deleted)
}

// pending counts the changes that apply writes (adds and updates).
func pending(changes []change) int {
	n := 0
	for _, ch := range changes {
		if ch.Kind != changeExtra {
			n++
		}
	}
	return n
}

func extra(changes []change) int { return len(changes) - pending(changes) }

// writeChanges prints changes for people:
//
//   - policy square
//     strategy = polynomial
//     ~ policy moderate
//     max: 1m -> 2s
//     policy legacy: only in the database (kept; apply --prune deletes it)
func writeChanges(w io.Writer, changes []change, pruned bool) {
	if pending(changes) == 0 && extra(changes) == 0 {
		fmt.Fprintln(w, "no differences")
		return
	}
	for _, ch := range changes {
		if ch.Kind == changeExtra {
			continue
		}
		note := ""
		switch {
		case ch.Note != "" && ch.Paused:
			note = " (" + ch.Note + "; paused)"
		case ch.Note != "":
			note = " (" + ch.Note + ")"
		case ch.Paused:
			note = " (paused)"
		}
		switch ch.Kind {
		case changeAdd:
			fmt.Fprintf(w, "+ %s %s%s\n", ch.Object, esc(ch.Name), note)
			for _, f := range ch.Fields {
				fmt.Fprintf(w, "    %s = %s\n", f.Field, f.New)
			}
		case changeUpdate:
			fmt.Fprintf(w, "~ %s %s%s\n", ch.Object, esc(ch.Name), note)
			for _, f := range ch.Fields {
				fmt.Fprintf(w, "    %s: %s -> %s\n", f.Field, f.Old, f.New)
			}
		}
	}
	writeExtras(w, changes, pruned)
}

func writeExtras(w io.Writer, changes []change, pruned bool) {
	for _, ch := range changes {
		if ch.Kind != changeExtra {
			continue
		}
		switch {
		case pruned && ch.Kept != "":
			fmt.Fprintf(w, "kept %s %q: %s\n", ch.Object, ch.Name, ch.Kept)
		case pruned:
			fmt.Fprintf(w, "- %s %s (deleted: only in the database)\n", ch.Object, esc(ch.Name))
		case ch.Paused:
			fmt.Fprintf(w, "  %s %s: only in the database, paused (kept; apply --prune keeps it while it is paused)\n",
				ch.Object, esc(ch.Name))
		case len(ch.keptFor) == 1:
			fmt.Fprintf(w, "  %s %s: only in the database (kept; apply --prune keeps it while paused queue %s uses it)\n",
				ch.Object, esc(ch.Name), quoteAll(ch.keptFor))
		case len(ch.keptFor) > 1:
			fmt.Fprintf(w, "  %s %s: only in the database (kept; apply --prune keeps it while paused queues %s use it)\n",
				ch.Object, esc(ch.Name), quoteAll(ch.keptFor))
		default:
			fmt.Fprintf(w, "  %s %s: only in the database (kept; apply --prune deletes it)\n", ch.Object, esc(ch.Name))
		}
		if ch.Unscoped != "" {
			// Revoking a role's last grant widens it unless
			// require_queue_grants is on (docs/adr/0058).
			if pruned {
				fmt.Fprintf(w, "warning: role %s has no queue grant left: it may now act on %s\n", esc(ch.grant.Role), ch.Unscoped)
			} else {
				fmt.Fprintf(w, "warning: apply --prune revokes every queue grant of role %s: it may then act on %s\n", esc(ch.grant.Role), ch.Unscoped)
			}
		}
	}
}
