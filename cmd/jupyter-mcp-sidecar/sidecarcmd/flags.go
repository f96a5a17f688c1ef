package sidecarcmd

import (
	"fmt"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// flagSpec is a command-line flag that sets one configuration key.
type flagSpec struct {
	name, key, usage string
}

// flatDefaults are the dotted-key defaults shown in --help and set in viper.
var flatDefaults, flatDefaultsErr = defaults()

// define adds the flag to fs, typed and defaulted like its key.
func (f flagSpec) define(fs *pflag.FlagSet) {
	usage := fmt.Sprintf("%s (%s)", f.usage, f.key)
	switch d := flatDefaults[f.key].(type) {
	case bool:
		fs.Bool(f.name, d, usage)
	case nil:
		fs.String(f.name, "", usage)
	default:
		fs.String(f.name, fmt.Sprint(d), usage)
	}
}

var logFlags = []flagSpec{
	{"log-level", "log.level", "log level: debug, info, warn, error"},
	{"log-format", "log.format", "log format: text, json"},
}

var storePathFlag = flagSpec{"store", "store.sqlite.path", "SQLite Y-store file written by jupyter-collaboration"}

var storeFlags = []flagSpec{
	{"backend", "store.backend", "Y-store backend: sqlite, postgres"},
	storePathFlag,
	{"dsn", "store.postgres.dsn", "Postgres Y-store connection string"},
	{"dsn-file", "store.postgres.dsn_file", "file holding the Postgres Y-store connection string"},
	{"fileid-db", "fileid.db_path", "jupyter_server_fileid database (default: Jupyter's data dir)"},
	{"root-dir", "fileid.root_dir", "Jupyter server root directory (default: the store's directory)"},
}

var serverFlags = []flagSpec{
	{"transport", "server.transport", "MCP transport: http, stdio"},
	{"listen", "server.listen", "HTTP listen address"},
	{"path", "server.path", "HTTP path of the MCP endpoint"},
	{"token-file", "server.token_file", "file holding the bearer token clients must send"},
	{"insecure-no-auth", "server.insecure_no_auth", "serve HTTP without a bearer token"},
	{"metrics-listen", "server.metrics_listen", "separate listener for /metrics /healthz /readyz"},
	{"state-file", "server.state_file", "file keeping notebook name bindings (default: $STATE_DIRECTORY/names.json, else next to the store, the first writable; else in memory)"},
}

var shipFlags = []flagSpec{
	storePathFlag,
	{"ship-dsn", "ship.postgres.dsn", "Postgres store to ship rows into"},
	{"ship-dsn-file", "ship.postgres.dsn_file", "file holding the connection string of the Postgres store to ship into"},
	{"source-id", "ship.source_id", "name of this source in the shared store (default: the host name)"},
	{"metrics-listen", "server.metrics_listen", "listener for /metrics /healthz /readyz (default: server.listen)"},
}

var postgresFlags = []flagSpec{
	{"dsn", "store.postgres.dsn", "Postgres connection string"},
	{"dsn-file", "store.postgres.dsn_file", "file holding the Postgres connection string"},
	{"schema", "store.postgres.schema", "schema holding the store"},
	{"table", "store.postgres.table", "updates table"},
	{"channel", "store.postgres.channel", "NOTIFY channel of the insert trigger"},
}

// withFlags defines the flag groups on cmd and returns how load finds their keys.
func (a *app) withFlags(cmd *cobra.Command, groups ...[]flagSpec) func() source {
	keys := map[string]string{}
	for _, f := range logFlags {
		keys[f.name] = f.key
	}
	for _, g := range groups {
		for _, f := range g {
			f.define(cmd.Flags())
			keys[f.name] = f.key
		}
	}
	return func() source { return source{file: a.configFile, flags: cmd.Flags(), keys: keys} }
}
