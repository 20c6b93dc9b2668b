package torture

import (
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// level is a transaction isolation level the sessions run their calls at.
type level struct {
	name string // as printed: "repeatable read"
	iso  pgx.TxIsoLevel
}

var levels = []level{
	{"read committed", pgx.ReadCommitted},
	{"repeatable read", pgx.RepeatableRead},
	{"serializable", pgx.Serializable},
}

// config is what the environment asks of a run.
type config struct {
	seconds time.Duration // per isolation level
	seed    uint64
	levels  []level
}

// configFromEnv reads TORTURE_SECONDS, TORTURE_SEED and TORTURE_ISOLATION.
func configFromEnv() (config, error) {
	c := config{seconds: 60 * time.Second, levels: levels}
	if v := os.Getenv("TORTURE_SECONDS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return c, fmt.Errorf("TORTURE_SECONDS must be a whole number of seconds, at least 1, got %q", v)
		}
		c.seconds = time.Duration(n) * time.Second
	}
	if v := os.Getenv("TORTURE_SEED"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return c, fmt.Errorf("TORTURE_SEED must be an unsigned integer, got %q", v)
		}
		c.seed = n
	} else {
		c.seed = rand.Uint64() % 1_000_000_000
	}
	if v := os.Getenv("TORTURE_ISOLATION"); v != "" && v != "all" {
		want := strings.NewReplacer("-", " ", "_", " ").Replace(strings.ToLower(v))
		c.levels = nil
		for _, l := range levels {
			if l.name == want {
				c.levels = []level{l}
			}
		}
		if c.levels == nil {
			return c, fmt.Errorf("TORTURE_ISOLATION must be read-committed, repeatable-read, serializable or all, got %q", v)
		}
	}
	return c, nil
}
