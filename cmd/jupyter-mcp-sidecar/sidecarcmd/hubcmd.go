package sidecarcmd

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/sidecar"
)

// hubCmd groups hub mode's operator commands.
func (a *app) hubCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "hub",
		Short: "Hub mode's operator commands",
	}
	logID := &cobra.Command{
		Use:   "log-id USER...",
		Short: "Print the pseudonym that names each user in hub mode's logs",
		Long: `log-id prints, for each Hub user named, the pseudonym that hub mode's log lines carry
as "tenant" instead of the user's name (docs/HUB.md, "Logs"). It is keyed by the service's
API token (hub.api_token or hub.api_token_file, or $JUPYTERHUB_API_TOKEN), so run it with
the configuration the service runs with; without a token each process picks its own key
and the pseudonyms cannot be computed (the tenant's first line at log level debug names
the user).`,
		Args: cobra.MinimumNArgs(1),
	}
	src := a.withFlags(logID)
	logID.RunE = func(_ *cobra.Command, users []string) error {
		cfg, _, err := load(src(), registered())
		if err != nil {
			return err
		}
		key, err := sidecar.LogIDKey(cfg)
		if err != nil {
			return err
		}
		for _, u := range users {
			fmt.Fprintf(a.stdout, "%s\t%s\n", sidecar.LogID(key, u), u)
		}
		return nil
	}
	cmd.AddCommand(logID)
	return cmd
}
