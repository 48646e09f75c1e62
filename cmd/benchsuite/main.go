// Command benchsuite is the harness behind `make bench` (see
// internal/benchsuite and scripts/bench.sh). It only wires flags to the
// package.
//
//	benchsuite run --compactord bin/compactord --work var/bench --out docs/benchmarks.md
//	benchsuite gen --kind compact|delete|merge --dir DIR ...
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/compactord/compactord/internal/benchsuite"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: benchsuite run|gen [flags]")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var err error
	switch os.Args[1] {
	case "run":
		err = run(ctx, os.Args[2:])
	case "gen":
		err = gen(ctx, os.Args[2:])
	default:
		err = fmt.Errorf("unknown command %q (run, gen)", os.Args[1])
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "benchsuite: %s\n", strings.ReplaceAll(err.Error(), "\n", "; "))
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string) error {
	cfg := benchsuite.DefaultConfig()
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	var only string
	fs.StringVar(&cfg.Work, "work", "var/bench", "data sets and scratch space (on the disk to measure)")
	fs.StringVar(&cfg.Compactord, "compactord", "bin/compactord", "compactord binary under test")
	fs.StringVar(&cfg.Baseline, "baseline", "", "an older compactord binary run in the same compaction and merge trials (before/after)")
	fs.StringVar(&cfg.Node, "node", "node", "node binary (DuckDB peer)")
	fs.StringVar(&cfg.BenchDir, "bench-dir", "bench", "directory of the peer scripts and their node_modules")
	fs.StringVar(&cfg.VersityGW, "versitygw", "", "versitygw binary: adds S3 over loopback to the commit benchmark")
	fs.StringVar(&cfg.Out, "out", "docs/benchmarks.md", "Markdown file whose generated block is replaced (empty: print it)")
	fs.IntVar(&cfg.Threads, "threads", cfg.Threads, "DuckDB threads = compactord parallelism = GOMAXPROCS")
	fs.IntVar(&cfg.Trials, "trials", cfg.Trials, "interleaved trials per comparison")
	fs.IntVar(&cfg.CompactRows, "compact-rows", cfg.CompactRows, "rows of the compaction data set (about 34 bytes each)")
	fs.IntVar(&cfg.CompactFragments, "compact-fragments", cfg.CompactFragments, "fragments of the compaction data set")
	fs.IntVar(&cfg.RSSFragments, "rss-fragments", cfg.RSSFragments, "fragments of the many-fragment variant (peak RSS)")
	fs.IntVar(&cfg.RSSMergeUpserts, "rss-merge-upserts", cfg.RSSMergeUpserts, "upserts merged into the compaction table for the merge's peak RSS (0: skip)")
	fs.IntVar(&cfg.MergeBase, "merge-base", cfg.MergeBase, "base rows of the merge data set")
	fs.IntVar(&cfg.MergeFragmentRows, "merge-fragment-rows", cfg.MergeFragmentRows, "rows per base fragment")
	fs.IntVar(&cfg.MergeUpserts, "merge-upserts", cfg.MergeUpserts, "upserts merged")
	fs.IntVar(&cfg.CommitSamples, "commit-samples", cfg.CommitSamples, "latency samples per kind")
	fs.DurationVar(&cfg.CommitWindow, "commit-window", cfg.CommitWindow, "throughput window per committer count")
	fs.IntVar(&cfg.IdleTables, "idle-tables", cfg.IdleTables, "tables of the idle daemon")
	fs.DurationVar(&cfg.IdleSettle, "idle-settle", cfg.IdleSettle, "wait after the daemon is ready")
	fs.DurationVar(&cfg.IdleWindow, "idle-window", cfg.IdleWindow, "RSS sampling window")
	fs.StringVar(&only, "only", "", "comma-separated sections: "+strings.Join(benchsuite.Sections, ","))
	if err := fs.Parse(args); err != nil {
		return err
	}
	for _, s := range strings.Split(only, ",") {
		if s = strings.TrimSpace(s); s != "" {
			cfg.Only = append(cfg.Only, s)
		}
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	cfg.Self = self
	logf := func(format string, args ...any) {
		fmt.Fprintf(os.Stderr, "%s %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
	}
	s, err := benchsuite.New(cfg, logf)
	if err != nil {
		return err
	}
	res, err := s.Run(ctx)
	if err != nil {
		return err
	}
	p, err := s.SaveJSON(res)
	if err != nil {
		return err
	}
	logf("raw results: %s", p)
	block := benchsuite.Render(res, cfg)
	if cfg.Out == "" {
		fmt.Println(block)
		return nil
	}
	if err := benchsuite.WriteDoc(cfg.Out, block); err != nil {
		return err
	}
	logf("wrote %s", cfg.Out)
	for _, g := range benchsuite.Goals(res) {
		logf("goal: %s (%s): %s: %s", g.What, g.Target, g.Status, g.Measured)
	}
	return nil
}

func gen(ctx context.Context, args []string) error {
	var a benchsuite.GenArgs
	fs := flag.NewFlagSet("gen", flag.ContinueOnError)
	fs.StringVar(&a.Kind, "kind", "", "compact, delete, upserts or merge")
	fs.StringVar(&a.Dir, "dir", "", "table directory to create")
	fs.StringVar(&a.From, "from", "", "delete, upserts: the table to clone (hard links) first")
	fs.IntVar(&a.Fragments, "fragments", 32, "compact: fragments")
	fs.IntVar(&a.RowsPerFragment, "rows-per-fragment", 983040, "rows per fragment")
	fs.IntVar(&a.BaseRows, "base-rows", 10_000_000, "merge: base rows")
	fs.IntVar(&a.Upserts, "upserts", 1_000_000, "merge, upserts: upserts")
	fs.IntVar(&a.Parallelism, "parallelism", 2, "fragments written at once")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if a.Dir == "" {
		return fmt.Errorf("gen: --dir is required")
	}
	info, err := benchsuite.Generate(ctx, a)
	if err != nil {
		return err
	}
	return json.NewEncoder(os.Stdout).Encode(info)
}
