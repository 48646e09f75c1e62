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
Exit 0 and one JSON line when the file is valid; exit 2 and one line on stderr when it is not.
The line counts the tables the file lists ("tables"); with discovery on, it names where and how
often tables are discovered ("discover") and counts the listed ones as "configured_tables"
(discovered tables are only known once the daemon scans).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, err := daemon.Load(args[0], daemon.Overrides{})
			if err == nil {
				err = daemon.CheckConfig(cfg)
			}
			if err != nil {
				return &exitError{code: 2, err: err}
			}
			return printJSON(e.stdout, checkedConfig(args[0], cfg))
		},
	})
	return check
}

// checkedConfig is check config's summary of a valid file. With discovery,
// the tables are found at run time: a bare count of the file's (often 0)
// would read as "no tables", so it says where they come from.
func checkedConfig(file string, cfg daemon.Config) map[string]any {
	// Which override each configured table gets, so that a glob that
	// catches more (or less) than meant shows here.
	policies := map[string]string{}
	for _, t := range cfg.Tables {
		if p := cfg.PolicyFor(t.Name); p.Override != "" {
			policies[t.Name] = p.Override
		}
	}
	out := map[string]any{"file": file, "valid": true, "listen": cfg.HTTP.Listen,
		"overrides": len(cfg.TableOverrides), "table_overrides": policies}
	if cfg.Discover.URL == "" {
		out["tables"] = len(cfg.Tables)
		return out
	}
	out["configured_tables"] = len(cfg.Tables)
	out["discover"] = map[string]any{
		"url":      cfg.Discover.URL,
		"interval": cfg.Discover.Interval.String(),
		"tables":   "every folder under url holding _versions/ (a LanceDB database directory: one table per *.lance dataset), none with a path segment starting with _; found at start, then every interval",
	}
	return out
}
