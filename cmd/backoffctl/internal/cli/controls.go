package cli

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/pgbackoff/pgbackoff/client"
	"github.com/pgbackoff/pgbackoff/client/ops"
	"github.com/pgbackoff/pgbackoff/cmd/backoffctl/internal/config"
)

// A queue's controls (ADR 0045, docs/concepts.md "Queues as
// controls") as `queue list`, `queue show` and `stats` print them: the
// settings from ops.QueueInfo, the live state from client.QueueState.

// controlsRow is a queue's settings for --output json; nil: off.
type controlsRow struct {
	Rate            *float64 `json:"rate"`
	Burst           *int32   `json:"burst"`
	BreakerFailures *int32   `json:"breaker_failures"`
	BreakerWindow   *string  `json:"breaker_window"`
	BreakerCooldown *string  `json:"breaker_cooldown"`
	BreakerProbes   int32    `json:"breaker_probes"`
}

func controlsOf(q ops.QueueInfo) controlsRow {
	dur := func(d *time.Duration) *string {
		if d == nil {
			return nil
		}
		s := config.FormatDuration(*d)
		return &s
	}
	return controlsRow{Rate: q.Rate, Burst: q.Burst, BreakerFailures: q.BreakerFailures,
		BreakerWindow: dur(q.BreakerWindow), BreakerCooldown: dur(q.BreakerCooldown), BreakerProbes: q.BreakerProbes}
}

// stateRow is a queue's live state for --output json.
type stateRow struct {
	State       string   `json:"state"`
	OpenedAt    jsonTime `json:"opened_at"`
	Failures    int64    `json:"failures"`
	ProbesLeft  *int32   `json:"probes_left"`
	Tokens      *float64 `json:"tokens"`
	NextClaimAt jsonTime `json:"next_claim_at"`
}

func stateOf(st client.QueueState) *stateRow {
	t := func(v time.Time) jsonTime {
		if v.IsZero() {
			return jsonTime{}
		}
		return jsonTime{&v}
	}
	return &stateRow{State: st.State, OpenedAt: t(st.OpenedAt), Failures: st.Failures, ProbesLeft: st.ProbesLeft,
		Tokens: st.Tokens, NextClaimAt: t(st.NextClaimAt)}
}

// hasControls reports whether a queue has a rate limit or a breaker.
func hasControls(q ops.QueueInfo) bool { return q.Rate != nil || q.BreakerFailures != nil }

// queueStates reads the live state of every queue in qs that has controls
// (one backoff.queue_state call each; none for the others). A queue the
// caller's queue grants do not cover has no state in the result.
func queueStates(ctx context.Context, c *client.Client, qs []ops.QueueInfo) (map[string]client.QueueState, error) {
	out := map[string]client.QueueState{}
	for _, q := range qs {
		if !hasControls(q) {
			continue
		}
		st, err := c.QueueState(ctx, q.Name)
		if errors.Is(err, client.ErrPermissionDenied) {
			continue
		}
		if err != nil {
			return nil, err
		}
		out[q.Name] = st
	}
	return out, nil
}

// rateCell renders a rate limit: "50/s burst 10", "-" for none.
func rateCell(rate *float64, burst *int32) string {
	if rate == nil {
		return "-"
	}
	s := strconv.FormatFloat(*rate, 'g', -1, 64) + "/s"
	if burst != nil {
		s += " burst " + strconv.Itoa(int(*burst))
	}
	return s
}

// breakerCell renders a breaker's settings: "5 in 30s, cooldown 1m", "-"
// for none; probes are added when more than one.
func breakerCell(q ops.QueueInfo) string {
	if q.BreakerFailures == nil || q.BreakerWindow == nil || q.BreakerCooldown == nil {
		return "-"
	}
	s := fmt.Sprintf("%d in %s, cooldown %s", *q.BreakerFailures, formatDelay(*q.BreakerWindow), formatDelay(*q.BreakerCooldown))
	if q.BreakerProbes > 1 {
		s += fmt.Sprintf(", %d probes", q.BreakerProbes)
	}
	return s
}

// stateCell renders a breaker's live state: "closed 2/5" (failures in the
// window of the threshold), "open", "half_open"; "-" without a breaker.
func stateCell(q ops.QueueInfo, st client.QueueState, ok bool) string {
	if !ok || q.BreakerFailures == nil {
		return "-"
	}
	if st.State == "closed" {
		return fmt.Sprintf("closed %d/%d", st.Failures, *q.BreakerFailures)
	}
	return st.State
}

// tokensCell renders the tokens in a rate-limited queue's bucket.
func tokensCell(st client.QueueState, ok bool) string {
	if !ok || st.Tokens == nil {
		return "-"
	}
	return strconv.FormatFloat(*st.Tokens, 'f', 1, 64)
}
