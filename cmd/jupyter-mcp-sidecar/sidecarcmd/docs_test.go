package sidecarcmd

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"testing"
)

// TestArchitectureNamesRealPackages: every package docs/ARCHITECTURE.md lists (its table of
// packages, the headings of its contracts) exists and holds Go files, so the document
// cannot keep describing a package that was renamed or removed.
func TestArchitectureNamesRealPackages(t *testing.T) {
	root := filepath.Join("..", "..", "..")
	doc, err := os.ReadFile(filepath.Join(root, "docs", "ARCHITECTURE.md"))
	if err != nil {
		t.Fatal(err)
	}
	named := regexp.MustCompile("(?m)(?:^\\| |\\*\\*)`((?:cmd|sidecar|ystore|resources)(?:/[a-z0-9_-]+)*)`").FindAllSubmatch(doc, -1)
	if len(named) < 20 {
		t.Fatalf("only %d package names found: is the pattern still right?", len(named))
	}
	var seen []string
	for _, m := range named {
		pkg := string(m[1])
		if slices.Contains(seen, pkg) {
			continue
		}
		seen = append(seen, pkg)
		gos, _ := filepath.Glob(filepath.Join(root, filepath.FromSlash(pkg), "*.go"))
		if len(gos) == 0 {
			t.Errorf("docs/ARCHITECTURE.md names %s, which is no package", pkg)
		}
	}
}
