//go:build !unix

package fri

import "time"

func processCPU() time.Duration { return 0 }
