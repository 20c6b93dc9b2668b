package webui

import (
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/pgbackoff/pgbackoff/client"
	"github.com/pgbackoff/pgbackoff/client/ops"
	"github.com/pgbackoff/pgbackoff/visible"
)

// The Schedules page: every periodic job (docs/schedules.md) with its
// timing, next fire, last fire and its job, and pause or resume (an action:
// POST with the CSRF token, only with AllowActions; the database lets only
// backoff_admin change a schedule).

type scheduleRow struct {
	S      client.Schedule
	Timing string
	Zone   string // the cron expression's zone ("" for an interval)
	// Fires are the next listFires fires (none for a paused schedule or
	// an expression with no later time).
	Fires []ops.FireTime
}

// listFires is how many fires ahead the Schedules list shows a schedule;
// its page shows pageFires on the timeline and its last pageJobs jobs.
const (
	listFires = 3
	pageFires = 10
	pageJobs  = 20
)

func timingOf(s client.Schedule) (timing, zone string) {
	if s.Cron != "" {
		return s.Cron, s.TimeZone
	}
	return "every " + visible.Duration(s.Every), ""
}

func (h *Handler) schedules(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := h.ctx(r)
	defer cancel()
	list, err := h.c.Schedules(ctx)
	if err != nil {
		h.failErr(w, r, err)
		return
	}
	// One statement for every schedule's fires ahead.
	fires, err := h.ops.UpcomingFires(ctx, nil, time.Now(), listFires)
	if err != nil {
		h.failErr(w, r, err)
		return
	}
	rows := make([]scheduleRow, len(list))
	for i, s := range list {
		rows[i] = scheduleRow{S: s}
		rows[i].Timing, rows[i].Zone = timingOf(s)
		if !s.Paused {
			rows[i].Fires = fires[s.Name]
		}
	}
	h.render(w, r, http.StatusOK, "schedules", view{Title: "Schedules", Nav: "schedules", Data: rows})
}

func (h *Handler) pauseSchedule(w http.ResponseWriter, r *http.Request) { h.switchSchedule(w, r, true) }
func (h *Handler) resumeSchedule(w http.ResponseWriter, r *http.Request) {
	h.switchSchedule(w, r, false)
}

func (h *Handler) switchSchedule(w http.ResponseWriter, r *http.Request, pause bool) {
	name := r.PostForm.Get("schedule")
	if name == "" {
		h.fail(w, r, http.StatusBadRequest, "schedule: a schedule name is required")
		return
	}
	ctx, cancel := h.ctx(r)
	defer cancel()
	var err error
	if pause {
		_, err = h.c.PauseSchedule(ctx, name)
	} else {
		_, err = h.c.ResumeSchedule(ctx, name)
	}
	if err != nil {
		h.failErr(w, r, err)
		return
	}
	back := h.opts.Prefix + "/schedules"
	if r.PostForm.Get("back") == "schedule" { // the form on the schedule's own page
		back += "/" + url.PathEscape(name)
	}
	http.Redirect(w, r, back, http.StatusSeeOther)
}

// schedulePage is a schedule's page: its settings, the fires ahead on a
// time axis and as a list, and its last jobs with their outcome.
type schedulePage struct {
	S            client.Schedule
	Timing, Zone string
	Fires        []fireRow
	Timeline     firesTimeline
	Jobs         []ops.ScheduleJob
}

// fireRow is a fire ahead in the list beside the timeline.
type fireRow struct {
	At   time.Time
	Wall string // the wall-clock time in the schedule's zone
	In   string // how far ahead of the page's time
}

func (h *Handler) schedule(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	ctx, cancel := h.ctx(r)
	defer cancel()
	s, found, err := h.c.ScheduleByName(ctx, name)
	if err != nil {
		h.failErr(w, r, err)
		return
	}
	if !found {
		h.fail(w, r, http.StatusNotFound, fmt.Sprintf("no schedule %q", visible.Escape(name, "")))
		return
	}
	now := time.Now()
	fires, err := h.ops.UpcomingFires(ctx, []string{name}, now, pageFires)
	if err != nil {
		h.failErr(w, r, err)
		return
	}
	jobs, err := h.ops.ScheduleJobs(ctx, name, pageJobs)
	if err != nil {
		h.failErr(w, r, err)
		return
	}
	d := schedulePage{S: s, Jobs: jobs, Timeline: buildFiresTimeline(fires[name], now, s.TimeZone)}
	d.Timing, d.Zone = timingOf(s)
	for _, f := range fires[name] {
		d.Fires = append(d.Fires, fireRow{At: f.At, Wall: f.Wall.Format("2006-01-02 15:04"), In: formatDuration(f.At.Sub(now))})
	}
	h.render(w, r, http.StatusOK, "schedule", view{Title: "Schedule " + visible.Escape(name, ""), Nav: "schedules", Data: d})
}

// jobSchedule is what the job page says of the schedule that enqueued a
// job: its name and slot (zero: a manual fire).
type jobSchedule struct {
	Name string
	Slot time.Time
}
