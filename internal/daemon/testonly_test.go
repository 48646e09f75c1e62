package daemon

// What only tests use: kept out of the product binary, still checked by the
// tests that exercise it.

// Addr is the HTTP listen address once Run has bound it ("" before).
func (d *Daemon) Addr() string {
	if a := d.addr.Load(); a != nil {
		return *a
	}
	return ""
}
