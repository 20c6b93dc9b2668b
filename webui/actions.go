package webui

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/pgbackoff/pgbackoff/client"
	"github.com/pgbackoff/pgbackoff/client/ops"
)

// bulkLimit is the most jobs one bulk action touches; the confirmation
// says when a filter matches more.
const bulkLimit = 10000

// resultData is the page an action ends on.
type resultData struct {
	Action string
	Done   int
	Failed int
	Groups []failGroup // what was left alone, grouped by why
	Back   string
}

// failGroup is the jobs a bulk action left alone for one reason (the
// reason with the job's id taken out).
type failGroup struct {
	Reason string
	Count  int
	IDs    []int64 // the first maxGroupIDs
}

const maxGroupIDs = 20

func (h *Handler) jobID(w http.ResponseWriter, r *http.Request) (int64, bool) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil || id < 1 {
		h.fail(w, r, http.StatusBadRequest, fmt.Sprintf("job id %q: not a job id (a positive integer)", r.PathValue("id")))
		return 0, false
	}
	return id, true
}

func (h *Handler) replayJob(w http.ResponseWriter, r *http.Request) {
	id, ok := h.jobID(w, r)
	if !ok {
		return
	}
	ctx, cancel := h.ctx(r)
	defer cancel()
	if _, err := h.ops.Replay(ctx, id); err != nil {
		h.failErr(w, r, err)
		return
	}
	http.Redirect(w, r, fmt.Sprintf("%s/jobs/%d", h.opts.Prefix, id), http.StatusSeeOther)
}

func (h *Handler) cancelJob(w http.ResponseWriter, r *http.Request) {
	id, ok := h.jobID(w, r)
	if !ok {
		return
	}
	ctx, cancel := h.ctx(r)
	defer cancel()
	if _, err := h.ops.Cancel(ctx, id, "cancelled from the web UI"); err != nil {
		h.failErr(w, r, err)
		return
	}
	http.Redirect(w, r, fmt.Sprintf("%s/jobs/%d", h.opts.Prefix, id), http.StatusSeeOther)
}

// unblockJob releases a blocked job from the parents that failed under a
// wait edge (backoff.unblock) and returns to the job.
func (h *Handler) unblockJob(w http.ResponseWriter, r *http.Request) {
	id, ok := h.jobID(w, r)
	if !ok {
		return
	}
	ctx, cancel := h.ctx(r)
	defer cancel()
	if _, err := h.ops.Unblock(ctx, id); err != nil {
		h.failErr(w, r, err)
		return
	}
	http.Redirect(w, r, fmt.Sprintf("%s/jobs/%d", h.opts.Prefix, id), http.StatusSeeOther)
}

// reap retries now the running jobs whose lease expired (backoff.reap, as
// a worker's reaper does), up to 10 batches, and returns to the overview.
func (h *Handler) reap(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := h.ctx(r)
	defer cancel()
	for range 10 {
		n, err := h.c.Reap(ctx, 1000)
		if err != nil {
			h.failErr(w, r, err)
			return
		}
		if n < 1000 {
			break
		}
	}
	http.Redirect(w, r, h.opts.Prefix+"/", http.StatusSeeOther)
}

func (h *Handler) pauseQueue(w http.ResponseWriter, r *http.Request)  { h.setPaused(w, r, true) }
func (h *Handler) resumeQueue(w http.ResponseWriter, r *http.Request) { h.setPaused(w, r, false) }

func (h *Handler) setPaused(w http.ResponseWriter, r *http.Request, pause bool) {
	q := r.PostForm.Get("queue")
	if q == "" {
		h.fail(w, r, http.StatusBadRequest, "queue: a queue name is required")
		return
	}
	ctx, cancel := h.ctx(r)
	defer cancel()
	var err error
	if pause {
		_, err = h.ops.PauseQueue(ctx, q)
	} else {
		_, err = h.ops.ResumeQueue(ctx, q)
	}
	if err != nil {
		h.failErr(w, r, err)
		return
	}
	http.Redirect(w, r, h.opts.Prefix+"/", http.StatusSeeOther)
}

type bulkData struct {
	Action string
	F      filter
	Count  int64
	More   bool   // the filter matches more than bulkLimit
	Back   string // URL of the filter's listing
	Hidden url.Values
}

// bulkRequest reads a bulk action and its filter from values.
func bulkRequest(v url.Values) (string, filter, ops.BulkFilter, error) {
	action := v.Get("action")
	if action != "replay" && action != "cancel" {
		return "", filter{}, ops.BulkFilter{}, fmt.Errorf("unknown bulk action %q: want replay or cancel", action)
	}
	f, p, err := parseFilter(v)
	if err != nil {
		return "", f, ops.BulkFilter{}, err
	}
	p.Cursor, p.Order = "", ops.OldestFirst
	return action, f, ops.BulkFilter{ListParams: p, ErrorSignature: f.Signature}, nil
}

// bulkConfirm counts what the filter matches and asks to confirm.
func (h *Handler) bulkConfirm(w http.ResponseWriter, r *http.Request) {
	if !h.opts.AllowActions {
		h.fail(w, r, http.StatusForbidden, "actions are disabled: this UI was started read-only (without --allow-actions)")
		return
	}
	action, f, bf, err := bulkRequest(r.URL.Query())
	if err != nil {
		h.fail(w, r, http.StatusBadRequest, "invalid bulk action: "+err.Error())
		return
	}
	ctx, cancel := h.ctx(r)
	defer cancel()
	// With a signature (a dead-letter group) this reads every dead letter
	// of the group's queue and reason: the whole group, not the page's
	// sample, is what the replay acts on.
	n, err := h.ops.CountBulk(ctx, bf, bulkLimit+1)
	if err != nil {
		h.failErr(w, r, err)
		return
	}
	hidden := f.values()
	hidden.Del("order")
	d := bulkData{Action: action, F: f, Count: min(n, bulkLimit), More: n > bulkLimit, Back: h.opts.Prefix + "/jobs?" + f.values().Encode(), Hidden: hidden}
	h.render(w, r, http.StatusOK, "bulk", view{Title: "Confirm bulk " + action, Nav: "jobs", Data: d})
}

func (h *Handler) bulk(w http.ResponseWriter, r *http.Request) {
	action, f, bf, err := bulkRequest(r.PostForm)
	if err != nil {
		h.fail(w, r, http.StatusBadRequest, "invalid bulk action: "+err.Error())
		return
	}
	ctx, cancel := h.ctx(r)
	defer cancel()
	out, err := h.ops.Bulk(ctx, ops.BulkAction(action), bf, bulkLimit)
	if err != nil {
		h.failErr(w, r, err)
		return
	}
	d := resultData{Action: "bulk " + action, Back: h.opts.Prefix + "/jobs?" + f.values().Encode()}
	if f.Signature != "" {
		d.Back = h.opts.Prefix + "/dead-letters"
	}
	byReason := map[string]int{}
	for _, o := range out {
		if o.Done {
			d.Done++
			continue
		}
		d.Failed++
		reason := strings.Replace(o.Reason, fmt.Sprintf("job \"%d\"", o.JobID), "job", 1)
		i, ok := byReason[reason]
		if !ok {
			i = len(d.Groups)
			byReason[reason] = i
			d.Groups = append(d.Groups, failGroup{Reason: reason})
		}
		g := &d.Groups[i]
		g.Count++
		if len(g.IDs) < maxGroupIDs {
			g.IDs = append(g.IDs, o.JobID)
		}
	}
	h.render(w, r, http.StatusOK, "result", view{Title: "Bulk " + action, Nav: "jobs", Data: d})
}

type enqueueData struct {
	Queue, Payload, Priority string
	Problem                  string
	Queues                   []string
}

func (h *Handler) enqueueForm(w http.ResponseWriter, r *http.Request) {
	if !h.opts.AllowActions {
		h.fail(w, r, http.StatusForbidden, "actions are disabled: this UI was started read-only (without --allow-actions)")
		return
	}
	d := enqueueData{Queue: r.URL.Query().Get("queue"), Payload: "{}", Priority: "0"}
	ctx, cancel := h.ctx(r)
	defer cancel()
	if qs, err := h.ops.Queues(ctx); err == nil {
		for _, q := range qs {
			d.Queues = append(d.Queues, q.Name)
		}
	}
	h.render(w, r, http.StatusOK, "enqueue", view{Title: "Enqueue", Nav: "enqueue", Data: d})
}

func (h *Handler) enqueue(w http.ResponseWriter, r *http.Request) {
	d := enqueueData{Queue: strings.TrimSpace(r.PostForm.Get("queue")), Payload: r.PostForm.Get("payload"),
		Priority: strings.TrimSpace(r.PostForm.Get("priority"))}
	prio, perr := strconv.Atoi(d.Priority)
	switch {
	case d.Queue == "":
		d.Problem = "queue: a queue name is required"
	case !json.Valid([]byte(d.Payload)):
		var v any
		err := json.Unmarshal([]byte(d.Payload), &v)
		d.Problem = "payload: not valid JSON: " + err.Error()
	case d.Priority != "" && perr != nil:
		d.Problem = fmt.Sprintf("priority %q: not an integer", d.Priority)
	}
	if d.Problem != "" {
		h.render(w, r, http.StatusUnprocessableEntity, "enqueue", view{Title: "Enqueue", Nav: "enqueue", Data: d})
		return
	}
	ctx, cancel := h.ctx(r)
	defer cancel()
	id, err := h.c.Enqueue(ctx, d.Queue, json.RawMessage(d.Payload), client.Priority(prio))
	if err != nil {
		h.failErr(w, r, err)
		return
	}
	http.Redirect(w, r, fmt.Sprintf("%s/jobs/%d", h.opts.Prefix, id), http.StatusSeeOther)
}
