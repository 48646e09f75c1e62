//go:build linux

package gcsserver

import (
	"runtime"
	"syscall"
)

// startWithDeathSignal starts the process from a goroutine locked to its OS
// thread, with PDEATHSIG set so that the kernel kills the emulator when that
// thread ends. The goroutine stays locked until the process exits, so the
// thread, and with it the emulator, lives exactly as long as it should, even if
// the test binary dies without running cleanups.
func startWithDeathSignal(s *Server) error {
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		// Never unlocked: the thread exits with this goroutine, after
		// the process has already exited.
		if err := s.cmd.Start(); err != nil {
			started <- err
			close(s.exited)
			return
		}
		started <- nil
		s.waitErr = s.cmd.Wait()
		close(s.exited)
	}()
	return <-started
}
