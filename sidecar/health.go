package sidecar

import (
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore"
)

// Health answers the liveness and readiness probes.
type Health struct {
	status       func() ystore.Status
	degraded     func() []string
	publisher    Publisher // nil: none
	lagThreshold time.Duration
}

// Publisher reports the health of the configured publisher; resources.Server is one.
type Publisher interface {
	// PublisherHealth is nil while the publisher delivers changes.
	PublisherHealth() error
}

// Readiness is the body of /readyz.
type Readiness struct {
	Ready         bool     `json:"ready"`
	Loaded        bool     `json:"loaded"`
	Reachable     bool     `json:"store_reachable"`
	LagSeconds    float64  `json:"lag_seconds"`
	LastError     string   `json:"last_error,omitempty"`
	DegradedRooms []string `json:"degraded_rooms,omitempty"`
	Publisher     string   `json:"publisher_error,omitempty"`
	Reasons       []string `json:"reasons,omitempty"`
	// Loading is how far a read of the whole store under way has come.
	Loading *Loading `json:"loading,omitempty"`
}

// Loading is the progress of a read of the whole store (ystore.LoadProgress) in /readyz.
type Loading struct {
	Rows      int64   `json:"rows"`
	TotalRows int64   `json:"total_rows"`
	Rooms     int     `json:"rooms"`
	Seconds   float64 `json:"seconds"`
}

// NewHealth returns probes over the tailer's status, the degraded rooms and the
// publisher (nil for none).
func NewHealth(status func() ystore.Status, degraded func() []string, publisher Publisher, lagThreshold time.Duration) *Health {
	return &Health{status: status, degraded: degraded, publisher: publisher, lagThreshold: lagThreshold}
}

// Check computes readiness now.
func (h *Health) Check() Readiness {
	st := h.status()
	r := Readiness{
		Loaded:        !st.LastReadAt.IsZero(),
		Reachable:     st.Reachable,
		LagSeconds:    st.Lag.Seconds(),
		LastError:     st.LastError,
		DegradedRooms: h.degraded(),
	}
	if l := st.Load; l.Active {
		r.Loading = &Loading{Rows: l.Rows, TotalRows: l.Total, Rooms: l.Rooms, Seconds: time.Since(l.Started).Seconds()}
	}
	switch {
	case !r.Loaded && r.Loading != nil:
		r.Reasons = append(r.Reasons, fmt.Sprintf("store loading: %d of %d rows", r.Loading.Rows, r.Loading.TotalRows))
	case !r.Loaded:
		r.Reasons = append(r.Reasons, "store not loaded yet")
	}
	// A store being read for the first time is not unreachable unless a read failed.
	if !r.Reachable && (r.Loaded || r.Loading == nil || r.LastError != "") {
		r.Reasons = append(r.Reasons, "store not reachable")
	}
	if h.lagThreshold > 0 && st.Lag > h.lagThreshold {
		r.Reasons = append(r.Reasons, "tail lag above "+h.lagThreshold.String())
	}
	if len(r.DegradedRooms) > 0 {
		r.Reasons = append(r.Reasons, "rooms degraded by undecodable rows")
	}
	if h.publisher != nil {
		if err := h.publisher.PublisherHealth(); err != nil {
			r.Publisher = err.Error()
			r.Reasons = append(r.Reasons, "the publisher is failing every delivery: nobody is being told of changes")
		}
	}
	r.Ready = len(r.Reasons) == 0
	return r
}

// Live answers /healthz: the process is up.
func (h *Health) Live() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte("ok\n"))
	})
}

// Ready answers /readyz: 200 when ready, 503 with the reasons otherwise.
func (h *Health) Ready() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		r := h.Check()
		w.Header().Set("Content-Type", "application/json")
		if !r.Ready {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
		_ = json.NewEncoder(w).Encode(r)
	})
}
