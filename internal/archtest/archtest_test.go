package archtest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar"

// pkg is what `go list -json` says of a package of the module.
type pkg struct {
	ImportPath string
	Dir        string
	GoFiles    []string
	Imports    []string
	Deps       []string
}

// root is the module's directory.
func root(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		t.Fatalf("go env GOMOD: %v", err)
	}
	return filepath.Dir(strings.TrimSpace(string(out)))
}

// packages lists the module's packages and their dependencies, tests excluded.
func packages(t *testing.T) map[string]pkg {
	t.Helper()
	cmd := exec.Command("go", "list", "-deps", "-json", "./...")
	cmd.Dir = root(t)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	pkgs := map[string]pkg{}
	for dec := json.NewDecoder(bytes.NewReader(out)); ; {
		var p pkg
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		if rel, ok := strings.CutPrefix(p.ImportPath, module); ok && (rel == "" || rel[0] == '/') {
			p.ImportPath = strings.TrimPrefix(rel, "/")
			pkgs[p.ImportPath] = p
		}
	}
	return pkgs
}

// rel is path relative to the module ("" when it is not the module's).
func rel(path string) (string, bool) {
	r, ok := strings.CutPrefix(path, module+"/")
	return r, ok
}

// under reports whether package p is dir or beneath it.
func under(p, dir string) bool { return p == dir || strings.HasPrefix(p, dir+"/") }

// layer is a package's layer (ARCHITECTURE.md, "Layers and imports"): cmd 3, sidecar 2,
// resources 1, ystore 0; internal/ is beside them all (-1).
func layer(p string) int {
	for l, dir := range []string{"ystore", "resources", "sidecar", "cmd"} {
		if under(p, dir) {
			return l
		}
	}
	return -1
}

// harness reports whether p is test harness: internal/testenv, the end-to-end tests, a
// package of test helpers (…test), the benchmarks and the scripts' checks.
func harness(p string) bool {
	last := p[strings.LastIndex(p, "/")+1:]
	return under(p, "internal/testenv") || under(p, "sidecar/e2e") || under(p, "bench") || under(p, "scripts") ||
		(strings.HasSuffix(last, "test") && last != "archtest")
}

// TestImports: each layer imports only the layers below it and internal/; internal/
// (the harness aside) imports only internal/; nothing but the harness imports the
// harness; mcp-go is imported only by the surface, its transport, the front and the
// built-in extensions, and sidecar/rooms builds without it; ystore/yjs is imported only
// by ystore/ynotebook, ystore/postgres and sidecar/rooms.
func TestImports(t *testing.T) {
	pkgs := packages(t)
	mcpGo := []string{"resources", "resources/extensions", "resources/internal/subscribers", "sidecar/transport",
		"sidecar/front", "sidecar/builtin/outline", "sidecar/builtin/search"}
	yjs := []string{"ystore/ynotebook", "ystore/postgres", "sidecar/rooms"}
	for _, p := range pkgs {
		if harness(p.ImportPath) {
			continue
		}
		from := p.ImportPath
		for _, imp := range p.Imports {
			if strings.HasPrefix(imp, "github.com/mark3labs/mcp-go") && !slices.Contains(mcpGo, from) {
				t.Errorf("%s imports %s: only %v may import mcp-go", from, imp, mcpGo)
			}
			to, ok := rel(imp)
			if !ok {
				continue
			}
			switch {
			case harness(to):
				t.Errorf("%s imports the test harness %s", from, to)
			case layer(from) == -1 && layer(to) != -1:
				t.Errorf("%s (internal/) imports %s: internal/ imports only internal/", from, to)
			case layer(to) > layer(from) && layer(from) != -1:
				t.Errorf("%s imports %s, a layer above it (cmd → sidecar → resources → ystore)", from, to)
			case to == "ystore/yjs" && !slices.Contains(yjs, from):
				t.Errorf("%s imports ystore/yjs: only %v may", from, yjs)
			}
		}
	}
	for _, d := range pkgs["sidecar/rooms"].Deps {
		if strings.HasPrefix(d, "github.com/mark3labs/mcp-go") {
			t.Errorf("sidecar/rooms depends on %s: it reaches the surface only through resources/library", d)
		}
	}
}

// libraryConfigs are the typed library configs the daemon's configuration maps onto
// (package → type names): built, outside their own package, only in the mapping file.
var libraryConfigs = map[string][]string{
	"ystore/sqlite":      {"Config", "WatcherConfig"},
	"ystore/postgres":    {"Config", "FollowerConfig"},
	"ystore/fileid":      {"DBConfig", "RESTConfig"},
	"resources":          {"Config", "Limits"},
	"resources/versions": {"Config"},
	"sidecar/transport":  {"Config"},
	"sidecar/front":      {"Config"},
	"sidecar/rooms":      {"Config"},
	"sidecar/ondisk":     {"Config"},
	"sidecar/auth":       {"Settings"},
	"sidecar/hubauth":    {"Config", "HubOptions"},
}

// mappingFile is where sidecar/config maps the configuration onto them.
const mappingFile = "sidecar/config/libconfig.go"

// TestLibraryConfigsBuiltInTheMapping: no composite literal of a library config
// outside its own package and the mapping file, tests, the harness and the built-in
// plugins (which build what they run from their own options) excluded.
func TestLibraryConfigsBuiltInTheMapping(t *testing.T) {
	dir := root(t)
	for _, p := range packages(t) {
		if harness(p.ImportPath) || under(p.ImportPath, "sidecar/builtin") {
			continue
		}
		for _, name := range p.GoFiles {
			file := filepath.Join(p.Dir, name)
			relFile, _ := filepath.Rel(dir, file)
			if relFile == filepath.FromSlash(mappingFile) {
				continue
			}
			for _, lit := range configLiterals(t, file, p.ImportPath) {
				t.Errorf("%s: %s built outside %s", lit, relFile, mappingFile)
			}
		}
	}
}

// configLiterals lists the composite literals of libraryConfigs of other packages
// than self in file, as "position: pkg.Type".
func configLiterals(t *testing.T, file, self string) []string {
	t.Helper()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, file, nil, parser.SkipObjectResolution)
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]string{} // the file's name of an import → its package, module-relative
	for _, imp := range f.Imports {
		path, _ := strconv.Unquote(imp.Path.Value)
		r, ok := rel(path)
		if !ok || libraryConfigs[r] == nil || r == self {
			continue
		}
		name := r[strings.LastIndex(r, "/")+1:]
		if imp.Name != nil {
			name = imp.Name.Name
		}
		names[name] = r
	}
	var found []string
	ast.Inspect(f, func(n ast.Node) bool {
		cl, ok := n.(*ast.CompositeLit)
		if !ok {
			return true
		}
		sel, ok := cl.Type.(*ast.SelectorExpr)
		if !ok {
			return true
		}
		x, ok := sel.X.(*ast.Ident)
		if !ok {
			return true
		}
		if p, ok := names[x.Name]; ok && slices.Contains(libraryConfigs[p], sel.Sel.Name) {
			found = append(found, fmt.Sprintf("%s: %s.%s", fset.Position(cl.Pos()), p, sel.Sel.Name))
		}
		return true
	})
	return found
}

// workaround marks the code of an mcp-go workaround (a comment saying so, or naming
// an mcp-go pull request or issue).
var workaround = regexp.MustCompile(`(?i)mcp-go workaround|mcp-go (pr|issue) #\d+`)

// TestWorkaroundsWhereTheDocumentSays: every mark of an mcp-go workaround in the
// module's Go sources (tests excluded) is in a file the document's sentence "Every
// workaround of mcp-go is in …" names, and each file it names holds one.
func TestWorkaroundsWhereTheDocumentSays(t *testing.T) {
	dir := root(t)
	doc, err := os.ReadFile(filepath.Join(dir, "docs", "ARCHITECTURE.md"))
	if err != nil {
		t.Fatal(err)
	}
	named := workaroundFiles(t, string(doc))
	marked := map[string]bool{}
	err = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		switch {
		case err != nil:
			return err
		case d.IsDir() && (d.Name() == "testdata" || d.Name() == "node_modules" || strings.HasPrefix(d.Name(), ".")):
			return filepath.SkipDir
		case d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go"):
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if workaround.Match(b) {
			r, _ := filepath.Rel(dir, path)
			marked[filepath.ToSlash(r)] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for f := range marked {
		if !slices.Contains(named, f) {
			t.Errorf("%s marks an mcp-go workaround, but docs/ARCHITECTURE.md names only %v", f, named)
		}
	}
	for _, f := range named {
		if !marked[f] {
			t.Errorf("docs/ARCHITECTURE.md names %s for mcp-go workarounds, but it marks none", f)
		}
	}
}

// workaroundFiles are the files (`…go` in backquotes) of the document's sentence that
// begins "Every workaround of mcp-go is in", up to its full stop.
func workaroundFiles(t *testing.T, doc string) []string {
	t.Helper()
	_, after, ok := strings.Cut(strings.Join(strings.Fields(doc), " "), "Every workaround of mcp-go is in")
	if !ok {
		t.Fatal(`docs/ARCHITECTURE.md has no sentence "Every workaround of mcp-go is in …"`)
	}
	sentence, _, _ := strings.Cut(after, ". ")
	var files []string
	for _, m := range regexp.MustCompile("`([^`]+\\.go)`").FindAllStringSubmatch(sentence, -1) {
		files = append(files, m[1])
	}
	if len(files) == 0 {
		t.Fatal("the sentence on mcp-go's workarounds names no file")
	}
	return files
}

// testFile is a test file's name as a package doc names it.
var testFile = regexp.MustCompile(`[\w.-]+_test\.go\b`)

// TestDocsListTheirTestFiles: a package whose doc names any of its _test.go files (a
// doc that lists its files) names every one of them, so that a reader of the doc finds
// each test.
func TestDocsListTheirTestFiles(t *testing.T) {
	dir := root(t)
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		switch {
		case err != nil:
			return err
		case !d.IsDir():
			return nil
		case path != dir && (d.Name() == "testdata" || d.Name() == "node_modules" || strings.HasPrefix(d.Name(), ".")):
			return filepath.SkipDir
		}
		doc, tests := packageDoc(t, path)
		named := map[string]bool{}
		for _, f := range testFile.FindAllString(doc, -1) {
			named[f] = true
		}
		if len(named) == 0 {
			return nil
		}
		r, _ := filepath.Rel(dir, path)
		for _, f := range tests {
			if !named[f] {
				t.Errorf("%s: the package doc lists its files but not %s", filepath.ToSlash(r), f)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// packageDoc is the package comments of the Go files in dir, and the names of its test
// files.
func packageDoc(t *testing.T, dir string) (doc string, tests []string) {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			tests = append(tests, filepath.Base(f))
		}
		parsed, err := parser.ParseFile(fset, f, nil, parser.PackageClauseOnly|parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		if parsed.Doc != nil {
			doc += parsed.Doc.Text()
		}
	}
	return doc, tests
}
