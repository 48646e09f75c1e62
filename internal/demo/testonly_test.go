package demo

// What only tests use: kept out of the product binary, still checked by the
// tests that exercise it.

// Model returns what table name should read as once the workload stopped
// (Run returned): key → "cat/val". Call it only after Run.
func (w *Workload) Model(name string) map[int64]string {
	for _, t := range w.tables {
		if t.name == name {
			return t.model
		}
	}
	return nil
}
