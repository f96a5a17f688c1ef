package sidecar

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/sidecar/rooms"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore/fileid"
)

// Health answers the liveness and readiness probes.
type Health struct {
	status       func() ystore.Status
	degraded     func() []rooms.Degradation
	publisher    Publisher     // nil: none
	fileid       fileid.Faulty // nil: none
	lagThreshold time.Duration
}

// Publisher reports the health of the configured publisher; resources.Server is one.
type Publisher interface {
	// PublisherHealth is nil while the publisher delivers changes.
	PublisherHealth() error
}

// StateWaiting is Readiness.State while the store does not exist yet (ystore.Status.Absent).
const StateWaiting = "waiting for the store: none yet"

// Readiness is the body of /readyz.
type Readiness struct {
	Ready         bool     `json:"ready"`
	Loaded        bool     `json:"loaded"`
	Reachable     bool     `json:"store_reachable"`
	State         string   `json:"state,omitempty"`
	LagSeconds    float64  `json:"lag_seconds"`
	LastError     string   `json:"last_error,omitempty"`
	DegradedRooms []string `json:"degraded_rooms,omitempty"`
	// Degradations says why each of DegradedRooms is degraded.
	Degradations []rooms.Degradation `json:"degradations,omitempty"`
	Publisher    string              `json:"publisher_error,omitempty"`
	Reasons      []string            `json:"reasons,omitempty"`
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

// NewHealth returns probes over the tailer's status, the degraded rooms, the publisher
// and the file id resolver (nil for none).
func NewHealth(status func() ystore.Status, degraded func() []rooms.Degradation, publisher Publisher, resolver fileid.Faulty, lagThreshold time.Duration) *Health {
	return &Health{status: status, degraded: degraded, publisher: publisher, fileid: resolver, lagThreshold: lagThreshold}
}

// Check computes readiness now.
func (h *Health) Check() Readiness {
	st := h.status()
	r := Readiness{
		Loaded:       !st.LastReadAt.IsZero(),
		Reachable:    st.Reachable,
		LagSeconds:   st.Lag.Seconds(),
		LastError:    st.LastError,
		Degradations: h.degraded(),
	}
	var bad, diverged, gaps bool
	for _, d := range r.Degradations {
		r.DegradedRooms = append(r.DegradedRooms, d.Room)
		bad, diverged, gaps = bad || d.BadRows > 0, diverged || d.Diverged, gaps || d.Gaps != nil
	}
	if l := st.Load; l.Active {
		r.Loading = &Loading{Rows: l.Rows, TotalRows: l.Total, Rooms: l.Rooms, Seconds: time.Since(l.Started).Seconds()}
	}
	if st.Absent {
		// A server writes its store once a notebook is opened: nothing to serve yet and
		// nothing wrong, so the pod (KubeSpawner waits for every container) is ready.
		r.State = StateWaiting
	} else {
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
	}
	if h.lagThreshold > 0 && st.Lag > h.lagThreshold {
		r.Reasons = append(r.Reasons, "tail lag above "+h.lagThreshold.String())
	}
	if bad {
		r.Reasons = append(r.Reasons, "rooms degraded by undecodable rows")
	}
	if diverged {
		r.Reasons = append(r.Reasons, "rooms whose live notebook differed from the server's saved file (served from the file)")
	}
	if gaps {
		r.Reasons = append(r.Reasons, "rooms waiting for updates missing from the store (served from the file)")
	}
	if h.publisher != nil {
		if err := h.publisher.PublisherHealth(); err != nil {
			r.Publisher = err.Error()
			r.Reasons = append(r.Reasons, "the publisher is failing every delivery: nobody is being told of changes")
		}
	}
	if h.fileid != nil {
		// Said without the paths: /readyz answers without authentication; the log has them.
		switch err := h.fileid.Fault(); {
		case errors.Is(err, fileid.ErrOutsideRoot):
			r.Reasons = append(r.Reasons, "file ids resolve outside fileid.root_dir: notebooks get no path (set it to the Jupyter server's root; the log says more)")
		case errors.Is(err, fileid.ErrUnreadable):
			r.Reasons = append(r.Reasons, "fileid.db_path is not a readable file id database (the log says more)")
		}
	}
	r.Ready = len(r.Reasons) == 0
	return r
}

// live answers /healthz, in both modes: the process is up.
var live http.Handler = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = w.Write([]byte("ok\n"))
})

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
