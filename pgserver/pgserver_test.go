package pgserver_test

import (
	"context"
	"testing"

	"github.com/pgbackoff/pgbackoff/pgserver"
)

// A server given by URL is used as it is, and Stop leaves it alone.
func TestStartWithURL(t *testing.T) {
	ctx := context.Background()
	s, err := pgserver.Start(ctx, "postgres://u@db.example:5433/app", "--database-url")
	if err != nil {
		t.Fatal(err)
	}
	if s.URL != "postgres://u@db.example:5433/app" || s.Kind != pgserver.KindURL || s.Source != "--database-url" || len(s.Skipped) != 0 {
		t.Fatalf("got %+v", *s)
	}
	if got, want := s.Describe(), "the server at db.example:5433 (--database-url)"; got != want {
		t.Fatalf("Describe() = %q, want %q", got, want)
	}
	if err := s.Stop(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestURLFromEnv(t *testing.T) {
	t.Setenv("TEST_DATABASE_URL", "")
	t.Setenv("DATABASE_URL", "postgres://a/b")
	if u, src := pgserver.URLFromEnv(); u != "postgres://a/b" || src != "DATABASE_URL" {
		t.Fatalf("URLFromEnv() = %q, %q", u, src)
	}
	t.Setenv("TEST_DATABASE_URL", "postgres://c/d")
	if u, src := pgserver.URLFromEnv(); u != "postgres://c/d" || src != "TEST_DATABASE_URL" {
		t.Fatalf("URLFromEnv() = %q, %q", u, src)
	}
}
