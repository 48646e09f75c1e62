package benchsuite

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"
)

// Suite runs the benchmarks. Construct it with New; Run runs it.
type Suite struct {
	cfg  Config
	logf func(format string, args ...any)
}

// New checks the configuration and starts nothing. logf receives progress
// lines (nil: discarded).
func New(cfg Config, logf func(format string, args ...any)) (*Suite, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if logf == nil {
		logf = func(string, ...any) {}
	}
	// file:// URLs need absolute paths.
	work, err := filepath.Abs(cfg.Work)
	if err != nil {
		return nil, err
	}
	cfg.Work = work
	return &Suite{cfg: cfg, logf: logf}, nil
}

// Results is one run of the suite. A section that failed has its error in
// Errors and no result; the others still run.
type Results struct {
	Started  time.Time         `json:"started"`
	Finished time.Time         `json:"finished"`
	Host     Host              `json:"host"`
	Threads  int               `json:"threads"`
	Trials   int               `json:"trials"`
	Compact  *CompactResult    `json:"compact,omitempty"`
	RSS      *RSSResult        `json:"rss,omitempty"`
	Merge    *MergeResult      `json:"merge,omitempty"`
	Commit   []CommitResult    `json:"commit,omitempty"`
	Idle     *IdleResult       `json:"idle,omitempty"`
	Errors   map[string]string `json:"errors,omitempty"`
}

// Host describes the machine and its load, which the figures depend on.
type Host struct {
	CPUs      int    `json:"cpus"`
	MemTotal  int64  `json:"mem_total_bytes"`
	Go        string `json:"go"`
	LoadStart string `json:"load_start"`
	LoadEnd   string `json:"load_end"`
	// SuiteHWM is the suite's own peak RSS: every child's getrusage peak
	// is at least this (see Run.MaxRSS).
	SuiteHWM int64 `json:"suite_hwm_bytes"`
	// StartupRSS is the peak RSS of `compactord version`: the binary's
	// floor (runtime, package initialisation, pages of the executable).
	StartupRSS int64 `json:"startup_rss_bytes"`
}

func loadavg() string {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(data))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

// Run runs every configured section and returns the results; it fails
// only on a canceled context.
func (s *Suite) Run(ctx context.Context) (*Results, error) {
	res := &Results{Started: time.Now(), Threads: s.cfg.Threads, Trials: s.cfg.Trials, Errors: map[string]string{},
		Host: Host{CPUs: runtime.NumCPU(), Go: runtime.Version(), LoadStart: loadavg()}}
	if data, err := os.ReadFile("/proc/meminfo"); err == nil {
		var kb int64
		if _, err := fmt.Sscanf(string(data), "MemTotal: %d kB", &kb); err == nil {
			res.Host.MemTotal = kb << 10
		}
	}
	if err := os.MkdirAll(s.scratch(""), 0o755); err != nil {
		return nil, err
	}
	// compactord's start-up footprint, for the idle figure: measured first,
	// while the suite is small (see Run.MaxRSS).
	if s.cfg.runs("idle") {
		if r, err := runCmd(ctx, s.goEnv(), s.cfg.Compactord, "version"); err == nil {
			res.Host.StartupRSS = r.MaxRSS
		}
	}
	run := func(name string, fn func() error) {
		if !s.cfg.runs(name) || ctx.Err() != nil {
			return
		}
		start := time.Now()
		s.logf("== %s", name)
		if err := fn(); err != nil {
			s.logf("%s failed: %v", name, err)
			res.Errors[name] = err.Error()
			return
		}
		s.logf("== %s done in %.0fs", name, time.Since(start).Seconds())
	}
	run("compact", func() (err error) { res.Compact, err = s.compaction(ctx); return })
	run("rss", func() (err error) { res.RSS, err = s.rss(ctx); return })
	run("merge", func() (err error) { res.Merge, err = s.merge(ctx); return })
	run("commit", func() (err error) { res.Commit, err = s.commits(ctx); return })
	run("idle", func() (err error) { res.Idle, err = s.idle(ctx); return })
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	res.Finished = time.Now()
	res.Host.LoadEnd = loadavg()
	if st, err := procStatus(os.Getpid(), "VmHWM"); err == nil {
		res.Host.SuiteHWM = st["VmHWM"]
	}
	return res, nil
}

// SaveJSON writes the raw results next to the data sets.
func (s *Suite) SaveJSON(res *Results) (string, error) {
	data, err := json.MarshalIndent(res, "", "  ")
	if err != nil {
		return "", err
	}
	p := filepath.Join(s.cfg.Work, "results.json")
	return p, os.WriteFile(p, data, 0o644)
}
