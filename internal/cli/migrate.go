package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/pgbackoff/pgbackoff/internal/migrations"
)

func newMigrateCommand() *cobra.Command {
	cmd := groupCommand(&cobra.Command{
		Use:   "migrate",
		Short: "Install, upgrade or remove the backoff schema",
		Long: `Apply pgbackoff's embedded migrations to the database.

Migrations create the schema "backoff" and keep their version in
backoff.schema_migrations; running "up" when nothing is pending changes nothing.`,
		Example: `  backoffctl migrate up --database-url postgres://localhost/app
  backoffctl migrate status
  backoffctl migrate down --target 0`,
	})
	cmd.AddCommand(
		newMigrateMoveCommand("up", "Apply pending migrations (to the latest, or --target N)"),
		newMigrateMoveCommand("down", "Roll back one migration (or down to --target N; 0 removes everything)"),
		newMigrateStatusCommand(),
	)
	return cmd
}

func newMigrateMoveCommand(direction, short string) *cobra.Command {
	var target int32
	cmd := &cobra.Command{
		Use:   direction,
		Short: short,
		Example: map[string]string{
			"up":   "  backoffctl migrate up --database-url postgres://localhost/app\n  backoffctl migrate up --target 1",
			"down": "  backoffctl migrate down\n  backoffctl migrate down --target 0   # remove every table and function",
		}[direction],
		Args: exactArgs(0, ""),
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			conn, err := connect(ctx, cmd)
			if err != nil {
				return err
			}
			defer conn.Close(ctx)
			m, err := migrations.New(ctx, conn)
			if err != nil {
				return err
			}
			current, err := m.Current(ctx)
			if err != nil {
				return err
			}
			to := target
			if !cmd.Flags().Changed("target") {
				to = m.Latest()
				if direction == "down" {
					to = max(current-1, 0)
				}
			}
			if direction == "up" && to < current {
				return usagef("migrate up --target %d: the database is already at version %d; use migrate down", to, current)
			}
			if direction == "down" && to > current {
				return usagef("migrate down --target %d: the database is only at version %d; use migrate up", to, current)
			}
			from, reached, err := m.MigrateTo(ctx, to)
			if err != nil {
				return err
			}
			if from == reached {
				fmt.Fprintf(cmd.OutOrStdout(), "no change: schema is at version %d\n", reached)
				return nil
			}
			fmt.Fprintf(cmd.OutOrStdout(), "migrated %s from version %d to %d\n", direction, from, reached)
			return nil
		},
	}
	cmd.Flags().Int32Var(&target, "target", 0, "version to migrate to")
	return cmd
}

func newMigrateStatusCommand() *cobra.Command {
	return &cobra.Command{
		Use:     "status",
		Example: "  backoffctl migrate status\n  DATABASE_URL=postgres://localhost/app backoffctl migrate status",
		Short:   "Show the installed version and every migration",
		Args:    exactArgs(0, ""),
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			conn, err := connect(ctx, cmd)
			if err != nil {
				return err
			}
			defer conn.Close(ctx)
			m, err := migrations.New(ctx, conn)
			if err != nil {
				return err
			}
			st, err := m.Status(ctx)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "version %d of %d\n", st.Current, st.Latest)
			for _, mig := range st.Migrations {
				state := "pending"
				if mig.Applied {
					state = "applied"
				}
				fmt.Fprintf(out, "  %3d  %-8s %s\n", mig.Version, state, mig.Name)
			}
			return nil
		},
	}
}
