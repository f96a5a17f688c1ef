package sidecarcmd

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/sidecar/config"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore/postgres/pgtest"
)

// isolate keeps the search path and the environment from leaking into a test.
func isolate(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	t.Setenv("XDG_CONFIG_HOME", dir)
	for _, kv := range os.Environ() {
		if name, _, _ := strings.Cut(kv, "="); strings.HasPrefix(name, envPrefix+"_") {
			t.Setenv(name, "")
			os.Unsetenv(name)
		}
	}
	return dir
}

func writeConfig(t *testing.T, dir, body string) string {
	t.Helper()
	p := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// run executes the command line and returns stdout, stderr and the error.
func run(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	var out, errb bytes.Buffer
	root := newRoot(&out, &errb)
	root.SetArgs(args)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := root.ExecuteContext(ctx)
	return out.String(), errb.String(), err
}

// check runs `config check` and decodes the printed configuration.
func check(t *testing.T, args ...string) (config.Config, string, error) {
	t.Helper()
	out, _, err := run(t, append([]string{"config", "check"}, args...)...)
	var cfg config.Config
	if err == nil {
		if yerr := yaml.Unmarshal([]byte(out), &cfg); yerr != nil {
			t.Fatalf("config check printed invalid YAML: %v\n%s", yerr, out)
		}
	}
	return cfg, out, err
}

// durationAdvice ends every invalid duration's message, from a file, the environment or
// a plugin's options alike.
const durationAdvice = "use a number with a unit, such as 250ms, 5s or 1m"

func TestConfigCheckRejects(t *testing.T) {
	tests := []struct {
		name string
		yaml string
		env  map[string]string
		args []string
		want []string // substrings of the error
	}{
		{name: "unknown top-level key", yaml: "bogus: 1\n", want: []string{"bogus: unknown key (known: changes, extensions, fileid, gate, hooks, hub, log, notebooks, notifications, ondisk, publisher, server, ship, store)"}},
		{name: "unknown nested key", yaml: "server:\n  tokn: x\n  listen: 127.0.0.1:1\n", want: []string{"server.tokn: unknown key"}},
		{name: "unknown deep key", yaml: "store:\n  sqlite:\n    pth: x\n    fsnotfy: true\n", want: []string{"store.sqlite.pth: unknown key (known: chunk_rows, fsnotify, path, poll_interval)", "store.sqlite.fsnotfy: unknown key"}},
		{name: "unknown key next to options", yaml: "publisher:\n  options: {anything: 1}\n  nme: webhook\n", want: []string{"publisher.nme: unknown key"}},
		{name: "bare number duration", yaml: "store:\n  sqlite:\n    poll_interval: 5\n", want: []string{"store.sqlite.poll_interval", "invalid duration 5: " + durationAdvice}},
		{name: "bad duration", yaml: "notifications:\n  debounce: 5 parsecs\n", want: []string{"notifications.debounce", `invalid duration "5 parsecs": ` + durationAdvice}},
		{name: "bare number duration in options", yaml: "extensions:\n  search: {timeout: 5}\n", want: []string{`build extension "search": timeout: invalid duration 5: ` + durationAdvice}},
		{name: "negative duration", yaml: "store:\n  lag_threshold: -1s\n", want: []string{"store.lag_threshold: must be > 0"}},
		{name: "wrong type scalar", yaml: "server:\n  max_request_bytes: lots\n", want: []string{"server.max_request_bytes"}},
		// The transport's own bound, checked once, by the transport, and named by its key.
		{name: "request limit under the transport's", yaml: "server:\n  max_request_bytes: 100\n", want: []string{"server.max_request_bytes: must be at least 1024, got 100"}},
		{name: "wrong type section", yaml: "server: 3\n", want: []string{"server"}},
		// Keys other libraries validate (versions, ondisk, auth), named by config check.
		{name: "versions bound", yaml: "changes:\n  max_versions: 0\n", want: []string{"changes.max_versions: must be from 1 to 100000, got 0"}},
		{name: "ondisk bound", yaml: "ondisk:\n  enabled: true\n  max_watched_dirs: 0\n", want: []string{"ondisk.max_watched_dirs: must be > 0, got 0"}},
		{name: "allowed origin", yaml: "server:\n  allowed_origins: [\"https://ok.example\", nope]\n", want: []string{`server.allowed_origins[1]: must be * or scheme://host[:port], got "nope"`}},
		{name: "wrong type bool", yaml: "server:\n  insecure_no_auth: maybe\n", want: []string{"server.insecure_no_auth"}},
		{name: "number for string", yaml: "server:\n  listen: 4040\n", want: []string{"server.listen"}},
		{name: "string not a number", yaml: "server:\n  max_connections: \"five\"\n", want: []string{`server.max_connections: "five" is not a int`}},
		{name: "sqlite store missing", yaml: "store:\n  sqlite:\n    path: \"\"\n", want: []string{"store.sqlite.path: must not be empty"}},
		{name: "postgres store missing", yaml: "store:\n  backend: postgres\n", want: []string{"store.postgres.dsn: must be set"}},
		{name: "unknown backend", yaml: "store:\n  backend: redis\n", want: []string{"store.backend:"}},
		{name: "unknown publisher", yaml: "publisher:\n  name: kafka\n", want: []string{`publisher.name: unknown name "kafka"`}},
		{name: "unknown gate", yaml: "gate:\n  name: bouncer\n", want: []string{`gate.name: unknown name "bouncer"`}},
		{name: "unknown verifier", yaml: "server:\n  verifier: {name: hub}\n", want: []string{`server.verifier.name: unknown name "hub"`}},
		{name: "unknown extension", yaml: "extensions:\n  nope: {}\n", want: []string{`extensions.nope: unknown name "nope"`}},
		{name: "bad notebook name", yaml: "notebooks:\n  \"a b\": x.ipynb\n", want: []string{"notebooks.a b: invalid notebook name"}},
		// What serve tries and refuses: a state file where none can be written (as root
		// too: /dev/null is not a directory; a read-only mount is scripts/image-check.sh's).
		{name: "state file not writable", yaml: "server: {state_file: /dev/null/names.json}\n",
			want: []string{"server.state_file: state file is not usable: /dev/null/names.json"}},
		{name: "hub state dir not writable", yaml: "hub: {enabled: true, api_url: http://127.0.0.1:9/hub/api, api_token: t, state_dir: /dev/null/hub}\n",
			want: []string{"hub.state_dir: state file is not usable: /dev/null/hub/"}},
		{name: "secret file missing", yaml: "server:\n  token_file: /nonexistent/token\n", want: []string{"server.token_file: reading secret"}},
		{name: "bad env value", env: map[string]string{"JUPYTER_MCP_SIDECAR_STORE_LAG_THRESHOLD": "soon"}, want: []string{"store.lag_threshold", `invalid duration "soon": ` + durationAdvice}},
		{name: "bare number env value", env: map[string]string{"JUPYTER_MCP_SIDECAR_STORE_LAG_THRESHOLD": "5"}, want: []string{"store.lag_threshold", `invalid duration "5": ` + durationAdvice}},
		{name: "bad env bool", env: map[string]string{"JUPYTER_MCP_SIDECAR_STORE_SQLITE_FSNOTIFY": "perhaps"}, want: []string{"store.sqlite.fsnotify"}},
		{name: "bad flag value", args: []string{"--transport", "carrier-pigeon"}, want: []string{"server.transport: must be one of http, stdio"}},
		{name: "all problems at once", yaml: "log: {level: loud}\nserver: {path: mcp}\n", want: []string{"log.level:", "server.path:"}},
		{name: "invalid yaml", yaml: "server: [\n", want: []string{"parse YAML"}},
		{name: "gate without its options", yaml: "gate: {name: withhold}\n", want: []string{"mcp server:", `option "templates"`}},
		{name: "publisher without its options", yaml: "publisher: {name: webhook}\n", want: []string{"mcp server:", "webhook"}},
		{name: "publisher option typo", yaml: "publisher:\n  name: webhook\n  options: {url: http://127.0.0.1:9/hook, max_retry: 3}\n",
			want: []string{`build publisher "webhook": max_retry: unknown key (known: backoff, headers, max_retries,`}},
		{name: "pgnotify option typo", yaml: "publisher:\n  name: pgnotify\n  options: {dsn: postgres://db/x, chanel: x}\n",
			want: []string{`build publisher "pgnotify": chanel: unknown key (known: `}},
		{name: "gate option typo", yaml: "gate:\n  name: withhold\n  options: {templates: [], template: x}\n",
			want: []string{`build resource gate "withhold": template: unknown key (known: templates)`}},
		{name: "extension option typo", yaml: "extensions:\n  search: {timout: 1s}\n", want: []string{`build extension "search": timout: unknown key (known: timeout)`}},
		{name: "hook option typo", yaml: "hooks:\n  audit: {levle: warn}\n", want: []string{`build hook "audit": levle: unknown key (known: level)`}},
		{name: "verifier option typo", yaml: "server:\n  token: x\n  verifier: {name: static, options: {tokn: y}}\n",
			want: []string{`build token verifier "static": tokn: unknown key (known: none)`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := isolate(t)
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			args := tt.args
			if tt.yaml != "" {
				args = append(args, "--config", writeConfig(t, dir, tt.yaml))
			}
			_, out, err := check(t, args...)
			if err == nil {
				t.Fatalf("config check accepted it:\n%s", out)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

// TestConfigCheckLogsLikeServe checks that the lines config check logs while it builds
// the plugins (the extensions' "extension active") follow log.format, as serve's do.
func TestConfigCheckLogsLikeServe(t *testing.T) {
	for _, format := range []string{"text", "json"} {
		t.Run(format, func(t *testing.T) {
			dir := isolate(t)
			_, stderr, err := run(t, "config", "check", "--config", writeConfig(t, dir, "log: {format: "+format+"}\n"))
			if err != nil {
				t.Fatal(err)
			}
			lines := strings.Split(strings.TrimSpace(stderr), "\n")
			for _, line := range lines {
				var rec map[string]any
				isJSON := json.Unmarshal([]byte(line), &rec) == nil
				if isJSON != (format == "json") || !isJSON && !strings.HasPrefix(line, "time=") {
					t.Errorf("a line not in log.format %s: %q", format, line)
				}
			}
			if !strings.Contains(stderr, "extension active") {
				t.Fatalf("no extension lines in config check's log:\n%s", stderr)
			}
		})
	}
}

// TestMalformedYAMLSaidOnce checks that a file that does not parse is reported once.
func TestMalformedYAMLSaidOnce(t *testing.T) {
	dir := isolate(t)
	_, _, err := check(t, "--config", writeConfig(t, dir, "server: [\n"))
	if err == nil || strings.Count(err.Error(), "did not find expected node content") != 1 {
		t.Fatalf("error = %v, want the parse error once", err)
	}
}

func TestConfigCheckDefaults(t *testing.T) {
	isolate(t)
	cfg, out, err := check(t)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(out, "# configuration file: none (defaults)\n") {
		t.Errorf("output does not start with the file comment:\n%s", out)
	}
	if !reflect.DeepEqual(cfg, config.Default()) {
		t.Fatalf("printed defaults differ:\n got %+v\nwant %+v", cfg, config.Default())
	}
}

// The shipped, commented configuration documents exactly the defaults.
func TestShippedConfigIsDefault(t *testing.T) {
	isolate(t)
	cfg, _, err := load(source{file: "../../../configs/sidecar.yaml", flags: newRoot(nil, nil).Flags()}, registered())
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(cfg, config.Default()) {
		t.Fatalf("configs/sidecar.yaml differs from config.Default():\n got %+v\nwant %+v", cfg, config.Default())
	}
}

func TestPrecedence(t *testing.T) {
	dir := isolate(t)
	file := writeConfig(t, dir, `
server:
  listen: 127.0.0.1:1111
  path: /from-file
  metrics_listen: 127.0.0.1:2222
store:
  sqlite:
    path: /from/file.db
`)
	t.Setenv("JUPYTER_MCP_SIDECAR_SERVER_LISTEN", "127.0.0.1:3333")                 // env beats file
	t.Setenv("JUPYTER_MCP_SIDECAR_STORE_SQLITE_POLL_INTERVAL", "3s")                // env, key not in file
	t.Setenv("JUPYTER_MCP_SIDECAR_SERVER_INSECURE_NO_AUTH", "true")                 // env bool
	t.Setenv("JUPYTER_MCP_SIDECAR_SERVER_MAX_REQUEST_BYTES", "1024")                // env int
	t.Setenv("JUPYTER_MCP_SIDECAR_SERVER_ALLOWED_ORIGINS", "http://a:1,http://b:2") // env list
	t.Setenv("JUPYTER_MCP_SIDECAR_STORE_SQLITE_PATH", "/from/env.db")               // flag beats env
	cfg, _, err := check(t, "--config", file, "--store", "/from/flag.db", "--log-level", "debug")
	if err != nil {
		t.Fatal(err)
	}
	want := config.Default()
	want.Log.Level = "debug"
	want.Server.Listen = "127.0.0.1:3333"
	want.Server.Path = "/from-file"
	want.Server.MetricsListen = "127.0.0.1:2222"
	want.Server.InsecureNoAuth = true
	want.Server.MaxRequestBytes = 1024
	want.Server.AllowedOrigins = []string{"http://a:1", "http://b:2"}
	want.Store.SQLite.Path = "/from/flag.db"
	want.Store.SQLite.PollInterval = 3 * time.Second
	if !reflect.DeepEqual(cfg, want) {
		t.Fatalf("effective config:\n got %+v\nwant %+v", cfg, want)
	}
}

// TestFileStringsReadAsText checks that a string in the file is read as its key's type,
// as the environment's are (and as the file was read before one decoder read it all):
// a quoted number, a quoted boolean, a scalar for a list. Plugin options stay strict.
func TestFileStringsReadAsText(t *testing.T) {
	dir := isolate(t)
	cfg, _, err := check(t, "--config", writeConfig(t, dir, `
server:
  max_connections: "5"
  insecure_no_auth: "true"
  allowed_origins: http://a:1,http://b:2
store:
  lag_threshold: "3s"
`))
	if err != nil {
		t.Fatal(err)
	}
	want := config.Default()
	want.Server.MaxConnections = 5
	want.Server.InsecureNoAuth = true
	want.Server.AllowedOrigins = []string{"http://a:1", "http://b:2"}
	want.Store.LagThreshold = 3 * time.Second
	if !reflect.DeepEqual(cfg, want) {
		t.Fatalf("effective config:\n got %+v\nwant %+v", cfg, want)
	}
	_, _, err = check(t, "--config", writeConfig(t, dir, "publisher:\n  name: webhook\n  options: {url: http://127.0.0.1:9/hook, max_retries: \"3\"}\n"))
	if err == nil || !strings.Contains(err.Error(), `build publisher "webhook": max_retries: `) {
		t.Fatalf("a string for a number in a plugin's options: %v", err)
	}
}

func TestSearchPath(t *testing.T) {
	dir := isolate(t)
	sub := filepath.Join(dir, "jupyter-mcp-sidecar")
	if err := os.MkdirAll(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(sub, configName), []byte("server: {path: /found}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, out, err := check(t)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Server.Path != "/found" || !strings.Contains(out, filepath.Join(sub, configName)) {
		t.Fatalf("config in $XDG_CONFIG_HOME/jupyter-mcp-sidecar not used:\n%s", out)
	}
	wd := t.TempDir()
	t.Chdir(wd)
	if err := os.WriteFile(configName, []byte("server: {path: /here}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if cfg, out, err := check(t); err != nil || cfg.Server.Path != "/here" {
		t.Fatalf("./%s not preferred: %v\n%s", configName, err, out)
	}
	if _, _, err := check(t, "--config", filepath.Join(dir, "missing.yaml")); err == nil || !strings.Contains(err.Error(), "missing.yaml") {
		t.Fatalf("missing --config file: %v", err)
	}
}

func TestFreeFormKeepsCase(t *testing.T) {
	dir := isolate(t)
	file := writeConfig(t, dir, `
notebooks:
  MyAnalysis: work/Analysis.ipynb
publisher:
  name: webhook
  options: {url: "http://hook", headers: {HeaderName: X-Token}}
`)
	cfg, _, err := check(t, "--config", file)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Notebooks["MyAnalysis"] != "work/Analysis.ipynb" {
		t.Errorf("notebooks = %v", cfg.Notebooks)
	}
	opts := cfg.Publisher.Options
	if h, _ := opts["headers"].(map[string]any); h["HeaderName"] != "X-Token" {
		t.Errorf("publisher options = %v", opts)
	}
}

func TestSecretsMasked(t *testing.T) {
	dir := isolate(t)
	tokenFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokenFile, []byte("file-token-123\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	file := writeConfig(t, dir, `
server:
  token_file: `+tokenFile+`
fileid:
  api: {url: "http://127.0.0.1:8888", token: api-token-456}
store:
  backend: postgres
  postgres: {dsn: "postgres://u:pg-pass-789@db/y"}
publisher:
  name: webhook
  options: {url: "http://hook", headers: {X-Api-Key: hook-secret-000}}
`)
	t.Setenv("JUPYTER_MCP_SIDECAR_SHIP_POSTGRES_DSN", "host=db password=ship-pass-111")
	cfg, out, err := check(t, "--config", file)
	if err != nil {
		t.Fatal(err)
	}
	for _, secret := range []string{"file-token-123", "api-token-456", "pg-pass-789", "hook-secret-000", "ship-pass-111"} {
		if strings.Contains(out, secret) {
			t.Errorf("config check printed secret %q:\n%s", secret, out)
		}
	}
	if cfg.Server.Token != config.Mask || cfg.Store.Postgres.DSN != "postgres://u:xxxxx@db/y" || cfg.Server.TokenFile != tokenFile {
		t.Errorf("masked config = %+v", cfg)
	}
}

func TestVersion(t *testing.T) {
	out, _, err := run(t, "version")
	if err != nil || !strings.HasPrefix(out, "jupyter-mcp-sidecar ") || !strings.Contains(out, "go1.") {
		t.Fatalf("version = %q, %v", out, err)
	}
	// The test binary, like go run's, has no VCS information: it says so, not "(devel)".
	if strings.Contains(out, "(devel)") || strings.Contains(out, "commit unknown") {
		t.Fatalf("version = %q: a placeholder for what the build did not record", out)
	}
}

// TestReadStamp reads the version and commit of every kind of build.
func TestReadStamp(t *testing.T) {
	vcs := []debug.BuildSetting{{Key: "vcs", Value: "git"}, {Key: "vcs.revision", Value: "59fc1336a1b2"}, {Key: "vcs.modified", Value: "true"}}
	tests := []struct {
		name    string
		b       Build
		info    *debug.BuildInfo
		version string
		source  string
	}{
		{"ldflags win", Build{Version: "v1.2.3", Commit: "abc"}, &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: vcs}, "v1.2.3", "commit abc"},
		{"go build in a checkout", Build{}, &debug.BuildInfo{Main: debug.Module{Version: "v0.0.0-20261201000000-59fc1336a1b2+dirty"}, Settings: vcs},
			"v0.0.0-20261201000000-59fc1336a1b2+dirty", "commit 59fc1336a1b2-dirty"},
		{"go run, -buildvcs=false", Build{}, &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}, "devel", "no commit recorded: built without VCS information; stamp it with scripts/build.sh"},
		{"go install module@version", Build{}, &debug.BuildInfo{Main: debug.Module{Version: "v1.4.0", Sum: "h1:xyz="}}, "v1.4.0", "module h1:xyz="},
		{"no build info", Build{}, nil, "devel", "no commit recorded: built without VCS information; stamp it with scripts/build.sh"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := readStamp(tt.b, tt.info)
			if s.version != tt.version || s.source() != tt.source {
				t.Fatalf("readStamp = %q, %q; want %q, %q", s.version, s.source(), tt.version, tt.source)
			}
		})
	}
}

func TestHelp(t *testing.T) {
	for _, args := range [][]string{
		{"--help"}, {"serve", "--help"}, {"inspect", "--help"}, {"ship", "--help"},
		{"postgres", "init", "--help"}, {"config", "check", "--help"}, {"version", "--help"},
	} {
		out, _, err := run(t, args...)
		if err != nil || !strings.Contains(out, "Usage:") {
			t.Errorf("%v: %v\n%s", args, err, out)
		}
	}
	out, _, _ := run(t, "serve", "--help")
	for _, flag := range []string{"--store string", "--listen string", "--token-file", "--demo", "--log-level string", `(default "127.0.0.1:4040")`} {
		if !strings.Contains(out, flag) {
			t.Errorf("serve --help lacks %q", flag)
		}
	}
}

func TestDemoRefusesPublicListen(t *testing.T) {
	isolate(t)
	_, _, err := run(t, "serve", "--demo", "--listen", "0.0.0.0:4040")
	if err == nil || !strings.Contains(err.Error(), "server.listen: --demo serves without a token, so only on a loopback address") {
		t.Fatalf("serve --demo on 0.0.0.0 = %v", err)
	}
}

func TestPostgresInitNeedsDSN(t *testing.T) {
	isolate(t)
	_, _, err := run(t, "postgres", "init")
	if err == nil || !strings.Contains(err.Error(), "store.postgres.dsn: must be set") {
		t.Fatalf("postgres init without dsn = %v", err)
	}
}

func TestShipNeedsDSN(t *testing.T) {
	isolate(t)
	_, _, err := run(t, "ship")
	if err == nil || !strings.Contains(err.Error(), "ship.postgres.dsn: must be set") {
		t.Fatalf("ship without dsn = %v", err)
	}
}

// The deployment examples and the README name only environment variables that exist.
func TestExamplesUseRealKeys(t *testing.T) {
	known := map[string]bool{}
	for k := range flatDefaults {
		known[envName(k)] = true
	}
	re := regexp.MustCompile(envPrefix + `_[A-Z0-9_]+`)
	for _, f := range []string{"../../../README.md", "../../../Dockerfile", "../../../configs/jupyter-mcp-sidecar.service", "../../../configs/k8s/pod.yaml", "../../../configs/k8s/z2jh/pod-sidecar-values.yaml", "../../../configs/sidecar.yaml"} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasSuffix(f, ".yaml") {
			dec := yaml.NewDecoder(bytes.NewReader(b))
			for {
				var doc any
				if err := dec.Decode(&doc); errors.Is(err, io.EOF) {
					break
				} else if err != nil {
					t.Fatalf("%s: %v", f, err)
				}
			}
		}
		for _, name := range re.FindAllString(string(b), -1) {
			if !known[name] && name != envPrefix+"_" && !strings.HasPrefix(name, feedEnvPrefix) { // the feed package's are its own
				t.Errorf("%s names %s, which is no configuration key", f, name)
			}
		}
	}
}

func TestUnknownEnvReported(t *testing.T) {
	isolate(t)
	t.Setenv("JUPYTER_MCP_SIDECAR_SERVER_TOKN", "x")
	t.Setenv("JUPYTER_MCP_SIDECAR_SERVER_TOKEN", "y")
	_, out, err := check(t)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "# ignored: JUPYTER_MCP_SIDECAR_SERVER_TOKN names no configuration key") ||
		strings.Contains(out, "ignored: JUPYTER_MCP_SIDECAR_SERVER_TOKEN ") {
		t.Fatalf("config check output:\n%s", out)
	}
}

// TestTestVariablesAreNoKeys: the variables the test suite sets for its PostgreSQL
// clusters are outside the daemon's prefix, so a binary started by the tests (or an
// operator's shell that sourced .ci/postgres.sh) warns about none of them.
func TestTestVariablesAreNoKeys(t *testing.T) {
	var env []string
	for _, name := range []string{pgtest.DSNEnv, pgtest.CrashDSNEnv, pgtest.CrashCtlEnv} {
		if strings.HasPrefix(name, envPrefix+"_") {
			t.Errorf("%s has the configuration prefix %s_", name, envPrefix)
		}
		env = append(env, name+"=x")
	}
	if got := unknownEnv(env); len(got) > 0 {
		t.Fatalf("reported as unknown keys: %v", got)
	}
}

// Durations are logged as Go durations in both formats, never as bare nanoseconds.
func TestLogDurations(t *testing.T) {
	for _, tc := range []struct{ format, want string }{
		{"json", `"wait":"1.5s"`},
		{"text", `wait=1.5s`},
	} {
		var b bytes.Buffer
		log, err := newLogger("info", tc.format, &b)
		if err != nil {
			t.Fatal(err)
		}
		log.Info("m", "wait", 1500*time.Millisecond)
		if !strings.Contains(b.String(), tc.want) {
			t.Errorf("%s: %q, want %s", tc.format, b.String(), tc.want)
		}
	}
}

// The variables of the Python package jupyter_mcp_sidecar_feed share the prefix; a
// shell that sets them for jupyter-mcp-server beside the sidecar is not told they are
// unknown keys, and no key of the sidecar takes their namespace.
func TestFeedVariablesAreNoUnknownKeys(t *testing.T) {
	src, err := os.ReadFile(filepath.Join("..", "..", "..", "jupyter_mcp_sidecar_feed", "src", "jupyter_mcp_sidecar_feed", "extension.py"))
	if err != nil {
		t.Fatal(err)
	}
	names := regexp.MustCompile(`JUPYTER_MCP_SIDECAR_FEED_[A-Z_]+`).FindAllString(string(src), -1)
	if len(names) < 3 {
		t.Fatalf("the feed package names %v; want its URL, TOKEN and TOKEN_FILE variables", names)
	}
	var env []string
	for _, n := range names {
		env = append(env, n+"=x")
	}
	if got := unknownEnv(env); len(got) > 0 {
		t.Fatalf("reported as unknown keys: %v", got)
	}
	for k := range flatDefaults {
		if strings.HasPrefix(envName(k), feedEnvPrefix) {
			t.Errorf("key %s is in the feed package's namespace %s", k, feedEnvPrefix)
		}
	}
}
