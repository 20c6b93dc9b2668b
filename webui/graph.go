package webui

import (
	"cmp"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/pgbackoff/pgbackoff/client/ops"
)

// The graph page draws the workflow a job belongs to (ops.Client.Graph,
// backoff.job_graph) as server-rendered SVG: jobs in columns by depth
// (a job stands right of all its parents), each edge from a parent to its
// child styled by its policy and state, the job asked for outlined.

const (
	// defaultGraphJobs is how many jobs the page draws unless ?limit= says
	// otherwise; maxGraphJobs the most it draws.
	defaultGraphJobs = 200
	maxGraphJobs     = 1000

	graphNodeW = 168
	graphNodeH = 44
	graphColW  = 240 // column pitch: a node and the room its edges need
	graphRowH  = 60
	graphPad   = 16
)

type graphData struct {
	ID        int64
	Jobs      []graphNode // in id order, for the table
	Edges     []graphLine
	Width     int
	Height    int
	NodeW     int
	NodeH     int
	Limit     int
	Truncated bool
	// Operator lists the blocked jobs a failed parent keeps waiting under
	// a wait edge: an operator's turn (unblock, or replay the parent).
	Operator []int64
}

type graphNode struct {
	ops.GraphJob
	X, Y  int
	Focus bool
}

// Edges are the job's edges as the table shows them: "2 (run: open)".
func (n graphNode) EdgeText() string {
	s := make([]string, len(n.Parents))
	for i, e := range n.Parents {
		s[i] = fmt.Sprintf("%d (%s: %s)", e.Parent, e.OnFailure, e.State)
	}
	return strings.Join(s, ", ")
}

// WaitingText is the parents a blocked job still waits for: "2, 3".
func (n graphNode) WaitingText() string {
	s := make([]string, len(n.WaitingFor))
	for i, id := range n.WaitingFor {
		s[i] = strconv.FormatInt(id, 10)
	}
	return strings.Join(s, ", ")
}

type graphLine struct {
	Parent, Child    int64
	Path             string // SVG path data
	OnFailure, State string
}

func (h *Handler) jobGraph(w http.ResponseWriter, r *http.Request) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil || id < 1 {
		h.fail(w, r, http.StatusBadRequest, fmt.Sprintf("job id %q: not a job id (a positive integer)", r.PathValue("id")))
		return
	}
	limit := defaultGraphJobs
	if s := r.URL.Query().Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > maxGraphJobs {
			h.fail(w, r, http.StatusBadRequest, fmt.Sprintf("limit %q: want a number of jobs from 1 to %d", s, maxGraphJobs))
			return
		}
		limit = n
	}
	ctx, cancel := h.ctx(r)
	defer cancel()
	g, err := h.ops.Graph(ctx, id, limit)
	if err != nil {
		h.failErr(w, r, err)
		return
	}
	d := layoutGraph(id, g)
	d.Limit = limit
	h.render(w, r, http.StatusOK, "graph", view{Title: fmt.Sprintf("Graph of job %d", id), Nav: "jobs", Data: d})
}

// layoutGraph places each job in the column of its depth (one more than
// its deepest parent among the jobs drawn; a job whose parents are not
// drawn starts a column 0), and orders each column by the mean row of the
// job's parents, then by id, so that children sit near their parents.
func layoutGraph(id int64, g ops.JobGraph) graphData {
	jobs := slices.Clone(g.Jobs)
	slices.SortFunc(jobs, func(a, b ops.GraphJob) int { return cmp.Compare(a.ID, b.ID) })
	index := make(map[int64]int, len(jobs))
	for i, j := range jobs {
		index[j.ID] = i
	}
	// Depths by Kahn's order over the edges among the jobs drawn (the
	// graph has no cycle: enqueue_graph refuses them).
	children := make([][]int, len(jobs))
	indegree := make([]int, len(jobs))
	for i, j := range jobs {
		for _, e := range j.Parents {
			if p, ok := index[e.Parent]; ok {
				children[p] = append(children[p], i)
				indegree[i]++
			}
		}
	}
	depth := make([]int, len(jobs))
	queue := make([]int, 0, len(jobs))
	for i := range jobs {
		if indegree[i] == 0 {
			queue = append(queue, i)
		}
	}
	for k := 0; k < len(queue); k++ {
		p := queue[k]
		for _, c := range children[p] {
			depth[c] = max(depth[c], depth[p]+1)
			if indegree[c]--; indegree[c] == 0 {
				queue = append(queue, c)
			}
		}
	}
	columns := 0
	for _, dp := range depth {
		columns = max(columns, dp+1)
	}
	byColumn := make([][]int, columns)
	for i := range jobs {
		byColumn[depth[i]] = append(byColumn[depth[i]], i)
	}
	row := make([]float64, len(jobs))
	rows := 0
	for c, col := range byColumn {
		key := make(map[int]float64, len(col))
		for _, i := range col {
			sum, n := 0.0, 0
			for _, e := range jobs[i].Parents {
				if p, ok := index[e.Parent]; ok && depth[p] < c {
					sum += row[p]
					n++
				}
			}
			if n > 0 {
				key[i] = sum / float64(n)
			} else {
				key[i] = -1
			}
		}
		slices.SortStableFunc(col, func(a, b int) int {
			if x := cmp.Compare(key[a], key[b]); x != 0 {
				return x
			}
			return cmp.Compare(jobs[a].ID, jobs[b].ID)
		})
		for r, i := range col {
			row[i] = float64(r)
		}
		rows = max(rows, len(col))
	}
	d := graphData{ID: id, Truncated: g.Truncated, NodeW: graphNodeW, NodeH: graphNodeH,
		Width:  2*graphPad + (columns-1)*graphColW + graphNodeW,
		Height: 2*graphPad + (rows-1)*graphRowH + graphNodeH}
	for i, j := range jobs {
		n := graphNode{GraphJob: j, X: graphPad + depth[i]*graphColW, Y: graphPad + int(row[i])*graphRowH, Focus: j.ID == id}
		d.Jobs = append(d.Jobs, n)
		for _, e := range j.Parents {
			if e.State == "waiting" && j.Status == "blocked" && !slices.Contains(d.Operator, j.ID) {
				d.Operator = append(d.Operator, j.ID)
			}
		}
	}
	for i, j := range d.Jobs {
		for _, e := range j.Parents {
			p, ok := index[e.Parent]
			if !ok {
				continue
			}
			from := d.Jobs[p]
			x1, y1 := from.X+graphNodeW, from.Y+graphNodeH/2
			x2, y2 := d.Jobs[i].X, j.Y+graphNodeH/2
			mid := (x1 + x2) / 2
			d.Edges = append(d.Edges, graphLine{Parent: e.Parent, Child: j.ID, OnFailure: e.OnFailure, State: e.State,
				Path: fmt.Sprintf("M%d %d C%d %d %d %d %d %d", x1, y1, mid, y1, mid, y2, x2-6, y2)})
		}
	}
	return d
}
