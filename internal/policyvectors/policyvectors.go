// Package policyvectors reads and writes the shared test vectors of the
// backoff math (client/policy/testdata/vectors.json), so that the Go
// mirror's tests and the PostgreSQL tests check the very same cases.
package policyvectors

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"time"

	"github.com/pgbackoff/pgbackoff/client/policy"
)

// File is the whole vectors file.
type File struct {
	Comment string `json:"comment"`
	// LeftOut counts candidate cases whose exact value lies within float
	// rounding of an integer: left out, as they would test rounding, not
	// the formula (the randomized cross-check covers such values).
	LeftOut   int         `json:"left_out_rounding_dependent"`
	Cases     []Case      `json:"cases"`
	Units     []Unit      `json:"units"`
	StepRetry []StepRetry `json:"step_retry"`
}

// Case is one delay: policy, seed and attempt → expected microseconds.
type Case struct {
	Name       string `json:"name"`
	Source     string `json:"source"`
	Profile    string `json:"profile,omitempty"` // a shipped profile equal to Policy: also checked by name
	Policy     Policy `json:"policy"`
	Seed       int64  `json:"seed"`
	Attempt    int    `json:"attempt"`
	ExpectedUS int64  `json:"expected_us"`
}

// Policy is the part of a policy the math reads, durations in microseconds.
type Policy struct {
	Strategy    string  `json:"strategy"`
	BaseUS      int64   `json:"base_us"`
	Multiplier  float64 `json:"multiplier"`
	Exponent    int     `json:"exponent"`
	ScheduleUS  []int64 `json:"schedule_us"`
	MaxUS       int64   `json:"max_us"`
	Jitter      string  `json:"jitter"`
	JitterRatio float64 `json:"jitter_ratio"`
}

// Unit is one jitter unit: u = Expected / 2^32 for (Seed, Attempt).
type Unit struct {
	Seed     int64  `json:"seed"`
	Attempt  int    `json:"attempt"`
	Expected uint32 `json:"expected_uint32"`
}

// StepRetry is one case of backoff.calculate_step_next_retry_time. Times
// are RFC 3339 in UTC; nil is SQL NULL. Either Expected (nil = NULL result)
// or SQLState (an error whose message mentions ErrorMentions).
type StepRetry struct {
	Name            string  `json:"name"`
	Request         *int    `json:"backoff_request_seconds"`
	LastAttemptedAt *string `json:"last_attempted_at"`
	FailureTime     *string `json:"failure_time"`
	Attempts        *int    `json:"attempts"`
	MaxSeconds      int     `json:"p_max_backoff_seconds"`
	Multiplier      string  `json:"p_backoff_multiplier"`
	Expected        *string `json:"expected,omitempty"`
	SQLState        string  `json:"sqlstate,omitempty"`
	ErrorMentions   string  `json:"error_mentions,omitempty"`
}

// Policy converts the vector's policy into a policy.Policy (the keys the
// math does not read take their defaults).
func (p Policy) Policy() policy.Policy {
	out := policy.Defaults()
	out.Name = "vector"
	out.Strategy = policy.Strategy(p.Strategy)
	out.Base = time.Duration(p.BaseUS) * time.Microsecond
	out.Multiplier = p.Multiplier
	out.Exponent = p.Exponent
	out.Schedule = nil
	for _, s := range p.ScheduleUS {
		out.Schedule = append(out.Schedule, time.Duration(s)*time.Microsecond)
	}
	out.Max = time.Duration(p.MaxUS) * time.Microsecond
	out.Jitter = policy.Jitter(p.Jitter)
	out.JitterRatio = p.JitterRatio
	return out
}

// FromPolicy is the vector form of a policy.Policy.
func FromPolicy(p policy.Policy) Policy {
	out := Policy{
		Strategy: string(p.Strategy), BaseUS: int64(p.Base / time.Microsecond), Multiplier: p.Multiplier,
		Exponent: p.Exponent, MaxUS: int64(p.Max / time.Microsecond), Jitter: string(p.Jitter), JitterRatio: p.JitterRatio,
		ScheduleUS: []int64{},
	}
	for _, s := range p.Schedule {
		out.ScheduleUS = append(out.ScheduleUS, int64(s/time.Microsecond))
	}
	return out
}

// Load reads a vectors file.
func Load(path string) (File, error) {
	body, err := os.ReadFile(path)
	if err != nil {
		return File{}, fmt.Errorf("read vectors: %w", err)
	}
	var f File
	if err := json.Unmarshal(body, &f); err != nil {
		return File{}, fmt.Errorf("parse vectors %s: %w", path, err)
	}
	return f, nil
}

// Path is the absolute path of client/policy/testdata/vectors.json in this
// source tree, for tests in other packages.
func Path() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "client", "policy", "testdata", "vectors.json")
}
