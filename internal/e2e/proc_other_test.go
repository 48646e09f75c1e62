//go:build !linux

package e2e

func startWithDeathSignal(p *proc) error {
	if err := p.cmd.Start(); err != nil {
		return err
	}
	go func() {
		p.waitErr = p.cmd.Wait()
		close(p.exited)
	}()
	return nil
}
