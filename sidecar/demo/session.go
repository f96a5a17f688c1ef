package demo

import (
	"bufio"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"
)

// ErrSession is wrapped by every error about a malformed session recording.
var ErrSession = errors.New("invalid demo session")

// maxLine bounds one JSON line of a session recording.
const maxLine = 16 << 20

// Step is one recorded Yjs update and the pause that preceded it.
type Step struct {
	Update []byte
	Delay  time.Duration
}

// ParseSession decodes a gzip-compressed recording of JSON lines
// {"update": base64, "delay_ms": N}; blank lines are skipped.
func ParseSession(r io.Reader) ([]Step, error) {
	zr, err := gzip.NewReader(r)
	if err != nil {
		return nil, fmt.Errorf("gunzip: %w: %w", ErrSession, err)
	}
	sc := bufio.NewScanner(zr)
	sc.Buffer(make([]byte, 0, 64<<10), maxLine)
	var steps []Step
	for line := 1; sc.Scan(); line++ {
		if len(sc.Bytes()) == 0 {
			continue
		}
		var rec struct {
			Update  []byte `json:"update"`
			DelayMS *int64 `json:"delay_ms"`
		}
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			return nil, fmt.Errorf("line %d: %w: %w", line, ErrSession, err)
		}
		switch {
		case len(rec.Update) == 0:
			return nil, fmt.Errorf("line %d: %w: empty update", line, ErrSession)
		case rec.DelayMS == nil || *rec.DelayMS < 0 || *rec.DelayMS > int64(time.Hour/time.Millisecond):
			return nil, fmt.Errorf("line %d: %w: delay_ms missing or outside [0, 3600000]", line, ErrSession)
		}
		steps = append(steps, Step{Update: rec.Update, Delay: time.Duration(*rec.DelayMS) * time.Millisecond})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read: %w: %w", ErrSession, err)
	}
	if len(steps) == 0 {
		return nil, fmt.Errorf("%w: no updates", ErrSession)
	}
	return steps, nil
}
