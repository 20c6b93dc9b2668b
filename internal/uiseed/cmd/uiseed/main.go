// Command uiseed fills a migrated pgbackoff database with jobs in every
// state, to look at with `backoffctl ui` (docs/ui.md):
//
//	go run ./internal/uiseed/cmd/uiseed -database-url postgres://localhost/app -jobs 200
package main

import (
	"context"
	"flag"
	"fmt"
	"os"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgbackoff/pgbackoff/internal/uiseed"
)

func main() {
	url := flag.String("database-url", os.Getenv("DATABASE_URL"), "PostgreSQL URL of a database migrated with backoffctl migrate up")
	n := flag.Int("jobs", 200, "completed jobs to add (the other states get a share of it)")
	flag.Parse()
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, *url)
	if err != nil {
		fmt.Fprintln(os.Stderr, "uiseed:", err)
		os.Exit(1)
	}
	defer pool.Close()
	res, err := uiseed.Seed(ctx, pool, *n)
	if err != nil {
		fmt.Fprintln(os.Stderr, "uiseed:", err)
		os.Exit(1)
	}
	fmt.Printf("uiseed: added %d jobs (retrying job %d, hostile dead letter %d)\n", res.Total, res.Retrying, res.Hostile)
}
