package cli

import (
	"github.com/spf13/cobra"

	"github.com/compactord/compactord/internal/daemon"
)

func init() { extraCommands = append(extraCommands, newCheckCmd) }

func newCheckCmd(e *env) *cobra.Command {
	check := &cobra.Command{
		Use:   "check",
		Short: "Check files without running anything",
	}
	check.AddCommand(&cobra.Command{
		Use:   "config FILE",
		Short: "Validate a daemon configuration exactly as `compactord run --config FILE` does at start-up and on reload",
		Long: `Validate a daemon configuration exactly as ` + "`compactord run --config FILE`" + ` does at start-up
and on reload, with the same messages (file, line, key). It opens no table and binds no port.
Exit 0 and one JSON line when the file is valid; exit 2 and one line on stderr when it is not.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, err := daemon.Load(args[0], daemon.Overrides{})
			if err == nil {
				err = daemon.CheckConfig(cfg)
			}
			if err != nil {
				return &exitError{code: 2, err: err}
			}
			// Which override each configured table gets, so that a glob
			// that catches more (or less) than meant shows here.
			policies := map[string]string{}
			for _, t := range cfg.Tables {
				if p := cfg.PolicyFor(t.Name); p.Override != "" {
					policies[t.Name] = p.Override
				}
			}
			return printJSON(e.stdout, map[string]any{"file": args[0], "valid": true, "tables": len(cfg.Tables),
				"discover": cfg.Discover.URL, "listen": cfg.HTTP.Listen, "overrides": len(cfg.TableOverrides), "table_overrides": policies})
		},
	})
	return check
}
