// Package sidecarcmd is the jupyter-mcp-sidecar command: its cobra commands, viper →
// sidecar.Config, and the extensions every build has (search, outline). The binary's
// main calls Main; so does a custom main that compiles more extensions in
// (docs/EXTENSIONS.md, examples/extension).
package sidecarcmd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/sidecar/config"
)

// Build is what the binary's main knows of itself, set with -ldflags (e.g.
// -X main.version=v1.2.3 -X main.commit=abc123); empty fields come from the build info.
type Build struct {
	Version string
	Commit  string
}

// built is Main's Build.
var built Build

// Main runs the command with os.Args and returns the process's exit status.
func Main(b Build) int {
	built = b
	if err := newRoot(os.Stdout, os.Stderr).ExecuteContext(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, "jupyter-mcp-sidecar: "+err.Error())
		return 1
	}
	return 0
}

// app carries what every command shares: the --config flag and the output streams.
type app struct {
	configFile string
	stdout     io.Writer
	stderr     io.Writer
}

// newRoot builds the command tree writing to stdout and stderr.
func newRoot(stdout, stderr io.Writer) *cobra.Command {
	a := &app{stdout: stdout, stderr: stderr}
	root := &cobra.Command{
		Use:   "jupyter-mcp-sidecar",
		Short: "Serve the live notebooks of a collaborative Jupyter server over MCP",
		Long: `jupyter-mcp-sidecar tails the Y-store that jupyter-collaboration writes (SQLite or
Postgres), decodes its Yjs updates into live notebooks, and serves them to AI agents over
MCP as notebook://{name} resources, with change notifications.

Configuration: defaults < YAML file < JUPYTER_MCP_SIDECAR_* environment < flags.
The file is --config, else the first of:
  ` + strings.Join(searchPath(), "\n  ") + `
Every key has an environment variable: server.token is JUPYTER_MCP_SIDECAR_SERVER_TOKEN.
See configs/sidecar.yaml for every key and its default.`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.PersistentFlags().StringVarP(&a.configFile, "config", "c", "", "YAML configuration file (default: the search path above)")
	for _, f := range logFlags {
		f.define(root.PersistentFlags())
	}
	root.AddCommand(a.serveCmd(), a.inspectCmd(), a.shipCmd(), a.postgresCmd(), a.configCmd(), a.hubCmd(), a.versionCmd())
	return root
}

// daemon runs fn, the body of a long-running command, with its configuration and its
// logger (config.Config.Logger), until SIGTERM or SIGINT ends fn's context.
func (a *app) daemon(ctx context.Context, src source, fn func(context.Context, config.Config) error) error {
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGTERM, os.Interrupt)
	defer stop()
	cfg, _, err := load(src, registered())
	if err != nil {
		return err
	}
	log, err := newLogger(cfg.Log.Level, cfg.Log.Format, a.stderr)
	if err != nil {
		return err
	}
	for _, name := range unknownEnv(os.Environ()) {
		log.Warn("environment variable names no configuration key; ignored", "variable", name)
	}
	cfg.Logger = log
	return fn(ctx, cfg)
}

// newLogger builds the slog logger the configuration asks for, writing to w. Durations
// are written as Go durations ("1.5s") in both formats: JSON would otherwise give bare
// nanoseconds, a number no reader takes for a duration.
func newLogger(level, format string, w io.Writer) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("log.level: %w", err)
	}
	opts := &slog.HandlerOptions{Level: l, ReplaceAttr: durationText}
	switch format {
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	default:
		return nil, errors.New("log.format: must be text or json")
	}
}

// durationText writes a duration attribute as its Go string, "250ms", "1m30s".
func durationText(_ []string, a slog.Attr) slog.Attr {
	if a.Value.Kind() == slog.KindDuration {
		a.Value = slog.StringValue(a.Value.Duration().String())
	}
	return a
}
