//go:build linux

package e2e

import (
	"runtime"
	"syscall"
)

// startWithDeathSignal starts the process from a goroutine locked to its OS
// thread, with PDEATHSIG set, so the kernel kills the server when that
// thread ends: a test binary that dies without running cleanups leaks no
// server. The goroutine stays locked until the process exits.
func startWithDeathSignal(p *proc) error {
	if p.cmd.SysProcAttr == nil {
		p.cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	p.cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		// Never unlocked: the thread exits with this goroutine, after the
		// process has exited.
		if err := p.cmd.Start(); err != nil {
			started <- err
			p.waitErr = err
			close(p.exited)
			return
		}
		started <- nil
		p.waitErr = p.cmd.Wait()
		close(p.exited)
	}()
	return <-started
}
