package ystore

import (
	"context"
	"errors"
	"slices"
	"testing"
)

type nopTailer struct{ source string }

func (nopTailer) Run(context.Context, func(context.Context, []Event) error) error { return nil }
func (nopTailer) Status() Status                                                  { return Status{} }
func (nopTailer) Load(context.Context) ([]Event, error)                           { return nil, nil }

func withRegistry(t *testing.T) {
	t.Helper()
	registryMu.Lock()
	saved := registry
	registry = map[string]Factory{}
	registryMu.Unlock()
	t.Cleanup(func() {
		registryMu.Lock()
		registry = saved
		registryMu.Unlock()
	})
}

func TestRegistry(t *testing.T) {
	withRegistry(t)
	errBad := errors.New("bad source")
	for _, name := range []string{"zeta", "alpha", "mid"} {
		Register(name, func(o Options) (Tailer, error) {
			if o.Source == "" {
				return nil, errBad
			}
			return nopTailer{source: o.Source}, nil
		})
	}
	if got, want := Backends(), []string{"alpha", "mid", "zeta"}; !slices.Equal(got, want) {
		t.Fatalf("Backends() = %v, want %v", got, want)
	}
	tl, err := Open("mid", Options{Source: "x.db"})
	if err != nil || tl.(nopTailer).source != "x.db" {
		t.Fatalf("Open(mid) = %v, %v", tl, err)
	}
	if _, err := Open("mid", Options{}); !errors.Is(err, errBad) {
		t.Fatalf("Open(mid) with bad options: err = %v, want %v", err, errBad)
	}
	if _, err := Open("nope", Options{}); !errors.Is(err, ErrUnknownBackend) {
		t.Fatalf("Open(nope): err = %v, want ErrUnknownBackend", err)
	}
}

func TestRegisterPanics(t *testing.T) {
	withRegistry(t)
	f := func(Options) (Tailer, error) { return nopTailer{}, nil }
	Register("dup", f)
	for name, fn := range map[string]func(){
		"duplicate":   func() { Register("dup", f) },
		"nil factory": func() { Register("other", nil) },
	} {
		t.Run(name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Fatal("Register did not panic")
				}
			}()
			fn()
		})
	}
}

func TestEventKindString(t *testing.T) {
	for k, want := range map[EventKind]string{EventUpdates: "updates", EventReset: "reset", EventRemoved: "removed", 9: "unknown"} {
		if got := k.String(); got != want {
			t.Errorf("EventKind(%d).String() = %q, want %q", k, got, want)
		}
	}
}
