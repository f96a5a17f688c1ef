package sidecarcmd

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"

	"github.com/mattn/go-isatty"
	"github.com/spf13/cobra"
	"golang.org/x/sync/errgroup"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/sidecar"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/sidecar/auth"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/sidecar/config"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/sidecar/demo"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/sidecar/transport"
)

func (a *app) serveCmd() *cobra.Command {
	var demoMode bool
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Tail the Y-store and serve its notebooks over MCP (the daemon)",
		Long: `serve tails the configured Y-store, keeps every notebook live, and serves them over MCP
(streamable HTTP or stdio) until SIGTERM or SIGINT, then drains within server.drain_timeout.

With no configuration it tails .jupyter_ystore.db in the working directory and listens on
127.0.0.1:4040/mcp. Without a token (server.token, server.token_file or
JUPYTER_MCP_SIDECAR_SERVER_TOKEN) and without server.insecure_no_auth, a random token is
generated and written to a file readable by this user only, beside the state file
(` + generatedTokenName + `); the log names the file, never the token. On a terminal it
is printed too.

--demo creates a throwaway store in a temporary directory holding demo.ipynb, which a
writer keeps editing, binds it to the name "demo" and serves it without a token on a
loopback address: any MCP client can connect at once.`,
		Args: cobra.NoArgs,
	}
	cmd.Flags().BoolVar(&demoMode, "demo", false, "serve a throwaway store with a notebook that keeps changing (no token, loopback only)")
	src := a.withFlags(cmd, storeFlags, serverFlags)
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		return a.daemon(cmd.Context(), src(), func(ctx context.Context, cfg config.Config) (err error) {
			if demoMode {
				return a.serveDemo(ctx, cfg)
			}
			if needsToken(cfg) {
				if cfg.Server.Token, err = a.generateToken(cfg); err != nil {
					return err
				}
			}
			return sidecar.Run(ctx, cfg, sidecar.WithVersion(versionString()))
		})
	}
	return cmd
}

// needsToken reports whether single mode's default verifier would have no token to
// compare with; hub mode admits the Hub's tokens (its "jupyterhub" verifier) and uses
// none of server.token.
func needsToken(cfg config.Config) bool {
	s := cfg.Server
	return !cfg.Hub.Enabled && s.Transport == transport.KindHTTP && !s.InsecureNoAuth && s.Token == "" && s.Verifier.Name == auth.Default
}

// generatedTokenName is the file, beside the state file, a generated token is written to.
const generatedTokenName = ".jupyter-mcp-sidecar-token"

// generateToken makes a random token, writes it to the file beside the state file (the
// first of config.StateFiles whose directory takes it; mode 0600, replaced atomically)
// and logs that file's path. The token itself goes only to a terminal: never into a log
// stream, where a collector would keep it and a JSON parser would trip over a plain line.
func (a *app) generateToken(cfg config.Config) (string, error) {
	token, err := randomToken()
	if err != nil {
		return "", err
	}
	files, _ := cfg.StateFiles()
	var errs []error
	for _, f := range files {
		path := filepath.Join(filepath.Dir(f), generatedTokenName)
		if err := writeSecret(path, token+"\n"); err != nil {
			errs = append(errs, err)
			continue
		}
		cfg.Logger.Warn("no token configured: generated one; clients send Authorization: Bearer <the file's content>", "token_file", path)
		if isTerminal(a.stderr) {
			fmt.Fprintf(a.stderr, "No token configured; clients must send this one (also in %s):\n  Authorization: Bearer %s\n", path, token)
		}
		return token, nil
	}
	return "", fmt.Errorf("no token configured, and nowhere to write a generated one (set server.token_file): %w", errors.Join(errs...))
}

// writeSecret replaces path with content, readable and writable by this user only.
func writeSecret(path, content string) error {
	f, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".tmp-*") // mode 0600
	if err != nil {
		return err
	}
	defer os.Remove(f.Name()) // after the rename: nothing
	if _, err := f.WriteString(content); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}

// isTerminal reports whether w is a terminal, where a person (not a log collector) reads.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && isatty.IsTerminal(f.Fd())
}

func randomToken() (string, error) {
	b := make([]byte, 24)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("generate token: %w", err)
	}
	return hex.EncodeToString(b), nil
}

// serveDemo runs the sidecar over a throwaway store that a demo.Writer keeps editing.
func (a *app) serveDemo(ctx context.Context, cfg config.Config) error {
	if cfg.Server.Transport == transport.KindHTTP && !isLoopback(cfg.Server.Listen) {
		return fmt.Errorf("server.listen: --demo serves without a token, so only on a loopback address, got %q", cfg.Server.Listen)
	}
	dir, err := os.MkdirTemp("", "jupyter-mcp-sidecar-demo-")
	if err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	defer os.RemoveAll(dir)
	w := demo.New(demo.Options{Dir: dir, Logger: cfg.Logger})
	if err := w.Create(ctx); err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	defer w.Close()
	cfg = demoConfig(cfg, w, dir)
	if cfg.Server.Transport == transport.KindHTTP {
		printDemoHelp(a.stderr, cfg, dir)
	}
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	g, ctx := errgroup.WithContext(ctx)
	g.Go(func() error { return w.Run(ctx) })
	g.Go(func() error {
		defer stop() // the writer stops with the server, whatever ended it
		return sidecar.Run(ctx, cfg, sidecar.WithVersion(versionString()))
	})
	return g.Wait()
}

// demoConfig points cfg at the demo writer's store and binds the name "demo".
func demoConfig(cfg config.Config, w *demo.Writer, dir string) config.Config {
	cfg.Store.Backend = config.BackendSQLite
	cfg.Store.SQLite.Path = w.StorePath()
	cfg.FileID.DBPath = w.FileIDDBPath()
	cfg.FileID.RootDir = dir
	cfg.FileID.API = config.FileIDAPI{}
	cfg.Server.StateFile = filepath.Join(dir, "names.json")
	cfg.Server.InsecureNoAuth = true
	cfg.Notebooks = map[string]string{"demo": demo.NotebookPath}
	return cfg
}

func isLoopback(listen string) bool {
	host, _, err := net.SplitHostPort(listen)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func printDemoHelp(w io.Writer, cfg config.Config, dir string) {
	url := "http://" + cfg.Server.Listen + cfg.Server.Path
	fmt.Fprintf(w, `
jupyter-mcp-sidecar demo: a notebook that keeps changing, served over MCP.

  MCP endpoint   %s   (streamable HTTP, no token: demo mode, loopback only)
  resources      notebook://demo
                 notebook://demo/cells/{cell_id}
                 notebook://demo/cells/{cell_id}/outputs/{index}
  try it         npx @modelcontextprotocol/inspector
                 then connect to %s with transport "Streamable HTTP",
                 read notebook://demo and subscribe to it: updates arrive as it is edited.
  store          %s (deleted on exit)
  health         http://%s/healthz  /readyz  /metrics

Stop with Ctrl-C.

`, url, url, dir, cfg.Server.Listen)
}
