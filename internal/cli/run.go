package cli

import (
	"errors"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
	"go.uber.org/zap"

	"github.com/compactord/compactord/internal/buildinfo"
	"github.com/compactord/compactord/internal/daemon"
	"github.com/compactord/compactord/internal/demo"
)

func init() { extraCommands = append(extraCommands, newRunCmd) }

// ExitCoder is an error that asks for a specific process exit code. A bad
// configuration exits 2, like a usage error.
type ExitCoder interface {
	error
	ExitCode() int
}

type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }
func (e *exitError) ExitCode() int { return e.code }

func newRunCmd(e *env) *cobra.Command {
	var file string
	var o daemon.Overrides
	var demoFlag bool
	cmd := &cobra.Command{
		Use:   "run --config FILE",
		Short: "Run the maintenance daemon: schedule merge, compact, index, trim and cleanup jobs on the configured tables",
		Long: `Run the maintenance daemon. The configuration file is YAML (configs/compactord.yaml documents
every key); flags override it (--log-level and --log-format override log.level and log.format).
SIGTERM or Ctrl-C drains and exits 0; SIGHUP (or POST /-/reload) reloads the file. A bad
configuration exits 2 before anything starts; check one first with ` + "`compactord check config FILE`" + `.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if cmd.Flags().Changed("demo") {
				o.Demo = &demoFlag
			}
			o.LogLevel, o.LogFormat = e.logLevel, e.logFormat
			load := func() (daemon.Config, error) {
				if file == "" {
					return daemon.Parse(nil, "", o)
				}
				return daemon.Load(file, o)
			}
			cfg, err := load()
			if err != nil {
				return &exitError{code: 2, err: err}
			}
			logger, level, err := daemon.NewLogger(cfg.Log, e.stderr)
			if err != nil {
				return &exitError{code: 2, err: err}
			}
			defer func() { _ = logger.Sync() }()
			// The demo workload (demo.enabled, make run) is wired in here, so
			// that the daemon package does not link the demo writer.
			d, err := daemon.New(cfg, daemon.Deps{Logger: logger, Level: &level, Reload: load, Build: buildinfo.Get(Version), Demo: demo.Start, Clock: e.clock})
			if err != nil {
				var ce *daemon.ConfigError
				if errors.As(err, &ce) {
					return &exitError{code: 2, err: err}
				}
				return err
			}
			// The daemon owns its signals, so it drains the same way whether
			// started by main or by a test binary: SIGTERM and Ctrl-C cancel
			// the run context; SIGHUP reloads.
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			hup := make(chan os.Signal, 1)
			signal.Notify(hup, syscall.SIGHUP)
			defer signal.Stop(hup)
			reloadDone := make(chan struct{})
			go func() {
				defer close(reloadDone)
				for {
					select {
					case <-ctx.Done():
						return
					case <-hup:
						logger.Info("SIGHUP: reloading the configuration", zap.String("file", file))
						_ = d.Reload()
					}
				}
			}()
			err = d.Run(ctx)
			stop()
			<-reloadDone
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&file, "config", "", "YAML configuration file (without it: defaults and flags)")
	f.StringVar(&o.Listen, "listen", "", "override http.listen (host:port)")
	f.StringArrayVar(&o.Tables, "table", nil, "add a table URL (repeatable)")
	f.StringVar(&o.Discover, "discover", "", "override discover.url")
	f.IntVar(&o.Workers, "workers", 0, "override workers")
	f.StringVar(&o.AdminTokenFile, "admin-token-file", "", "override http.admin_token_file")
	f.StringVar(&o.LeaseHolder, "lease-holder", "", "override lease.holder")
	f.BoolVar(&demoFlag, "demo", false, "run the built-in demo workload (demo.enabled)")
	return cmd
}

// exitCodeOf is the exit code an error from a command asks for: 2 for a
// bad configuration, otherwise 1.
func exitCodeOf(err error) int {
	var ec ExitCoder
	if errors.As(err, &ec) {
		return ec.ExitCode()
	}
	return 1
}
