package concurrency_test

import (
	"context"
	"flag"
	"os"
	"strconv"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/compactord/compactord/internal/concurrency"
	"github.com/compactord/compactord/internal/model"
	"github.com/compactord/compactord/internal/testutil"
)

func TestMain(m *testing.M) { testutil.Main(m) }

var (
	seedFlag     = flag.Uint64("seed", 0, "seed (also COMPACTORD_CONCURRENCY_SEED)")
	durationFlag = flag.Duration("duration", 8*time.Second, "how long the writers and daemons run per store")
	verbose      = flag.Bool("concurrency.v", false, "log the daemons at info level")
)

func seed(t *testing.T) uint64 {
	if *seedFlag != 0 {
		return *seedFlag
	}
	if s := os.Getenv("COMPACTORD_CONCURRENCY_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("COMPACTORD_CONCURRENCY_SEED=%q: %v", s, err)
		}
		return v
	}
	return uint64(time.Now().UnixNano()) % 1_000_000_000
}

func runCampaign(t *testing.T, cfg concurrency.Config) *concurrency.Stats {
	t.Helper()
	level := zap.ErrorLevel
	if *verbose {
		level = zap.InfoLevel
	}
	cfg.Logger = zaptest.NewLogger(t, zaptest.Level(level))
	t.Logf("seed %d on %s for %s", cfg.Seed, cfg.URL, cfg.Duration)
	st, err := concurrency.Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("seed %d: %d writer operations (%d failed, %d ambiguous); daemon jobs %v, failures %v; phases %v; end: version %d, %d fragments, %d rows", st.Seed, st.Ops, st.Failed, st.Ambiguous, st.Jobs, st.JobFailures, st.Phases, st.Version, st.Fragments, st.Rows)
	for _, e := range st.Errors {
		t.Logf("error (expected under contention): %s", e)
	}
	for _, v := range st.Violations {
		t.Errorf("violation: %s", v)
	}
	return st
}

// TestConcurrencyCampaign runs writers and two daemons on one table, on
// file:// and on the versitygw S3 server.
func TestConcurrencyCampaign(t *testing.T) {
	s := seed(t)
	t.Run("file", func(t *testing.T) {
		st := runCampaign(t, concurrency.Config{URL: "file://" + t.TempDir(), Seed: s, Duration: *durationFlag})
		if st.Ops < 50 {
			t.Errorf("only %d writer operations: the campaign did not exercise concurrency", st.Ops)
		}
	})
	t.Run("s3", func(t *testing.T) {
		srv := testutil.SharedS3(t)
		runCampaign(t, concurrency.Config{URL: srv.URL(testutil.UniqueName(t)), Seed: s, Duration: *durationFlag})
	})
}

// TestSoakConcurrency runs campaigns for its share of COMPACTORD_SOAK
// (make soak DURATION=30m), alternating file:// and S3.
func TestSoakConcurrency(t *testing.T) {
	budget, ok, err := model.SoakBudget(model.ShareConcurrency)
	if err != nil {
		t.Fatal(err)
	}
	if !ok {
		t.Skip("set COMPACTORD_SOAK (make soak) to run")
	}
	start := time.Now()
	deadline := start.Add(budget)
	sum := model.SoakReport{Campaign: "concurrency"}
	base := seed(t)
	for i := uint64(0); time.Now().Before(deadline); i++ {
		url := "file://" + t.TempDir()
		if i%2 == 1 {
			url = testutil.SharedS3(t).URL(testutil.UniqueName(t))
		}
		d := min(time.Until(deadline), 2*time.Minute)
		st := runCampaign(t, concurrency.Config{URL: url, Seed: base + i, Duration: d})
		sum.Runs++
		sum.Ops += st.Ops
		for _, n := range st.Jobs {
			sum.Ops += n
		}
		sum.Races += st.Failed
		sum.Violations += len(st.Violations)
		if len(st.Violations) > 0 {
			break
		}
	}
	sum.Elapsed = time.Since(start)
	sum.Print(os.Stdout)
}
