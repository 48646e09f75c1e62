package benchsuite

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// step is one measured run of a trial; it prepares and cleans up outside
// the measured span.
type step struct {
	name string
	run  func(ctx context.Context) (*Run, error)
}

// trials runs the steps Trials times, interleaved and rotated (trial k
// starts at step k), and returns each step's runs in trial order.
func (s *Suite) trials(ctx context.Context, what string, steps []step) (map[string][]Run, error) {
	out := map[string][]Run{}
	for t := range s.cfg.Trials {
		for _, st := range rotate(steps, t) {
			r, err := st.run(ctx)
			if err != nil {
				return nil, fmt.Errorf("%s, trial %d, %s: %w", what, t+1, st.name, err)
			}
			s.logf("%s trial %d/%d: %-18s %7.2fs wall %7.2fs cpu %6.0f MiB", what, t+1, s.cfg.Trials, st.name, r.Wall.Seconds(), r.CPU.Seconds(), float64(r.MaxRSS)/(1<<20))
			out[st.name] = append(out[st.name], *r)
		}
	}
	return out, nil
}

func walls(rs []Run) []time.Duration {
	out := make([]time.Duration, len(rs))
	for i, r := range rs {
		out[i] = r.Wall
	}
	return out
}

func (s *Suite) scratch(name string) string { return filepath.Join(s.cfg.Work, "scratch", name) }

func (s *Suite) goEnv() []string { return []string{"GOMAXPROCS=" + strconv.Itoa(s.cfg.Threads)} }

// cpStep copies the files into a fresh directory with cp(1) and fsyncs the
// copies: the I/O ceiling at compactord's durability (it fsyncs every file
// it writes). Run.CPU holds cp's own wall time, without the fsyncs.
func (s *Suite) cpStep(files []string) step {
	return step{name: "cp", run: func(ctx context.Context) (*Run, error) {
		dst := s.scratch("cp")
		if err := os.RemoveAll(dst); err != nil {
			return nil, err
		}
		if err := os.MkdirAll(dst, 0o755); err != nil {
			return nil, err
		}
		defer os.RemoveAll(dst)
		if err := warm(files); err != nil {
			return nil, err
		}
		start := time.Now()
		r, err := runCmd(ctx, nil, append(append([]string{"cp"}, files...), dst+"/")...)
		if err != nil {
			return nil, err
		}
		var copies []string
		for _, f := range files {
			copies = append(copies, filepath.Join(dst, filepath.Base(f)))
		}
		if err := fsyncFiles(copies); err != nil {
			return nil, err
		}
		return &Run{Wall: time.Since(start), CPU: r.Wall, MaxRSS: r.MaxRSS}, nil
	}}
}

// jobStep runs a compactord job on a hard-linked clone of template.
func (s *Suite) jobStep(name string, template *TableInfo, warmFiles []string, check func(out map[string]any) error, args ...string) step {
	return s.binStep(name, s.cfg.Compactord, template, warmFiles, check, args...)
}

// baselineStep is jobStep with the baseline binary (Config.Baseline).
func (s *Suite) baselineStep(name string, template *TableInfo, warmFiles []string, check func(out map[string]any) error, args ...string) step {
	return s.binStep(baselinePrefix+name, s.cfg.Baseline, template, warmFiles, check, args...)
}

// baselinePrefix names the baseline binary's steps.
const baselinePrefix = "baseline:"

func (s *Suite) binStep(name, bin string, template *TableInfo, warmFiles []string, check func(out map[string]any) error, args ...string) step {
	return step{name: name, run: func(ctx context.Context) (*Run, error) {
		dir := s.scratch("table")
		if err := cloneTree(ctx, strings.TrimPrefix(template.URL, "file://"), dir); err != nil {
			return nil, err
		}
		defer os.RemoveAll(dir)
		if err := warm(warmFiles); err != nil {
			return nil, err
		}
		argv := append([]string{bin, args[0], "file://" + dir}, args[1:]...)
		r, err := runCmd(ctx, s.goEnv(), argv...)
		if err != nil {
			return nil, err
		}
		var out map[string]any
		if err := json.Unmarshal(r.Stdout, &out); err != nil {
			return nil, fmt.Errorf("%s: output is not JSON: %q", name, r.Stdout)
		}
		if err := check(out); err != nil {
			return nil, fmt.Errorf("%s: %w (output %s)", name, err, strings.TrimSpace(string(r.Stdout)))
		}
		return r, nil
	}}
}

// duckResult is bench/duckdb-rewrite.mjs's output.
type duckResult struct {
	MS    float64 `json:"ms"`
	CPUMS float64 `json:"cpu_ms"`
	Bytes int64   `json:"bytes"`
}

// duckStep runs DuckDB statements writing outs (each statement may name
// an output with the placeholder {outN}).
func (s *Suite) duckStep(name string, warmFiles []string, nOut int, statements ...string) step {
	return step{name: name, run: func(ctx context.Context) (*Run, error) {
		var outs []string
		for i := range nOut {
			outs = append(outs, s.scratch(fmt.Sprintf("duck%d.parquet", i)))
		}
		defer func() {
			for _, o := range outs {
				_ = os.Remove(o)
			}
		}()
		if err := os.MkdirAll(s.scratch(""), 0o755); err != nil {
			return nil, err
		}
		if err := warm(warmFiles); err != nil {
			return nil, err
		}
		argv := append([]string{s.cfg.Node, filepath.Join(s.cfg.BenchDir, "duckdb-rewrite.mjs"), strconv.Itoa(s.cfg.Threads)}, outs...)
		argv = append(argv, "--")
		for _, st := range statements {
			for i, o := range outs {
				st = strings.ReplaceAll(st, fmt.Sprintf("{out%d}", i), sqlString(o))
			}
			argv = append(argv, st)
		}
		r, err := runCmd(ctx, nil, argv...)
		if err != nil {
			return nil, err
		}
		var dr duckResult
		if err := json.Unmarshal(r.Stdout, &dr); err != nil {
			return nil, fmt.Errorf("%s: output is not JSON: %q", name, r.Stdout)
		}
		return &Run{Wall: time.Duration(dr.MS * float64(time.Millisecond)), CPU: time.Duration(dr.CPUMS * float64(time.Millisecond)), MaxRSS: r.MaxRSS}, nil
	}}
}

// duckQuery runs one query and returns its first row's first value.
func (s *Suite) duckQuery(ctx context.Context, sql string) (string, error) {
	r, err := runCmd(ctx, nil, s.cfg.Node, filepath.Join(s.cfg.BenchDir, "duckdb-query.mjs"), sql, strconv.Itoa(s.cfg.Threads))
	if err != nil {
		return "", err
	}
	var row map[string]any
	line, _, _ := strings.Cut(string(r.Stdout), "\n")
	if err := json.Unmarshal([]byte(line), &row); err != nil || len(row) != 1 {
		return "", fmt.Errorf("duckdb: unexpected output %q", r.Stdout)
	}
	for _, v := range row {
		return fmt.Sprint(v), nil
	}
	return "", nil
}

func sqlString(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

func sqlList(files []string) string {
	q := make([]string, len(files))
	for i, f := range files {
		q[i] = sqlString(f)
	}
	return "[" + strings.Join(q, ", ") + "]"
}

// num reads a JSON number field of a command's output.
func num(out map[string]any, key string) float64 {
	v, _ := out[key].(float64)
	return v
}
