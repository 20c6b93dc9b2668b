package migrations_test

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/pgbackoff/pgbackoff/migrations"
)

// Migrate a database to the version this build ships, as a program does at
// start-up before it creates its client; a second run changes nothing.
func Example() {
	url, cleanup := migrations.SampleDatabaseURL() // os.Getenv("DATABASE_URL")
	defer cleanup()
	ctx := context.Background()

	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		panic(err)
	}
	defer conn.Close(ctx)
	m, err := migrations.New(ctx, conn)
	if err != nil {
		panic(err)
	}
	from, to, err := m.MigrateTo(ctx, migrations.Latest())
	if err != nil {
		panic(err)
	}
	fmt.Println(from, to == migrations.Latest())
	from, to, err = m.MigrateTo(ctx, migrations.Latest())
	if err != nil {
		panic(err)
	}
	fmt.Println(from == to)
	// Output:
	// 0 true
	// true
}

// Read where a database stands: its version and every migration.
func ExampleMigrator_Status() {
	url, cleanup := migrations.SampleDatabaseURL()
	defer cleanup()
	ctx := context.Background()

	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		panic(err)
	}
	defer conn.Close(ctx)
	m, err := migrations.New(ctx, conn)
	if err != nil {
		panic(err)
	}
	if _, _, err := m.MigrateTo(ctx, 2); err != nil {
		panic(err)
	}
	st, err := m.Status(ctx)
	if err != nil {
		panic(err)
	}
	fmt.Println(st.Current, st.Latest == migrations.Latest())
	for _, x := range st.Migrations[:3] {
		fmt.Println(x.Version, x.Name, x.Applied)
	}
	// Output:
	// 2 true
	// 1 001_schema.sql true
	// 2 002_functions.sql true
	// 3 003_roles.sql false
}
