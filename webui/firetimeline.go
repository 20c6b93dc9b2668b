package webui

import (
	"fmt"
	"time"

	"github.com/pgbackoff/pgbackoff/client/ops"
)

// The fires ahead of a schedule on a time axis, as the job page draws its
// retry timeline: from the page's time (now, at the left end) to the last
// fire shown, each fire a mark numbered in order, the tick labels in UTC
// and each mark's tooltip with its wall-clock time in the schedule's zone.
// The list beside it says the same in text.

type firesTimeline struct {
	Width, Height, Line int
	Now                 float64 // x of the page's time
	Points              []tlPoint
	Ticks               []tlTick
	Axis                string
}

func buildFiresTimeline(fires []ops.FireTime, now time.Time, zone string) firesTimeline {
	ft := firesTimeline{Width: 700, Height: 100, Line: 44, Now: tlPad}
	if len(fires) == 0 {
		return ft
	}
	lo, hi := now, fires[len(fires)-1].At
	if fires[0].At.Before(lo) { // due now: fire_schedules has not run since
		lo = fires[0].At
	}
	ax := newTLAxis(lo, hi, ft.Width)
	ft.Now = ax.x(now)
	for i, f := range fires {
		p := tlPoint{X: ax.x(f.At), Kind: "next", Label: fmt.Sprint(i + 1),
			Title: fmt.Sprintf("fire %d: %s (%s %s), in %s", i+1, formatTime(f.At), f.Wall.Format("2006-01-02 15:04"), zone,
				formatDuration(f.At.Sub(now)))}
		if i > 0 {
			p.Kind = "projected"
		}
		ft.Points = append(ft.Points, p)
	}
	thinLabels(ft.Points) // fires come in time order
	ft.Ticks, ft.Axis = ax.ticks(), ax.caption()
	return ft
}
