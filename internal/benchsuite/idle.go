package benchsuite

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/compactord/compactord/internal/memwal"
	"github.com/compactord/compactord/internal/table"
	"github.com/compactord/compactord/internal/testutil/toolproc"
)

// IdleResult is the idle daemon's footprint.
type IdleResult struct {
	Tables int `json:"tables"`
	// Ready is how long the daemon took to report ready.
	Ready  time.Duration `json:"ready_ns"`
	Settle time.Duration `json:"settle_ns"`
	Window time.Duration `json:"window_ns"`
	// MaxRSS is the largest VmRSS sampled each second over the window;
	// HWM the process's VmHWM at its end (start-up included).
	MaxRSS  int64   `json:"max_rss_bytes"`
	HWM     int64   `json:"hwm_bytes"`
	Anon    int64   `json:"rss_anon_bytes"`
	File    int64   `json:"rss_file_bytes"`
	CPUPct  float64 `json:"cpu_percent"`
	Command string  `json:"command"`
	// Error is set when the daemon could not be measured (not ready).
	Error string `json:"error,omitempty"`
}

// idle runs `compactord run` over IdleTables file:// tables (each with a
// two-shard MemWAL, so the daemon polls shards too) with the default
// schedule, lets it settle, then samples its RSS once a second.
func (s *Suite) idle(ctx context.Context) (*IdleResult, error) {
	c := s.cfg
	dir := s.scratch("idle")
	if err := os.RemoveAll(dir); err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	res := &IdleResult{Tables: c.IdleTables, Settle: c.IdleSettle, Window: c.IdleWindow,
		Command: "compactord run --config c.yaml   # " + fmt.Sprint(c.IdleTables) + " file:// tables, defaults otherwise"}
	sch, _ := table.ParseSchema("id:int64,cat:string,val:float64", []string{"id"})
	var cfg strings.Builder
	port, err := toolproc.FreePort()
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(&cfg, "http:\n  listen: 127.0.0.1:%d\nlog:\n  level: warn\ntables:\n", port)
	for i := range c.IdleTables {
		tdir := filepath.Join(dir, "tables", fmt.Sprintf("t%03d", i))
		t, b, err := openTable(ctx, tdir)
		if err != nil {
			return nil, err
		}
		_, err = t.Create(ctx, sch)
		if err == nil {
			_, err = memwal.Configure(ctx, t, []string{"s0", "s1"}, nil)
		}
		_ = b.Close()
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(&cfg, "  - url: file://%s\n", tdir)
	}
	file := filepath.Join(dir, "c.yaml")
	if err := os.WriteFile(file, []byte(cfg.String()), 0o644); err != nil {
		return nil, err
	}
	cmd := exec.Command(c.Compactord, "run", "--config", file)
	cmd.Env = append(os.Environ(), s.goEnv()...)
	logs := &lockedBuffer{}
	cmd.Stdout, cmd.Stderr = io.Discard, logs
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	}()
	ready := fmt.Sprintf("http://127.0.0.1:%d/-/ready", port)
	deadline := time.Now().Add(2 * time.Minute)
	for {
		if ok, err := httpOK(ctx, ready); ok {
			break
		} else if time.Now().After(deadline) {
			res.Error = fmt.Sprintf("not ready after 2 minutes (%v)", err)
			return res, nil
		}
		select {
		case err := <-exited:
			exited <- err
			res.Error = fmt.Sprintf("the daemon exited before it was ready: %v: %s", err, lastLine(logs.String()))
			return res, nil
		case <-time.After(200 * time.Millisecond): // polling interval
		}
	}
	res.Ready = time.Since(start)
	pid := cmd.Process.Pid
	s.logf("idle: daemon ready in %.1fs; settling %v, sampling %v", res.Ready.Seconds(), c.IdleSettle, c.IdleWindow)
	if err := sleepCtx(ctx, c.IdleSettle); err != nil { // measuring, not synchronising
		return nil, err
	}
	cpu0, err := procCPU(pid)
	if err != nil {
		return nil, err
	}
	t0 := time.Now()
	for time.Since(t0) < c.IdleWindow {
		if err := sleepCtx(ctx, time.Second); err != nil { // sampling interval
			return nil, err
		}
		st, err := procStatus(pid, "VmRSS")
		if err != nil {
			return nil, fmt.Errorf("the daemon exited while idle: %w: %s", err, lastLine(logs.String()))
		}
		res.MaxRSS = max(res.MaxRSS, st["VmRSS"])
	}
	cpu1, err := procCPU(pid)
	if err != nil {
		return nil, err
	}
	res.CPUPct = 100 * (cpu1 - cpu0).Seconds() / time.Since(t0).Seconds()
	st, err := procStatus(pid, "VmHWM", "RssAnon", "RssFile")
	if err != nil {
		return nil, err
	}
	res.HWM, res.Anon, res.File = st["VmHWM"], st["RssAnon"], st["RssFile"]
	s.logf("idle: RSS max %.1f MiB (HWM %.1f MiB), CPU %.2f%%", float64(res.MaxRSS)/(1<<20), float64(res.HWM)/(1<<20), res.CPUPct)
	return res, nil
}

func httpOK(ctx context.Context, url string) (bool, error) {
	rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(rctx, http.MethodGet, url, nil)
	if err != nil {
		return false, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false, err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return false, errors.New(resp.Status)
	}
	return true, nil
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// lockedBuffer collects a child's stderr while the suite reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
