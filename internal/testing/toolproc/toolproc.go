// Package toolproc runs the server programs that tests start on loopback:
// the S3 gateway (s3server), the Cloud Storage emulator (gcsserver), and the
// servers of the integration tests (internal/testing/e2e). It finds a program in the
// project-local tools folder, chooses a free loopback port, starts the
// process so that it dies with the test binary (PDEATHSIG on Linux), keeps
// the last of its output for error messages, polls until it is ready and
// stops it.
//
// A missing program skips the test, except under CI=true, where it fails:
// CI must not silently lose coverage (SkipOrFail).
package toolproc

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"
)

const (
	// ReadyTimeout bounds StartServer's wait for a server to answer.
	ReadyTimeout = 30 * time.Second
	// StopGrace is how long the harnesses' Stop waits after SIGTERM before
	// it kills the process.
	StopGrace = 5 * time.Second
	// MaxOutput is how much of a process's output Output keeps: the last
	// bytes, so that a chatty server cannot grow it without limit.
	MaxOutput = 64 << 10

	portTries    = 3
	pollInterval = 25 * time.Millisecond
	probeTimeout = 2 * time.Second
)

// InCI reports whether CI=true: a missing component must then fail the
// test rather than skip it.
func InCI() bool { return os.Getenv("CI") == "true" }

// SkipOrFail reports a missing prerequisite: t.Fatal with fatal under
// CI=true, where skipping would hide lost coverage, t.Skip with skip
// elsewhere.
func SkipOrFail(t testing.TB, fatal, skip string) {
	t.Helper()
	if InCI() {
		t.Fatalf("%s", fatal)
	}
	t.Skipf("%s", skip)
}

// Find looks for the executable rel (a slash-separated path below the tools
// folder) in $COMPACTORD_TOOLS, then in <module root>/tools. It returns its
// path, or "" and the paths it looked at.
func Find(rel string) (path string, tried []string) {
	var dirs []string
	if dir := os.Getenv("COMPACTORD_TOOLS"); dir != "" {
		dirs = append(dirs, dir)
	}
	if root, err := ModuleRoot(); err == nil {
		dirs = append(dirs, filepath.Join(root, "tools"))
	}
	for _, dir := range dirs {
		p := filepath.Join(dir, filepath.FromSlash(rel))
		if isExecutable(p) {
			return p, nil
		}
		tried = append(tried, p)
	}
	return "", tried
}

func isExecutable(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0
}

// ModuleRoot walks up from the working directory (a package directory under
// go test) to the directory holding go.mod.
func ModuleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("go.mod not found above the working directory")
		}
		dir = parent
	}
}

// FreePort returns a loopback TCP port that was free a moment ago.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// OnFreePort calls start with a free loopback port until it succeeds, on up
// to three ports: a port found free by listening and closing can be taken
// by someone else before the server binds it. It gives up early once ctx is
// done, and returns the last error.
func OnFreePort[T any](ctx context.Context, start func(port int) (T, error)) (T, error) {
	var zero T
	var lastErr error
	for range portTries {
		port, err := FreePort()
		if err == nil {
			var v T
			if v, err = start(port); err == nil {
				return v, nil
			}
		}
		lastErr = err
		if ctx.Err() != nil {
			break
		}
	}
	return zero, lastErr
}

// Proc is a process started by Start.
type Proc struct {
	cmd      *exec.Cmd
	out      buffer
	exited   chan struct{} // closed when the process has exited
	waitErr  error         // set before exited closes
	stopOnce sync.Once
	stopped  bool // Stop ended the process
}

// Start starts cmd with its standard output and error collected (Output)
// and reaps it in the background. On Linux the process gets PDEATHSIG, so
// that it dies with the test binary even if that dies without running its
// cleanups.
func Start(cmd *exec.Cmd) (*Proc, error) {
	p := &Proc{cmd: cmd, exited: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = &p.out, &p.out
	if err := startWithDeathSignal(p); err != nil {
		return nil, err
	}
	return p, nil
}

// StartServer starts cmd (Start) and waits until ready, called as in
// WaitReady, reports it serving. A process that does not start is reported
// as "start PATH: ..."; one that exits or is not ready within ReadyTimeout is
// stopped and reported as "NAME on ADDR not ready: ...", with its output.
func StartServer(ctx context.Context, name, addr string, cmd *exec.Cmd, ready func(context.Context) error) (*Proc, error) {
	p, err := Start(cmd)
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", cmd.Path, err)
	}
	if err := p.WaitReady(ctx, ReadyTimeout, ready); err != nil {
		p.Stop(StopGrace)
		return nil, fmt.Errorf("%s on %s not ready: %w; output:\n%s", name, addr, err, p.Output())
	}
	return p, nil
}

// WaitReady calls ready every 25ms, each call with a context bounded to 2s,
// until it returns nil. It fails when the process exits or timeout passes
// (or ctx ends), with the last error ready gave.
func (p *Proc) WaitReady(ctx context.Context, timeout time.Duration, ready func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(pollInterval)
	defer tick.Stop()
	for {
		actx, acancel := context.WithTimeout(ctx, probeTimeout)
		err := ready(actx)
		acancel()
		if err == nil {
			return nil
		}
		select {
		case <-p.exited:
			return fmt.Errorf("process exited (%v)", p.waitErr)
		case <-ctx.Done():
			return fmt.Errorf("%w (last error: %v)", ctx.Err(), err)
		case <-tick.C:
		}
	}
}

// Exited is closed when the process has exited.
func (p *Proc) Exited() <-chan struct{} { return p.exited }

// Err is how the process ended (the error of exec.Cmd.Wait), once Exited is
// closed.
func (p *Proc) Err() error { return p.waitErr }

// Output returns the last MaxOutput bytes the process wrote.
func (p *Proc) Output() string { return p.out.String() }

// Stop ends the process if it still runs: SIGTERM, then SIGKILL if it has
// not exited after grace (at once if grace is 0). It returns once the
// process has exited, and reports whether Stop ended it: false if it had
// exited before. Later calls wait for the first and return what it did.
func (p *Proc) Stop(grace time.Duration) bool {
	p.stopOnce.Do(func() {
		select {
		case <-p.exited:
			return
		default:
		}
		p.stopped = true
		if grace > 0 {
			_ = p.cmd.Process.Signal(syscall.SIGTERM)
			t := time.NewTimer(grace)
			defer t.Stop()
			select {
			case <-p.exited:
				return
			case <-t.C:
			}
		}
		_ = p.cmd.Process.Kill()
		<-p.exited
	})
	return p.stopped
}

// buffer keeps the last MaxOutput bytes written to it.
type buffer struct {
	mu  sync.Mutex
	buf []byte
}

func (b *buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(b.buf, p...)
	if len(b.buf) > MaxOutput {
		b.buf = b.buf[len(b.buf)-MaxOutput:]
	}
	return len(p), nil
}

func (b *buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return string(b.buf)
}
