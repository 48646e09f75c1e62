package scheduler

import "fmt"

// Kind is a job kind.
type Kind string

// Job kinds, in their order within a table.
const (
	KindMerge   Kind = "merge"
	KindCompact Kind = "compact"
	KindIndex   Kind = "index"
	KindTrim    Kind = "trim"
	KindCleanup Kind = "cleanup"
)

// Kinds lists every kind in the order they run within a table.
var Kinds = []Kind{KindMerge, KindCompact, KindIndex, KindTrim, KindCleanup}

const numKinds = 5

func (k Kind) index() int {
	for i, x := range Kinds {
		if x == k {
			return i
		}
	}
	return -1
}

// ParseKind checks a kind name.
func ParseKind(s string) (Kind, error) {
	k := Kind(s)
	if k.index() < 0 {
		return "", fmt.Errorf("unknown job kind %q (want merge, compact, index, trim or cleanup)", s)
	}
	return k, nil
}

// Trigger says why a job is pending.
type Trigger string

// Triggers.
const (
	TriggerSchedule Trigger = "schedule"
	TriggerChange   Trigger = "change"
	TriggerManual   Trigger = "manual"
	TriggerRetry    Trigger = "retry"
	TriggerContinue Trigger = "continue"
)
