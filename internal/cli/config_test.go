package cli

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/compactord/compactord/internal/cleanup"
	"github.com/compactord/compactord/internal/compact"
	"github.com/compactord/compactord/internal/merge"
	"github.com/compactord/compactord/internal/trim"
)

// The job commands' flags are registered from the job packages' Config:
// each default is the package's, so the daemon (whose jobs: section is the
// same Config) and the command line cannot disagree.
func TestJobFlagDefaultsAreTheConfigDefaults(t *testing.T) {
	cd, md, td, ld := compact.DefaultConfig(), merge.DefaultConfig(), trim.DefaultConfig(), cleanup.DefaultConfig()
	want := map[string]map[string]string{
		"compact": {
			"target-rows":        fmt.Sprint(cd.TargetRowsPerFragment),
			"deletion-threshold": fmt.Sprint(cd.DeletionThreshold),
			"parallelism":        fmt.Sprint(cd.Parallelism),
			"replans":            fmt.Sprint(cd.Replans),
			"defer-remap":        fmt.Sprint(!cd.InlineRemap),
		},
		"merge": {"max-generations": fmt.Sprint(md.MaxGenerations)},
		"trim": {
			"reader-grace":         td.ReaderGrace.String(),
			"keep-shard-manifests": fmt.Sprint(td.KeepShardManifests),
			"concurrency":          fmt.Sprint(td.Concurrency),
		},
		"cleanup": {
			"retain-versions": fmt.Sprint(ld.RetainVersions),
			"older-than":      ld.OlderThan.String(),
			"min-age":         ld.MinAge.String(),
			"concurrency":     fmt.Sprint(ld.Concurrency),
		},
	}
	root := newRoot(&env{})
	for name, flags := range want {
		cmd, _, err := root.Find([]string{name})
		if err != nil || cmd.Name() != name {
			t.Fatalf("command %s: %v", name, err)
		}
		for flag, def := range flags {
			f := cmd.Flags().Lookup(flag)
			if f == nil {
				t.Errorf("%s --%s: no such flag", name, flag)
				continue
			}
			if f.DefValue != def {
				t.Errorf("%s --%s defaults to %s, the package's Config to %s", name, flag, f.DefValue, def)
			}
		}
	}
}

func TestFlagError(t *testing.T) {
	for _, c := range []struct {
		err     error
		renames map[string]string
		want    string
	}{
		{errors.New("reader_grace must not be negative, got -1s"), nil, "--reader-grace must not be negative, got -1s"},
		{errors.New("target_rows_per_fragment must be in [1, 4294967295], got 0"), map[string]string{"target_rows_per_fragment": "target-rows"},
			"--target-rows must be in [1, 4294967295], got 0"},
		// Not a key: left alone.
		{errors.New("open x: no such table"), nil, "open x: no such table"},
	} {
		if got := flagError(c.err, c.renames).Error(); got != c.want {
			t.Errorf("flagError(%q) = %q, want %q", c.err, got, c.want)
		}
	}
}

// A bad job setting on the command line is refused with the package's own
// rule, naming the flag, before the table is opened.
func TestJobFlagsValidatedByTheConfig(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "none")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"compact", missing, "--deletion-threshold", "0"}, "--deletion-threshold must be in (0, 1], got 0"},
		{[]string{"compact", missing, "--deletion-threshold", "1.5"}, "--deletion-threshold must be in (0, 1]"},
		{[]string{"compact", missing, "--target-rows", "0"}, "--target-rows must be in [1, "},
		{[]string{"compact", missing, "--parallelism", "0"}, "--parallelism must be at least 1"},
		{[]string{"merge", missing, "--max-generations", "-1"}, "--max-generations must not be negative"},
		{[]string{"trim", missing, "--keep-shard-manifests", "1"}, "--keep-shard-manifests must be at least 2"},
		{[]string{"trim", missing, "--reader-grace", "-1s"}, "--reader-grace must not be negative"},
		{[]string{"cleanup", missing, "--retain-versions", "0"}, "--retain-versions must be at least 1"},
		{[]string{"cleanup", missing, "--concurrency", "0"}, "--concurrency must be at least 1"},
	} {
		r := run(t, "", c.args...)
		if r.code == 0 || !strings.Contains(r.stderr, c.want) {
			t.Errorf("compactord %s: exit %d, stderr %q; want a failure saying %q", strings.Join(c.args, " "), r.code, r.stderr, c.want)
		}
	}
}
