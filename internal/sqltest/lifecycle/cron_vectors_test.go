package lifecycle_test

import (
	"encoding/json"
	"errors"
	"os"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"
)

// TestCronVectorsInSQL: backoff._parse_cron says of each expression of the
// shared vectors what the file says, which is what the Go syntax check of
// `config validate` (config.CheckCron) is tested to say too.
func TestCronVectorsInSQL(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	data, err := os.ReadFile("../../../cmd/backoffctl/internal/config/testdata/cron_vectors.json")
	require.NoError(t, err)
	var f struct {
		Vectors []struct {
			Cron  string  `json:"cron"`
			Error *string `json:"error"`
		}
	}
	require.NoError(t, json.Unmarshal(data, &f))
	require.NotEmpty(t, f.Vectors)
	for _, v := range f.Vectors {
		err := execErr(db, "SELECT * FROM backoff._parse_cron($1)", v.Cron)
		if v.Error == nil {
			require.NoError(t, err, "cron %q", v.Cron)
			continue
		}
		var pgErr *pgconn.PgError
		require.True(t, errors.As(err, &pgErr), "cron %q: %v", v.Cron, err)
		require.Equal(t, "22023", pgErr.Code, "cron %q", v.Cron)
		require.Equal(t, *v.Error, pgErr.Message, "cron %q", v.Cron)
	}
}
