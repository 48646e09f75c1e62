//go:build !linux

package gcsserver

// startWithDeathSignal starts the process and reaps it in the background.
// Without PDEATHSIG (Linux only) a test binary that dies without running its
// cleanups leaves the emulator running.
func startWithDeathSignal(s *Server) error {
	if err := s.cmd.Start(); err != nil {
		close(s.exited)
		return err
	}
	go func() {
		s.waitErr = s.cmd.Wait()
		close(s.exited)
	}()
	return nil
}
