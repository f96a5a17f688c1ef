package postgres

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
)

// migrateLockKey is the pg_advisory_xact_lock key serializing migrations
// (the first eight bytes of "ystoremg").
const migrateLockKey int64 = 0x7973746f72656d67

// Beginner starts transactions: *pgx.Conn, *pgxpool.Pool and pgx.Tx satisfy it.
type Beginner interface {
	Begin(ctx context.Context) (pgx.Tx, error)
}

// schemaSQL is the idempotent DDL of the store; see docs/POSTGRES.md.
func schemaSQL(n names) []string {
	r := strings.NewReplacer(
		"{schema}", n.schema, "{table}", n.table, "{cursors}", n.cursors,
		"{rooms}", n.rooms, "{owner_index}", n.ownerIndex,
		"{notify_func}", n.notifyFunc, "{trigger}", n.trigger,
		"{channel}", quoteLiteral(n.channel),
		"{path_index}", n.pathIndex, "{xid_index}", n.xidIndex,
	)
	stmts := []string{
		`CREATE SCHEMA IF NOT EXISTS {schema}`,
		`CREATE TABLE IF NOT EXISTS {table} (
			id        bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
			path      text NOT NULL,
			yupdate   bytea,
			metadata  bytea,
			timestamp double precision NOT NULL DEFAULT extract(epoch FROM clock_timestamp()),
			xid       xid8 NOT NULL DEFAULT pg_current_xact_id(),
			reset     boolean NOT NULL DEFAULT false
		)`,
		`CREATE INDEX IF NOT EXISTS {path_index} ON {table} (path, id)`,
		`CREATE INDEX IF NOT EXISTS {xid_index} ON {table} (xid)`,
		`CREATE TABLE IF NOT EXISTS {cursors} (
			source     text NOT NULL,
			path       text NOT NULL,
			rows       bigint NOT NULL,
			digest     bytea NOT NULL,
			updated_at timestamptz NOT NULL DEFAULT now(),
			PRIMARY KEY (source, path)
		)`,
		`CREATE TABLE IF NOT EXISTS {rooms} (
			path       text PRIMARY KEY,
			owner      text NOT NULL,
			updated_at timestamptz NOT NULL DEFAULT now()
		)`,
		`CREATE INDEX IF NOT EXISTS {owner_index} ON {rooms} (owner, path)`,
		`CREATE OR REPLACE FUNCTION {notify_func}() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN
			PERFORM pg_notify({channel}, NEW.path);
			RETURN NULL;
		END
		$$`,
		`DROP TRIGGER IF EXISTS {trigger} ON {table}`,
		`CREATE TRIGGER {trigger} AFTER INSERT ON {table} FOR EACH ROW EXECUTE FUNCTION {notify_func}()`,
	}
	for i, s := range stmts {
		stmts[i] = r.Replace(s)
	}
	return stmts
}

// quoteLiteral quotes s as a SQL string literal.
func quoteLiteral(s string) string {
	return "'" + strings.ReplaceAll(s, "'", "''") + "'"
}

// Migrate creates the store's schema, tables, indexes and notify trigger if they do not
// exist. It is idempotent and safe to run concurrently: one transaction under an advisory
// lock.
func Migrate(ctx context.Context, db Beginner, cfg Config) error {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return err
	}
	tx, err := db.Begin(ctx)
	if err != nil {
		return fmt.Errorf("migrate: begin: %w", err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, migrateLockKey); err != nil {
		return fmt.Errorf("migrate: lock: %w", err)
	}
	for _, stmt := range schemaSQL(namesOf(cfg)) {
		if _, err := tx.Exec(ctx, stmt); err != nil {
			return fmt.Errorf("migrate: %s: %w", firstLine(stmt), err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("migrate: commit: %w", err)
	}
	return nil
}

// Init connects with cfg.DSN and runs Migrate: the `jupyter-mcp-sidecar postgres init`
// command.
func Init(ctx context.Context, cfg Config) error {
	cfg, conn, err := open(ctx, cfg, "init")
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	return Migrate(ctx, conn, cfg)
}

// open validates cfg, fills its defaults and connects to its DSN, for the command what.
func open(ctx context.Context, cfg Config, what string) (Config, *pgx.Conn, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return cfg, nil, err
	}
	conn, err := connect(ctx, cfg.DSN)
	if err != nil {
		return cfg, nil, fmt.Errorf("%s: %w", what, err)
	}
	return cfg, conn, nil
}

// lockRoom takes the transaction-scoped advisory lock that serializes the writers that
// rewrite a room's history (Shipper, Compact).
func lockRoom(ctx context.Context, tx pgx.Tx, n names, room string) error {
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext($1), hashtext($2))`, n.table, room); err != nil {
		return fmt.Errorf("room %q: lock: %w", room, err)
	}
	return nil
}

// firstLine shortens a statement for error messages.
func firstLine(stmt string) string {
	line, _, _ := strings.Cut(stmt, "\n")
	return strings.TrimSpace(line)
}
