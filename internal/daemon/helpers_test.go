package daemon_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/compactord/compactord/internal/daemon"
	"github.com/compactord/compactord/internal/scheduler"
	"github.com/compactord/compactord/lancewal"
)

var seq atomic.Int64

func memRoot(t *testing.T) string {
	return fmt.Sprintf("mem://daemon-%s-%d", strings.ToLower(strings.ReplaceAll(t.Name(), "/", "-")), seq.Add(1))
}

// createTable creates an empty Lance table at url (id int64 primary key,
// cat string, val double) and returns it opened for MemWAL writes.
func createTable(t *testing.T, url string) *lancewal.Table {
	t.Helper()
	tb, err := lancewal.CreateTable(context.Background(), url, []lancewal.Column{
		{Name: "id", Type: "int64"}, {Name: "cat", Type: "string", Nullable: true}, {Name: "val", Type: "double", Nullable: true}}, "id")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tb.Close() })
	return tb
}

// baseConfig: schedules off, leasing off, an ephemeral port.
func baseConfig() daemon.Config {
	c := daemon.DefaultConfig()
	c.HTTP.Listen = "127.0.0.1:0"
	c.Scheduler.Schedule = scheduler.Schedules{Merge: "off", Compact: "off", Index: "off", Trim: "off", Cleanup: "off"}
	c.Scheduler.Lease.Enabled = false
	c.Scheduler.PollInterval = 0
	c.Scheduler.ShutdownGrace = 5 * time.Second
	return c
}

// recorder is a job set that records calls (fault injection only: the
// daemon's real jobs are tested in their packages and end to end below).
type recorder struct {
	mu    sync.Mutex
	calls []string
}

func (r *recorder) jobs() map[scheduler.Kind]scheduler.JobFunc {
	out := map[scheduler.Kind]scheduler.JobFunc{}
	for _, k := range scheduler.Kinds {
		out[k] = func(ctx context.Context, h *scheduler.TableHandle) (scheduler.Outcome, error) {
			r.mu.Lock()
			r.calls = append(r.calls, h.Name+"/"+string(k))
			r.mu.Unlock()
			return scheduler.Outcome{Summary: "recorded"}, nil
		}
	}
	return out
}

func (r *recorder) has(c string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, x := range r.calls {
		if x == c {
			return true
		}
	}
	return false
}

type running struct {
	d      *daemon.Daemon
	base   string
	cancel context.CancelFunc
	done   chan error
}

func run(t *testing.T, cfg daemon.Config, deps daemon.Deps) *running {
	t.Helper()
	if deps.Logger == nil {
		deps.Logger = zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel))
	}
	d, err := daemon.New(cfg, deps)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{d: d, cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- d.Run(ctx) }()
	eventually(t, "listening", func() bool { return d.Addr() != "" })
	r.base = "http://" + d.Addr()
	t.Cleanup(func() { _ = r.stop() })
	return r
}

func (r *running) stop() error {
	r.cancel()
	err := <-r.done
	r.done <- err
	return err
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// within polls cond for a short while.
func within(cond func() bool) bool {
	deadline := time.Now().Add(300 * time.Millisecond)
	for time.Now().Before(deadline) {
		if cond() {
			return true
		}
		time.Sleep(time.Millisecond)
	}
	return cond()
}

type resp struct {
	status int
	header http.Header
	body   string
}

func do(t *testing.T, method, url, token string, hdr ...string) resp {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return resp{res.StatusCode, res.Header, string(b)}
}

func decode(t *testing.T, s string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		t.Fatalf("not JSON: %v: %s", err, s)
	}
	return m
}
