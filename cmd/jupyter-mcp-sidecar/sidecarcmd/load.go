package sidecarcmd

import (
	"cmp"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/pflag"
	"github.com/spf13/viper"
	"go.yaml.in/yaml/v3"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/resources/option"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/sidecar/config"
)

// envPrefix prefixes the environment variable of every key:
// server.token is JUPYTER_MCP_SIDECAR_SERVER_TOKEN.
const envPrefix = "JUPYTER_MCP_SIDECAR"

// configName is the file looked for in each directory of the search path.
const configName = "jupyter-mcp-sidecar.yaml"

// freeForm are the keys whose entries are named by the user, not by the schema; viper
// lower-cases their keys, so decode takes them from the file as written.
var freeForm = []string{
	"extensions", "gate.options", "hooks", "notebooks", "publisher.options", "server.verifier.options",
}

// feedEnvPrefix is the namespace of the Python feed package's
// variables (JUPYTER_MCP_SIDECAR_FEED_URL, …): no key of the sidecar is under "feed", so
// a shell that sets both is not told those are unknown keys.
const feedEnvPrefix = envPrefix + "_FEED_"

// envName is the environment variable that overrides key.
func envName(key string) string {
	return envPrefix + "_" + strings.ToUpper(strings.ReplaceAll(key, ".", "_"))
}

// unknownEnv lists the JUPYTER_MCP_SIDECAR_* variables of environ that name no key,
// sorted: typos that would otherwise be ignored without a word. The feed package's
// (feedEnvPrefix) are not the sidecar's.
func unknownEnv(environ []string) []string {
	known := map[string]bool{}
	for k := range flatDefaults {
		known[envName(k)] = true
	}
	var unknown []string
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(name, envPrefix+"_") && !strings.HasPrefix(name, feedEnvPrefix) && !known[name] {
			unknown = append(unknown, name)
		}
	}
	slices.Sort(unknown)
	return unknown
}

// searchPath lists where a config file is looked for when --config is not given.
func searchPath() []string {
	xdg := os.Getenv("XDG_CONFIG_HOME")
	if xdg == "" {
		if home, err := os.UserHomeDir(); err == nil {
			xdg = filepath.Join(home, ".config")
		}
	}
	files := []string{"./" + configName}
	if xdg != "" {
		files = append(files, filepath.Join(xdg, "jupyter-mcp-sidecar", configName))
	}
	return append(files, filepath.Join("/etc/jupyter-mcp-sidecar", configName))
}

// findConfig returns the first existing file of the search path, or "".
func findConfig() string {
	for _, p := range searchPath() {
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() {
			return p
		}
	}
	return ""
}

// defaults flattens config.Default() into dotted keys; free-form maps are leaves.
func defaults() (map[string]any, error) {
	b, err := yaml.Marshal(config.Default())
	if err != nil {
		return nil, fmt.Errorf("marshal defaults: %w", err)
	}
	var tree map[string]any
	if err := yaml.Unmarshal(b, &tree); err != nil {
		return nil, fmt.Errorf("unmarshal defaults: %w", err)
	}
	flat := map[string]any{}
	var walk func(prefix string, m map[string]any)
	walk = func(prefix string, m map[string]any) {
		for k, v := range m {
			key := prefix + k
			if sub, ok := v.(map[string]any); ok && !slices.Contains(freeForm, key) {
				walk(key+".", sub)
				continue
			}
			flat[key] = v
		}
	}
	walk("", tree)
	return flat, nil
}

// source is where a configuration comes from besides defaults and the environment.
type source struct {
	file  string            // --config, or "" to use the search path
	flags *pflag.FlagSet    // the command's flags
	keys  map[string]string // flag name → config key
}

// configError is an invalid configuration, with the file it came from.
type configError struct {
	file string
	err  error
}

// Error lists the problems, one a line when there are several.
func (e *configError) Error() string {
	head := "invalid configuration"
	if e.file != "" {
		head += " (" + e.file + ")"
	}
	lines := strings.Split(e.err.Error(), "\n")
	if len(lines) == 1 {
		return head + ": " + lines[0]
	}
	return head + ":\n  " + strings.Join(lines, "\n  ")
}

func (e *configError) Unwrap() error { return e.err }

// load builds the configuration: defaults < file < environment < flags (with hub mode
// on, JupyterHub's service environment fills the hub keys left empty), then validates
// it, checks registered names and reads the secret files. It returns the file used ("" for
// none); errors are *configError.
func load(src source, known config.Names) (config.Config, string, error) {
	file := src.file
	if file == "" {
		file = findConfig()
	}
	cfg, err := build(src, file, known)
	if err != nil {
		return cfg, file, &configError{file: file, err: err}
	}
	return cfg, file, nil
}

func build(src source, file string, known config.Names) (config.Config, error) {
	if flatDefaultsErr != nil {
		return config.Config{}, flatDefaultsErr
	}
	v := viper.New()
	for k, val := range flatDefaults {
		v.SetDefault(k, val)
		if err := v.BindEnv(k, envName(k)); err != nil {
			return config.Config{}, fmt.Errorf("bind %s: %w", k, err)
		}
	}
	for name, key := range src.keys {
		if err := v.BindPFlag(key, src.flags.Lookup(name)); err != nil {
			return config.Config{}, fmt.Errorf("bind --%s: %w", name, err)
		}
	}

	var raw map[string]any
	if file != "" {
		b, err := os.ReadFile(file)
		if err != nil {
			return config.Config{}, err
		}
		if err := yaml.Unmarshal(b, &raw); err != nil {
			return config.Config{}, fmt.Errorf("parse YAML: %w", err)
		}
		// viper lower-cases the keys of the map it merges, in place: it merges a copy.
		if err := v.MergeConfigMap(clone(raw)); err != nil {
			return config.Config{}, fmt.Errorf("merge YAML: %w", err)
		}
	}

	cfg, err := decode(v, src, raw)
	if err != nil {
		return cfg, err
	}
	// Hub mode: what JupyterHub gives a service fills the hub keys left empty, and the
	// listener, unless configured, is where the Hub's proxy sends the service's requests.
	cfg.Hub = cfg.Hub.WithServiceEnv(os.Getenv)
	if cfg.Hub.Enabled && !configured(src, raw, "server.listen") {
		addr, err := config.ServiceListen(os.Getenv)
		if err != nil {
			return cfg, err
		}
		cfg.Server.Listen = cmp.Or(addr, cfg.Server.Listen)
	}
	if err := errors.Join(cfg.Validate(), cfg.CheckNames(known)); err != nil {
		return cfg, err
	}
	return cfg, cfg.ResolveSecrets()
}

// configured says whether key was set by the file, the environment or a flag, rather
// than left to its default.
func configured(src source, raw map[string]any, key string) bool {
	if asText(src, key) {
		return true
	}
	_, ok := lookup(raw, key)
	return ok
}

// asText says whether key was set by the environment or a flag: as text.
func asText(src source, key string) bool {
	if os.Getenv(envName(key)) != "" { // viper reads an empty variable as unset
		return true
	}
	for name, k := range src.keys {
		if k == key && src.flags.Changed(name) {
			return true
		}
	}
	return false
}

// decode decodes what v merged into a Config, once, with the one strict decoder
// (resources/option): a string, whether the environment, a flag or the file set it, as
// text parsed as its key takes it (max_connections: "5" is 5, a scalar for a list a
// comma-separated list, as viper's decoding read the file before); the free-form maps
// (plugin options, strict about types) as the file wrote them, since viper lower-cases
// keys.
func decode(v *viper.Viper, src source, raw map[string]any) (config.Config, error) {
	tree := v.AllSettings()
	for key := range flatDefaults {
		if slices.Contains(freeForm, key) && !asText(src, key) {
			if sub, ok := lookup(raw, key); ok {
				set(tree, key, sub)
			}
		} else if s, ok := v.Get(key).(string); ok {
			set(tree, key, option.Text(s))
		}
	}
	var cfg config.Config
	return cfg, option.Decode(tree, &cfg)
}

// set replaces the value of a dotted key in a tree of viper's (keys lower-cased) that
// has it.
func set(tree map[string]any, key string, val any) {
	parents, leaf := "", key
	if i := strings.LastIndexByte(key, '.'); i >= 0 {
		parents, leaf = key[:i], key[i+1:]
	}
	m := tree
	if parents != "" {
		sub, _ := lookup(tree, parents) // nil when missing
		var ok bool
		if m, ok = sub.(map[string]any); !ok {
			return // a section the file gave another type: the decoder says so
		}
	}
	if _, ok := m[leaf]; ok {
		m[leaf] = val
	}
}

// clone copies a YAML tree deeply.
func clone(v map[string]any) map[string]any {
	var walk func(any) any
	walk = func(v any) any {
		switch x := v.(type) {
		case map[string]any:
			out := make(map[string]any, len(x))
			for k, val := range x {
				out[k] = walk(val)
			}
			return out
		case []any:
			out := make([]any, len(x))
			for i, val := range x {
				out[i] = walk(val)
			}
			return out
		}
		return v
	}
	m, _ := walk(v).(map[string]any)
	return m
}

// lookup finds a dotted key in a raw YAML tree, matching keys without case as viper does.
func lookup(tree map[string]any, key string) (any, bool) {
	var cur any = tree
	for part := range strings.SplitSeq(key, ".") {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		found := false
		for k, val := range m {
			if strings.EqualFold(k, part) {
				cur, found = val, true
				break
			}
		}
		if !found {
			return nil, false
		}
	}
	return cur, true
}
