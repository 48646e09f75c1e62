package crash

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"runtime"
	"sync"
	"syscall"
	"time"
)

// killPlan says when a process is killed with SIGKILL (or, for a graceful
// stop, sent SIGTERM).
type killPlan struct {
	// afterEvents > 0 kills at that filesystem event under the table.
	afterEvents int64
	// afterDelay > 0 kills after that long (with afterEvents, whichever
	// comes first).
	afterDelay time.Duration
	// term sends SIGTERM instead of SIGKILL.
	term bool
}

func (k killPlan) String() string {
	sig := "SIGKILL"
	if k.term {
		sig = "SIGTERM"
	}
	switch {
	case k.afterEvents > 0 && k.afterDelay > 0:
		return fmt.Sprintf("%s at event %d or after %s", sig, k.afterEvents, k.afterDelay.Round(time.Millisecond))
	case k.afterEvents > 0:
		return fmt.Sprintf("%s at event %d", sig, k.afterEvents)
	case k.afterDelay > 0:
		return fmt.Sprintf("%s after %s", sig, k.afterDelay.Round(time.Millisecond))
	}
	return "no kill"
}

// procResult is how one process ended.
type procResult struct {
	err            error // the wait error (nil: exit 0)
	killed         bool  // our signal ended it
	signaled       bool  // we sent the signal (it may have exited first)
	events         int64
	elapsed        time.Duration
	stdout, stderr string
}

// hungTimeout bounds one process: a job that runs this long is hung.
const hungTimeout = 3 * time.Minute

// runProc runs the binary with args in dir and applies plan. stdin, when
// set, is the process's standard input.
func runProc(ctx context.Context, binary, watchDir string, args []string, plan killPlan) procResult {
	var out, errb bytes.Buffer
	cmd := exec.Command(binary, args...)
	cmd.Stdout, cmd.Stderr = &out, &errb
	cmd.SysProcAttr = &syscall.SysProcAttr{}
	setDeathSignal(cmd.SysProcAttr)

	var res procResult
	var mu sync.Mutex
	started := make(chan error, 1)
	exited := make(chan error, 1)
	signal := func() {
		mu.Lock()
		defer mu.Unlock()
		if res.signaled || cmd.Process == nil {
			return
		}
		res.signaled = true
		sig := syscall.SIGKILL
		if plan.term {
			sig = syscall.SIGTERM
		}
		_ = cmd.Process.Signal(sig)
	}
	var fire func()
	target := int64(0)
	if plan.afterEvents > 0 {
		target, fire = plan.afterEvents, signal
	}
	w, werr := newWatcher(watchDir, target, fire)
	if werr != nil {
		return procResult{err: fmt.Errorf("watch %s: %w", watchDir, werr)}
	}
	start := time.Now()
	// The process is started and waited for on one locked OS thread: the
	// death signal is tied to the thread that forked it.
	go func() {
		runtime.LockOSThread()
		mu.Lock()
		err := cmd.Start()
		mu.Unlock()
		started <- err
		if err != nil {
			return
		}
		exited <- cmd.Wait()
	}()
	if err := <-started; err != nil {
		w.Close()
		return procResult{err: err}
	}
	var timer *time.Timer
	if plan.afterDelay > 0 {
		timer = time.AfterFunc(plan.afterDelay, signal)
	}
	hung := time.NewTimer(hungTimeout)
	defer hung.Stop()
	var waitErr error
	select {
	case waitErr = <-exited:
	case <-hung.C:
		_ = cmd.Process.Kill()
		waitErr = <-exited
		res.err = fmt.Errorf("hung: still running after %s (killed)", hungTimeout)
	case <-ctx.Done():
		_ = cmd.Process.Kill()
		waitErr = <-exited
	}
	if timer != nil {
		timer.Stop()
	}
	res.events = w.Close()
	res.elapsed = time.Since(start)
	res.stdout, res.stderr = out.String(), errb.String()
	mu.Lock()
	defer mu.Unlock()
	if res.err == nil {
		res.err = waitErr
	}
	if ps := cmd.ProcessState; ps != nil && res.signaled {
		if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			res.killed = true
		}
	}
	return res
}
