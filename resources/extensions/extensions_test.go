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
)

// testExt is a configurable extension registered under several names.
type testExt struct {
	register func(t *Tools) error
	caps     func() ([]Capability, error)
	startErr error
	log      *[]string
	name     string
}

func (e testExt) RegisterTools(t *Tools) error {
	if e.register == nil {
		return nil
	}
	return e.register(t)
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

var lifecycle []string

func init() {
	reg := func(name string, e testExt) {
		e.name, e.log = name, &lifecycle
		Register(name, func(map[string]any) (Extension, error) { return e, nil })
	}
	reg("t-sandboxes", testExt{
		register: func(t *Tools) error { return t.Add(mcp.NewTool("launch_sandbox"), text("upstream")) },
		caps: func() ([]Capability, error) {
			return []Capability{{Name: "sandboxes.launch", Enabled: true}, {Name: "flat", Enabled: true}}, nil
		},
	})
	reg("t-sandboxes-datalayer", testExt{
		register: func(t *Tools) error { return t.Replace(mcp.NewTool("launch_sandbox"), text("datalayer")) },
		caps:     func() ([]Capability, error) { panic("boom") },
	})
	reg("t-wrapper", testExt{
		register: func(t *Tools) error {
			return t.Wrap("list_notebooks", func(next server.ToolHandlerFunc) server.ToolHandlerFunc {
				return func(ctx context.Context, r mcp.CallToolRequest) (*mcp.CallToolResult, error) {
					res, err := next(ctx, r)
					res.Content = append(res.Content, mcp.NewTextContent("wrapped"))
					return res, err
				}
			})
		},
		caps: func() ([]Capability, error) { return nil, errors.New("cannot tell") },
	})
	reg("t-dup", testExt{register: func(t *Tools) error { return t.Add(mcp.NewTool("list_notebooks"), text("x")) }})
	reg("t-replace-missing", testExt{register: func(t *Tools) error { return t.Replace(mcp.NewTool("nope"), text("x")) }})
	reg("t-register-panics", testExt{register: func(*Tools) error { panic("bad") }})
	reg("t-start-fails", testExt{startErr: errors.New("no sandbox backend")})
	Register("t-unbuildable", func(map[string]any) (Extension, error) { return nil, errors.New("missing option") })
}

func coreTools(t *testing.T) *Tools {
	tools := NewTools()
	if err := tools.Add(mcp.NewTool("list_notebooks"), text("core")); err != nil {
		t.Fatal(err)
	}
	return tools
}

func call(t *testing.T, tools *Tools, name string) string {
	for _, st := range tools.List() {
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
	tools := coreTools(t)
	set, err := Build(map[string]map[string]any{"t-wrapper": nil, "t-sandboxes-datalayer": nil, "t-sandboxes": nil},
		tools, slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	if got := call(t, tools, "launch_sandbox"); got != "datalayer" {
		t.Fatalf("launch_sandbox = %q: the replacement sorted after the original must win", got)
	}
	if owner, _ := tools.Owner("launch_sandbox"); owner != "t-sandboxes-datalayer" {
		t.Fatalf("owner = %q", owner)
	}
	if got := call(t, tools, "list_notebooks"); got != "core+wrapped" {
		t.Fatalf("list_notebooks = %q", got)
	}
	caps := set.Capabilities()
	if len(caps) != 1 || caps[0].Name != "sandboxes.launch" || caps[0].Source != "t-sandboxes" {
		t.Fatalf("capabilities = %+v: only the namespaced one of the healthy extension", caps)
	}
	for _, want := range []string{"not namespaced", "panicked", "cannot tell"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("log lacks %q: %s", want, logs.String())
		}
	}
}

func TestBuildErrorsNameTheExtension(t *testing.T) {
	for _, name := range []string{"t-dup", "t-replace-missing", "t-register-panics", "t-unbuildable", "t-unknown"} {
		_, err := Build(map[string]map[string]any{name: nil}, coreTools(t), nil)
		if err == nil || !strings.Contains(err.Error(), `"`+name+`"`) {
			t.Errorf("%s: error %v does not name it", name, err)
		}
	}
	_, err := Build(map[string]map[string]any{"t-dup": nil}, coreTools(t), nil)
	if !errors.Is(err, ErrDuplicateTool) {
		t.Errorf("duplicate add: %v", err)
	}
}

func TestStartStopOrder(t *testing.T) {
	lifecycle = nil
	set, err := Build(map[string]map[string]any{"t-sandboxes": nil, "t-start-fails": nil, "t-wrapper": nil}, coreTools(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	err = set.Start(context.Background())
	if err == nil || !strings.Contains(err.Error(), `"t-start-fails"`) {
		t.Fatalf("Start = %v", err)
	}
	want := "start t-sandboxes|start t-start-fails|stop t-sandboxes"
	if got := strings.Join(lifecycle, "|"); got != want {
		t.Fatalf("lifecycle = %s, want %s", got, want)
	}
	lifecycle = nil
	set, err = Build(map[string]map[string]any{"t-sandboxes": nil, "t-wrapper": nil}, coreTools(t), nil)
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
	if got := strings.Join(lifecycle, "|"); got != want {
		t.Fatalf("lifecycle = %s, want %s", got, want)
	}
}
