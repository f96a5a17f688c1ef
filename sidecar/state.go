package sidecar

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/resources/names"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/sidecar/config"
)

// hubProbeFile is the file whose writing, in a hub state directory, tells whether
// users' bindings can be kept there.
const hubProbeFile = "probe.names.json"

// withStateFile returns cfg with server.state_file set to where use_notebook bindings
// persist (config.Config.StateFiles): the configured file, which must be usable (else
// an error wrapping names.ErrStateFile: serve refuses it), or the first default where a
// file can be written; none: "", the bindings kept in memory, with a warning.
func withStateFile(cfg config.Config, obs config.Obs) (config.Config, error) {
	files, configured := cfg.StateFiles()
	f, err := pickState(files, configured, func(f string) string { return f }, obs)
	if err != nil {
		return cfg, fmt.Errorf("server.state_file: %w", err)
	}
	cfg.Server.StateFile = f
	return cfg, nil
}

// hubStateDir returns where hub users' bindings persist (config.Config.HubStateDirs),
// chosen as withStateFile chooses: "" keeps them in memory.
func hubStateDir(cfg config.Config, obs config.Obs) (string, error) {
	dirs, configured := cfg.HubStateDirs()
	d, err := pickState(dirs, configured, func(d string) string { return filepath.Join(d, hubProbeFile) }, obs)
	if err != nil {
		key := "server.state_file"
		if cfg.Hub.StateDir != "" {
			key = "hub.state_dir"
		}
		return "", fmt.Errorf("%s: %w", key, err)
	}
	return d, nil
}

// pickState returns the first of candidates whose file(candidate) names.Probe finds
// usable. Configured, the one candidate must be; else none usable is "" and a warning.
func pickState(candidates []string, configured bool, file func(string) string, obs config.Obs) (string, error) {
	var tried []string
	for _, c := range candidates {
		err := names.Probe(file(c))
		if err == nil {
			return c, nil
		}
		if configured {
			return "", err
		}
		tried = append(tried, err.Error())
	}
	obs.Logger.Warn("no writable place for the state file: names bound with use_notebook are kept in memory and lost at restart; "+
		"set server.state_file (hub mode: hub.state_dir) to a writable place", "tried", strings.Join(tried, "; "))
	return "", nil
}
