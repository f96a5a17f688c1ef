package extensions

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/registry"
)

// testExt is a configurable extension registered under several names.
type testExt struct {
	Base
	name     string
	api      string
	register func(s *Surface) error
	caps     func() ([]Capability, error)
	startErr error
	log      *[]string
}

func (e testExt) Manifest() Manifest {
	api := APIVersion
	if e.api != "" {
		api = e.api
	}
	return Manifest{Name: e.name, Version: "1.2.3", APIVersion: api}
}

func (e testExt) Register(s *Surface) error {
	if e.register == nil {
		return nil
	}
	return e.register(s)
}

func (e testExt) Capabilities() ([]Capability, error) {
	if e.caps == nil {
		return nil, nil
	}
	return e.caps()
}

func (e testExt) Start(context.Context) error {
	*e.log = append(*e.log, "start "+e.name)
	return e.startErr
}

func (e testExt) Stop(context.Context) error {
	*e.log = append(*e.log, "stop "+e.name)
	return nil
}

func text(s string) server.ToolHandlerFunc {
	return func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return mcp.NewToolResultText(s), nil
	}
}

// testRegistry registers the given test extensions (by name) in a registry of
// their own: every registered extension is active unless disabled.
func testRegistry(names ...string) (*registry.Registry[Factory], *[]string) {
	lifecycle := &[]string{}
	all := map[string]testExt{
		"t-sandboxes": {
			register: func(s *Surface) error { return s.AddTool(mcp.NewTool("launch_sandbox"), text("upstream")) },
			caps: func() ([]Capability, error) {
				return []Capability{{Name: "sandboxes.launch", Enabled: true}, {Name: "flat", Enabled: true}, {Name: "notebooks.resources"}}, nil
			},
		},
		"t-sandboxes-datalayer": {
			register: func(s *Surface) error { s.ReplaceTool(mcp.NewTool("launch_sandbox"), text("datalayer")); return nil },
			caps:     func() ([]Capability, error) { panic("boom") },
		},
		"t-wrapper": {
			register: func(s *Surface) error {
				s.WrapTool("list_notebooks", func(next server.ToolHandlerFunc) server.ToolHandlerFunc {
					return func(ctx context.Context, r mcp.CallToolRequest) (*mcp.CallToolResult, error) {
						res, err := next(ctx, r)
						res.Content = append(res.Content, mcp.NewTextContent("wrapped"))
						return res, err
					}
				})
				return nil
			},
			caps: func() ([]Capability, error) { return nil, errors.New("cannot tell") },
		},
		"t-shadow":          {caps: func() ([]Capability, error) { return []Capability{{Name: "sandboxes.launch"}}, nil }},
		"t-dup":             {register: func(s *Surface) error { return s.AddTool(mcp.NewTool("list_notebooks"), text("x")) }},
		"t-wrap-missing":    {register: func(s *Surface) error { s.WrapTool("nope", nil); s.ReplaceTool(mcp.NewTool("gone"), nil); return nil }},
		"t-register-panics": {register: func(*Surface) error { panic("bad") }},
		"t-start-fails":     {startErr: errors.New("no sandbox backend")},
		"t-old-api":         {api: "v0"},
		"t-dup-resource": {register: func(s *Surface) error {
			return s.AddResource(Resource{Template: mcp.NewResourceTemplate("notebook://{name}", "mine"), Read: readNothing})
		}},
	}
	reg := registry.New[Factory]("extension")
	for _, n := range names {
		e, ok := all[n]
		if !ok {
			continue
		}
		e.name, e.log = n, lifecycle
		reg.Register(n, func(*Host) (Extension, error) { return e, nil })
	}
	if strings.Contains(strings.Join(names, " "), "t-unbuildable") {
		reg.Register("t-unbuildable", func(*Host) (Extension, error) { return nil, errors.New("missing option") })
	}
	if strings.Contains(strings.Join(names, " "), "t-misnamed") {
		reg.Register("t-misnamed", func(*Host) (Extension, error) { return testExt{name: "other"}, nil })
	}
	return reg, lifecycle
}

func readNothing(context.Context, string) ([]mcp.ResourceContents, error) { return nil, nil }

var core = []Capability{{Name: "notebooks.resources", Source: "core"}}

func coreSurface(t *testing.T, log *slog.Logger) *Surface {
	s := NewSurface(SurfaceConfig{Reserved: []string{"notebook://{name}"}, Logger: log})
	if err := s.AddTool(mcp.NewTool("list_notebooks"), text("core")); err != nil {
		t.Fatal(err)
	}
	return s
}

func call(t *testing.T, s *Surface, name string) string {
	for _, st := range s.Tools() {
		if st.Tool.Name == name {
			res, err := st.Handler(context.Background(), mcp.CallToolRequest{})
			if err != nil {
				t.Fatal(err)
			}
			var parts []string
			for _, c := range res.Content {
				parts = append(parts, c.(mcp.TextContent).Text)
			}
			return strings.Join(parts, "+")
		}
	}
	t.Fatalf("tool %q missing", name)
	return ""
}

func TestBuildAddReplaceWrapInNameOrder(t *testing.T) {
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	reg, _ := testRegistry("t-wrapper", "t-sandboxes-datalayer", "t-sandboxes", "t-shadow")
	surf := coreSurface(t, log)
	set, err := build(reg, nil, surf, Deps{Logger: log, Core: core})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(set.Names(), " "); got != "t-sandboxes t-sandboxes-datalayer t-shadow t-wrapper" {
		t.Fatalf("active = %s: every compiled-in extension, in name order", got)
	}
	if got := call(t, surf, "launch_sandbox"); got != "datalayer" {
		t.Fatalf("launch_sandbox = %q: the replacement sorted after the original must win", got)
	}
	if owner, _ := surf.Owner("launch_sandbox"); owner != "t-sandboxes-datalayer" {
		t.Fatalf("owner = %q", owner)
	}
	if got := call(t, surf, "list_notebooks"); got != "core+wrapped" {
		t.Fatalf("list_notebooks = %q", got)
	}
	caps := set.Capabilities()
	if len(caps) != 1 || caps[0].Name != "sandboxes.launch" || caps[0].Source != "t-sandboxes" {
		t.Fatalf("capabilities = %+v: only the namespaced one of the healthy extension, shadowing nothing", caps)
	}
	for _, want := range []string{"not namespaced", "panicked", "cannot tell", "already declared"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("log lacks %q: %s", want, logs.String())
		}
	}
	if strings.Count(logs.String(), "capability=notebooks.resources") != 1 || strings.Count(logs.String(), "capability=sandboxes.launch") != 1 {
		t.Errorf("a core name and an earlier extension's name must both be refused: %s", logs.String())
	}
}

func TestDisabledExtensionIsNotBuilt(t *testing.T) {
	reg, _ := testRegistry("t-sandboxes", "t-register-panics")
	set, err := build(reg, map[string]map[string]any{"t-register-panics": {"enabled": false}}, coreSurface(t, nil), Deps{})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(set.Names(), " "); got != "t-sandboxes" {
		t.Fatalf("active = %s", got)
	}
	reg, _ = testRegistry("t-sandboxes")
	_, err = build(reg, map[string]map[string]any{"t-sandboxes": {"enabled": "no"}}, coreSurface(t, nil), Deps{})
	if err == nil || !strings.Contains(err.Error(), `"t-sandboxes"`) || !strings.Contains(err.Error(), "enabled") {
		t.Fatalf("enabled: \"no\" = %v", err)
	}
}

func TestWrapOrReplaceOfAMissingToolWarnsAndStarts(t *testing.T) {
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	reg, _ := testRegistry("t-wrap-missing")
	surf := coreSurface(t, log)
	if _, err := build(reg, nil, surf, Deps{Logger: log}); err != nil {
		t.Fatal(err)
	}
	if len(surf.Tools()) != 1 {
		t.Fatalf("tools = %v", surf.Tools())
	}
	for _, want := range []string{`level=WARN msg="cannot wrap a tool that does not exist; skipped" extension=t-wrap-missing tool=nope`,
		`level=WARN msg="cannot replace a tool that does not exist; skipped" extension=t-wrap-missing tool=gone`} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("log lacks %s:\n%s", want, logs.String())
		}
	}
}

func TestBuildErrorsNameTheExtension(t *testing.T) {
	tests := []struct {
		name string
		want []string
		is   error
	}{
		{"t-dup", nil, ErrDuplicateTool},
		{"t-dup-resource", nil, ErrDuplicateResource},
		{"t-register-panics", []string{"panic"}, nil},
		{"t-unbuildable", []string{"missing option"}, nil},
		{"t-misnamed", []string{`"other"`}, nil},
		{"t-old-api", []string{`version "1.2.3"`, `extension API "v0"`, `provides "` + APIVersion + `"`}, ErrIncompatible},
	}
	for _, tt := range tests {
		reg, _ := testRegistry(tt.name)
		_, err := build(reg, nil, coreSurface(t, nil), Deps{})
		if err == nil || !strings.Contains(err.Error(), `"`+tt.name+`"`) {
			t.Errorf("%s: error %v does not name it", tt.name, err)
			continue
		}
		for _, w := range tt.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error %v lacks %s", tt.name, err, w)
			}
		}
		if tt.is != nil && !errors.Is(err, tt.is) {
			t.Errorf("%s: %v is not %v", tt.name, err, tt.is)
		}
	}
	reg, _ := testRegistry("t-sandboxes")
	if _, err := build(reg, map[string]map[string]any{"t-unknown": nil}, coreSurface(t, nil), Deps{}); err == nil || !strings.Contains(err.Error(), `"t-unknown"`) {
		t.Errorf("unknown configured name: %v", err)
	}
}

func TestStartStopOrder(t *testing.T) {
	reg, lifecycle := testRegistry("t-sandboxes", "t-start-fails", "t-wrapper")
	set, err := build(reg, nil, coreSurface(t, nil), Deps{})
	if err != nil {
		t.Fatal(err)
	}
	err = set.Start(context.Background())
	if err == nil || !strings.Contains(err.Error(), `"t-start-fails"`) {
		t.Fatalf("Start = %v", err)
	}
	want := "start t-sandboxes|start t-start-fails|stop t-sandboxes"
	if got := strings.Join(*lifecycle, "|"); got != want {
		t.Fatalf("lifecycle = %s, want %s", got, want)
	}
	reg, lifecycle = testRegistry("t-sandboxes", "t-wrapper")
	set, err = build(reg, nil, coreSurface(t, nil), Deps{})
	if err != nil {
		t.Fatal(err)
	}
	if err := set.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := set.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	want = "start t-sandboxes|start t-wrapper|stop t-wrapper|stop t-sandboxes"
	if got := strings.Join(*lifecycle, "|"); got != want {
		t.Fatalf("lifecycle = %s, want %s", got, want)
	}
}
