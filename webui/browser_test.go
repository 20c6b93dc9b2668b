package webui_test

import (
	"bytes"
	"context"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/pgbackoff/pgbackoff/client"
	"github.com/pgbackoff/pgbackoff/client/ops"
	"github.com/pgbackoff/pgbackoff/internal/testdb"
	"github.com/pgbackoff/pgbackoff/internal/uiseed"
	"github.com/pgbackoff/pgbackoff/webui"
)

const chromiumPath = "/usr/bin/chromium"

var pageLoad = page.LoadEventFired

// browser starts a headless Debian chromium with a fresh profile, or skips
// the test when there is none (it fails under CI, where .ci/run installs
// it). Console messages of every page are collected into the returned
// func's answer. extra adds flags to chromium's.
func browser(t *testing.T, extra ...chromedp.ExecAllocatorOption) (context.Context, func() []string) {
	t.Helper()
	if os.Getenv("BACKOFF_BROWSER_TESTS") == "skip" {
		// .ci/run's runs on the PostgreSQL versions other than the
		// default: the pages' queries are tested there without a browser.
		t.Skip("BACKOFF_BROWSER_TESTS=skip: the browser tests run in CI's default run")
	}
	if _, err := os.Stat(chromiumPath); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("browser tests need %s under CI: %v", chromiumPath, err)
		}
		t.Skipf("no %s: apt-get install chromium to run the browser tests", chromiumPath)
	}
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chromiumPath),
		chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1200, 800),
	}
	opts = append(opts, extra...)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelCtx := chromedp.NewContext(actx)
	t.Cleanup(func() { cancelCtx(); cancelAlloc() })
	require.NoError(t, chromedp.Do(ctx, chromedp.EmulateViewport(1200, 800)))
	var mu sync.Mutex
	var msgs []string
	go func() {
		for m, err := range chromedp.Console(ctx) {
			if err != nil {
				return
			}
			mu.Lock()
			msgs = append(msgs, fmt.Sprintf("%s %s:%d %s", m.Type, m.URL, m.Line+1, m.Text))
			mu.Unlock()
		}
	}()
	return ctx, func() []string {
		time.Sleep(100 * time.Millisecond) // let the iterator deliver what arrived
		mu.Lock()
		defer mu.Unlock()
		out := msgs
		msgs = nil
		return out
	}
}

// uiToken is the browser tests' access token, as `backoffctl ui` makes
// one at start: each test's browser opens the URL with it first (login).
const uiToken = "browser-tests-token"

// uiServer seeds a database and serves the UI over it, with uiToken.
func uiServer(t *testing.T, allow bool) (*httptest.Server, *pgxpool.Pool, uiseed.Result) {
	t.Helper()
	pool := testdb.New(t)
	ctx := context.Background()
	res, err := uiseed.Seed(ctx, pool, 120)
	require.NoError(t, err)
	c, err := client.New(ctx, pool)
	require.NoError(t, err)
	h, err := webui.New(c, ops.New(pool), webui.Options{AllowActions: allow, RefreshEvery: 300 * time.Millisecond, BearerToken: uiToken, QueryTimeout: busyQueryTimeout})
	require.NoError(t, err)
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv, pool, res
}

func status(t *testing.T, pool *pgxpool.Pool, id int64) string {
	t.Helper()
	var s string
	require.NoError(t, pool.QueryRow(context.Background(), "SELECT status FROM backoff.jobs WHERE id = $1", id).Scan(&s))
	return s
}

func run[T any](t *testing.T, ctx context.Context, a chromedp.Action[T]) T {
	t.Helper()
	v, err := chromedp.Run(ctx, a)
	require.NoError(t, err)
	return v
}

func do(t *testing.T, ctx context.Context, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	require.NoError(t, chromedp.Do(ctx, actions...))
}

// paletted is img in 256 of its colors, each pixel the nearest of them:
// a page is mostly a few flat colors, and the rest is the antialiasing of
// text.
func paletted(img image.Image) *image.Paletted {
	b := img.Bounds()
	counts := map[color.RGBA]int{}
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			counts[color.RGBAModel.Convert(img.At(x, y)).(color.RGBA)]++
		}
	}
	colors := make([]color.RGBA, 0, len(counts))
	for c := range counts {
		colors = append(colors, c)
	}
	sort.Slice(colors, func(i, j int) bool {
		if counts[colors[i]] != counts[colors[j]] {
			return counts[colors[i]] > counts[colors[j]]
		}
		a, b := colors[i], colors[j]
		return uint32(a.R)<<24|uint32(a.G)<<16|uint32(a.B)<<8|uint32(a.A) < uint32(b.R)<<24|uint32(b.G)<<16|uint32(b.B)<<8|uint32(b.A)
	})
	// The most frequent first, each one kept only when no kept color is
	// close to it: the small swatches of the legends keep their hue.
	pal := color.Palette{}
	for _, minDist := range []int{400, 100, 0} {
		for _, c := range colors {
			if len(pal) == 256 {
				break
			}
			far := true
			for _, k := range pal {
				kr, kg, kb, _ := k.RGBA()
				dr, dg, db := int(kr>>8)-int(c.R), int(kg>>8)-int(c.G), int(kb>>8)-int(c.B)
				if dr*dr+dg*dg+db*db <= minDist {
					far = false
					break
				}
			}
			if far {
				pal = append(pal, c)
			}
		}
	}
	out := image.NewPaletted(b, pal)
	index := map[color.RGBA]uint8{}
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			c := color.RGBAModel.Convert(img.At(x, y)).(color.RGBA)
			i, ok := index[c]
			if !ok {
				i = uint8(pal.Index(c))
				index[c] = i
			}
			out.SetColorIndex(x, y, i)
		}
	}
	return out
}

// TestBrowser drives every page in a real browser against a database with
// jobs in every state, with actions enabled.
func TestBrowser(t *testing.T) {
	srv, pool, seeded := uiServer(t, true)
	ctx, console := browser(t)
	login(t, ctx, srv.URL, uiToken)
	shots := os.Getenv("UI_SCREENSHOTS") // a directory: docs/ui.md's pictures
	shot := func(name string) {
		if shots == "" {
			return
		}
		buf := run(t, ctx, chromedp.CaptureScreenshot())
		// Re-encoded with 256 colors at the best compression: the
		// pictures live in git.
		img, err := png.Decode(bytes.NewReader(buf))
		require.NoError(t, err)
		var out bytes.Buffer
		require.NoError(t, (&png.Encoder{CompressionLevel: png.BestCompression}).Encode(&out, paletted(img)))
		require.NoError(t, os.WriteFile(filepath.Join(shots, name+".png"), out.Bytes(), 0o644))
	}

	t.Run("every page loads without console errors", func(t *testing.T) {
		pages := []struct{ name, path, want string }{
			{"overview", "/", "Queues"},
			{"jobs", "/jobs?queue=webhooks&status=dead_lettered", "Jobs"},
			{"job", fmt.Sprintf("/jobs/%d", seeded.Retrying), "Job"},
			{"dead-letters", "/dead-letters", "Dead letters"},
			{"policies", "/policies", "Policies"},
			{"enqueue", "/enqueue", "Enqueue a job"},
		}
		for _, p := range pages {
			do(t, ctx, chromedp.Navigate(srv.URL+p.path))
			h1 := run(t, ctx, chromedp.Text(chromedp.CSS("h1")))
			require.Contains(t, h1, p.want, p.path)
			require.Empty(t, console(), "console messages on %s", p.path)
			shot(p.name)
		}
		// The seed's dead letters fit the sample: counts per reason, the
		// groups, and no note about a sample.
		do(t, ctx, chromedp.Navigate(srv.URL+"/dead-letters"))
		reasons := run(t, ctx, chromedp.Evaluate[int](`document.querySelectorAll("#reasons tbody tr").length`))
		require.GreaterOrEqual(t, reasons, 3, "three causes")
		require.False(t, run(t, ctx, chromedp.Evaluate[bool](`document.getElementById("sampled") !== null`)))
	})

	t.Run("the overview says the maintenance never ran", func(t *testing.T) {
		// The seed runs no Worker: no reap, rotate or firer ever ran, and
		// the overview says so above the queues, in red.
		do(t, ctx, chromedp.Navigate(srv.URL+"/"))
		warning := run(t, ctx, chromedp.Text(chromedp.ID("liveness-warning")))
		require.Contains(t, warning, "no maintenance has ever run: reap never ran, rotate never ran")
		require.Equal(t, "never", run(t, ctx, chromedp.Text(chromedp.CSS(`#live-rotate b`))))
		require.True(t, run(t, ctx, chromedp.Evaluate[bool](`document.getElementById("live-rotate").classList.contains("stale")`)))
		require.Contains(t, run(t, ctx, chromedp.Text(chromedp.ID("live-workers"))), "Workers seen in the last minute:")
		require.Empty(t, console())
	})

	t.Run("the overview refreshes itself", func(t *testing.T) {
		do(t, ctx, chromedp.Navigate(srv.URL+"/"))
		before := run(t, ctx, chromedp.Text(chromedp.ID("updated")))
		_, err := pool.Exec(context.Background(), "SELECT 1") // the page fetches its table again by itself
		require.NoError(t, err)
		require.Eventually(t, func() bool {
			now, err := chromedp.Run(ctx, chromedp.Text(chromedp.ID("updated")))
			return err == nil && now != before
		}, 10*time.Second, 200*time.Millisecond)
		loc := run(t, ctx, chromedp.Location())
		require.Equal(t, srv.URL+"/", loc, "no navigation")
		require.Empty(t, console())
	})

	t.Run("filters and pagination", func(t *testing.T) {
		do(t, ctx, chromedp.Navigate(srv.URL+"/jobs?queue=emails&status=completed"))
		queues := run(t, ctx, chromedp.Evaluate[[]string](`Array.from(document.querySelectorAll("#jobs tbody tr")).map(r => r.cells[1].textContent + "/" + r.cells[2].textContent.trim())`))
		require.Len(t, queues, 40, "120 completed jobs over three queues")
		for _, q := range queues {
			require.Equal(t, "emails/completed", q)
		}
		require.Contains(t, run(t, ctx, chromedp.Text(chromedp.ID("shown"))), "1–40 of 40")
		// The filters are choices from the database, in words; the form
		// writes the stored values into the URL: status retrying only.
		do(t, ctx, chromedp.Navigate(srv.URL+"/jobs"))
		opts := run(t, ctx, chromedp.Evaluate[[]string](`Array.from(document.querySelectorAll("#queue-filter option")).map(o => o.value)`))
		require.Equal(t, []string{"", "emails", "hostile", "reports", "webhooks"}, opts)
		words := run(t, ctx, chromedp.Evaluate[[]string](`Array.from(document.querySelectorAll("#status-filter option, #reason-filter option")).map(o => o.textContent)`))
		require.Contains(t, words, "retrying: failed, waiting to retry")
		require.Contains(t, words, "leases expired too often")
		pols := run(t, ctx, chromedp.Evaluate[[]string](`Array.from(document.querySelectorAll("#policy-filter option")).map(o => o.value)`))
		require.Contains(t, pols, "conservative")
		do(t, ctx, chromedp.SetValue(chromedp.ID("queue-filter"), "reports"),
			chromedp.SetValue(chromedp.ID("status-filter"), "retrying"))
		_, err := chromedp.Run(ctx, chromedp.WaitEvent(pageLoad, nil, chromedp.Click(chromedp.ID("apply"))))
		require.NoError(t, err)
		loc := run(t, ctx, chromedp.Location())
		require.Contains(t, loc, "queue=reports")
		require.Contains(t, loc, "status=retrying")
		ids := run(t, ctx, chromedp.Evaluate[[]string](`Array.from(document.querySelectorAll("#jobs tbody tr")).map(r => r.dataset.id)`))
		require.Equal(t, []string{fmt.Sprint(seeded.Retrying)}, ids)

		// Pagination: 50 a page, newest first, keyset.
		do(t, ctx, chromedp.Navigate(srv.URL+"/jobs"))
		first := run(t, ctx, chromedp.Evaluate[[]int64](`Array.from(document.querySelectorAll("#jobs tbody tr")).map(r => +r.dataset.id)`))
		require.Len(t, first, 50)
		_, err = chromedp.Run(ctx, chromedp.WaitEvent(pageLoad, nil, chromedp.Click(chromedp.ID("next"))))
		require.NoError(t, err)
		second := run(t, ctx, chromedp.Evaluate[[]int64](`Array.from(document.querySelectorAll("#jobs tbody tr")).map(r => +r.dataset.id)`))
		require.NotEmpty(t, second)
		require.Contains(t, run(t, ctx, chromedp.Text(chromedp.ID("shown"))), fmt.Sprintf("51–%d of %d", 50+len(second), seeded.Total))
		require.Less(t, second[0], first[len(first)-1], "the next page continues after the last id")
		require.Empty(t, console())
	})

	t.Run("producer and worker text renders as text and runs nothing", func(t *testing.T) {
		do(t, ctx, chromedp.Navigate(fmt.Sprintf("%s/jobs/%d", srv.URL, seeded.Hostile)))
		pwned := run(t, ctx, chromedp.Evaluate[bool](`window.__pwned !== undefined`))
		require.False(t, pwned, "injected script ran")
		imgs := run(t, ctx, chromedp.Evaluate[int](`document.querySelectorAll("main img, main script").length`))
		require.Zero(t, imgs, "payload or error became markup")
		payload := run(t, ctx, chromedp.Text(chromedp.ID("payload")))
		require.Contains(t, payload, "<script>window.__pwned=1</script>")
		require.Contains(t, payload, `\u001b[31mred`, "terminal escapes shown escaped")
		require.NotContains(t, payload, "\x1b")
		errs := run(t, ctx, chromedp.Text(chromedp.ID("errors")))
		require.Contains(t, errs, `<img src=x onerror="window.__pwned=2">`)
		require.NotContains(t, errs, "\x1b")
		for _, p := range []string{"/jobs?queue=hostile", "/dead-letters"} {
			do(t, ctx, chromedp.Navigate(srv.URL+p))
			require.False(t, run(t, ctx, chromedp.Evaluate[bool](`window.__pwned !== undefined`)), p)
		}
		require.Empty(t, console())
	})

	t.Run("a POST without the token is refused", func(t *testing.T) {
		do(t, ctx, chromedp.Navigate(fmt.Sprintf("%s/jobs/%d", srv.URL, seeded.Running)))
		code := run(t, ctx, chromedp.Evaluate[int](fmt.Sprintf(
			`fetch("/jobs/%d/cancel", {method: "POST", body: new URLSearchParams({csrf: "forged"})}).then(r => r.status)`,
			seeded.Running), chromedp.EvalAwaitPromise))
		require.Equal(t, 403, code)
		code = run(t, ctx, chromedp.Evaluate[int](fmt.Sprintf(
			`fetch("/jobs/%d/cancel", {method: "POST"}).then(r => r.status)`, seeded.Running), chromedp.EvalAwaitPromise))
		require.Equal(t, 403, code)
		require.Equal(t, "running", status(t, pool, seeded.Running))
		console() // the refused fetches log 403s
	})

	t.Run("stranded work in plain sight, and reaped", func(t *testing.T) {
		do(t, ctx, chromedp.Navigate(srv.URL+"/"))
		require.Equal(t, "1", run(t, ctx, chromedp.Text(chromedp.CSS(`tr[data-queue=webhooks] td.expired`))))
		do(t, ctx, chromedp.Navigate(srv.URL+"/jobs?queue=webhooks&status=running"))
		require.Contains(t, run(t, ctx, chromedp.Text(chromedp.CSS(`#jobs td.expired`))), "worker-7f-killed")
		shot("jobs-stranded")
		do(t, ctx, chromedp.Navigate(fmt.Sprintf("%s/jobs/%d", srv.URL, seeded.Stranded)))
		require.Contains(t, run(t, ctx, chromedp.Text(chromedp.ID("lease-expired"))), "lease expired")
		shot("job-stranded")
		// Reap from the overview (its confirmation accepted).
		do(t, ctx, chromedp.Navigate(srv.URL+"/"))
		run(t, ctx, chromedp.Evaluate[bool](`window.confirm = () => true; true`))
		_, err := chromedp.Run(ctx, chromedp.WaitEvent(pageLoad, nil, chromedp.Click(chromedp.ID("reap"))))
		require.NoError(t, err)
		require.Equal(t, "retrying", status(t, pool, seeded.Stranded))
		require.Equal(t, "0", run(t, ctx, chromedp.Text(chromedp.CSS(`tr[data-queue=webhooks] td:nth-child(5)`))))
		// The reap is recorded: the overview says it ran just now.
		require.Equal(t, "just now", run(t, ctx, chromedp.Text(chromedp.CSS(`#live-reap b`))))
		do(t, ctx, chromedp.Navigate(fmt.Sprintf("%s/jobs/%d", srv.URL, seeded.Stranded)))
		require.Contains(t, run(t, ctx, chromedp.Text(chromedp.ID("errors"))), "lease_expired")
		// The timeline: an axis with labels, a legend for every mark, the
		// stuck interval from the attempt's recorded start to the expiry.
		require.Contains(t, run(t, ctx, chromedp.Evaluate[string](`document.getElementById("timeline-axis").textContent`)), "time (UTC)")
		ticks := run(t, ctx, chromedp.Evaluate[[]string](`Array.from(document.querySelectorAll("#timeline .ticklabel")).map(e => e.textContent)`))
		require.Len(t, ticks, 5)
		require.Regexp(t, `^\d\d:\d\d`, ticks[0])
		legend := run(t, ctx, chromedp.Text(chromedp.ID("timeline-legend")))
		for _, w := range []string{"attempt", "failed", "retry wait", "lease expired", "snoozed", "replay", "cancel", "dead letter"} {
			require.Contains(t, legend, w)
		}
		stuck := run(t, ctx, chromedp.Evaluate[[]float64](`(() => { const s = document.querySelector("#timeline line.seg.stuck"); const p = document.querySelector("#timeline g.pt.expired circle"); return [+s.getAttribute("x1"), +s.getAttribute("x2"), +p.getAttribute("cx")]; })()`))
		require.Less(t, stuck[0], stuck[1], "drawn from the start")
		require.InDelta(t, stuck[1], stuck[2], 0.01, "to the lease expiry's mark")
		shot("job-reaped")
		require.Empty(t, console())
	})

	t.Run("actions change the database", func(t *testing.T) {
		// Replay the hostile dead letter from its page.
		do(t, ctx, chromedp.Navigate(fmt.Sprintf("%s/jobs/%d", srv.URL, seeded.Hostile)))
		_, err := chromedp.Run(ctx, chromedp.WaitEvent(pageLoad, nil, chromedp.Click(chromedp.ID("replay"))))
		require.NoError(t, err)
		require.Equal(t, "pending", status(t, pool, seeded.Hostile))
		require.Equal(t, "pending", run(t, ctx, chromedp.Text(chromedp.ID("status"))))

		// Bulk: replay the dead letters of emails, after a confirmation
		// that names the count.
		var want int
		require.NoError(t, pool.QueryRow(context.Background(),
			"SELECT count(*) FROM backoff.jobs WHERE queue = 'emails' AND status = 'dead_lettered'").Scan(&want))
		require.NotZero(t, want)
		do(t, ctx, chromedp.Navigate(srv.URL+"/jobs?queue=emails&status=dead_lettered"))
		_, err = chromedp.Run(ctx, chromedp.WaitEvent(pageLoad, nil, chromedp.Click(chromedp.ID("bulk-replay"))))
		require.NoError(t, err)
		require.Equal(t, fmt.Sprint(want), run(t, ctx, chromedp.Text(chromedp.ID("count"))))
		shot("bulk-confirm")
		_, err = chromedp.Run(ctx, chromedp.WaitEvent(pageLoad, nil, chromedp.Click(chromedp.ID("confirm"))))
		require.NoError(t, err)
		require.Equal(t, fmt.Sprint(want), run(t, ctx, chromedp.Text(chromedp.ID("done"))))
		var left int
		require.NoError(t, pool.QueryRow(context.Background(),
			"SELECT count(*) FROM backoff.jobs WHERE queue = 'emails' AND status = 'dead_lettered'").Scan(&left))
		require.Zero(t, left)

		// Bulk cancel of finished jobs reports each as left alone.
		do(t, ctx, chromedp.Navigate(srv.URL+"/bulk?action=cancel&queue=reports&status=completed"))
		_, err = chromedp.Run(ctx, chromedp.WaitEvent(pageLoad, nil, chromedp.Click(chromedp.ID("confirm"))))
		require.NoError(t, err)
		require.Equal(t, "0", run(t, ctx, chromedp.Text(chromedp.ID("done"))))
		require.Equal(t, "40", run(t, ctx, chromedp.Text(chromedp.ID("failed"))))
		require.Contains(t, run(t, ctx, chromedp.Text(chromedp.ID("failures"))), "cannot cancel")
		shot("bulk-result")

		// Pause a queue from the overview.
		do(t, ctx, chromedp.Navigate(srv.URL+"/"))
		_, err = chromedp.Run(ctx, chromedp.WaitEvent(pageLoad, nil,
			chromedp.Click(chromedp.CSS(`tr[data-queue=emails] button`))))
		require.NoError(t, err)
		var paused bool
		require.NoError(t, pool.QueryRow(context.Background(), "SELECT paused FROM backoff.queues WHERE name = 'emails'").Scan(&paused))
		require.True(t, paused)
		// The queue's view ends with its history: the pause just made,
		// and a resume and a pause after it.
		_, err = pool.Exec(context.Background(), "SELECT backoff.resume_queue('emails'); SELECT backoff.pause_queue('emails')")
		require.NoError(t, err)
		do(t, ctx, chromedp.Navigate(srv.URL+"/jobs?queue=emails&status=running"))
		require.Equal(t, 3, run(t, ctx, chromedp.Evaluate[int](`document.querySelectorAll("#queue-events tbody tr").length`)))
		require.Contains(t, run(t, ctx, chromedp.Text(chromedp.ID("queue-events"))), "pause")
		shot("queue")

		// Enqueue: invalid JSON is caught before sending; valid JSON lands.
		do(t, ctx, chromedp.Navigate(srv.URL+"/enqueue"),
			chromedp.SetValue(chromedp.CSS(`input[name=queue]`), "webhooks"),
			chromedp.SetValue(chromedp.ID("payload"), `{"url": `),
			chromedp.Click(chromedp.ID("submit")))
		require.Contains(t, run(t, ctx, chromedp.Text(chromedp.ID("json-problem"))), "not valid JSON")
		require.Equal(t, srv.URL+"/enqueue", run(t, ctx, chromedp.Location()))
		do(t, ctx, chromedp.SetValue(chromedp.ID("payload"), `{"url": "https://example.com/<b>"}`))
		_, err = chromedp.Run(ctx, chromedp.WaitEvent(pageLoad, nil, chromedp.Click(chromedp.ID("submit"))))
		require.NoError(t, err)
		loc := run(t, ctx, chromedp.Location())
		require.True(t, strings.HasPrefix(loc, srv.URL+"/jobs/"), loc)
		require.Contains(t, run(t, ctx, chromedp.Text(chromedp.ID("payload"))), "https://example.com/<b>")
		require.Empty(t, console())
	})

	t.Run("schedules: the list, a schedule's page with its fires and jobs", func(t *testing.T) {
		bg := context.Background()
		// A week of a nightly schedule in a queue of its own, each night
		// fired and settled on a clock of its own: completed runs, a dead
		// letter, a retrying run tonight, and a manual fire.
		now := time.Now()
		clock := now.Add(-6 * 24 * time.Hour)
		cc, err := client.New(bg, pool, client.WithClock(func() time.Time { return clock }))
		require.NoError(t, err)
		_, err = pool.Exec(bg, `SELECT backoff.put_schedule('nightly-report', 'nightly', p_cron => '30 2 * * *',
			p_time_zone => 'Europe/Berlin', p_payload => '{"format": "pdf"}', p_max_attempts => 3, p_now => $1)`, clock.Add(-24*time.Hour))
		require.NoError(t, err)
		for day := 0; day <= 6; day++ {
			clock = now.Add(time.Duration(day-6) * 24 * time.Hour)
			fired, err := cc.FireSchedules(bg, 0)
			require.NoError(t, err)
			require.Len(t, fired, 1)
			jobs, err := cc.Claim(bg, "nightly", 1, time.Minute)
			require.NoError(t, err)
			require.Len(t, jobs, 1)
			switch day {
			case 2:
				_, err = cc.Fail(bg, jobs[0].ID, jobs[0].Token, "report template missing", client.NonRetryable())
			case 6:
				_, err = cc.Fail(bg, jobs[0].ID, jobs[0].Token, "report store: connection refused")
			default:
				_, err = cc.Complete(bg, jobs[0].ID, jobs[0].Token)
			}
			require.NoError(t, err)
		}
		_, err = pool.Exec(bg, `SELECT backoff.trigger_schedule('nightly-report');
			SELECT backoff.put_schedule('heartbeat', 'webhooks', p_every => '15 minutes', p_skip_if_running => true);
			SELECT backoff.put_schedule('weekly-digest', 'emails', p_cron => '0 8 * * 1', p_time_zone => 'America/New_York');
			SELECT backoff.pause_schedule('weekly-digest')`)
		require.NoError(t, err)

		do(t, ctx, chromedp.Navigate(srv.URL+"/schedules"))
		require.Contains(t, run(t, ctx, chromedp.Text(chromedp.CSS("h1"))), "Schedules")
		next := run(t, ctx, chromedp.Evaluate[[]int](`Array.from(document.querySelectorAll("#schedules td.fires")).map(td => td.querySelectorAll("br").length + (td.textContent.trim() === "—" ? 0 : 1))`))
		require.Equal(t, []int{3, 3, 0}, next, "three fires ahead each; none for the paused one")
		require.Empty(t, console())
		shot("schedules")
		_, err = chromedp.Run(ctx, chromedp.WaitEvent(pageLoad, nil, chromedp.Click(chromedp.CSS(`#schedules a[href="/schedules/nightly-report"]`))))
		require.NoError(t, err)
		require.Equal(t, srv.URL+"/schedules/nightly-report", run(t, ctx, chromedp.Location()))
		require.Contains(t, run(t, ctx, chromedp.Text(chromedp.CSS("h1"))), "Schedule nightly-report")
		require.Equal(t, 10, run(t, ctx, chromedp.Evaluate[int](`document.querySelectorAll("#fires-timeline g.pt circle").length`)))
		require.Equal(t, 10, run(t, ctx, chromedp.Evaluate[int](`document.querySelectorAll("#fires li").length`)))
		ticks := run(t, ctx, chromedp.Evaluate[[]string](`Array.from(document.querySelectorAll("#fires-timeline .ticklabel")).map(e => e.textContent)`))
		require.Len(t, ticks, 5)
		xs := run(t, ctx, chromedp.Evaluate[[]float64](`Array.from(document.querySelectorAll("#fires-timeline g.pt circle")).map(c => +c.getAttribute("cx"))`))
		for i := 1; i < len(xs); i++ {
			require.Greater(t, xs[i], xs[i-1], "the fires in order along the axis")
		}
		// The last jobs, newest first: the manual fire, then each night.
		statuses := run(t, ctx, chromedp.Evaluate[[]string](`Array.from(document.querySelectorAll("#schedule-jobs tbody tr")).map(r => r.cells[1].textContent.trim() + "/" + r.cells[2].textContent.trim())`))
		require.Len(t, statuses, 8)
		require.Equal(t, "manual/pending", statuses[0])
		require.Contains(t, statuses[1], "/retrying")
		require.Contains(t, statuses[5], "/dead_lettered")
		require.Contains(t, statuses[7], "/completed")
		require.Empty(t, console())
		// Taller, for the picture to show the jobs too.
		do(t, ctx, chromedp.EmulateViewport(1200, 1000))
		shot("schedule")
		do(t, ctx, chromedp.EmulateViewport(1200, 800))
	})

	t.Run("a workflow's graph", func(t *testing.T) {
		// extract completed; load-eu running, load-us dead-lettered (its
		// wait edge holds report for an operator), load-asia pending;
		// report waits for the three loads, notify for report. New queues,
		// after the pages above counted theirs.
		bg := context.Background()
		cc, err := client.New(bg, pool)
		require.NoError(t, err)
		ids, err := cc.EnqueueGraph(bg, client.NewGraph().
			Add("extract", "etl", map[string]string{"table": "orders"}, nil).
			Add("load-eu", "etl", nil, []client.Dependency{client.After("extract")}).
			Add("load-us", "etl", nil, []client.Dependency{client.After("extract")}).
			Add("load-asia", "etl", nil, []client.Dependency{client.After("extract")}).
			Add("report", "etl-reports", nil, []client.Dependency{client.After("load-eu"),
				client.After("load-us").Or(client.OnFailureWait), client.After("load-asia")}).
			Add("notify", "etl-reports", nil, []client.Dependency{client.After("report")}))
		require.NoError(t, err)
		j, err := cc.Acquire(bg, ids["extract"], time.Hour)
		require.NoError(t, err)
		_, err = cc.CompleteWithOutput(bg, j.ID, j.Token, map[string]int{"rows": 42})
		require.NoError(t, err)
		_, err = cc.Acquire(bg, ids["load-eu"], time.Hour)
		require.NoError(t, err)
		j, err = cc.Acquire(bg, ids["load-us"], time.Hour)
		require.NoError(t, err)
		_, err = cc.Fail(bg, j.ID, j.Token, "region us-east-1 unreachable", client.NonRetryable())
		require.NoError(t, err)

		do(t, ctx, chromedp.Navigate(fmt.Sprintf("%s/jobs/%d", srv.URL, ids["report"])))
		require.NotEmpty(t, run(t, ctx, chromedp.Text(chromedp.ID("unblock"))), "a job held by a wait edge can be unblocked")
		_, err = chromedp.Run(ctx, chromedp.WaitEvent(pageLoad, nil, chromedp.Click(chromedp.ID("graph-link"))))
		require.NoError(t, err)
		require.Equal(t, fmt.Sprintf("%s/jobs/%d/graph", srv.URL, ids["report"]), run(t, ctx, chromedp.Location()))
		require.Contains(t, run(t, ctx, chromedp.Text(chromedp.CSS("h1"))), fmt.Sprintf("Graph of job %d", ids["report"]))
		require.Equal(t, 6, run(t, ctx, chromedp.Evaluate[int](`document.querySelectorAll("#graph g.node").length`)))
		require.Equal(t, 7, run(t, ctx, chromedp.Evaluate[int](`document.querySelectorAll("#graph path.edge").length`)))
		statuses := run(t, ctx, chromedp.Evaluate[[]string](`Array.from(document.querySelectorAll("#graph-jobs tbody tr")).map(r => r.cells[2].textContent.trim())`))
		require.Equal(t, []string{"completed", "running", "dead_lettered", "pending", "blocked", "blocked"}, statuses)
		require.Equal(t, fmt.Sprint(ids["report"]), run(t, ctx, chromedp.Evaluate[string](`document.querySelector("#graph g.node.focus").dataset.job`)))
		require.Equal(t, 1, run(t, ctx, chromedp.Evaluate[int](`document.querySelectorAll("#graph path.edge.wait.waiting").length`)))
		require.NotEmpty(t, run(t, ctx, chromedp.Text(chromedp.ID(fmt.Sprintf("graph-operator-%d", ids["report"])))))
		// Every edge runs rightwards, from its parent's box to its child's,
		// and no two boxes overlap.
		bad := run(t, ctx, chromedp.Evaluate[[]string](`(() => {
			const box = id => document.querySelector('#graph g.node[data-job="' + id + '"] rect').getBBox();
			const out = [];
			for (const e of document.querySelectorAll("#graph path.edge")) {
				const [p, c] = e.dataset.edge.split("-");
				if (box(p).x + box(p).width > box(c).x) out.push("edge " + e.dataset.edge);
			}
			const rects = Array.from(document.querySelectorAll("#graph g.node rect")).map(r => r.getBBox());
			rects.forEach((a, i) => rects.slice(i + 1).forEach(b => {
				if (a.x < b.x + b.width && b.x < a.x + a.width && a.y < b.y + b.height && b.y < a.y + a.height) out.push("overlap");
			}));
			return out;
		})()`))
		require.Empty(t, bad)
		require.Empty(t, console())
		shot("graph")
		// A box opens its job.
		_, err = chromedp.Run(ctx, chromedp.WaitEvent(pageLoad, nil,
			chromedp.Click(chromedp.CSS(fmt.Sprintf(`#graph g.node[data-job="%d"] rect`, ids["extract"])))))
		require.NoError(t, err)
		require.Equal(t, fmt.Sprintf("%s/jobs/%d", srv.URL, ids["extract"]), run(t, ctx, chromedp.Location()))
		require.Empty(t, console())
	})

	t.Run("bad input gets a page that says what was wrong", func(t *testing.T) {
		for path, want := range map[string]string{
			"/jobs/99999999":       "no such job",
			"/jobs/abc":            "not a job id",
			"/jobs?status=bogus":   `unknown status "bogus"`,
			"/jobs?from=yesterday": `from "yesterday": not a time`,
			"/jobs?reason=bored":   `unknown dead-letter reason "bored"`,
		} {
			do(t, ctx, chromedp.Navigate(srv.URL+path))
			require.Contains(t, run(t, ctx, chromedp.Text(chromedp.ID("message"))), want, path)
			console() // the 4xx answer is logged by the browser
		}
	})
}

// TestBrowserReadOnly: without --allow-actions the pages say so, offer no
// action, and a POST is refused even with a valid form.
func TestBrowserReadOnly(t *testing.T) {
	srv, pool, seeded := uiServer(t, false)
	ctx, console := browser(t)
	login(t, ctx, srv.URL, uiToken)
	do(t, ctx, chromedp.Navigate(fmt.Sprintf("%s/jobs/%d", srv.URL, seeded.Hostile)))
	require.Contains(t, run(t, ctx, chromedp.Text(chromedp.ID("mode"))), "read-only")
	buttons := run(t, ctx, chromedp.Evaluate[int](`document.querySelectorAll("main form[method=post], #replay, #bulk-replay").length`))
	require.Zero(t, buttons)
	require.Empty(t, console())
	code := run(t, ctx, chromedp.Evaluate[int](fmt.Sprintf(
		`fetch("/jobs/%d/replay", {method: "POST", body: new URLSearchParams({csrf: "x"})}).then(r => r.status)`,
		seeded.Hostile), chromedp.EvalAwaitPromise))
	require.Equal(t, 403, code)
	require.Equal(t, "dead_lettered", status(t, pool, seeded.Hostile))
	do(t, ctx, chromedp.Navigate(srv.URL+"/bulk?action=replay&status=dead_lettered"))
	require.Contains(t, run(t, ctx, chromedp.Text(chromedp.ID("message"))), "read-only")
	do(t, ctx, chromedp.Navigate(srv.URL+"/enqueue"))
	require.Contains(t, run(t, ctx, chromedp.Text(chromedp.ID("message"))), "read-only")
}
