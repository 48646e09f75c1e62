package cli

import (
	"context"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/compactord/compactord/internal/clock"
	"github.com/compactord/compactord/internal/commit"
	"github.com/compactord/compactord/internal/storage"
	"github.com/compactord/compactord/internal/table"
)

// TestIdleDaemonFootprintLance measures the idle footprint of the daemon:
// COMPACTORD_BENCH_TABLES (default 1000) small Lance tables that
// compactord's own code creates (one append of 100 rows each), watched by
// the real binary with the default configuration. Goals: 1000 tables
// within 64 MiB and 2% of a core, 100 within 50 MiB and 1%.
// COMPACTORD_BENCH_DIR keeps the tables and the configuration there;
// COMPACTORD_BENCH_BIN runs that binary instead of building this tree's.
//
//	COMPACTORD_BENCH_IDLE=1 go test ./internal/cli -run TestIdleDaemonFootprintLance -v
func TestIdleDaemonFootprintLance(t *testing.T) {
	if os.Getenv("COMPACTORD_BENCH_IDLE") != "1" {
		t.Skip("set COMPACTORD_BENCH_IDLE=1 to run the idle-footprint benchmark")
	}
	window := 60 * time.Second
	if s := os.Getenv("COMPACTORD_BENCH_SECONDS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil {
			t.Fatal(err)
		}
		window = time.Duration(n) * time.Second
	}
	tables := 1000
	if s := os.Getenv("COMPACTORD_BENCH_TABLES"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			t.Fatalf("COMPACTORD_BENCH_TABLES=%q", s)
		}
		tables = n
	}
	dir := t.TempDir()
	if d := os.Getenv("COMPACTORD_BENCH_DIR"); d != "" {
		dir = d // kept, with its c.yaml, for profiling the daemon by hand
	}
	bin := filepath.Join(dir, "compactord")
	if b := os.Getenv("COMPACTORD_BENCH_BIN"); b != "" {
		bin = b // another build, to compare
	} else if out, err := exec.Command("go", "build", "-o", bin, "../../cmd/compactord").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	ctx := context.Background()
	fields, err := table.ParseFields("id:int64,cat:string,val:float64", []string{"id"})
	if err != nil {
		t.Fatal(err)
	}
	var rows strings.Builder
	for i := range 100 {
		fmt.Fprintf(&rows, `{"id":%d,"cat":"c%d","val":%d.5}`+"\n", i, i%5, i)
	}
	var cfg strings.Builder
	cfg.WriteString("http:\n  listen: 127.0.0.1:0\nlog:\n  level: warn\ntables:\n")
	for i := range tables {
		url := "file://" + filepath.Join(dir, "tables", fmt.Sprintf("t%04d.lance", i))
		b, err := storage.Open(ctx, url)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := table.Create(ctx, b, fields, "", time.Now()); err != nil {
			t.Fatal(err)
		}
		c, err := commit.NewCommitter(commit.DefaultConfig(), b, clock.Real(), commit.NewMetrics(prometheus.NewRegistry()), zap.NewNop())
		if err != nil {
			t.Fatal(err)
		}
		h, err := table.New(b, c)
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := h.AppendJSON(ctx, strings.NewReader(rows.String())); err != nil {
			t.Fatal(err)
		}
		_ = b.Close()
		fmt.Fprintf(&cfg, "  - url: %s\n", url)
	}
	// The first merge and index attempt of every table (trim and cleanup
	// first run after their interval).
	rss, cpuPct := measureIdle(t, bin, dir, cfg.String(), window, 2*tables)
	t.Logf("idle daemon, %d Lance tables: RSS max %.1f MiB, CPU %.3f%% of one core", tables, float64(rss)/(1<<20), cpuPct)
	maxRSS, maxCPU := int64(64<<20), 2.0
	if tables <= 100 {
		maxRSS, maxCPU = 50<<20, 1
	}
	if rss > maxRSS {
		t.Errorf("RSS %.1f MiB over the %d MiB goal", float64(rss)/(1<<20), maxRSS>>20)
	}
	if cpuPct > maxCPU {
		t.Errorf("CPU %.3f%% over the %g%% goal", cpuPct, maxCPU)
	}
}

// measureIdle runs the daemon on cfg, waits for the first round of jobs to
// be over (at least minRuns attempts started, none running or waiting),
// lets every table be synced, polled and leased once more, then samples
// RSS each second over window and the CPU used in it.
func measureIdle(t *testing.T, bin, dir, cfg string, window time.Duration, minRuns int) (maxRSS int64, cpuPct float64) {
	t.Helper()
	file := filepath.Join(dir, "c.yaml")
	if err := os.WriteFile(file, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "run", "--config", file, "--log-level", "info")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	logs := &logLines{}
	go logs.read(stderr)
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	waitFor(t, "listening", func() bool { return logs.find("compactord running") != nil })
	base := "http://" + logs.find("compactord running")["listen"].(string)
	waitFor(t, "ready", func() bool {
		res, err := http.Get(base + "/-/ready")
		if err != nil {
			return false
		}
		res.Body.Close()
		return res.StatusCode == 200
	})
	// Warm up: the first round of jobs over (read from the log: scraping
	// /metrics of many tables would itself grow the heap being measured),
	// then every table synced, polled and leased once more.
	started := func() int {
		logs.mu.Lock()
		defer logs.mu.Unlock()
		n := 0
		for _, m := range logs.lines {
			// Started, not finished: these first attempts find nothing
			// to do, and a skipped attempt's end is logged at debug.
			if m != nil && m["msg"] == "job started" {
				n++
			}
		}
		return n
	}
	for deadline := time.Now().Add(5 * time.Minute); started() < minRuns; {
		if time.Now().After(deadline) {
			t.Fatalf("%d of the first %d job attempts started in 5 minutes", started(), minRuns)
		}
		time.Sleep(time.Second) // polling the log, not the daemon
	}
	time.Sleep(15 * time.Second) // measuring, not synchronising
	pid := cmd.Process.Pid
	cpu0, _ := procCPU(t, pid)
	start := time.Now()
	for time.Since(start) < window {
		time.Sleep(time.Second) // sampling interval of the measurement
		maxRSS = max(maxRSS, procRSS(t, pid))
	}
	cpu1, hz := procCPU(t, pid)
	elapsed := time.Since(start).Seconds()
	cpuPct = float64(cpu1-cpu0) / hz / elapsed * 100
	hwm := procField(t, pid, "VmHWM:")
	anon, mapped := procField(t, pid, "RssAnon:"), procField(t, pid, "RssFile:")
	t.Logf("%0.fs window: RSS max %.1f MiB (high-water %.1f MiB; at the end %.1f MiB anonymous + %.1f MiB of the binary's pages), CPU %.3f%% of one core (%.2f CPU-seconds per minute)",
		elapsed, float64(maxRSS)/(1<<20), float64(hwm)/(1<<20), float64(anon)/(1<<20), float64(mapped)/(1<<20), cpuPct, float64(cpu1-cpu0)/hz/elapsed*60)
	// Then the object-store requests of an idle table, over a second
	// window of the same length (scraping /metrics during the first would
	// have grown the heap it measured).
	ops0, jobs0 := objstoreOps(t, base), started()
	start = time.Now()
	time.Sleep(window) // measuring, not synchronising
	ops1, jobs1 := objstoreOps(t, base), started()
	elapsed = time.Since(start).Seconds()
	var total float64
	var parts []string
	for _, op := range slices.Sorted(maps.Keys(ops1)) {
		if d := ops1[op] - ops0[op]; d > 0 {
			total += d
			parts = append(parts, fmt.Sprintf("%s=%.0f", op, d))
		}
	}
	tables := float64(strings.Count(cfg, "- url:"))
	t.Logf("%0.fs window: %.0f object-store requests (%s), %.3f per second per table; %d job attempts started in it",
		elapsed, total, strings.Join(parts, " "), total/elapsed/tables, jobs1-jobs0)
	return maxRSS, cpuPct
}

// objstoreOps scrapes the daemon's object-store operation counters, summed
// by operation.
func objstoreOps(t *testing.T, base string) map[string]float64 {
	t.Helper()
	res, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, line := range strings.Split(string(body), "\n") {
		rest, ok := strings.CutPrefix(line, "compactord_objstore_operations_total{")
		if !ok {
			continue
		}
		labels, value, _ := strings.Cut(rest, "} ")
		_, op, _ := strings.Cut(labels, `operation="`)
		op, _, _ = strings.Cut(op, `"`)
		v, err := strconv.ParseFloat(strings.TrimSpace(value), 64)
		if err != nil {
			t.Fatalf("metrics line %q: %v", line, err)
		}
		out[op] += v
	}
	return out
}

func procCPU(t *testing.T, pid int) (ticks int64, hz float64) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	s := string(data)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	ut, _ := strconv.ParseInt(fields[11], 10, 64)
	st, _ := strconv.ParseInt(fields[12], 10, 64)
	return ut + st, 100 // USER_HZ is 100 on Linux
}

func procRSS(t *testing.T, pid int) int64 { return procField(t, pid, "VmRSS:") }

func procField(t *testing.T, pid int, key string) int64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, key); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}
