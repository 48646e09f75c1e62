//go:build !linux

package toolproc

// startWithDeathSignal starts the process and reaps it in the background.
// Without PDEATHSIG (Linux only) a test binary that dies without running its
// cleanups leaves the process running.
func startWithDeathSignal(p *Proc) error {
	if err := p.cmd.Start(); err != nil {
		p.waitErr = err
		close(p.exited)
		return err
	}
	go func() {
		p.waitErr = p.cmd.Wait()
		close(p.exited)
	}()
	return nil
}
