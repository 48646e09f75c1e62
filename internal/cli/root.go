// Package cli defines the compactord command line. It is a stable contract:
// every command that commits prints one JSON line with the new version, and
// every error is one sentence on stderr with a non-zero exit.
package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/compactord/compactord/internal/buildinfo"
	"github.com/compactord/compactord/internal/clock"
	"github.com/compactord/compactord/internal/daemon"
	"github.com/compactord/compactord/internal/inflight"
	"github.com/compactord/compactord/internal/marker"
	"github.com/compactord/compactord/internal/meta"
	"github.com/compactord/compactord/internal/progress"
	"github.com/compactord/compactord/internal/storage"
	"github.com/compactord/compactord/internal/table"
)

// Version is set at build time with -ldflags; without it the version
// comes from the Go build info (buildinfo.Get).
var Version = "dev"

// env is what commands share; tests construct it with their own streams.
type env struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	logger         *zap.Logger
	// logLevel and logFormat are the root's --log-level and --log-format.
	logLevel, logFormat string
	// progress logs the progress of long work (info, whatever
	// --log-level says); logger the rest, off unless --log-level is given.
	progress *zap.Logger
	// warn logs a command's warnings (a setting an operator chose that
	// risks data), shown whatever --log-level says, as progress is.
	warn *zap.Logger
	// progressInterval is --progress-interval: the least time between two
	// progress lines (0: none).
	progressInterval time.Duration
	// reporter is the one-shot command's, on its context (nil for run).
	reporter *progress.Reporter
	// clock is the commands' one time source: commit timestamps and
	// backoff, the ages cleanup and trim judge, marks, in-flight markers
	// and progress reports (tests hand in a fake one).
	clock clock.Clock
}

// Main runs the command line and returns the process exit code: 0, 1 when
// a command fails, 2 for a usage or configuration error (like Go's flag
// package).
func Main(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	return mainAt(ctx, clock.Real(), args, stdin, stdout, stderr)
}

// mainAt is Main on the clock clk.
func mainAt(ctx context.Context, clk clock.Clock, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	e := &env{stdin: stdin, stdout: stdout, stderr: stderr, logger: zap.NewNop(), progress: zap.NewNop(), clock: clk}
	root := newRoot(e)
	root.SetArgs(args)
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	err := root.ExecuteContext(ctx)
	if err == nil {
		// The totals of long work; short work stays quiet.
		e.reporter.Finish()
	}
	_ = e.logger.Sync()
	_ = e.progress.Sync()
	if err != nil {
		if strings.HasPrefix(err.Error(), "unknown command ") {
			err = usageError(err)
		}
		fmt.Fprintf(stderr, "compactord: %s\n", oneLine(err.Error()))
		return exitCodeOf(err)
	}
	return 0
}

// usageError marks err as a usage error: exit code 2.
func usageError(err error) error {
	if err == nil {
		return nil
	}
	var ec ExitCoder
	if errors.As(err, &ec) {
		return err
	}
	return &exitError{code: 2, err: err}
}

// markUsageErrors makes every command's argument-count and flag errors
// usage errors (exit 2).
func markUsageErrors(c *cobra.Command) {
	if args := c.Args; args != nil {
		c.Args = func(cmd *cobra.Command, a []string) error { return usageError(args(cmd, a)) }
	}
	for _, sub := range c.Commands() {
		markUsageErrors(sub)
	}
}

func oneLine(s string) string {
	s = strings.ReplaceAll(s, "\n", "; ")
	return strings.TrimSpace(s)
}

func newRoot(e *env) *cobra.Command {
	root := &cobra.Command{
		Use:           "compactord",
		Short:         "Maintenance daemon for Lance tables in object storage: MemWAL merge, compaction, index catch-up, trim and cleanup",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.CompletionOptions.DisableDefaultCmd = true
	info := buildinfo.Get(Version)
	root.Version = info.Version
	root.SetVersionTemplate(info.String() + "\n")
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError(err) })
	pf := root.PersistentFlags()
	pf.StringVar(&e.logLevel, "log-level", "", "log level on stderr: debug, info, warn, error (default: only the progress of long work, every few seconds; a level also shows the components' logs)")
	pf.StringVar(&e.logFormat, "log-format", "", "log format on stderr: console (the default for one-shot commands) or json")
	pf.DurationVar(&e.progressInterval, "progress-interval", progress.DefaultInterval, "least time between two progress lines of long work on stderr (rows and bytes done, rate, ETA); 0 disables them")
	pretty := pf.Bool("pretty", false, "print JSON documents indented over several lines instead of one line each (inspect, plans, results); JSON-lines outputs of rows are unchanged")
	root.PersistentPreRunE = func(cmd *cobra.Command, _ []string) error {
		if *pretty {
			e.stdout = indentedJSON{e.stdout}
		}
		return e.setupLogger(cmd)
	}
	root.AddCommand(
		&cobra.Command{
			Use:   "version",
			Short: "Print the version, VCS revision, Go version and the Lance versions compactord reads, writes and refuses (JSON)",
			Args:  cobra.NoArgs,
			RunE: func(cmd *cobra.Command, _ []string) error {
				// The compatibility statement rides along: an operator
				// deciding whether this build may maintain a table a newer
				// Lance wrote reads it here (docs/format.md has the same).
				return printJSON(e.stdout, struct {
					buildinfo.Info
					Lance meta.Compatibility `json:"lance_compatibility"`
				}{info, meta.Compat})
			},
		},
		newTableCmd(e),
		newInspectCmd(e),
	)
	for _, c := range extraCommands {
		root.AddCommand(c(e))
	}
	for _, c := range tableSubcommands {
		if t, _, err := root.Find([]string{"table"}); err == nil && t != root {
			t.AddCommand(c(e))
		}
	}
	markUsageErrors(root)
	guardMarkedTables(root)
	return root
}

// markGuards lists the maintenance commands that honour a table's marks,
// as the daemon's jobs do: a paused table runs none of them, a no-compact
// table no compaction. Writes of data (table append and delete, wal
// write and flush) are the writers' own and do not look at the marks.
var markGuards = map[string][]marker.Kind{
	"merge":          {marker.Pause},
	"compact":        {marker.Pause, marker.NoCompact},
	"index create":   {marker.Pause},
	"index catchup":  {marker.Pause},
	"index remap":    {marker.Pause},
	"index trim-fri": {marker.Pause},
	"index rebuild":  {marker.Pause},
	"index drop":     {marker.Pause},
	"trim":           {marker.Pause},
	"cleanup":        {marker.Pause},
}

// guardMarkedTables gives each guarded command a --force flag and a check,
// before it runs, that the table it names carries none of the marks it
// honours. A dry run changes nothing and is always allowed.
func guardMarkedTables(root *cobra.Command) {
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		for _, sub := range c.Commands() {
			walk(sub)
		}
		path := strings.TrimPrefix(c.CommandPath(), root.Name()+" ")
		kinds, ok := markGuards[path]
		if !ok {
			return
		}
		if c.RunE == nil {
			panic("cli: guarded command " + path + " has no RunE")
		}
		force := c.Flags().Bool("force", false, "run even though the table is paused or marked (see table pause, table mark)")
		run := c.RunE
		c.RunE = func(cmd *cobra.Command, args []string) error {
			if dry, err := cmd.Flags().GetBool("dry-run"); (err != nil || !dry) && !*force && len(args) > 0 {
				if err := refuseMarked(cmd, path, args[0], kinds); err != nil {
					return err
				}
			}
			return run(cmd, args)
		}
	}
	walk(root)
}

// refuseMarked returns a one-line error naming the first mark of kinds the
// table at rawURL carries, with its reason.
func refuseMarked(cmd *cobra.Command, job, rawURL string, kinds []marker.Kind) error {
	b, err := openTable(cmd.Context(), rawURL)
	if err != nil {
		// No table to carry a mark: the command reports what is wrong,
		// after its own checks of its flags.
		return nil
	}
	defer b.Close()
	marks, err := marker.Load(cmd.Context(), b)
	if err != nil {
		return fmt.Errorf("%s %s: read the table's marks: %w", job, rawURL, err)
	}
	for _, k := range kinds {
		m, ok := marks[k]
		if !ok {
			continue
		}
		why := ""
		if m.Reason != "" {
			why = fmt.Sprintf(" (%q)", m.Reason)
		}
		if m.By != "" {
			why += " by " + m.By
		}
		clear := "table mark URL " + string(k) + " --clear"
		if k == marker.Pause {
			clear = "table resume URL"
		}
		return fmt.Errorf("%s %s refused: the table carries the %s mark%s since %s; %s clears it, or pass --force", job, rawURL, k, why, m.Since.UTC().Format(time.RFC3339), clear)
	}
	return nil
}

// tableSubcommands lets other files of this package add `table` commands.
var tableSubcommands []func(*env) *cobra.Command

// setupLogger builds the logger of one-shot commands from --log-level and
// --log-format: progress of long jobs at info, on stderr. `run` builds its
// own from the configuration (the flags override it there).
func (e *env) setupLogger(cmd *cobra.Command) error {
	if cmd.Name() == "run" {
		return nil
	}
	if e.progressInterval < 0 {
		return usageError(fmt.Errorf("--progress-interval must not be negative, got %s", e.progressInterval))
	}
	lc := daemon.LogConfig{Level: e.logLevel, Format: e.logFormat}
	if lc.Level == "" {
		lc.Level = "info"
	}
	if lc.Format == "" {
		lc.Format = "console"
	}
	if err := (&daemon.Config{Log: lc}).ValidateLog(); err != nil {
		return usageError(err)
	}
	// One lock for both loggers below: they write to the same stderr, and
	// a job's goroutines report progress at once.
	stderr := zapcore.Lock(zapcore.AddSync(e.stderr))
	l, _, err := daemon.NewLogger(lc, stderr)
	if err != nil {
		return usageError(err)
	}
	e.logger = l
	// Progress is at info even when --log-level hides info: it is the one
	// thing a successful one-shot command writes on stderr.
	pl, _, err := daemon.NewLogger(daemon.LogConfig{Level: "info", Format: lc.Format}, stderr)
	if err != nil {
		return usageError(err)
	}
	e.progress = pl.With(zap.String("component", "progress"))
	e.warn = pl.With(zap.String("component", "cli"))
	opts := progress.Options{Clock: e.clock, Interval: e.progressInterval}
	if e.progressInterval > 0 {
		opts.Logger = e.progress
	}
	e.reporter = progress.New(opts)
	ctx := cmd.Context()
	if ctx == nil {
		ctx = context.Background()
	}
	cmd.SetContext(progress.With(ctx, e.reporter))
	if e.logLevel == "" {
		// By default only progress (every few seconds of long work)
		// reaches stderr besides the command's one-line error: the
		// components' own logs need --log-level.
		e.logger = zap.NewNop()
	}
	return nil
}

// extraCommands lets other files of this package add top-level commands.
var extraCommands []func(*env) *cobra.Command

// normalizeURL turns a bare path into a file:// URL.
func normalizeURL(raw string) (string, error) {
	if raw == "" {
		return "", fmt.Errorf("empty table URL")
	}
	if strings.Contains(raw, "://") {
		return raw, nil
	}
	abs, err := filepath.Abs(raw)
	if err != nil {
		return "", err
	}
	return "file://" + filepath.ToSlash(abs), nil
}

// openBucket opens the location rawURL names (a plain path or any storage
// URL), whatever it holds: the marks of `table pause` and `table mark` are
// compactord's own records, beside the table.
func openBucket(ctx context.Context, rawURL string) (storage.Bucket, error) {
	u, err := normalizeURL(rawURL)
	if err != nil {
		return nil, err
	}
	return storage.Open(ctx, u)
}

// inFlightTTL bounds how long a CLI job's in-flight marker protects its
// uncommitted files from cleanup; a crashed job's marker expires after it.
const inFlightTTL = 6 * time.Hour

// openWriter opens a Lance table for a command that writes files
// before it commits, and publishes an in-flight marker for as long as it
// runs, so that a concurrent `compactord cleanup` (or a daemon's) never
// deletes its output before the commit. Read-only commands use openTable:
// they must work with read-only credentials.
func openWriter(ctx context.Context, e *env, rawURL, job string) (*table.Handle, func(), error) {
	h, done, err := openHandle(ctx, e, rawURL)
	if err != nil {
		return nil, nil, err
	}
	release, err := inflight.Register(ctx, h.Bucket, "cli "+job, 0, e.clock.Now(), inFlightTTL)
	if err != nil {
		done()
		return nil, nil, err
	}
	return h, func() { release(); done() }, nil
}

// printJSON writes v as one line of JSON, or indented when w is stdout
// under --pretty.
func printJSON(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if _, ok := w.(indentedJSON); ok {
		b, err = json.MarshalIndent(v, "", "  ")
	}
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}

// indentedJSON is stdout under --pretty: printJSON indents what it writes
// there. A writer, not a flag threaded through every command, so that
// each command's printing stays one call.
type indentedJSON struct{ io.Writer }

// readInput opens --jsonl: "-" is stdin.
func readInput(e *env, path string) (io.ReadCloser, error) {
	if path == "-" {
		return io.NopCloser(e.stdin), nil
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	return f, nil
}
