package client

import "github.com/pgbackoff/pgbackoff/client/internal/sqlapi"

// CleanErrorText returns s as the database stores an error text: NUL bytes
// and invalid UTF-8 replaced by U+FFFD (PostgreSQL text can hold neither,
// and refuses the whole call), and anything beyond 8 KiB cut at a
// character boundary, ending with " [truncated: N bytes]" (N = len(s)).
// Fail applies it before sending, so that a handler's error can always be
// recorded and a huge one does not travel to the server.
func CleanErrorText(s string) string { return sqlapi.CleanErrorText(s) }
