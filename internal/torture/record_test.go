package torture

import (
	"sync"
	"time"
)

// fate is what a call's caller knows of its outcome.
type fate int

const (
	// acknowledged: its COMMIT returned OK, so it took effect.
	acknowledged fate = iota
	// uncertain: the connection was lost while its COMMIT was in flight;
	// it took effect or it did not, and the checks accept either.
	uncertain
)

// act is one call the record keeps: the calls whose effect a check needs.
type act struct {
	kind    string // enqueue, claim, acquire, complete, fail, snooze, heartbeat, cancel
	fate    fate
	session int
	job     int64
	attempt int32         // the fencing token claimed, acquired or settled with
	start   time.Duration // since the run began: the call's BEGIN was sent
	end     time.Duration // its COMMIT returned
}

// fire is one slot an acknowledged fire_schedules call enqueued.
type fire struct {
	schedule string
	slot     time.Time
	job      int64
}

// record is every acknowledged (and uncertain) call of a run, in the
// order they ended.
type record struct {
	mu    sync.Mutex
	acts  []act
	fires []fire
	// The database clock of the first and the last acknowledged
	// fire_schedules call made with it (p_now NULL).
	firstDBFire, lastDBFire time.Time
}

func (r *record) add(a ...act) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.acts = append(r.acts, a...)
}

func (r *record) addFires(at time.Time, dbClock bool, f []fire) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.fires = append(r.fires, f...)
	if dbClock {
		if r.firstDBFire.IsZero() || at.Before(r.firstDBFire) {
			r.firstDBFire = at
		}
		if at.After(r.lastDBFire) {
			r.lastDBFire = at
		}
	}
}

// snapshot copies what was recorded so far, for a check that runs while
// the sessions go on.
func (r *record) snapshot() ([]act, []fire, time.Time, time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]act(nil), r.acts...), append([]fire(nil), r.fires...), r.firstDBFire, r.lastDBFire
}
