package torture

import (
	"math/rand/v2"
	"sync"
)

// token is a claimed attempt: the job and its fencing token.
type token struct {
	job     int64
	attempt int32
}

// board is what the sessions share of what they did, so that one settles
// what another claimed and calls name jobs that exist: the latest job ids
// and claimed attempts, kept to a bounded number. A token stays on the
// board after it is settled until it falls off the end, so later calls
// settle with stale tokens too, which must be refused.
type board struct {
	mu     sync.Mutex
	jobs   []int64
	tokens []token
}

const (
	boardJobs   = 400
	boardTokens = 200
)

func (b *board) addJobs(ids ...int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.jobs = append(b.jobs, ids...)
	if n := len(b.jobs) - boardJobs; n > 0 {
		b.jobs = append(b.jobs[:0], b.jobs[n:]...)
	}
}

func (b *board) addTokens(ts ...token) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.tokens = append(b.tokens, ts...)
	if n := len(b.tokens) - boardTokens; n > 0 {
		b.tokens = append(b.tokens[:0], b.tokens[n:]...)
	}
}

// job picks a job id, the recent ones more often.
func (b *board) job(rng *rand.Rand) (int64, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.jobs) == 0 {
		return 0, false
	}
	return b.jobs[recent(rng, len(b.jobs))], true
}

// token picks a claimed attempt, the recent ones more often. settled takes
// it off the board mostly: a settled token that stays is a stale one.
func (b *board) token(rng *rand.Rand) (token, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.tokens) == 0 {
		return token{}, false
	}
	return b.tokens[recent(rng, len(b.tokens))], true
}

// settled takes t off the board, four times in five.
func (b *board) settled(rng *rand.Rand, t token) {
	if rng.IntN(5) == 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for i, x := range b.tokens {
		if x == t {
			b.tokens = append(b.tokens[:i], b.tokens[i+1:]...)
			return
		}
	}
}

// recent is an index into n items, the last ones more often: half the
// picks fall among the last eighth.
func recent(rng *rand.Rand, n int) int {
	if rng.IntN(2) == 0 {
		k := max(1, n/8)
		return n - 1 - rng.IntN(k)
	}
	return rng.IntN(n)
}
