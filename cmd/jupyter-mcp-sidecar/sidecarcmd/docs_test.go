package sidecarcmd

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/testenv"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/sidecar/config"
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

// TestDocExamplesLoad: every YAML example of README.md and docs/*.md passes
// `config check`, the loader serve uses and the seams' option decoders, so no document
// teaches a key, a value or a shape the sidecar refuses. What a reader fills in is stood
// in for: "…" by a secret long enough for any token, a *_file by a file holding one, and
// JupyterHub's service environment is set, as the Hub sets it for its services.
func TestDocExamplesLoad(t *testing.T) {
	// Examples for a binary other than this one, and the test that loads each there.
	elsewhere := map[string]string{
		"docs/EXTENSIONS.md: stats: {label:": "TestExampleExtensionModule (sidecar/e2e/mcp), with the example's binary",
	}
	matched := map[string]bool{}
	blocks := testenv.DocBlocks(t, "yaml", "README.md", "docs/*.md")
	if len(blocks) < 5 {
		t.Fatalf("only %d YAML examples found: is the fence still ```yaml?", len(blocks))
	}
	secretFile := regexp.MustCompile(`(?m)^(\s*\w+_file:\s*)(\S+)`)
	for _, b := range blocks {
		t.Run(b.String(), func(t *testing.T) {
			for key, where := range elsewhere {
				file, part, _ := strings.Cut(key, ": ")
				if b.File == file && strings.Contains(b.Text, part) {
					matched[key] = true
					t.Skipf("loaded by %s", where)
				}
			}
			dir := isolate(t)
			for k, v := range map[string]string{
				config.EnvHubAPIURL: "http://127.0.0.1:8081/hub/api", config.EnvHubAPIToken: "svc-token",
				config.EnvHubServiceName: "mcp", config.EnvHubServicePrefix: "/services/mcp/",
			} {
				t.Setenv(k, v)
			}
			const secret = "stand-in-secret-0123456789"
			secrets := filepath.Join(dir, "secret")
			if err := os.WriteFile(secrets, []byte(secret+"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			body := strings.ReplaceAll(b.Text, "…", secret)
			body = secretFile.ReplaceAllString(body, "${1}"+secrets)
			if _, out, err := check(t, "--config", writeConfig(t, dir, body)); err != nil {
				t.Fatalf("%s does not load: %v\n%s\nthe example:\n%s", b, err, out, body)
			}
		})
	}
	for key, where := range elsewhere {
		if !matched[key] {
			t.Errorf("no YAML example matches %q (said to be loaded by %s): update the list", key, where)
		}
	}
}
