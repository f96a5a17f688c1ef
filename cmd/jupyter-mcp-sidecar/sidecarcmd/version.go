package sidecarcmd

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/resources"
)

// stamp is what a binary knows of the source it was built from.
type stamp struct {
	version string // -X main.version, else the module version, else resources.DefaultVersion
	commit  string // -X main.commit, else vcs.revision (+"-dirty"); "" when neither
	sum     string // the module's checksum (go install module@version), if any
}

// buildStamp reads the stamp from -ldflags and the build info the go command embeds.
func buildStamp() stamp {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		info = nil
	}
	return readStamp(built, info)
}

// readStamp prefers b's fields to info's; info may be nil. The go command reports a
// build from a checkout without VCS information (go run, -buildvcs=false) as "(devel)",
// which is no version.
func readStamp(b Build, info *debug.BuildInfo) stamp {
	s := stamp{version: b.Version, commit: b.Commit}
	if info != nil {
		if s.version == "" && info.Main.Version != "(devel)" {
			s.version = info.Main.Version
		}
		s.sum = info.Main.Sum
		if s.commit == "" {
			s.commit = vcsRevision(info.Settings)
		}
	}
	s.version = or(s.version, resources.DefaultVersion)
	return s
}

// vcsRevision is the vcs.revision setting, "-dirty" appended when vcs.modified.
func vcsRevision(settings []debug.BuildSetting) string {
	var rev string
	modified := false
	for _, s := range settings {
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
	return rev
}

// source says where the binary came from: its commit, else its module checksum, else
// that nothing recorded it.
func (s stamp) source() string {
	switch {
	case s.commit != "":
		return "commit " + s.commit
	case s.sum != "":
		return "module " + s.sum
	}
	return "no commit recorded: built without VCS information; stamp it with scripts/build.sh"
}

// versionString is the version the MCP server reports: "v1.2.3 (abc123)", "devel".
func versionString() string {
	s := buildStamp()
	if c := or(s.commit, s.sum); c != "" {
		return s.version + " (" + c + ")"
	}
	return s.version
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
			s := buildStamp()
			_, err := fmt.Fprintf(a.stdout, "jupyter-mcp-sidecar %s (%s, %s, %s/%s)\n",
				s.version, s.source(), runtime.Version(), runtime.GOOS, runtime.GOARCH)
			return err
		},
	}
}
