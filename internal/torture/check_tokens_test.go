package torture

import (
	"fmt"
	"sort"
)

// checkTokens: no acknowledged settle used a stale fencing token, and no
// job was acknowledged completed twice. A settle S of job j with attempt a
// (complete, fail, snooze, heartbeat) is stale when, before S began, an
// acknowledged call had already committed one of:
//   - a claim or acquire of j with a later attempt (attempts never go
//     down: j no longer runs attempt a);
//   - a complete, fail or snooze of j with attempt a (that attempt ended);
//   - a cancel of j, after the claim of attempt a had committed.
//
// Such an S must have been refused (BK002, BK003).
func checkTokens(acts []act) []string {
	byJob := map[int64][]act{}
	for _, a := range acts {
		if a.fate == acknowledged && a.kind != "enqueue" && a.kind != "replay" {
			byJob[a.job] = append(byJob[a.job], a)
		}
	}
	var jobs []int64
	for id := range byJob {
		jobs = append(jobs, id)
	}
	sort.Slice(jobs, func(i, k int) bool { return jobs[i] < jobs[k] })
	var v []string
	for _, id := range jobs {
		as := byJob[id]
		var completes []act
		for _, s := range as {
			if s.kind == "complete" {
				completes = append(completes, s)
			}
			if !isSettle(s.kind) {
				continue
			}
			for _, e := range as {
				if e.end >= s.start || !endsAttempt(e, s, as) {
					continue
				}
				v = append(v, fmt.Sprintf("job %d: stale token settled: %s with attempt %d (client %d, %.3f-%.3f s) was acknowledged after %s (client %d, attempt %d, acknowledged at %.3f s)",
					id, s.kind, s.attempt, s.session, s.start.Seconds(), s.end.Seconds(), e.kind, e.session, e.attempt, e.end.Seconds()))
				break
			}
		}
		if len(completes) > 1 {
			v = append(v, fmt.Sprintf("job %d: acknowledged completed %d times: attempt %d (client %d) and attempt %d (client %d)",
				id, len(completes), completes[0].attempt, completes[0].session, completes[1].attempt, completes[1].session))
		}
	}
	return v
}

func isSettle(kind string) bool {
	return kind == "complete" || kind == "fail" || kind == "snooze" || kind == "heartbeat"
}

// endsAttempt: e, committed before settle s began, means s's attempt was
// no longer running.
func endsAttempt(e, s act, all []act) bool {
	switch e.kind {
	case "claim", "acquire":
		return e.attempt > s.attempt
	case "complete", "fail", "snooze":
		return e.attempt == s.attempt
	case "cancel":
		for _, c := range all {
			if (c.kind == "claim" || c.kind == "acquire") && c.attempt == s.attempt && c.end < e.start {
				return true
			}
		}
	}
	return false
}
