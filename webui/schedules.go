package webui

import (
	"net/http"
	"time"

	"github.com/pgbackoff/pgbackoff/client"
	"github.com/pgbackoff/pgbackoff/internal/visible"
)

// The Schedules page: every periodic job (docs/schedules.md) with its
// timing, next fire, last fire and its job, and pause or resume (an action:
// POST with the CSRF token, only with AllowActions; the database lets only
// backoff_admin change a schedule).

type scheduleRow struct {
	S      client.Schedule
	Timing string
	Zone   string // the cron expression's zone ("" for an interval)
}

func (h *Handler) schedules(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := h.ctx(r)
	defer cancel()
	list, err := h.c.Schedules(ctx)
	if err != nil {
		h.failErr(w, r, err)
		return
	}
	rows := make([]scheduleRow, len(list))
	for i, s := range list {
		rows[i] = scheduleRow{S: s, Timing: s.Cron}
		if s.Cron != "" {
			rows[i].Zone = s.TimeZone
		} else {
			rows[i].Timing = "every " + visible.Duration(s.Every)
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
	http.Redirect(w, r, h.opts.Prefix+"/schedules", http.StatusSeeOther)
}

// jobSchedule is what the job page says of the schedule that enqueued a
// job: its name and slot (zero: a manual fire).
type jobSchedule struct {
	Name string
	Slot time.Time
}
