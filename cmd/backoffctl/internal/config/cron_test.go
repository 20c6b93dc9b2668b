package config

import (
	"encoding/json"
	"os"
	"testing"

	"github.com/stretchr/testify/require"
)

// CronVector is one entry of testdata/cron_vectors.json: an expression and
// what backoff._parse_cron says of it (nil: valid).
type cronVector struct {
	Cron  string  `json:"cron"`
	Error *string `json:"error"`
}

func loadCronVectors(t *testing.T) []cronVector {
	t.Helper()
	data, err := os.ReadFile("testdata/cron_vectors.json")
	require.NoError(t, err)
	var f struct{ Vectors []cronVector }
	require.NoError(t, json.Unmarshal(data, &f))
	require.NotEmpty(t, f.Vectors)
	return f.Vectors
}

// TestCheckCronVectors: the Go syntax check says what the SQL says, message
// for message (the same vectors run against PostgreSQL in
// internal/sqltest/lifecycle).
func TestCheckCronVectors(t *testing.T) {
	t.Parallel()
	valid, invalid := 0, 0
	for _, v := range loadCronVectors(t) {
		err := CheckCron(v.Cron)
		if v.Error == nil {
			require.NoError(t, err, "cron %q", v.Cron)
			valid++
			continue
		}
		require.Error(t, err, "cron %q", v.Cron)
		require.Equal(t, *v.Error, err.Error(), "cron %q", v.Cron)
		invalid++
	}
	require.Greater(t, valid, 10)
	require.Greater(t, invalid, 10)
}
