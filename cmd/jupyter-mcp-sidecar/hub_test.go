package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/sidecar/config"
)

// Hub mode's keys load strictly, from the file, JUPYTER_MCP_SIDECAR_HUB_* and, for the
// keys left empty, JupyterHub's service environment.
func TestLoadHub(t *testing.T) {
	hubEnv := map[string]string{
		config.EnvHubAPIURL: "http://127.0.0.1:8081/hub/api", config.EnvHubAPIToken: "svc-token",
		config.EnvHubServiceName: "mcp", config.EnvHubServicePrefix: "/services/mcp/",
	}
	tests := []struct {
		name string
		yaml string
		env  map[string]string
		want func(config.Hub) bool
		err  string
	}{
		{name: "off: the service environment is not read", yaml: "hub:\n  enabled: false\n", env: hubEnv,
			want: func(h config.Hub) bool { return h == config.DefaultHub() }},
		{name: "managed service", yaml: "hub:\n  enabled: true\n", env: hubEnv,
			want: func(h config.Hub) bool {
				return h.APIURL == "http://127.0.0.1:8081/hub/api" && h.APIToken == "svc-token" &&
					h.ServiceName == "mcp" && h.PrefixedPath("/mcp") == "/services/mcp/mcp"
			}},
		{name: "external service, tljh stores", yaml: `
hub:
  enabled: true
  api_url: https://hub.example.org/hub/api
  service_name: notebooks
  stores:
    sqlite_path: /home/jupyter-{username}/.jupyter_ystore.db
    fileid_db: /home/jupyter-{username}/.local/share/jupyter/file_id_manager.db
    root_dir: /home/jupyter-{username}
  token_cache_ttl: 10s
  idle_timeout: 30m
`, env: map[string]string{config.EnvHubAPIURL: "http://ignored/hub/api", "JUPYTER_MCP_SIDECAR_HUB_IDLE_TIMEOUT": "1h"},
			want: func(h config.Hub) bool {
				p, err := h.StorePath("alice")
				return h.APIURL == "https://hub.example.org/hub/api" && h.ServicePrefix == "/services/notebooks/" &&
					h.TokenCacheTTL == 10*time.Second && h.IdleTimeout == time.Hour &&
					err == nil && p == "/home/jupyter-alice/.jupyter_ystore.db"
			}},
		{name: "unknown key", yaml: "hub:\n  enabled: true\n  stores:\n    sqlite: x\n", env: hubEnv, err: "hub.stores.sqlite: unknown key"},
		{name: "no api url", yaml: "hub:\n  enabled: true\n", err: "hub.api_url: must be set"},
		{name: "template", yaml: "hub:\n  enabled: true\n  stores:\n    root_dir: /home/{user}\n", env: hubEnv,
			err: "hub.stores.root_dir: {username} is the only placeholder"},
		{name: "bare duration", yaml: "hub:\n  idle_timeout: 600\n", err: "hub.idle_timeout"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := isolate(t)
			for _, k := range []string{config.EnvHubAPIURL, config.EnvHubAPIToken, config.EnvHubServiceName, config.EnvHubServicePrefix} {
				t.Setenv(k, tt.env[k])
			}
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			cfg, _, err := load(source{file: writeConfig(t, dir, tt.yaml), flags: newRoot(nil, nil).Flags()}, registered())
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("load = %v, want %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !tt.want(cfg.Hub) {
				t.Fatalf("hub = %+v", cfg.Hub)
			}
		})
	}
}

// The API token can come from a file, and is masked when printed.
func TestLoadHubTokenFile(t *testing.T) {
	dir := isolate(t)
	tok := filepath.Join(dir, "hub-token")
	if err := os.WriteFile(tok, []byte("from-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv(config.EnvHubAPIToken, "from-env")
	file := writeConfig(t, dir, "hub:\n  enabled: true\n  api_url: http://127.0.0.1:8081/hub/api\n  api_token_file: "+tok+"\n")
	cfg, out, err := check(t, "--config", file)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out, "from-file") || cfg.Hub.APIToken != config.Mask {
		t.Fatalf("hub.api_token printed as %q:\n%s", cfg.Hub.APIToken, out)
	}
	loaded, _, err := load(source{file: file, flags: newRoot(nil, nil).Flags()}, registered())
	if err != nil || loaded.Hub.APIToken != "from-file" {
		t.Fatalf("hub.api_token = %q, %v", loaded.Hub.APIToken, err)
	}
}
