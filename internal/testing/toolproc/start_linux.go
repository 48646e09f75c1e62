//go:build linux

package toolproc

import (
	"runtime"
	"syscall"
)

// startWithDeathSignal starts the process from a goroutine locked to its OS
// thread, with PDEATHSIG set so that the kernel kills the process when that
// thread ends. The goroutine stays locked until the process exits, so the
// thread, and with it the process, lives exactly as long as it should, even
// if the test binary dies without running cleanups.
func startWithDeathSignal(p *Proc) error {
	if p.cmd.SysProcAttr == nil {
		p.cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	p.cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		// Never unlocked: the thread exits with this goroutine, after
		// the process has already exited.
		if err := p.cmd.Start(); err != nil {
			p.waitErr = err
			close(p.exited)
			started <- err
			return
		}
		started <- nil
		p.waitErr = p.cmd.Wait()
		close(p.exited)
	}()
	return <-started
}
