package promreg

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The namespace is spelled out once, here: every other series name is built from
// Namespace (Opts.Namespace, prometheus.BuildFQName), comments included.
func TestNamespaceSpelledOnce(t *testing.T) {
	root := filepath.Join("..", "..")
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("the module root: %v", err)
	}
	var found []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		for range strings.Count(string(src), Namespace) {
			found = append(found, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(found) != 1 || found[0] != "internal/promreg/promreg.go" {
		t.Fatalf("%q spelled out %d times in non-test Go files %v; want once, in internal/promreg/promreg.go", Namespace, len(found), found)
	}
}
