package testdb

import (
	"errors"

	"github.com/jackc/pgx/v5/pgconn"
)

// SQLState is the SQLSTATE of err, or "" when it is not a server error.
func SQLState(err error) string {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Code
	}
	return ""
}
