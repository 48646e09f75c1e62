package toolproc_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/compactord/compactord/internal/testing/toolproc"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestFind(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "sub", "tool")
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "plain"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("COMPACTORD_TOOLS", dir)
	if got, tried := toolproc.Find("sub/tool"); got != p {
		t.Errorf("Find = %q (tried %v), want %q", got, tried, p)
	}
	// Not executable: not found; the module's tools folder is looked at
	// next.
	got, tried := toolproc.Find("plain")
	root, err := toolproc.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	want := []string{filepath.Join(dir, "plain"), filepath.Join(root, "tools", "plain")}
	if got != "" || strings.Join(tried, ",") != strings.Join(want, ",") {
		t.Errorf("Find(plain) = %q, tried %v; want tried %v", got, tried, want)
	}
	t.Setenv("COMPACTORD_TOOLS", "")
	t.Chdir(t.TempDir()) // outside the module: no fallback
	if got, tried := toolproc.Find("sub/tool"); got != "" || len(tried) != 0 {
		t.Errorf("Find outside the module = %q, tried %v", got, tried)
	}
	if _, err := toolproc.ModuleRoot(); err == nil {
		t.Errorf("ModuleRoot found a go.mod above a temp dir")
	}
}

// SkipOrFail is checked through a harness: gcsserver's
// TestMissingBinarySkipsOrFails.

func TestOnFreePort(t *testing.T) {
	ctx := t.Context()
	var ports []int
	v, err := toolproc.OnFreePort(ctx, func(port int) (string, error) {
		ports = append(ports, port)
		if len(ports) < 3 {
			return "", errors.New("taken")
		}
		return "ok", nil
	})
	if v != "ok" || err != nil || len(ports) != 3 || ports[2] == 0 {
		t.Errorf("third try: %q, %v after ports %v", v, err, ports)
	}

	calls := 0
	_, err = toolproc.OnFreePort(ctx, func(port int) (int, error) {
		calls++
		return 0, errors.New("taken")
	})
	if err == nil || calls != 3 {
		t.Errorf("never free: %v after %d calls, want an error after 3", err, calls)
	}

	cctx, cancel := context.WithCancel(ctx)
	cancel()
	calls = 0
	_, err = toolproc.OnFreePort(cctx, func(port int) (int, error) {
		calls++
		return 0, cctx.Err()
	})
	if !errors.Is(err, context.Canceled) || calls != 1 {
		t.Errorf("cancelled: %v after %d calls, want context.Canceled after 1", err, calls)
	}
}

// startScript starts a shell script and waits until it has printed ready.
func startScript(t *testing.T, script string) *toolproc.Proc {
	t.Helper()
	p, err := toolproc.Start(exec.Command("/bin/sh", "-c", script))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Stop(0) })
	if err := p.WaitReady(t.Context(), 10*time.Second, func(context.Context) error {
		if !strings.Contains(p.Output(), "ready") {
			return errors.New("not yet")
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return p
}

// run runs a shell script to its end.
func run(t *testing.T, script string) *toolproc.Proc {
	t.Helper()
	p, err := toolproc.Start(exec.Command("/bin/sh", "-c", script))
	if err != nil {
		t.Fatal(err)
	}
	<-p.Exited()
	return p
}

func TestStop(t *testing.T) {
	p := startScript(t, "echo ready; exec sleep 60")
	if !p.Stop(time.Minute) {
		t.Errorf("Stop did not report that it ended the process")
	}
	select {
	case <-p.Exited():
	default:
		t.Fatal("Stop returned before the process exited")
	}
	if err := p.Err(); err == nil || !strings.Contains(err.Error(), "terminated") {
		t.Errorf("Err after SIGTERM = %v", err)
	}
	if !p.Stop(time.Minute) {
		t.Errorf("second Stop answered differently")
	}

	// A process that ignores SIGTERM is killed after the grace period.
	p = startScript(t, "trap '' TERM; echo ready; exec sleep 60")
	if !p.Stop(10 * time.Millisecond) {
		t.Errorf("Stop did not report that it ended the process")
	}
	if err := p.Err(); err == nil || !strings.Contains(err.Error(), "killed") {
		t.Errorf("Err after the grace period = %v", err)
	}

	// One that exited by itself was not stopped.
	p = run(t, "exit 3")
	if p.Stop(time.Minute) {
		t.Errorf("Stop claims to have ended a process that had exited")
	}
	if err := p.Err(); err == nil || !strings.Contains(err.Error(), "exit status 3") {
		t.Errorf("Err = %v, want exit status 3", err)
	}
}

// A server that exits instead of serving is reported at once, with its
// output; one that cannot start says so.
func TestStartServerErrors(t *testing.T) {
	never := func(context.Context) error { return errors.New("refused") }
	cmd := exec.Command("/bin/sh", "-c", "echo cannot serve >&2; exit 3")
	_, err := toolproc.StartServer(t.Context(), "srv", "127.0.0.1:1", cmd, never)
	if err == nil || !strings.Contains(err.Error(), "srv on 127.0.0.1:1 not ready: process exited (exit status 3)") ||
		!strings.Contains(err.Error(), "cannot serve") {
		t.Errorf("exited: %v", err)
	}

	missing := filepath.Join(t.TempDir(), "missing")
	_, err = toolproc.StartServer(t.Context(), "srv", "127.0.0.1:1", exec.Command(missing), never)
	if err == nil || !strings.HasPrefix(err.Error(), "start "+missing+": ") {
		t.Errorf("missing binary: %v", err)
	}

	// Not ready in time: the last error is given.
	p := startScript(t, "echo ready; exec sleep 60")
	err = p.WaitReady(t.Context(), 50*time.Millisecond, never)
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "refused") {
		t.Errorf("WaitReady timeout: %v", err)
	}
}

func TestOutputIsBounded(t *testing.T) {
	// 3 × 64 KiB of "x" then a marker; only the last MaxOutput bytes stay.
	script := "head -c 196608 /dev/zero | tr '\\0' x; echo ready"
	p := run(t, script)
	out := p.Output()
	if len(out) != toolproc.MaxOutput || !strings.HasSuffix(out, "xready\n") {
		t.Errorf("Output: %d bytes ending %q", len(out), out[max(0, len(out)-10):])
	}
}
