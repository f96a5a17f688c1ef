package sidecarcmd

import (
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/sidecar"
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
			want: func(h config.Hub) bool { return reflect.DeepEqual(h, config.DefaultHub()) }},
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
		// Keys the hub verifier (hubauth) validates, named by config check.
		{name: "api url not http", yaml: "hub:\n  enabled: true\n  api_url: ftp://hub/api\n",
			err: `hub.api_url: must be the Hub's http(s) API URL, e.g. http://127.0.0.1:8081/hub/api, got "ftp://hub/api"`},
		{name: "service name", yaml: "hub:\n  enabled: true\n  service_name: a/b\n", env: hubEnv,
			err: `hub.service_name: must be a JupyterHub service name (letters, digits, . _ -), got "a/b"`},
		{name: "token cache ttl", yaml: "hub:\n  enabled: true\n  token_cache_ttl: 0s\n", env: hubEnv, err: "hub.token_cache_ttl: must be > 0, got 0s"},
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

// A managed service listens where $JUPYTERHUB_SERVICE_URL says, the address the Hub's
// proxy sends its requests to, unless server.listen is configured (file, environment or
// flag); outside hub mode the variable is not read.
func TestLoadHubServiceURL(t *testing.T) {
	const hubOn = "hub:\n  enabled: true\n  api_url: http://127.0.0.1:8081/hub/api\n"
	tests := []struct {
		name, yaml, url string
		env             map[string]string
		args            []string
		want, err       string
	}{
		{name: "from the service url", yaml: hubOn, url: "http://127.0.0.1:10101/", want: "127.0.0.1:10101"},
		{name: "port of the scheme", yaml: hubOn, url: "http://[::1]/", want: "[::1]:80"},
		{name: "unset: the default", yaml: hubOn, want: "127.0.0.1:4040"},
		{name: "the file wins", yaml: hubOn + "server: {listen: 127.0.0.1:5000}\n", url: "http://127.0.0.1:10101/", want: "127.0.0.1:5000"},
		{name: "the environment wins", yaml: hubOn, url: "http://127.0.0.1:10101/",
			env: map[string]string{"JUPYTER_MCP_SIDECAR_SERVER_LISTEN": "127.0.0.1:5001"}, want: "127.0.0.1:5001"},
		{name: "the flag wins", yaml: hubOn, url: "http://127.0.0.1:10101/", args: []string{"--listen", "127.0.0.1:5002"}, want: "127.0.0.1:5002"},
		{name: "hub mode off", yaml: "hub: {enabled: false}\n", url: "http://127.0.0.1:10101/", want: "127.0.0.1:4040"},
		{name: "https", yaml: hubOn, url: "https://127.0.0.1:10101/", err: "server.listen: $JUPYTERHUB_SERVICE_URL is \"https://127.0.0.1:10101/\""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := isolate(t)
			t.Setenv(config.EnvHubServiceURL, tt.url)
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			cfg, _, err := check(t, append([]string{"--config", writeConfig(t, dir, tt.yaml)}, tt.args...)...)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("config check = %v, want %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if cfg.Server.Listen != tt.want {
				t.Fatalf("server.listen %q, want %q", cfg.Server.Listen, tt.want)
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

// hubExampleEnv reads the JUPYTER_MCP_SIDECAR_* settings of a deployment example:
// Environment= lines of a systemd unit, "KEY": "value" pairs of jupyterhub_config.py, or
// the env of the named container of a Kubernetes manifest.
func hubExampleEnv(t *testing.T, file, container string) map[string]string {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{}
	switch {
	case strings.HasSuffix(file, ".service"):
		for _, m := range regexp.MustCompile(`(?m)^Environment=(\w+)=(.*)$`).FindAllStringSubmatch(string(b), -1) {
			env[m[1]] = m[2]
		}
	case strings.HasSuffix(file, ".py"):
		for _, m := range regexp.MustCompile(`"(`+envPrefix+`_\w+)": (MCP_LISTEN|"[^"]*")`).FindAllStringSubmatch(string(b), -1) {
			env[m[1]] = strings.Trim(m[2], `"`)
		}
		listen := regexp.MustCompile(`(?m)^MCP_LISTEN = "([^"]+)"$`).FindStringSubmatch(string(b))
		for k, v := range env {
			if v == "MCP_LISTEN" && listen != nil {
				env[k] = listen[1]
			}
		}
	default:
		for _, part := range strings.Split(string(b), "\n---\n") {
			var doc any
			if err := yaml.Unmarshal([]byte(part), &doc); err != nil {
				t.Fatalf("%s: %v", file, err)
			}
			walkContainers(doc, func(c map[string]any) {
				if c["name"] != container {
					return
				}
				envs, _ := c["env"].([]any)
				for _, e := range envs {
					kv, _ := e.(map[string]any)
					name, _ := kv["name"].(string)
					value, _ := kv["value"].(string)
					env[name] = value
				}
			})
		}
	}
	if len(env) == 0 {
		t.Fatalf("%s: no settings found for %q", file, container)
	}
	return env
}

// walkContainers calls f on every map with an "image" key (a container) in a YAML tree.
func walkContainers(node any, f func(map[string]any)) {
	switch n := node.(type) {
	case map[string]any:
		if _, ok := n["image"]; ok {
			f(n)
		}
		for _, v := range n {
			walkContainers(v, f)
		}
	case []any:
		for _, v := range n {
			walkContainers(v, f)
		}
	}
}

// The deployment examples (hub mode's, the ship container's, the single-user server's
// sidecar) load as valid configurations, naming only real keys.
func TestDeploymentExamplesLoad(t *testing.T) {
	managed := map[string]string{ // what the Hub gives a managed service
		config.EnvHubAPIURL: "http://127.0.0.1:8081/hub/api", config.EnvHubAPIToken: "svc-token",
		config.EnvHubServiceName: "mcp", config.EnvHubServicePrefix: "/services/mcp/",
	}
	tests := []struct {
		file, container string
		hubEnv          map[string]string
		check           func(config.Config) error
		hub             bool
	}{
		{"../../../configs/jupyterhub_config.py", "", managed, nil, true},
		{"../../../configs/systemd/jupyter-mcp-sidecar-hub.service", "", nil, nil, true},
		{"../../../configs/k8s/z2jh/mcp-hub.yaml", "jupyter-mcp-sidecar", nil, nil, true},
		{"../../../configs/k8s/z2jh/values.yaml", "jupyter-mcp-sidecar-ship", nil, config.Config.ValidateShip, false},
		{"../../../configs/jupyter-mcp-sidecar.service", "", nil, nil, false},
		{"../../../configs/k8s/pod.yaml", "jupyter-mcp-sidecar", nil, nil, false},
		{"../../../configs/k8s/z2jh/pod-sidecar-values.yaml", "jupyter-mcp-sidecar", nil, nil, false},
	}
	for _, tt := range tests {
		t.Run(filepath.Base(tt.file), func(t *testing.T) {
			dir := isolate(t)
			for _, k := range []string{config.EnvHubAPIURL, config.EnvHubAPIToken, config.EnvHubServiceName, config.EnvHubServicePrefix} {
				t.Setenv(k, tt.hubEnv[k])
			}
			known := map[string]bool{}
			for k := range flatDefaults {
				known[envName(k)] = true
			}
			for k, v := range hubExampleEnv(t, tt.file, tt.container) {
				if !strings.HasPrefix(k, envPrefix+"_") {
					continue
				}
				if !known[k] {
					t.Errorf("%s names %s, which is no configuration key", tt.file, k)
				}
				if strings.HasSuffix(k, "_FILE") && !strings.HasSuffix(k, "_STATE_FILE") { // a secret's file: stand one in
					v = filepath.Join(dir, strings.ToLower(k))
					if err := os.WriteFile(v, []byte("secret\n"), 0o600); err != nil {
						t.Fatal(err)
					}
				}
				t.Setenv(k, v)
			}
			cfg, _, err := load(source{flags: newRoot(nil, nil).Flags()}, registered())
			if err == nil && tt.check != nil {
				err = tt.check(cfg)
			}
			if err != nil {
				t.Fatalf("%s does not load: %v", tt.file, err)
			}
			if cfg.Hub.Enabled != tt.hub {
				t.Fatalf("hub.enabled = %v, want %v", cfg.Hub.Enabled, tt.hub)
			}
			if cfg.Hub.Enabled {
				if p, err := cfg.Hub.StorePath("alice"); err != nil || !strings.Contains(p, "alice") {
					t.Errorf("store path of alice: %q, %v", p, err)
				}
				if cfg.Hub.PrefixedPath(cfg.Server.Path) != "/services/mcp/mcp" {
					t.Errorf("MCP endpoint %q, want /services/mcp/mcp", cfg.Hub.PrefixedPath(cfg.Server.Path))
				}
			}
		})
	}
}

// `hub log-id` prints the pseudonym a hub-mode sidecar with the same token logs a user
// as; without a token it refuses (each process then keys its own).
func TestHubLogID(t *testing.T) {
	dir := isolate(t)
	t.Setenv(config.EnvHubAPIToken, "")
	tok := filepath.Join(dir, "hub-token")
	if err := os.WriteFile(tok, []byte("the-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	file := writeConfig(t, dir, "hub:\n  enabled: true\n  api_url: http://127.0.0.1:8081/hub/api\n  api_token_file: "+tok+"\n")
	out, _, err := run(t, "hub", "log-id", "--config", file, "alice", "bob")
	if err != nil {
		t.Fatal(err)
	}
	key, err := sidecar.LogIDKey(config.Config{Hub: config.Hub{APIToken: "the-token"}})
	if err != nil {
		t.Fatal(err)
	}
	want := sidecar.LogID(key, "alice") + "\talice\n" + sidecar.LogID(key, "bob") + "\tbob\n"
	if out != want || strings.Contains(sidecar.LogID(key, "alice"), "alice") {
		t.Fatalf("hub log-id printed %q, want %q", out, want)
	}
	noToken := writeConfig(t, dir, "hub:\n  enabled: true\n  api_url: http://127.0.0.1:8081/hub/api\n")
	if _, _, err := run(t, "hub", "log-id", "--config", noToken, "alice"); err == nil || !strings.Contains(err.Error(), "api_token") {
		t.Fatalf("without a token: %v, want an error naming hub.api_token", err)
	}
}
