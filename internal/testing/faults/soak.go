package faults

import (
	"fmt"
	"io"
	"os"
	"time"
)

// SoakEnv is the environment variable `make soak` sets to the total soak
// duration (e.g. 30m). Each campaign takes its share of it.
const SoakEnv = "COMPACTORD_SOAK"

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
