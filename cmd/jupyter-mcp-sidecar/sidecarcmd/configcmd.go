package sidecarcmd

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"
	"go.yaml.in/yaml/v3"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/resources/extensions"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/resources/gate"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/resources/hooks"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/resources/publish"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/sidecar"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/sidecar/auth"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/sidecar/config"
)

var errMissingDSN = &config.KeyError{
	Key: "store.postgres.dsn",
	Msg: "must be set (--dsn, --dsn-file or JUPYTER_MCP_SIDECAR_STORE_POSTGRES_DSN)",
	Err: config.ErrInvalid,
}

// registered lists the names compiled into this binary for each seam.
func registered() config.Names {
	return config.Names{
		Publishers: publish.Names(),
		Gates:      gate.Names(),
		Verifiers:  auth.Names(),
		Extensions: extensions.Names(),
		Hooks:      hooks.Names(),
	}
}

func (a *app) configCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "config",
		Short: "Inspect the configuration",
	}
	check := &cobra.Command{
		Use:   "check",
		Short: "Validate the configuration and print it, secrets masked",
		Long: `check builds the configuration serve would use (defaults, file, environment, flags),
reads the secret files, validates every key and the registered names (backend, publisher,
gate, verifier, extensions, hooks), builds those seams with their options as serve does
(without connecting to anything), and prints the effective configuration as YAML with
secrets masked. It exits non-zero, naming each offending key, when anything is wrong.`,
		Args: cobra.NoArgs,
	}
	src := a.withFlags(check, storeFlags, serverFlags)
	check.RunE = func(*cobra.Command, []string) error {
		cfg, file, err := load(src(), registered())
		if err != nil {
			return err
		}
		log, err := newLogger(cfg.Log.Level, cfg.Log.Format, a.stderr)
		if err != nil {
			return err
		}
		seams := cfg
		seams.Logger = log
		if needsToken(seams) { // serve would generate one
			seams.Server.Token = "generated"
		}
		if err := sidecar.Check(seams); err != nil {
			return &configError{file: file, err: err}
		}
		if file == "" {
			file = "none (defaults)"
		}
		fmt.Fprintf(a.stdout, "# configuration file: %s\n", file)
		for _, name := range unknownEnv(os.Environ()) {
			fmt.Fprintf(a.stdout, "# ignored: %s names no configuration key\n", name)
		}
		enc := yaml.NewEncoder(a.stdout)
		enc.SetIndent(2)
		if err := enc.Encode(cfg.Masked()); err != nil {
			return fmt.Errorf("print config: %w", err)
		}
		return enc.Close()
	}
	cmd.AddCommand(check)
	return cmd
}
