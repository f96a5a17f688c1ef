package sidecarcmd

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// buildVersion returns the version and commit, from -ldflags or else from the build info
// (module version, VCS revision) that the go command embeds.
func buildVersion() (ver, rev string) {
	ver, rev = built.Version, built.Commit
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return or(ver, "devel"), or(rev, "unknown")
	}
	if ver == "" && info.Main.Version != "" {
		ver = info.Main.Version
	}
	if rev == "" {
		modified := false
		for _, s := range info.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.modified":
				modified = s.Value == "true"
			}
		}
		if rev != "" && modified {
			rev += "-dirty"
		}
	}
	return or(ver, "devel"), or(rev, "unknown")
}

// versionString is the version the MCP server reports: "v1.2.3 (abc123)".
func versionString() string {
	ver, rev := buildVersion()
	return ver + " (" + rev + ")"
}

func or(s, fallback string) string {
	if s == "" {
		return fallback
	}
	return s
}

func (a *app) versionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version, commit and Go version",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			ver, rev := buildVersion()
			_, err := fmt.Fprintf(a.stdout, "jupyter-mcp-sidecar %s (commit %s, %s, %s/%s)\n",
				ver, rev, runtime.Version(), runtime.GOOS, runtime.GOARCH)
			return err
		},
	}
}
