package lifecycle_test

// Rules written more than once in SQL, kept as copies because one copy would
// cost the hot path a call or a plan (docs/adr/0070), and checked here
// against each other and the catalog, as installed: the text comes from
// pg_proc, never from a copy of it in the test.

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
)

// stripSQLComments returns src without its -- and /* */ comments, string
// literals and quoted identifiers untouched, so that a comment can neither
// hide a column nor count as a drift.
func stripSQLComments(src string) string {
	var b strings.Builder
	for i := 0; i < len(src); {
		switch {
		case src[i] == '\'' || src[i] == '"':
			q := src[i]
			j := i + 1
			for j < len(src) {
				if src[j] == q {
					if j+1 < len(src) && src[j+1] == q { // '' or "" inside
						j += 2
						continue
					}
					break
				}
				j++
			}
			end := min(j+1, len(src))
			b.WriteString(src[i:end])
			i = end
		case strings.HasPrefix(src[i:], "--"):
			j := strings.IndexByte(src[i:], '\n')
			if j < 0 {
				return b.String()
			}
			i += j // keep the newline: it separates words
		case strings.HasPrefix(src[i:], "/*"):
			j := strings.Index(src[i+2:], "*/")
			if j < 0 {
				return b.String()
			}
			b.WriteByte(' ')
			i += 2 + j + 2
		default:
			b.WriteByte(src[i])
			i++
		}
	}
	return b.String()
}

// scanTopLevel calls visit with each byte of s outside string literals and
// its depth in parentheses (a parenthesis counts inside the pair it opens
// or closes), until visit returns false.
func scanTopLevel(s string, visit func(i, depth int) bool) {
	depth := 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '\'':
			for i++; i < len(s) && s[i] != '\''; i++ {
			}
			continue
		case '(':
			depth++
			if !visit(i, depth) {
				return
			}
			continue
		case ')':
			depth--
			if !visit(i, depth+1) {
				return
			}
			continue
		}
		if !visit(i, depth) {
			return
		}
	}
}

// closingParen returns the index of the parenthesis that closes the one at
// s[open], or -1.
func closingParen(s string, open int) int {
	end := -1
	scanTopLevel(s[open:], func(i, depth int) bool {
		if depth == 1 && s[open+i] == ')' {
			end = open + i
			return false
		}
		return true
	})
	return end
}

// splitTopLevel splits s at the commas outside parentheses and literals.
func splitTopLevel(s string) []string {
	var out []string
	start := 0
	scanTopLevel(s, func(i, depth int) bool {
		if depth == 0 && s[i] == ',' {
			out = append(out, strings.TrimSpace(s[start:i]))
			start = i + 1
		}
		return true
	})
	return append(out, strings.TrimSpace(s[start:]))
}

// topLevelWord returns the index of the first whole word w in s outside
// parentheses and literals (any case), or -1.
func topLevelWord(s, w string) int {
	isWord := func(c byte) bool {
		return c == '_' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
	}
	at := -1
	scanTopLevel(s, func(i, depth int) bool {
		if depth == 0 && i+len(w) <= len(s) && strings.EqualFold(s[i:i+len(w)], w) &&
			(i == 0 || !isWord(s[i-1])) && (i+len(w) == len(s) || !isWord(s[i+len(w)])) {
			at = i
			return false
		}
		return true
	})
	return at
}

var (
	// Into backoff.jobs or into its finished partition by name (which has
	// the parent's identity on PostgreSQL 17 and later).
	insertJobsRe = regexp.MustCompile(`(?i)\bINSERT\s+INTO\s+backoff\.jobs(_finished)?\b(\s+AS\s+\w+)?\s*\(`)
	deleteJobsRe = regexp.MustCompile(`(?i)\bDELETE\s+FROM\s+backoff\.jobs\b`)
	overridingRe = regexp.MustCompile(`(?i)^\s*OVERRIDING\s+SYSTEM\s+VALUE\s+SELECT\b`)
	carriedRe    = regexp.MustCompile(`^\w+\.(\w+)$`)
)

// jobMove is one INSERT INTO backoff.jobs (or its finished partition) of a
// statement that also deletes from backoff.jobs: a job's row moving
// (finishing, rotating, replayed).
type jobMove struct {
	fn      string   // the function, as regprocedure
	columns []string // the INSERT's column list
	values  []string // its SELECT list
}

// jobMoves finds every move in the functions of schema backoff.
func jobMoves(t *testing.T, db querier) []jobMove {
	t.Helper()
	rows, err := db.Query(context.Background(), `
		SELECT p.oid::pg_catalog.regprocedure::text, p.prosrc
		FROM pg_catalog.pg_proc AS p
		WHERE p.pronamespace = 'backoff'::pg_catalog.regnamespace
		ORDER BY 1`)
	require.NoError(t, err)
	defer rows.Close()
	var moves []jobMove
	for rows.Next() {
		var fn, src string
		require.NoError(t, rows.Scan(&fn, &src))
		src = stripSQLComments(src)
		for _, m := range insertJobsRe.FindAllStringIndex(src, -1) {
			// The statement so far: back to the previous semicolon.
			stmt := src[strings.LastIndexByte(src[:m[0]], ';')+1 : m[0]]
			if !deleteJobsRe.MatchString(stmt) {
				continue // a new job (enqueue, a schedule's fire), not a move
			}
			open := m[1] - 1
			closing := closingParen(src, open)
			require.Positive(t, closing, "%s: INSERT INTO backoff.jobs without its column list closed", fn)
			mv := jobMove{fn: fn, columns: splitTopLevel(src[open+1 : closing])}
			rest := src[closing+1:]
			sel := overridingRe.FindStringIndex(rest)
			require.NotNil(t, sel, "%s: a move of a job's row must keep its id: INSERT (…) OVERRIDING SYSTEM VALUE SELECT …", fn)
			rest = rest[sel[1]:]
			from := topLevelWord(rest, "FROM")
			require.Positive(t, from, "%s: the SELECT of a move without FROM", fn)
			mv.values = splitTopLevel(rest[:from])
			moves = append(moves, mv)
		}
	}
	require.NoError(t, rows.Err())
	return moves
}

// jobColumns is the columns of backoff.jobs from the catalog.
func jobColumns(t *testing.T, db querier) []string {
	t.Helper()
	var cols []string
	require.NoError(t, db.QueryRow(context.Background(), `
		SELECT pg_catalog.array_agg(a.attname::text ORDER BY a.attnum)
		FROM pg_catalog.pg_attribute AS a
		WHERE a.attrelid = 'backoff.jobs'::pg_catalog.regclass AND a.attnum > 0 AND NOT a.attisdropped`).Scan(&cols))
	return cols
}

// crossedOnPurpose is the one value a move carries from another column of
// the old row: a replay's fresh budget, uncounted_attempts = attempts
// (docs/adr/0020).
var crossedOnPurpose = map[string]bool{"uncounted_attempts = attempts": true}

// moveProblems says, per move, what it loses or misplaces of a job's row:
// a column of backoff.jobs missing from its column list, a column the table
// lacks, a SELECT list of another length, and a value carried from the old
// row (alias.column) into another column.
func moveProblems(t *testing.T, db querier) (problems []string, fns []string) {
	t.Helper()
	table := jobColumns(t, db)
	for _, mv := range jobMoves(t, db) {
		fns = append(fns, mv.fn)
		for _, c := range table {
			if !slices.Contains(mv.columns, c) {
				problems = append(problems, fmt.Sprintf("%s: column %s of backoff.jobs is missing from the INSERT's column list: a job's %s would be lost when it moves", mv.fn, c, c))
			}
		}
		seen := map[string]bool{}
		for _, c := range mv.columns {
			if !slices.Contains(table, c) {
				problems = append(problems, fmt.Sprintf("%s: the INSERT names column %s, which backoff.jobs does not have", mv.fn, c))
			}
			if seen[c] {
				problems = append(problems, fmt.Sprintf("%s: the INSERT names column %s twice", mv.fn, c))
			}
			seen[c] = true
		}
		if len(mv.values) != len(mv.columns) {
			problems = append(problems, fmt.Sprintf("%s: %d columns but %d values in the SELECT list", mv.fn, len(mv.columns), len(mv.values)))
			continue
		}
		for i, v := range mv.values {
			if m := carriedRe.FindStringSubmatch(v); m != nil && m[1] != mv.columns[i] && !crossedOnPurpose[mv.columns[i]+" = "+m[1]] {
				problems = append(problems, fmt.Sprintf("%s: value %d, %s, goes into column %s", mv.fn, i+1, v, mv.columns[i]))
			}
		}
	}
	sort.Strings(fns)
	return problems, fns
}

// The moves a job's row makes (finishing, rotating, replay) are each a
// DELETE feeding an INSERT that lists every column (docs/adr/0061), in
// several functions: one copy would cost the single statement of complete
// and cancel (they set the finished values in the INSERT), so each copy is
// checked against the table instead. A column added to backoff.jobs and
// forgotten in one of them fails here, naming the function and the column.
func TestJobMovesCarryEveryColumn(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	problems, fns := moveProblems(t, db)
	require.Empty(t, problems)
	// The moves as of this writing: a pattern that stopped finding them
	// would otherwise pass with nothing checked.
	for _, want := range []string{
		"backoff._move_finished(bigint[])",
		"backoff._move_to_current_segment(bigint[],boolean)",
		"backoff.cancel(bigint,text,timestamp with time zone)",
		"backoff.complete(bigint,integer,timestamp with time zone,jsonb)",
		"backoff.complete_many(bigint[],integer[],timestamp with time zone,jsonb[])",
		"backoff.replay(bigint,timestamp with time zone)",
		"backoff.replay_dead_letters(text,timestamp with time zone)",
	} {
		require.Contains(t, fns, want, "no move of a job's row found in %s", want)
	}
}

// drifted returns a transaction on a copy of pool's database in which fn (a
// regprocedure) is defined again with its source after edit, which must
// change it. The transaction is rolled back when the test ends.
func drifted(t *testing.T, pool *pgxpool.Pool, fn string, edit func(string) string) pgx.Tx {
	t.Helper()
	ctx := context.Background()
	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	t.Cleanup(func() { _ = tx.Rollback(ctx) })
	var def string
	require.NoError(t, tx.QueryRow(ctx, `SELECT pg_catalog.pg_get_functiondef($1::pg_catalog.regprocedure)`, fn).Scan(&def))
	changed := edit(def)
	require.NotEqual(t, def, changed, "the edit of %s changed nothing", fn)
	_, err = tx.Exec(ctx, changed)
	require.NoError(t, err)
	return tx
}

// The check of the moves fails on a copy that drifted: a column dropped from
// one copy (both lists, so that the statement still runs), and two carried
// values swapped.
func TestJobMovesCheckFailsOnADriftedCopy(t *testing.T) {
	t.Parallel()
	pool := newDB(t)

	problems, _ := moveProblems(t, drifted(t, pool, "backoff._move_finished(bigint[])", func(s string) string {
		s = strings.Replace(s, "lease_expiries, schedule,", "schedule,", 1)
		return strings.Replace(s, "d.lease_expiries, d.schedule,", "d.schedule,", 1)
	}))
	require.Equal(t, []string{"backoff._move_finished(bigint[]): column lease_expiries of backoff.jobs is missing from the INSERT's column list: a job's lease_expiries would be lost when it moves"}, problems)

	problems, _ = moveProblems(t, drifted(t, pool, "backoff._move_to_current_segment(bigint[],boolean)", func(s string) string {
		return strings.Replace(s, "m.last_attempted_at, m.last_failed_at,", "m.last_failed_at, m.last_attempted_at,", 1)
	}))
	require.Len(t, problems, 2, "%q", problems)
	require.Contains(t, problems[0], "backoff._move_to_current_segment(bigint[],boolean): value 12, m.last_failed_at, goes into column last_attempted_at")
}

var (
	claimUpdateRe = regexp.MustCompile(`(?i)\bUPDATE\s+backoff\.jobs\s+AS\s+j\s+SET\s+status\s*=\s*'running'`)
	claimLimitRe  = regexp.MustCompile(`(?i)\bLIMIT\s+(\w+)\s+FOR\s+UPDATE\s+SKIP\s+LOCKED\b`)
	spacesRe      = regexp.MustCompile(`\s+`)
	// The fast statement's probe of backoff.queues (docs/adr/0045; planned
	// away while no queue has a control, docs/adr/0094): claim
	// leaves a paused queue and a queue under controls to
	// backoff._claim_controlled, whose copies have no such probe.
	queueProbeRe = regexp.MustCompile(`(?i)\s*\bAND\s+NOT\s+\(\s*backoff\._queues_held\(\)\s+AND\s+EXISTS\s*\(\s*SELECT\s+FROM\s+backoff\.queues\s+AS\s+q\b`)
)

// claimCopy is one copy of the claim statement, normalized: comments gone,
// whitespace collapsed, its LIMIT written <limit>.
type claimCopy struct {
	stmt      string // from UPDATE to RETURNING
	limit     string // what its LIMIT was
	returning string // RETURNING …, up to the end of the statement
}

// normalizeSQL collapses whitespace, none inside parentheses' edges.
func normalizeSQL(s string) string {
	s = strings.TrimSpace(spacesRe.ReplaceAllString(s, " "))
	return strings.NewReplacer("( ", "(", " )", ")").Replace(s)
}

// claimCopies reads fn's source from pg_proc and returns its copies of the
// claim statement.
func claimCopies(t *testing.T, db querier, fn string) []claimCopy {
	t.Helper()
	var src string
	require.NoError(t, db.QueryRow(context.Background(),
		`SELECT p.prosrc FROM pg_catalog.pg_proc AS p WHERE p.oid = $1::pg_catalog.regprocedure`, fn).Scan(&src))
	src = stripSQLComments(src)
	var copies []claimCopy
	for _, m := range claimUpdateRe.FindAllStringIndex(src, -1) {
		body := src[m[0]:]
		ret := topLevelWord(body, "RETURNING")
		require.Positive(t, ret, "%s: a claim statement without RETURNING", fn)
		end := strings.IndexAny(body[ret:], ";)")
		require.Positive(t, end, "%s: a claim statement without its end", fn)
		c := claimCopy{stmt: normalizeSQL(body[:ret]), returning: normalizeSQL(body[ret : ret+end])}
		if l := claimLimitRe.FindStringSubmatch(c.stmt); l != nil {
			c.limit = l[1]
			c.stmt = claimLimitRe.ReplaceAllString(c.stmt, "LIMIT <limit> FOR UPDATE SKIP LOCKED")
		}
		copies = append(copies, c)
	}
	return copies
}

// withoutQueueProbe returns stmt without the fast statement's probe of
// backoff.queues, and whether it had one.
func withoutQueueProbe(stmt string) (string, bool) {
	loc := queueProbeRe.FindStringIndex(stmt)
	if loc == nil {
		return stmt, false
	}
	open := strings.IndexByte(stmt[loc[0]:], '(') + loc[0]
	closing := closingParen(stmt, open)
	if closing < 0 {
		return stmt, false
	}
	return stmt[:loc[0]] + stmt[closing+1:], true
}

const (
	claimFn      = "backoff.claim(text,text,integer,interval,timestamp with time zone)"
	controlledFn = "backoff._claim_controlled(text,text,integer,interval,timestamp with time zone,backoff.queues)"
)

// claimProblems compares the four copies of the claim statement as
// installed. What may differ between them, and nothing else:
//   - the LIMIT: 1 and p_limit in backoff.claim (a constant keeps one
//     generic plan for the single-job claim), v_allow, the allowance of
//     the queue's controls, in backoff._claim_controlled;
//   - the probe of backoff.queues in backoff.claim's two copies (equal to
//     each other): the fast statement leaves a queue under controls to
//     backoff._claim_controlled, which has no probe;
//   - RETURNING j AS job in the copy of backoff._claim_controlled that
//     keeps the rows of a half-open breaker's claim to record the probes'
//     ids, RETURNING j.* everywhere else.
func claimProblems(t *testing.T, db querier) []string {
	t.Helper()
	var problems []string
	fast := claimCopies(t, db, claimFn)
	controlled := claimCopies(t, db, controlledFn)
	if len(fast) != 2 || len(controlled) != 2 {
		return []string{fmt.Sprintf("want 2 claim statements in %s and 2 in %s, found %d and %d", claimFn, controlledFn, len(fast), len(controlled))}
	}
	if got := []string{fast[0].limit, fast[1].limit}; !slices.Equal(got, []string{"1", "p_limit"}) {
		problems = append(problems, fmt.Sprintf("%s: LIMITs %q, want 1 then p_limit", claimFn, got))
	}
	if got := []string{controlled[0].limit, controlled[1].limit}; !slices.Equal(got, []string{"v_allow", "v_allow"}) {
		problems = append(problems, fmt.Sprintf("%s: LIMITs %q, want v_allow in both", controlledFn, got))
	}
	if fast[0].stmt != fast[1].stmt {
		problems = append(problems, fmt.Sprintf("%s: its LIMIT 1 and LIMIT p_limit statements differ:\n%s\n%s", claimFn, fast[0].stmt, fast[1].stmt))
	}
	want, probed := withoutQueueProbe(fast[0].stmt)
	if !probed {
		problems = append(problems, fmt.Sprintf("%s: no probe of backoff.queues in its statement: %s", claimFn, fast[0].stmt))
	}
	for i, c := range controlled {
		if c.stmt != want {
			problems = append(problems, fmt.Sprintf("%s: its claim statement %d differs from backoff.claim's:\n%s\n%s", controlledFn, i+1, c.stmt, want))
		}
	}
	for _, c := range fast {
		if c.returning != "RETURNING j.*" {
			problems = append(problems, fmt.Sprintf("%s: %s, want RETURNING j.*", claimFn, c.returning))
		}
	}
	if got := []string{controlled[0].returning, controlled[1].returning}; !slices.Equal(got, []string{"RETURNING j.*", "RETURNING j AS job"}) {
		problems = append(problems, fmt.Sprintf("%s: %q, want RETURNING j.* then RETURNING j AS job", controlledFn, got))
	}
	return problems
}

// The claim statement is written four times (backoff.claim with LIMIT 1 and
// with LIMIT p_limit, backoff._claim_controlled twice): one copy with a
// LIMIT parameter would make the single-job claim plan again at every call
// (docs/adr/0041), and the controlled copies are kept off the hot path. The
// copies are compared as installed, so a change made to one and not the
// others fails here.
func TestClaimCopiesAgree(t *testing.T) {
	t.Parallel()
	require.Empty(t, claimProblems(t, newDB(t)))
}

// The comparison fails on a drifted copy: an ORDER BY changed in one copy of
// backoff._claim_controlled, and a condition changed in backoff.claim's
// LIMIT 1 copy only.
func TestClaimCopiesCheckFailsOnADriftedCopy(t *testing.T) {
	t.Parallel()
	pool := newDB(t)

	problems := claimProblems(t, drifted(t, pool, controlledFn, func(s string) string {
		return strings.Replace(s, "ORDER BY c.priority DESC, c.run_at, c.id", "ORDER BY c.priority DESC, c.id", 1)
	}))
	require.Len(t, problems, 1, "%q", problems)
	require.Contains(t, problems[0], controlledFn+": its claim statement 1 differs from backoff.claim's")

	problems = claimProblems(t, drifted(t, pool, claimFn, func(s string) string {
		return strings.Replace(s, "c.run_at <= p_now", "c.run_at < p_now", 1)
	}))
	require.NotEmpty(t, problems)
	require.Contains(t, problems[0], claimFn+": its LIMIT 1 and LIMIT p_limit statements differ")
}

// outputColumns is fn's (a regprocedure) result columns, "name type", in
// order.
func outputColumns(t *testing.T, db querier, fn string) []string {
	t.Helper()
	var cols []string
	require.NoError(t, db.QueryRow(context.Background(), `
		SELECT pg_catalog.array_agg(a.name || ' ' || pg_catalog.format_type(a.type, NULL) ORDER BY a.n)
		FROM pg_catalog.pg_proc AS p,
		     unnest(p.proargnames, p.proargmodes, p.proallargtypes) WITH ORDINALITY AS a(name, mode, type, n)
		WHERE p.oid = $1::pg_catalog.regprocedure AND a.mode = 't'`, fn).Scan(&cols))
	return cols
}

// backoff.job_detail and backoff.list_jobs show a job with the same columns,
// up to effective_max_attempts, then each its own (a payload's preview;
// scan_end). RETURNS TABLE cannot name a shared list, and a composite type
// would either give each function the other's columns or nest the job in a
// column every client reads flat; the two lists are compared instead.
func TestJobDisplayColumnsAgree(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	upToPolicy := func(cols []string) []string {
		i := slices.Index(cols, "effective_max_attempts integer")
		require.Positive(t, i, "no effective_max_attempts in %q", cols)
		return cols[:i+1]
	}
	detail := upToPolicy(outputColumns(t, db, "backoff.job_detail(bigint,integer)"))
	list := upToPolicy(outputColumns(t, db, "backoff.list_jobs(text,text[],text,text,text,timestamp with time zone,timestamp with time zone,timestamp with time zone,timestamp with time zone,text,text,bigint,timestamp with time zone,integer,boolean,integer)"))
	require.Equal(t, detail, list, "the job columns of backoff.job_detail, then of backoff.list_jobs")
	// Each shown column of the job is the table's, with its type.
	var table []string
	require.NoError(t, db.QueryRow(context.Background(), `
		SELECT pg_catalog.array_agg(a.attname || ' ' || pg_catalog.format_type(a.atttypid, NULL))
		FROM pg_catalog.pg_attribute AS a
		WHERE a.attrelid = 'backoff.jobs'::pg_catalog.regclass AND a.attnum > 0 AND NOT a.attisdropped`).Scan(&table))
	for _, c := range detail {
		if !strings.HasPrefix(c, "effective_") {
			require.Contains(t, table, c, "a job column of backoff.job_detail and backoff.list_jobs")
		}
	}
}
