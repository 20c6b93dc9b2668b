package cli

import (
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/spf13/cobra"

	"github.com/pgbackoff/pgbackoff/client/policy"
	"github.com/pgbackoff/pgbackoff/cmd/backoffctl/internal/config"
)

func init() { register(newScheduleCommand) }

// timelineRow is one line of a policy's retry timeline.
type timelineRow struct {
	Attempt      int           `json:"attempt"`
	Delay        time.Duration `json:"delay_us"`
	Cumulative   time.Duration `json:"cumulative_us"`
	Unjittered   time.Duration `json:"unjittered_us"`
	SpreadMin    time.Duration `json:"spread_min_us"`
	SpreadMax    time.Duration `json:"spread_max_us"`
	DeadLettered bool          `json:"dead_lettered_after"`
	// Reason is why a failure of this attempt dead-letters the job.
	Reason string `json:"dead_letter_reason,omitempty"`
}

// timeline computes attempts 1..n of a new job under p with
// policy.Timeline (the retry timeline the web UI and the demo show too):
// the delay for seed, and the least and greatest delay over seeds 1..seeds.
func timeline(p policy.Policy, attempts int, seed int64, seeds int) []timelineRow {
	rows := make([]timelineRow, 0, attempts)
	for _, st := range policy.Timeline(p, policy.TimelineStart{Seed: seed, Steps: attempts}) {
		lo, hi := time.Duration(math.MaxInt64), time.Duration(0)
		for s := 1; s <= seeds; s++ {
			v := p.Delay(st.Attempt, int64(s))
			lo, hi = min(lo, v), max(hi, v)
		}
		rows = append(rows, timelineRow{Attempt: st.Attempt, Delay: st.Delay, Cumulative: st.Next, Unjittered: st.Unjittered,
			SpreadMin: lo, SpreadMax: hi, DeadLettered: st.DeadLetter != "", Reason: st.DeadLetter})
	}
	return rows
}

func newScheduleCommand() *cobra.Command {
	var (
		name, file, env, plot string
		attempts, seeds       int
		seed                  int64
	)
	cmd := &cobra.Command{
		Use:   "schedule",
		Short: "Print a policy's retry timeline and how jitter spreads it",
		Long: `Print when a job under a policy runs again after each failed attempt: the
delay for one seed (a job id), the cumulative wait, the delay without jitter,
and the least and greatest delay jitter gives across --seeds seeds, which is
how far a burst of jobs that failed together spreads out.

The delays come from the Go mirror of the SQL math, which agrees with
backoff.retry_delay to the microsecond. The policy is read from --config when
given; else from the database when --database-url or DATABASE_URL is set;
else from the shipped profiles (aggressive, moderate, conservative, default).

By default the table shows the retries the policy allows (max_attempts - 1);
--attempts shows more or fewer. --plot FILE.svg draws the spread band and the
un-jittered delay over the attempts.`,
		Example: `  backoffctl schedule --policy moderate
  backoffctl schedule --policy emails --config backoff.toml --env test --attempts 8
  backoffctl schedule --policy conservative --seed 42 --plot conservative.svg
  backoffctl schedule --policy moderate --output json`,
		Args: exactArgs(0, ""),
		RunE: withOutput(func(cmd *cobra.Command, _ []string, jsonOut bool) error {
			if name == "" {
				return usagef("schedule needs --policy NAME")
			}
			if cmd.Flags().Changed("attempts") && (attempts < 1 || attempts > 10000) {
				return usagef("--attempts %d: want 1 to 10000", attempts)
			}
			if seeds < 1 || seeds > 100000 {
				return usagef("--seeds %d: want 1 to 100000", seeds)
			}
			if plot != "" && !strings.HasSuffix(strings.ToLower(plot), ".svg") {
				return usagef("--plot %q: only SVG is supported; name the file *.svg", plot)
			}
			p, source, err := schedulePolicy(cmd, name, file, env)
			if err != nil {
				return err
			}
			n := attempts
			if !cmd.Flags().Changed("attempts") {
				n = max(p.MaxAttempts-1, 1)
			}
			rows := timeline(p, n, seed, seeds)
			if plot != "" {
				if err := writePlotFile(plot, p, rows, seeds); err != nil {
					return err
				}
			}
			w := cmd.OutOrStdout()
			if jsonOut {
				return writeJSON(w, map[string]any{"policy": p.Name, "source": source, "seed": seed, "seeds": seeds,
					"max_attempts": p.MaxAttempts, "timeline": rows})
			}
			writeTimeline(w, p, source, rows, seed, seeds)
			if plot != "" {
				fmt.Fprintf(w, "plot written to %s\n", plot)
			}
			return nil
		}),
	}
	cmd.Flags().StringVar(&name, "policy", "", "policy name (required)")
	cmd.Flags().IntVar(&attempts, "attempts", 0, "number of failed attempts to show (default: max_attempts - 1)")
	cmd.Flags().Int64Var(&seed, "seed", 0, "jitter seed, normally a job id")
	cmd.Flags().IntVar(&seeds, "seeds", 1000, "seeds sampled (1..N) for the spread columns")
	cmd.Flags().StringVar(&file, "config", "", "read the policy from this configuration file")
	cmd.Flags().StringVar(&env, "env", "", "environment overlay of --config")
	cmd.Flags().StringVar(&plot, "plot", "", "also draw the timeline into this SVG file")
	return cmd
}

// schedulePolicy finds the policy: --config, else the database, else the
// shipped profiles.
func schedulePolicy(cmd *cobra.Command, name, file, env string) (policy.Policy, string, error) {
	if env != "" && file == "" {
		return policy.Policy{}, "", usagef("--env needs --config")
	}
	if file != "" {
		c, err := config.Load(file, env)
		if err != nil {
			return policy.Policy{}, "", err
		}
		p, ok := c.Policy(name)
		if !ok {
			return policy.Policy{}, "", fmt.Errorf("no policy %q in %s; defined: %s", name, file, policyNames(c.Policies))
		}
		p.Name = name
		src := file
		if env != "" {
			src += " (env " + env + ")"
		}
		return p, src, nil
	}
	if u, _ := databaseURL(cmd); u != "" {
		var p policy.Policy
		err := withConn(cmd, func(ctx context.Context, conn *pgx.Conn) error {
			var ok bool
			var err error
			if p, ok, err = readPolicy(ctx, conn, name); err == nil && !ok {
				err = fmt.Errorf("no policy %q in backoff.policies", name)
			}
			return err
		})
		if err != nil {
			return policy.Policy{}, "", err
		}
		return p, "database", nil
	}
	profiles := policy.Profiles()
	p, ok := profiles[name]
	if !ok {
		names := make([]string, 0, len(profiles))
		for k := range profiles {
			names = append(names, k)
		}
		slices.Sort(names)
		return policy.Policy{}, "", fmt.Errorf("no shipped profile %q (shipped: %s); pass --config or --database-url for other policies", name, strings.Join(names, ", "))
	}
	p.Name = name
	return p, "shipped profiles", nil
}

func policyNames(ps []policy.Policy) string {
	names := make([]string, len(ps))
	for i, p := range ps {
		names[i] = p.Name
	}
	return strings.Join(names, ", ")
}

// describePolicy is a one-line summary: "exponential 1s ×2.0, max 1m, jitter proportional 0.1, 5 attempts".
func describePolicy(p policy.Policy) string {
	var b strings.Builder
	b.WriteString(string(p.Strategy))
	switch p.Strategy {
	case policy.StrategyFixed, policy.StrategyLinear:
		fmt.Fprintf(&b, " %s", formatDelay(p.Base))
	case policy.StrategyExponential:
		fmt.Fprintf(&b, " %s ×%s", formatDelay(p.Base), config.FormatFloat(p.Multiplier))
	case policy.StrategyPolynomial:
		fmt.Fprintf(&b, " %s × n^%d", formatDelay(p.Base), p.Exponent)
	case policy.StrategySchedule:
		parts := make([]string, len(p.Schedule))
		for i, d := range p.Schedule {
			parts[i] = formatDelay(d)
		}
		fmt.Fprintf(&b, " [%s]", strings.Join(parts, " "))
	}
	fmt.Fprintf(&b, ", max %s, jitter %s", formatDelay(p.Max), p.Jitter)
	if p.Jitter == policy.JitterProportional {
		fmt.Fprintf(&b, " %s", config.FormatFloat(p.JitterRatio))
	}
	fmt.Fprintf(&b, ", %d attempts", p.MaxAttempts)
	if p.Deadline > 0 {
		fmt.Fprintf(&b, ", deadline %s", formatDelay(p.Deadline))
	}
	return b.String()
}

func writeTimeline(w io.Writer, p policy.Policy, source string, rows []timelineRow, seed int64, seeds int) {
	fmt.Fprintf(w, "policy %s (%s): %s\n\n", p.Name, source, describePolicy(p))
	tw := newTable(w)
	row(tw, "ATTEMPT", "DELAY (seed "+strconv.FormatInt(seed, 10)+")", "CUMULATIVE", "NO JITTER", "SPREAD ("+strconv.Itoa(seeds)+" seeds)")
	for _, r := range rows {
		spread := formatDelay(r.SpreadMin) + " – " + formatDelay(r.SpreadMax)
		if r.SpreadMin == r.SpreadMax {
			spread = formatDelay(r.SpreadMin)
		}
		attempt := strconv.Itoa(r.Attempt)
		if r.DeadLettered {
			attempt += "*"
		}
		row(tw, attempt, formatDelay(r.Delay), formatDelay(r.Cumulative), formatDelay(r.Unjittered), spread)
	}
	_ = tw.Flush()
	if i := slices.IndexFunc(rows, func(r timelineRow) bool { return r.DeadLettered }); i >= 0 {
		if r := rows[i]; r.Reason == policy.ReasonDeadline {
			fmt.Fprintf(w, "\n* attempt %d is the last (deadline %s): a job that fails it would run again after the deadline, so it is dead-lettered\n",
				r.Attempt, formatDelay(p.Deadline))
		} else {
			fmt.Fprintf(w, "\n* attempt %d is the last (max_attempts = %d): a job that fails it is dead-lettered, not retried\n", r.Attempt, p.MaxAttempts)
		}
	} else {
		fmt.Fprintf(w, "\nafter attempt %d (max_attempts) a job is dead-lettered\n", p.MaxAttempts)
	}
}

func writePlotFile(path string, p policy.Policy, rows []timelineRow, seeds int) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("write plot: %w", err)
	}
	if err := writePlot(f, p, rows, seeds); err != nil {
		f.Close()
		return fmt.Errorf("write plot %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write plot %s: %w", path, err)
	}
	return nil
}

// writePlot draws the timeline as SVG: attempts on x, delay in seconds on
// y, the min–max jitter band filled, the un-jittered delay as a line and the
// chosen seed's delays as dots.
func writePlot(w io.Writer, p policy.Policy, rows []timelineRow, seeds int) error {
	const (
		width, height            = 720.0, 420.0
		left, right, top, bottom = 70.0, 20.0, 40.0, 50.0
	)
	plotW, plotH := width-left-right, height-top-bottom
	yMax := 0.0
	for _, r := range rows {
		yMax = math.Max(yMax, math.Max(r.SpreadMax.Seconds(), math.Max(r.Unjittered.Seconds(), r.Delay.Seconds())))
	}
	yMax = niceCeil(yMax)
	n := len(rows)
	x := func(attempt int) float64 {
		if n == 1 {
			return left + plotW/2
		}
		return left + plotW*float64(attempt-1)/float64(n-1)
	}
	y := func(d time.Duration) float64 { return top + plotH - plotH*d.Seconds()/yMax }

	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" viewBox="0 0 %.0f %.0f" font-family="sans-serif" font-size="12">`+"\n", width, height, width, height)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(&b, `<text x="%.0f" y="22" font-size="14">%s</text>`+"\n", left, xmlEscape("policy "+p.Name+": "+describePolicy(p)))
	// Grid and y labels.
	for i := 0; i <= 5; i++ {
		v := yMax * float64(i) / 5
		yy := top + plotH - plotH*float64(i)/5
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#ddd"/>`+"\n", left, yy, left+plotW, yy)
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="end">%s</text>`+"\n", left-6, yy+4, xmlEscape(formatDelay(time.Duration(v*float64(time.Second)).Round(time.Millisecond))))
	}
	// x labels (at most ~20).
	step := max(1, n/20)
	for _, r := range rows {
		if (r.Attempt-1)%step == 0 || r.Attempt == n {
			fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle">%d</text>`+"\n", x(r.Attempt), top+plotH+18, r.Attempt)
		}
	}
	fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle">failed attempt</text>`+"\n", left+plotW/2, height-10)
	fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="black"/>`+"\n", left, top+plotH, left+plotW, top+plotH)
	fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="black"/>`+"\n", left, top, left, top+plotH)
	// Band: max edge left to right, min edge back.
	var pts []string
	for _, r := range rows {
		pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(r.Attempt), y(r.SpreadMax)))
	}
	for i := n - 1; i >= 0; i-- {
		pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(rows[i].Attempt), y(rows[i].SpreadMin)))
	}
	fmt.Fprintf(&b, `<polygon points="%s" fill="#4e79a7" fill-opacity="0.25" stroke="#4e79a7" stroke-width="1"><title>jitter spread over %d seeds</title></polygon>`+"\n", strings.Join(pts, " "), seeds)
	pts = pts[:0]
	for _, r := range rows {
		pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(r.Attempt), y(r.Unjittered)))
	}
	fmt.Fprintf(&b, `<polyline points="%s" fill="none" stroke="#e15759" stroke-width="2"><title>delay without jitter</title></polyline>`+"\n", strings.Join(pts, " "))
	for _, r := range rows {
		fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="3" fill="#333"><title>attempt %d: %s</title></circle>`+"\n", x(r.Attempt), y(r.Delay), r.Attempt, xmlEscape(formatDelay(r.Delay)))
	}
	// Legend.
	lx := left + plotW - 220
	fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="14" height="10" fill="#4e79a7" fill-opacity="0.25" stroke="#4e79a7"/><text x="%.1f" y="%.1f">jitter spread (%d seeds)</text>`+"\n", lx, top+4, lx+20, top+13, seeds)
	fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#e15759" stroke-width="2"/><text x="%.1f" y="%.1f">without jitter</text>`+"\n", lx, top+25, lx+14, top+25, lx+20, top+29)
	fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="3" fill="#333"/><text x="%.1f" y="%.1f">chosen seed</text>`+"\n", lx+7, top+41, lx+20, top+45)
	b.WriteString("</svg>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// niceCeil rounds v up to 1, 2 or 5 times a power of ten (at least 1ms).
func niceCeil(v float64) float64 {
	if v <= 0.001 {
		return 0.001
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if v <= m*p {
			return m * p
		}
	}
	return 10 * p
}

func xmlEscape(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&quot;").Replace(s)
}
