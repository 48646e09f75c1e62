//go:build !unix

package compact_test

import "time"

func processCPU() time.Duration { return 0 }
