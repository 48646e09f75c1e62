package model

import (
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"sync"
	"time"

	"github.com/google/uuid"
)

// SoakEnv is the environment variable `make soak` sets to the total soak
// duration (e.g. 30m). The three campaigns split it by their shares.
const SoakEnv = "COMPACTORD_SOAK"

// Shares of the soak duration per campaign; they run one after another.
const (
	ShareModel       = 0.40
	ShareCrash       = 0.35
	ShareConcurrency = 0.25
)

// SoakBudget returns a campaign's share of the soak duration, and false
// when no soak was asked for.
func SoakBudget(share float64) (time.Duration, bool, error) {
	s := os.Getenv(SoakEnv)
	if s == "" {
		return 0, false, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return 0, false, fmt.Errorf("%s=%q: want a positive duration such as 30m", SoakEnv, s)
	}
	return time.Duration(float64(d) * share), true, nil
}

// SoakReport is one campaign's totals. Print writes it as the one line
// `make soak` collects.
type SoakReport struct {
	Campaign   string
	Runs       int
	Ops        int
	Faults     int
	Crashes    int
	Races      int
	Violations int
	Elapsed    time.Duration
}

// Print writes the report line.
func (r SoakReport) Print(w io.Writer) {
	fmt.Fprintf(w, "SOAK campaign=%s runs=%d ops=%d faults=%d crashes=%d races=%d violations=%d elapsed=%s\n",
		r.Campaign, r.Runs, r.Ops, r.Faults, r.Crashes, r.Races, r.Violations, r.Elapsed.Round(time.Second))
}

// DeterministicUUIDs makes uuid generation follow seed, so that a seed
// replays with the same object names (and so the same listing orders),
// and returns the function restoring the default. It changes process-wide
// state: only a test running one model at a time may use it.
func DeterministicUUIDs(seed uint64) (restore func()) {
	uuid.SetRand(&lockedReader{r: rand.New(rand.NewPCG(seed, 0x5eed))})
	return func() { uuid.SetRand(nil) }
}

type lockedReader struct {
	mu sync.Mutex
	r  *rand.Rand
}

func (l *lockedReader) Read(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i := range p {
		p[i] = byte(l.r.Uint32())
	}
	return len(p), nil
}
