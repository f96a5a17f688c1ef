package sidecar

import (
	"bytes"
	"errors"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/resources/names"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/sidecar/config"
)

// Where bindings persist: the configured place or an error; else $STATE_DIRECTORY, then
// beside the store, the first where a file can be written; else in memory, with a
// warning. (As root nothing refuses a write but a read-only mount: /dev/null, which is
// no directory, stands for a place where nothing can be written.)
func TestStatePlaces(t *testing.T) {
	tmp := t.TempDir()
	store := filepath.Join(tmp, "srv", ".jupyter_ystore.db")
	state := filepath.Join(tmp, "state")
	const nowhere = "/dev/null/x"
	tests := []struct {
		name, stateDirectory, storePath, stateFile, hubDir string
		want, wantHub                                      string // "": in memory
		err, hubErr                                        string
	}{
		{name: "beside the store", storePath: store,
			want: filepath.Join(tmp, "srv", ".jupyter-mcp-sidecar-names.json"), wantHub: "."},
		{name: "systemd's StateDirectory", stateDirectory: state + ":/other", storePath: store,
			want: filepath.Join(state, "names.json"), wantHub: state},
		{name: "StateDirectory unusable, beside the store", stateDirectory: nowhere, storePath: store,
			want: filepath.Join(tmp, "srv", ".jupyter-mcp-sidecar-names.json"), wantHub: "."},
		{name: "read-only store, no StateDirectory: in memory", storePath: nowhere + "/.jupyter_ystore.db", want: "", wantHub: "."},
		{name: "configured", stateDirectory: state, storePath: nowhere + "/s.db", stateFile: filepath.Join(tmp, "mine", "n.json"),
			want: filepath.Join(tmp, "mine", "n.json"), wantHub: filepath.Join(tmp, "mine")},
		{name: "configured and unusable", stateDirectory: state, storePath: store, stateFile: nowhere + "/n.json",
			err: "server.state_file: " + names.ErrStateFile.Error(), hubErr: "server.state_file: " + names.ErrStateFile.Error()},
		{name: "hub.state_dir unusable", storePath: store, hubDir: nowhere,
			want: filepath.Join(tmp, "srv", ".jupyter-mcp-sidecar-names.json"), hubErr: "hub.state_dir: " + names.ErrStateFile.Error()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("STATE_DIRECTORY", tt.stateDirectory)
			cfg := config.Default()
			cfg.Store.SQLite.Path, cfg.Server.StateFile, cfg.Hub.StateDir = tt.storePath, tt.stateFile, tt.hubDir
			var logs bytes.Buffer
			obs := config.Obs{Logger: slog.New(slog.NewTextHandler(&logs, nil))}
			got, err := withStateFile(cfg, obs)
			if tt.err != "" {
				if err == nil || !errors.Is(err, names.ErrStateFile) || !strings.HasPrefix(err.Error(), tt.err) {
					t.Fatalf("withStateFile = %q, %v; want an error %q", got.Server.StateFile, err, tt.err)
				}
			} else if err != nil || got.Server.StateFile != tt.want {
				t.Fatalf("withStateFile = %q, %v; want %q", got.Server.StateFile, err, tt.want)
			}
			if warned := strings.Contains(logs.String(), "kept in memory"); warned != (tt.err == "" && tt.want == "") {
				t.Errorf("warned of bindings in memory: %v; log:\n%s", warned, logs.String())
			}
			dir, err := hubStateDir(cfg, obs)
			if tt.hubErr != "" {
				if err == nil || !errors.Is(err, names.ErrStateFile) || !strings.HasPrefix(err.Error(), tt.hubErr) {
					t.Fatalf("hubStateDir = %q, %v; want an error %q", dir, err, tt.hubErr)
				}
			} else if err != nil || dir != tt.wantHub {
				t.Fatalf("hubStateDir = %q, %v; want %q", dir, err, tt.wantHub)
			}
		})
	}
}
