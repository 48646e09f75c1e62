// Package cli defines the compactord command line. It is a stable contract:
// every command that commits prints one JSON line with the new version, and
// every error is one sentence on stderr with a non-zero exit.
package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"go.uber.org/zap"

	"github.com/compactord/compactord/internal/commit"
	"github.com/compactord/compactord/internal/inflight"
	"github.com/compactord/compactord/internal/ops"
	"github.com/compactord/compactord/internal/storage"
)

// Version is set at build time with -ldflags.
var Version = "dev"

// env is what commands share; tests construct it with their own streams.
type env struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	logger         *zap.Logger
}

// Main runs the command line and returns the process exit code.
func Main(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	e := &env{stdin: stdin, stdout: stdout, stderr: stderr, logger: zap.NewNop()}
	root := newRoot(e)
	root.SetArgs(args)
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	if err := root.ExecuteContext(ctx); err != nil {
		fmt.Fprintf(stderr, "compactord: %s\n", oneLine(err.Error()))
		return exitCodeOf(err)
	}
	return 0
}

func oneLine(s string) string {
	s = strings.ReplaceAll(s, "\n", "; ")
	return strings.TrimSpace(s)
}

func newRoot(e *env) *cobra.Command {
	root := &cobra.Command{
		Use:           "compactord",
		Short:         "Compaction and WAL-trim daemon for LSM-fronted columnar tables in object storage",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.CompletionOptions.DisableDefaultCmd = true
	root.AddCommand(
		&cobra.Command{
			Use:   "version",
			Short: "Print the version",
			Args:  cobra.NoArgs,
			RunE: func(cmd *cobra.Command, _ []string) error {
				return printJSON(e.stdout, map[string]string{"version": Version})
			},
		},
		newTableCmd(e),
		newInspectCmd(e),
	)
	for _, c := range extraCommands {
		root.AddCommand(c(e))
	}
	return root
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

// openTable opens the table at url with a committer.
func openTable(ctx context.Context, e *env, rawURL string) (*ops.Table, func(), error) {
	u, err := normalizeURL(rawURL)
	if err != nil {
		return nil, nil, err
	}
	b, err := storage.Open(ctx, u)
	if err != nil {
		return nil, nil, err
	}
	c, err := commit.NewCommitter(commit.Config{}, b, nil, nil, e.logger)
	if err != nil {
		_ = b.Close()
		return nil, nil, err
	}
	return ops.NewTable(b, c, nil, e.logger), func() { _ = b.Close() }, nil
}

// inFlightTTL bounds how long a CLI job's in-flight marker protects its
// uncommitted files from cleanup; a crashed job's marker expires after it.
const inFlightTTL = 6 * time.Hour

// openWriter opens a table for a command that writes files before it
// commits, and publishes an in-flight marker for as long as it runs, so that
// a concurrent `compactord cleanup` (or a daemon's) never deletes its output
// before the commit (scenarios 27, 28). Read-only commands use openTable:
// they must work with read-only credentials.
func openWriter(ctx context.Context, e *env, rawURL, job string) (*ops.Table, func(), error) {
	t, done, err := openTable(ctx, e, rawURL)
	if err != nil {
		return nil, nil, err
	}
	release, err := inflight.Register(ctx, t.Bucket, "cli "+job, 0, time.Now(), inFlightTTL)
	if err != nil {
		done()
		return nil, nil, err
	}
	return t, func() { release(); done() }, nil
}

func printJSON(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}

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
