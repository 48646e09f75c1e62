package model_test

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/compactord/compactord/internal/model"
	"github.com/compactord/compactord/internal/testutil"
)

func TestMain(m *testing.M) { testutil.Main(m) }

var (
	seedFlag  = flag.Uint64("seed", 0, "run only this seed (also COMPACTORD_MODEL_SEED)")
	stepsFlag = flag.Int("steps", 200, "steps per seed")
	verbose   = flag.Bool("model.v", false, "log every step")
	fileFlag  = flag.Bool("file", false, "run TestModel on file:// instead of mem://")
)

// seeds returns the seeds to run: the one asked for, or two fixed seeds
// and one new one (printed, so that a failure can be replayed).
func seeds(t *testing.T) []uint64 {
	if *seedFlag != 0 {
		return []uint64{*seedFlag}
	}
	if s := os.Getenv("COMPACTORD_MODEL_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("COMPACTORD_MODEL_SEED=%q: %v", s, err)
		}
		return []uint64{v}
	}
	return []uint64{1, 2, uint64(time.Now().UnixNano()) % 1_000_000_000}
}

// TestModel drives random operations, faults, crashes and races against
// the reference model (see package doc). Replay a failure with
// go test ./internal/model -run TestModel -seed N [-model.v].
func TestModel(t *testing.T) {
	for _, seed := range seeds(t) {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			cfg := model.Config{Seed: seed, Steps: *stepsFlag}
			if *fileFlag {
				cfg.URL = "file://" + t.TempDir()
			}
			runSeed(t, cfg)
		})
	}
}

// TestModelFile runs one seed on file://, where put-if-absent is the
// link-based implementation rather than memblob's.
func TestModelFile(t *testing.T) {
	if *seedFlag != 0 {
		t.Skip("-seed replays TestModel (add -file for file://)")
	}
	runSeed(t, model.Config{Seed: 7, Steps: *stepsFlag / 2, URL: "file://" + t.TempDir()})
}

func runSeed(t *testing.T, cfg model.Config) *model.Stats {
	t.Helper()
	file := ""
	if strings.HasPrefix(cfg.URL, "file://") {
		file = " -file"
	}
	t.Logf("seed %d (replay: go test ./internal/model -run 'TestModel$' -seed %d -steps %d%s -model.v)", cfg.Seed, cfg.Seed, cfg.Steps, file)
	if *verbose {
		cfg.Logf = t.Logf
	}
	restore := model.DeterministicUUIDs(cfg.Seed)
	defer restore()
	st, err := model.Run(context.Background(), cfg)
	if err != nil {
		t.Fatalf("seed %d: %v", cfg.Seed, err)
	}
	t.Logf("seed %d: %d steps, %d failed ops, %d faults injected, %d crashes survived, %d races, %d ambiguous outcomes reconciled",
		st.Seed, st.Steps, st.Failed, st.Faults, st.Crashes, st.Races, st.Ambiguous)
	for _, v := range st.Violations {
		t.Errorf("violation: %s", v)
	}
	return st
}

// TestSoakModel runs seeds back to back for its share of COMPACTORD_SOAK
// (make soak DURATION=30m), alternating mem:// and file://.
func TestSoakModel(t *testing.T) {
	budget, ok, err := model.SoakBudget(model.ShareModel)
	if err != nil {
		t.Fatal(err)
	}
	if !ok {
		t.Skip("set COMPACTORD_SOAK (make soak) to run")
	}
	start := time.Now()
	deadline := start.Add(budget)
	sum := model.SoakReport{Campaign: "model"}
	base := uint64(time.Now().UnixNano()) % 1_000_000_000
	for i := uint64(0); time.Now().Before(deadline); i++ {
		cfg := model.Config{Seed: base + i, Steps: 400}
		if i%2 == 1 {
			cfg.URL = "file://" + t.TempDir()
		}
		if left := time.Until(deadline); left < 5*time.Minute {
			cfg.Duration = left
		}
		st := runSeed(t, cfg)
		sum.Runs++
		sum.Ops += st.Steps
		sum.Faults += st.Faults
		sum.Crashes += st.Crashes
		sum.Races += st.Races
		sum.Violations += len(st.Violations)
		if len(st.Violations) > 0 {
			break
		}
	}
	sum.Elapsed = time.Since(start)
	sum.Print(os.Stdout)
}
