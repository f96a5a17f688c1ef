package nbview

import (
	"errors"
	"testing"
)

func TestParseURI(t *testing.T) {
	tests := []struct {
		uri  string
		want Ref
		tmpl string
		ok   bool
	}{
		{"notebook://work", Ref{Name: "work", Output: -1}, TemplateNotebook, true},
		{"notebook://work/cells/c1", Ref{Name: "work", CellID: "c1", Output: -1}, TemplateCell, true},
		{"notebook://work/cells/c1/outputs/0", Ref{Name: "work", CellID: "c1", Output: 0}, TemplateOutput, true},
		{"notebook://work/cells/c1/outputs/12", Ref{Name: "work", CellID: "c1", Output: 12}, TemplateOutput, true},
		{"notebook://work/cells/a%2Fb", Ref{Name: "work", CellID: "a/b", Output: -1}, TemplateCell, true},
		{"notebook://", Ref{}, "", false},
		{"notebook://a b", Ref{}, "", false},
		{"notebook://work/", Ref{}, "", false},
		{"notebook://work/cells", Ref{}, "", false},
		{"notebook://work/cells/", Ref{}, "", false},
		{"notebook://work/cell/c1", Ref{}, "", false},
		{"notebook://work/cells/c1/outputs", Ref{}, "", false},
		{"notebook://work/cells/c1/outputs/-1", Ref{}, "", false},
		{"notebook://work/cells/c1/outputs/01", Ref{}, "", false},
		{"notebook://work/cells/c1/outputs/x", Ref{}, "", false},
		{"notebook://work/cells/c1/outputs/0/x", Ref{}, "", false},
		{"notebook://work/cells/%zz", Ref{}, "", false},
		{"file:///etc/passwd", Ref{}, "", false},
	}
	for _, tt := range tests {
		got, err := ParseURI(tt.uri)
		if (err == nil) != tt.ok {
			t.Errorf("ParseURI(%q) error = %v, want ok=%v", tt.uri, err, tt.ok)
			continue
		}
		if err != nil {
			if !errors.Is(err, ErrBadURI) {
				t.Errorf("ParseURI(%q) error %v does not wrap ErrBadURI", tt.uri, err)
			}
			continue
		}
		if got != tt.want || got.Template() != tt.tmpl {
			t.Errorf("ParseURI(%q) = %+v (%s), want %+v (%s)", tt.uri, got, got.Template(), tt.want, tt.tmpl)
		}
		if got.String() != tt.uri {
			t.Errorf("ParseURI(%q).String() = %q", tt.uri, got.String())
		}
	}
}

func FuzzParseURI(f *testing.F) {
	for _, s := range []string{"notebook://work", "notebook://w/cells/c1", "notebook://w/cells/c1/outputs/3", "notebook://w/cells/a%2F", "notebook://w/cells/c/outputs/007"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		ref, err := ParseURI(s)
		if err != nil {
			return
		}
		again, err := ParseURI(ref.String())
		if err != nil || again != ref {
			t.Fatalf("%q parsed to %+v, which formats to %q and parses to %+v, %v", s, ref, ref.String(), again, err)
		}
	})
}
