package crash_test

import (
	"context"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/compactord/compactord/internal/crash"
	"github.com/compactord/compactord/internal/model"
	"github.com/compactord/compactord/internal/testutil"
)

func TestMain(m *testing.M) { testutil.Main(m) }

var (
	seedFlag  = flag.Uint64("seed", 0, "run only this seed (also COMPACTORD_CRASH_SEED)")
	stepsFlag = flag.Int("steps", 100, "processes per seed")
	verbose   = flag.Bool("crash.v", false, "log every process")
)

var binary struct {
	once sync.Once
	path string
	err  error
	out  []byte
}

// buildBinary builds compactord once per test binary, or returns
// $COMPACTORD_BINARY when set (a soak pins the build it tests).
func buildBinary(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("COMPACTORD_BINARY"); p != "" {
		return p
	}
	binary.once.Do(func() {
		dir, err := os.MkdirTemp("", "compactord-crash-bin-")
		if err != nil {
			binary.err = err
			return
		}
		goBin, err := exec.LookPath("go")
		if err != nil {
			binary.err = err
			return
		}
		binary.path = filepath.Join(dir, "compactord")
		cmd := exec.Command(goBin, "build", "-o", binary.path, "github.com/compactord/compactord/cmd/compactord")
		binary.out, binary.err = cmd.CombinedOutput()
	})
	if binary.err != nil {
		t.Fatalf("build compactord: %v\n%s", binary.err, binary.out)
	}
	return binary.path
}

func seed(t *testing.T) uint64 {
	if *seedFlag != 0 {
		return *seedFlag
	}
	if s := os.Getenv("COMPACTORD_CRASH_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("COMPACTORD_CRASH_SEED=%q: %v", s, err)
		}
		return v
	}
	return uint64(time.Now().UnixNano()) % 1_000_000_000
}

func runCampaign(t *testing.T, cfg crash.Config) *crash.Stats {
	t.Helper()
	cfg.Binary = buildBinary(t)
	cfg.Dir = filepath.Join(t.TempDir(), "table")
	cfg.WorkDir = t.TempDir()
	if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if *verbose {
		cfg.Logf = t.Logf
	}
	// The seed fixes the jobs and the kill plans; where a kill lands
	// depends on timing, so a replay is close but not exact.
	t.Logf("seed %d (replay: go test ./internal/crash -run TestCrashCampaign -seed %d -steps %d -crash.v)", cfg.Seed, cfg.Seed, cfg.Steps)
	st, err := crash.Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("seed %d: %d processes, %d killed, %d graceful stops, by kind %v", st.Seed, st.Processes, st.Kills, st.Terms, st.ByKind)
	for _, v := range st.Violations {
		t.Errorf("violation: %s", v)
	}
	return st
}

// TestCrashCampaign kills CLI jobs and the daemon at random points, then
// checks the table against the model and runs verify after every process.
func TestCrashCampaign(t *testing.T) {
	st := runCampaign(t, crash.Config{Seed: seed(t), Steps: *stepsFlag})
	if st.Kills < 20 && len(st.Violations) == 0 && *stepsFlag >= 70 {
		t.Errorf("only %d kills in %d processes: the campaign is not exercising crashes", st.Kills, st.Processes)
	}
}

// TestSoakCrash runs campaigns back to back for its share of
// COMPACTORD_SOAK (make soak DURATION=30m).
func TestSoakCrash(t *testing.T) {
	budget, ok, err := model.SoakBudget(model.ShareCrash)
	if err != nil {
		t.Fatal(err)
	}
	if !ok {
		t.Skip("set COMPACTORD_SOAK (make soak) to run")
	}
	start := time.Now()
	deadline := start.Add(budget)
	sum := model.SoakReport{Campaign: "crash"}
	base := seed(t)
	for i := uint64(0); time.Now().Before(deadline); i++ {
		left := time.Until(deadline)
		st := runCampaign(t, crash.Config{Seed: base + i, Steps: 400, Duration: min(left, 10*time.Minute)})
		sum.Runs++
		sum.Ops += st.Processes
		sum.Crashes += st.Kills
		sum.Violations += len(st.Violations)
		if len(st.Violations) > 0 {
			break
		}
	}
	sum.Elapsed = time.Since(start)
	sum.Print(os.Stdout)
}
