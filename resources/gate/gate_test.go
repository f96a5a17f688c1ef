package gate

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
)

type failing struct{ panics bool }

func (f failing) Serves(context.Context, string) (bool, error) {
	if f.panics {
		panic("boom")
	}
	return false, errors.New("backend down")
}

func TestDecide(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	w, err := New("withhold", map[string]any{"templates": []any{"notebook://{name}"}})
	if err != nil {
		t.Fatal(err)
	}
	def, err := New("", nil)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		g    Gate
		tmpl string
		want bool
	}{
		{"default serves", def, "notebook://{name}", true},
		{"withheld", w, "notebook://{name}", false},
		{"not listed", w, "notebook://{name}/cells/{cell_id}", true},
		{"error serves", failing{}, "notebook://{name}", true},
		{"panic serves", failing{panics: true}, "notebook://{name}", true},
	}
	for _, tt := range tests {
		if got := Decide(context.Background(), tt.g, tt.tmpl, log); got != tt.want {
			t.Errorf("%s: Decide = %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestNewErrors(t *testing.T) {
	if _, err := New("nope", nil); !errors.Is(err, ErrUnknown) {
		t.Fatalf("unknown gate: %v", err)
	}
	if _, err := New("withhold", nil); err == nil {
		t.Fatal("withhold without templates built")
	}
	if _, err := New("withhold", map[string]any{"templates": "x"}); err == nil {
		t.Fatal("withhold with a string built")
	}
}

func TestRegisterDuplicatePanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("duplicate Register did not panic")
		}
	}()
	Register(Default, func(map[string]any) (Gate, error) { return all{}, nil })
}
