package sqlapi

import (
	"encoding/json"

	"github.com/jackc/pgx/v5"

	"github.com/pgbackoff/pgbackoff/client/jobtype"
)

// JobColumns is the column list every query returning jobs selects, in the
// order ScanJob reads them. Naming the columns (rather than *) keeps the
// client working when a later migration adds one.
const JobColumns = "id, queue, payload, status, priority, attempts, uncounted_attempts, max_attempts, policy, run_at, " +
	"lease_until, locked_by, last_attempted_at, last_failed_at, last_error, errors, " +
	"dead_letter_reason, dedupe_key, created_at, completed_at"

// ScanJob reads one row selected with JobColumns, then into extra the
// columns that follow them.
func ScanJob(row pgx.Row, extra ...any) (jobtype.Job, error) {
	var (
		j                                           jobtype.Job
		status                                      string
		maxAttempts                                 *int32
		priority, attempts, uncounted               int32
		policy, lockedBy, lastError, reason, dedupe *string
		payload, history                            []byte
	)
	dest := append([]any{&j.ID, &j.Queue, &payload, &status, &priority, &attempts, &uncounted, &maxAttempts, &policy, &j.RunAt,
		&j.LeaseUntil, &lockedBy, &j.LastAttemptedAt, &j.LastFailedAt, &lastError, &history,
		&reason, &dedupe, &j.CreatedAt, &j.CompletedAt}, extra...)
	err := row.Scan(dest...)
	if err != nil {
		return jobtype.Job{}, err
	}
	j.Payload = json.RawMessage(payload)
	j.Status = jobtype.Status(status)
	j.Priority = int(priority)
	j.Token = int(attempts)
	j.UncountedAttempts = int(uncounted)
	if maxAttempts != nil {
		j.MaxAttempts = int(*maxAttempts)
	}
	j.Policy = Deref(policy)
	j.LockedBy = Deref(lockedBy)
	j.LastError = Deref(lastError)
	j.DeadLetterReason = Deref(reason)
	j.DedupeKey = Deref(dedupe)
	if len(history) > 0 {
		j.Errors = DecodeHistory(history)
	}
	return j, nil
}

// Deref reads a nullable text column: NULL is "".
func Deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// DecodeHistory reads a job's error history. An entry Go cannot read whole
// (a timestamp past year 9999, which PostgreSQL's jsonb can hold, or a
// field of an unexpected type) keeps what can be read, with a zero At: a
// history is for people, and one odd entry must not make the job, or the
// claim batch it came in, unreadable.
func DecodeHistory(raw []byte) []jobtype.AttemptError {
	if string(raw) == "[]" {
		// Every job claimed for its first attempt: no JSON decoder needed.
		return []jobtype.AttemptError{}
	}
	var errs []jobtype.AttemptError
	if json.Unmarshal(raw, &errs) == nil {
		return errs
	}
	var entries []map[string]json.RawMessage
	if json.Unmarshal(raw, &entries) != nil {
		return nil
	}
	errs = make([]jobtype.AttemptError, len(entries))
	for i, e := range entries {
		for k, v := range e {
			switch k {
			case "attempt":
				_ = json.Unmarshal(v, &errs[i].Token)
			case "counted":
				_ = json.Unmarshal(v, &errs[i].AttemptNumber)
			case "at":
				_ = json.Unmarshal(v, &errs[i].At)
			case "error":
				_ = json.Unmarshal(v, &errs[i].Error)
			case "worker":
				_ = json.Unmarshal(v, &errs[i].Worker)
			case "kind":
				_ = json.Unmarshal(v, &errs[i].Kind)
			}
		}
	}
	return errs
}
