package sidecar

import "time"

// roomsMetrics is the rooms' view of the sidecar's collectors (rooms.Metrics).
type roomsMetrics struct{ m *Metrics }

func (r roomsMetrics) ObserveApply(start time.Time, committed float64) {
	r.m.observeApply(start, committed)
}
func (r roomsMetrics) RowsApplied(n int)  { r.m.rowsApplied.Add(float64(n)) }
func (r roomsMetrics) DecodeErrors(n int) { r.m.decodeErrors.Add(float64(n)) }
func (r roomsMetrics) SetRooms(n int)     { r.m.setRooms(n) }
func (r roomsMetrics) SetDegraded(n int)  { r.m.setDegraded(n) }
