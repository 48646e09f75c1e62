// Package content holds the result of an index content check
// (index.CheckContent), apart from package index so that verify can report
// it without depending on the index jobs (and, through them, on table).
package content

// Check is what a content check found in one logical index.
type Check struct {
	Name string `json:"name"`
	Kind string `json:"kind"`
	// Checked is false when compactord cannot read the index's content
	// (Reason says why); Problems is then empty.
	Checked bool   `json:"checked"`
	Reason  string `json:"reason,omitempty"`
	// Segments and Entries are the segments and entries read.
	Segments int    `json:"segments"`
	Entries  uint64 `json:"entries"`
	// Masked counts entries a reader masks: rows deleted since the index
	// was built, and rows of fragments no longer in the version.
	Masked uint64 `json:"masked"`
	// Note says what the check of a vector or full-text index leaves out.
	Note string `json:"note,omitempty"`
	// Problems are the disagreements with the data, one line each, naming
	// the segment.
	Problems []string `json:"problems"`
}
