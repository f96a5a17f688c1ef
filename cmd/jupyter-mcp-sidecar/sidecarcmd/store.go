package sidecarcmd

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/spf13/cobra"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/sidecar"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/sidecar/config"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore/postgres"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore/sqlite"
)

func (a *app) inspectCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "inspect [NOTEBOOK]",
		Short: "List the rooms of a Y-store, or print one notebook as nbformat JSON",
		Long: `inspect reads the configured Y-store (SQLite or Postgres) once, without following it.

With no argument it lists every room: its key, the notebook path it maps to (through the
fileid database, else the document's own path) and its row count.
With NOTEBOOK (a path relative to the Jupyter root, or a file id) it prints that notebook
as nbformat JSON, exactly as the sidecar serves it. Rows that could not be applied, and a
notebook whose room is degraded, are logged on stderr (at warn, or log.level if higher).`,
		Example: `  jupyter-mcp-sidecar inspect --store /srv/jupyter/.jupyter_ystore.db
  jupyter-mcp-sidecar inspect --store .jupyter_ystore.db work/analysis.ipynb
  jupyter-mcp-sidecar inspect --backend postgres --dsn postgres://… 0b6f…-file-id`,
		Args: cobra.MaximumNArgs(1),
	}
	src := a.withFlags(cmd, storeFlags)
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		cfg, _, err := load(src(), registered())
		if err != nil {
			return err
		}
		target := ""
		if len(args) == 1 {
			target = args[0]
		}
		// What goes wrong is logged to stderr (a room's bad rows, a degraded notebook),
		// what goes right is not: the output is the listing or the notebook alone.
		level := cfg.Log.Level
		if l := new(slog.Level); l.UnmarshalText([]byte(level)) == nil && *l < slog.LevelWarn {
			level = slog.LevelWarn.String()
		}
		if cfg.Logger, err = newLogger(level, cfg.Log.Format, a.stderr); err != nil {
			return err
		}
		err = sidecar.Inspect(cmd.Context(), cfg, a.stdout, target)
		if errors.Is(err, sqlite.ErrNoStore) && !cmd.Flags().Changed(storePathFlag.name) {
			return fmt.Errorf("%w; name the store with --store (jupyter-collaboration's .jupyter_ystore.db, in the Jupyter root) or store.sqlite.path", err)
		}
		return err
	}
	return cmd
}

func (a *app) shipCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "ship",
		Short: "Append the rows of the local SQLite Y-store into a shared Postgres Y-store",
		Long: `ship tails the local SQLite Y-store (store.sqlite.path) and appends every row into the
Postgres Y-store ship.postgres, tagged with ship.source_id, until SIGTERM or SIGINT. Sidecars
on other machines then serve the notebooks of every shipped server from that one database
(store.backend: postgres). Its memory does not grow with the store: rows are copied as they
are read. /healthz, /readyz (with the load's progress) and /metrics are served on
server.metrics_listen, or on server.listen when that is not set.`,
		Args: cobra.NoArgs,
	}
	src := a.withFlags(cmd, shipFlags)
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		return a.daemon(cmd.Context(), src(), func(ctx context.Context, cfg config.Config) error {
			if err := cfg.ValidateShip(); err != nil {
				return err
			}
			return sidecar.Ship(ctx, cfg)
		})
	}
	return cmd
}

func (a *app) postgresCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "postgres",
		Short: "Manage the Postgres Y-store",
	}
	initCmd := &cobra.Command{
		Use:   "init",
		Short: "Create the Postgres Y-store's schema, table, indexes and notify trigger",
		Long: `init creates, if they do not exist, the schema store.postgres.schema, the updates table
store.postgres.table, its indexes and the trigger that NOTIFYs store.postgres.channel on
insert. It is idempotent and safe to run from several machines at once.`,
		Example: `  jupyter-mcp-sidecar postgres init --dsn postgres://sidecar@db/jupyter
  JUPYTER_MCP_SIDECAR_STORE_POSTGRES_DSN=postgres://… jupyter-mcp-sidecar postgres init`,
		Args: cobra.NoArgs,
	}
	src := a.withFlags(initCmd, postgresFlags)
	initCmd.RunE = func(cmd *cobra.Command, _ []string) error {
		s := src()
		cfg, _, err := load(s, registered())
		if err != nil {
			return err
		}
		if cfg.Store.Postgres.DSN == "" {
			return errMissingDSN
		}
		pg := cfg.Store.Postgres
		if err := postgres.Init(cmd.Context(), pg.StoreConfig(config.Obs{})); err != nil {
			return err
		}
		_, err = a.stdout.Write([]byte("postgres y-store ready: " + pg.Schema + "." + pg.Table + "\n"))
		return err
	}
	compactCmd := &cobra.Command{
		Use:   "compact [ROOM...]",
		Short: "Merge each room's rows of the Postgres Y-store into one row",
		Long: `compact replaces the rows of each named room, or of every room, by one row holding their
merged Yjs state, one transaction per room. Rows committed meanwhile are kept, and running
sidecars apply the merged row as the state they already have, so it is safe while they run.`,
		Example: `  jupyter-mcp-sidecar postgres compact --dsn postgres://sidecar@db/jupyter
  jupyter-mcp-sidecar postgres compact '.notebook:0b5e2f5c-6a57-4d55-9d4c-1f6f0c3b8a11.y'`,
	}
	compactSrc := a.withFlags(compactCmd, postgresFlags)
	compactCmd.RunE = func(cmd *cobra.Command, rooms []string) error {
		cfg, _, err := load(compactSrc(), registered())
		if err != nil {
			return err
		}
		if cfg.Store.Postgres.DSN == "" {
			return errMissingDSN
		}
		pg := cfg.Store.Postgres
		return postgres.CompactStore(cmd.Context(), pg.StoreConfig(config.Obs{}), rooms, func(room string, r postgres.CompactResult) {
			if r.Skipped != "" {
				fmt.Fprintf(a.stdout, "%s: left as it is: %s\n", room, r.Skipped)
				return
			}
			if r.Rows == 0 {
				fmt.Fprintf(a.stdout, "%s: nothing to compact\n", room)
				return
			}
			fmt.Fprintf(a.stdout, "%s: %d rows (%d bytes) → 1 row (%d bytes)\n", room, r.Rows, r.Bytes, r.MergedBytes)
		})
	}
	cmd.AddCommand(initCmd, compactCmd)
	return cmd
}
