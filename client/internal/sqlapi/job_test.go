package sqlapi

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// Tests of the Worker's CPU per job (profile in docs/adr/0049).

// A job claimed for its first attempt has the history "[]": it reads as an
// empty history, as json.Unmarshal would give, without running the JSON
// decoder for every claimed job.
func TestDecodeEmptyHistoryWithoutTheDecoder(t *testing.T) {
	raw := []byte("[]")
	h := DecodeHistory(raw)
	require.NotNil(t, h)
	require.Empty(t, h)
	require.Zero(t, testing.AllocsPerRun(100, func() { DecodeHistory(raw) }))
	require.Len(t, DecodeHistory([]byte(`[{"attempt": 1, "error": "boom"}]`)), 1)
}
