package benchsuite

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
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
	// Carried lists sections taken from the previous run's results
	// (they were not run this time: Config.Only), with that run's start.
	Carried map[string]time.Time `json:"carried,omitempty"`
}

// CarryOver fills the sections this run did not run from prev (the
// previous results.json), so that a partial run (BENCH_ONLY) updates its
// sections of the document without dropping the others.
func (r *Results) CarryOver(prev *Results, ran func(section string) bool) {
	if prev == nil {
		return
	}
	carry := func(section string, ok bool, take func()) {
		if ran(section) || !ok {
			return
		}
		take()
		if r.Carried == nil {
			r.Carried = map[string]time.Time{}
		}
		at := prev.Started
		if t, ok := prev.Carried[section]; ok {
			at = t
		}
		r.Carried[section] = at
	}
	carry("compact", prev.Compact != nil, func() { r.Compact = prev.Compact })
	carry("rss", prev.RSS != nil, func() { r.RSS = prev.RSS })
	carry("merge", prev.Merge != nil, func() { r.Merge = prev.Merge })
	carry("commit", len(prev.Commit) > 0, func() { r.Commit = prev.Commit })
	carry("idle", prev.Idle != nil, func() { r.Idle = prev.Idle; r.Host.StartupRSS = prev.Host.StartupRSS })
}

// LoadPrevious reads the previous run's results, if any.
func (s *Suite) LoadPrevious() (*Results, error) {
	data, err := os.ReadFile(filepath.Join(s.cfg.Work, "results.json"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var prev Results
	if err := json.Unmarshal(data, &prev); err != nil {
		return nil, fmt.Errorf("previous results: %w", err)
	}
	return &prev, nil
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
	if len(s.cfg.Only) > 0 {
		prev, err := s.LoadPrevious()
		if err != nil {
			s.logf("previous results not carried over: %v", err)
		}
		res.CarryOver(prev, s.cfg.runs)
	}
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
