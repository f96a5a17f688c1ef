package sidecar

import (
	"sync/atomic"
	"time"
)

// roomsMetrics is one instance's view of the sidecar's collectors (rooms.Metrics). The
// room gauges, shared with the other instances on the Registerer, move by this
// instance's changes, so that their series is the sum; release takes its share out.
type roomsMetrics struct {
	m               *Metrics
	rooms, degraded atomic.Int64 // this instance's share of liveRooms and degradedRooms
	versions        atomic.Int64 // and of versionsKept
}

func (r *roomsMetrics) ObserveApply(start time.Time, committed float64) {
	r.m.observeApply(start, committed)
}
func (r *roomsMetrics) RowsApplied(n int)  { r.m.rowsApplied.Add(float64(n)) }
func (r *roomsMetrics) DecodeErrors(n int) { r.m.decodeErrors.Add(float64(n)) }
func (r *roomsMetrics) SetRooms(n int)     { r.m.liveRooms.Add(float64(int64(n) - r.rooms.Swap(int64(n)))) }
func (r *roomsMetrics) Diverged()          { r.m.divergences.Inc() }
func (r *roomsMetrics) Gap()               { r.m.storeGaps.Inc() }
func (r *roomsMetrics) Refused(bound string) {
	r.m.roomsRefused.WithLabelValues(bound).Inc()
}
func (r *roomsMetrics) VersionsKept(n int) {
	r.versions.Add(int64(n))
	r.m.versionsKept.Add(float64(n))
}
func (r *roomsMetrics) SetDegraded(n int) {
	r.m.degradedRooms.Add(float64(int64(n) - r.degraded.Swap(int64(n))))
}

// release takes the instance's rooms out of the gauges.
func (r *roomsMetrics) release() {
	r.SetRooms(0)
	r.SetDegraded(0)
	r.VersionsKept(-int(r.versions.Load()))
}
