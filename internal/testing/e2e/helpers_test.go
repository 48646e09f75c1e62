package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/compactord/compactord/internal/testing/toolproc"
)

// skipOrFail reports a missing prerequisite: a failure under CI=true, a
// skip with the reason elsewhere.
func skipOrFail(t testing.TB, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	toolproc.SkipOrFail(t, "CI=true and a required component is missing: "+msg, "skipping: "+msg)
}

// requireTool returns the path of an executable in PATH, or skips/fails
// with the command that installs it.
func requireTool(t testing.TB, name, install string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		skipOrFail(t, "%s not found in PATH; install it with: %s", name, install)
	}
	return p
}

var root struct {
	once sync.Once
	dir  string
	err  error
}

// moduleRoot is the directory holding go.mod (tests run in the package
// directory).
func moduleRoot(t testing.TB) string {
	t.Helper()
	root.once.Do(func() { root.dir, root.err = toolproc.ModuleRoot() })
	if root.err != nil {
		t.Fatalf("module root: %v", root.err)
	}
	return root.dir
}

// repoFile is the path of a file of the repository.
func repoFile(t testing.TB, rel string) string {
	return filepath.Join(moduleRoot(t), filepath.FromSlash(rel))
}

func readRepoFile(t testing.TB, rel string) []byte {
	t.Helper()
	b, err := os.ReadFile(repoFile(t, rel))
	if err != nil {
		t.Fatalf("read %s: %v", rel, err)
	}
	return b
}

func freePort(t testing.TB) int {
	t.Helper()
	port, err := toolproc.FreePort()
	if err != nil {
		t.Fatalf("find a free port: %v", err)
	}
	return port
}

// run runs a command to completion and returns its combined output.
func run(t testing.TB, dir string, env []string, name string, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	if env != nil {
		cmd.Env = env
	}
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// proc is a server process started by a test. It dies with the test binary
// (PDEATHSIG on Linux) and is stopped by the test's cleanup.
type proc struct {
	*toolproc.Proc
	name string
	// kill skips the graceful stop: for servers whose state is a temp dir
	// and whose drain would wait for the clients' idle keep-alive
	// connections (Azurite).
	kill bool
}

// startProc starts cmd, with stdout and stderr collected, and stops it when
// the test ends.
func startProc(t testing.TB, name string, cmd *exec.Cmd) *proc {
	t.Helper()
	tp, err := toolproc.Start(cmd)
	if err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	p := &proc{Proc: tp, name: name}
	t.Cleanup(func() {
		if err := p.stop(); err != nil && !t.Failed() {
			t.Logf("%s exited with %v", name, err)
		}
		if t.Failed() {
			t.Logf("%s output (last %d bytes):\n%s", name, toolproc.MaxOutput, p.Output())
		}
	})
	return p
}

// stop sends SIGTERM, waits up to 30s, then kills (kills at once if
// p.kill). It returns the wait error (nil for exit status 0, and nil when
// p.kill and it killed the process). It is idempotent.
func (p *proc) stop() error {
	grace := 30 * time.Second
	if p.kill {
		grace = 0
	}
	if p.Stop(grace) && p.kill {
		return nil
	}
	return p.Err()
}

// waitFor polls cond every 50ms until it reports true, the process (if
// any) exits, or the timeout passes; the last detail cond gave goes into
// the failure. It never sleeps blindly: each round asks the real state.
func waitFor(t testing.TB, timeout time.Duration, what string, p *proc, cond func() (bool, string)) {
	t.Helper()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	var exited <-chan struct{}
	if p != nil {
		exited = p.Exited()
	}
	last := ""
	for {
		ok, detail := cond()
		if ok {
			return
		}
		last = detail
		select {
		case <-exited:
			t.Fatalf("waiting for %s: %s exited (%v); last: %s\noutput:\n%s", what, p.name, p.Err(), last, p.Output())
		case <-deadline.C:
			t.Fatalf("waiting for %s: timed out after %s; last: %s", what, timeout, last)
		case <-tick.C:
		}
	}
}

var httpClient = &http.Client{Timeout: 10 * time.Second}

// httpGet returns the status and body of a GET.
func httpGet(url string) (int, string, error) {
	resp, err := httpClient.Get(url)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	return resp.StatusCode, string(b), err
}

// envWith returns the process environment with the given variables set.
func envWith(kv ...string) []string {
	env := os.Environ()
	for i := 0; i+1 < len(kv); i += 2 {
		prefix := kv[i] + "="
		out := env[:0:0]
		for _, e := range env {
			if !strings.HasPrefix(e, prefix) {
				out = append(out, e)
			}
		}
		env = append(out, prefix+kv[i+1])
	}
	return env
}

func lookTool(name string) (string, error) { return exec.LookPath(name) }

// runStdin runs a command with stdin and returns its combined output.
func runStdin(t testing.TB, stdin, name string, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Stdin = strings.NewReader(stdin)
	out, err := cmd.CombinedOutput()
	return string(out), err
}
