package ops

import (
	"context"
	"fmt"

	"github.com/pgbackoff/pgbackoff/client/internal/sqlapi"
)

// QueueNames returns the names of the first limit queues by name
// (backoff.queue_list: configured or seen in jobs), and more = true when
// there are others: a page that offers the queues as choices stays the
// same size with thousands of them.
func (c *Client) QueueNames(ctx context.Context, limit int) (names []string, more bool, err error) {
	op := "list queue names"
	if limit < 1 {
		return nil, false, fmt.Errorf("%s: %w: limit %d: want at least 1", op, sqlapi.ErrInvalidArgument, limit)
	}
	rows, err := c.db.Query(ctx, "SELECT DISTINCT q.name FROM backoff.queue_list() AS q ORDER BY q.name LIMIT $1", limit+1)
	if err != nil {
		return nil, false, translate(op, err)
	}
	defer rows.Close()
	names = []string{}
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			return nil, false, translate(op, err)
		}
		names = append(names, s)
	}
	if err := rows.Err(); err != nil {
		return nil, false, translate(op, err)
	}
	if len(names) > limit {
		return names[:limit], true, nil
	}
	return names, false, nil
}
