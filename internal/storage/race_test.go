package storage_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/compactord/compactord/internal/storage"
	"github.com/compactord/compactord/internal/testing/stores"
)

// TestPutIfAbsentRace checks the package INVARIANT on every backend: in each
// round, writers start together on one fresh key; exactly one must win, the
// rest must see IsAlreadyExists, and the stored object must be the winner's.
func TestPutIfAbsentRace(t *testing.T) {
	const writers = 8
	rounds := 1000
	if testing.Short() {
		rounds = 100
	}
	stores.ForEachStore(t, func(t *testing.T, url string) {
		putIfAbsentRace(t, stores.Open(t, url), writers, rounds)
	})
}

// putIfAbsentRace is the package INVARIANT: writers race PutIfAbsent on one
// fresh key, starting together, round after round; exactly one wins each
// round, every other is told the key exists, and the stored object is the
// winner's.
func putIfAbsentRace(t *testing.T, b storage.Bucket, writers, rounds int) {
	t.Helper()
	ctx := t.Context()
	for round := range rounds {
		key := fmt.Sprintf("_log/%020d.json", round)
		errs := make([]error, writers)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for w := range writers {
			wg.Go(func() {
				<-start
				errs[w] = b.PutIfAbsent(ctx, key, fmt.Appendf(nil, "writer %d round %d", w, round))
			})
		}
		close(start)
		wg.Wait()

		winner := -1
		for w, err := range errs {
			switch {
			case err == nil && winner >= 0:
				t.Fatalf("round %d: writers %d and %d both won", round, winner, w)
			case err == nil:
				winner = w
			case !storage.IsAlreadyExists(err):
				t.Fatalf("round %d: writer %d: %v", round, w, err)
			}
		}
		if winner < 0 {
			t.Fatalf("round %d: no writer won", round)
		}
		got, err := b.Get(ctx, key)
		if want := fmt.Sprintf("writer %d round %d", winner, round); err != nil || string(got) != want {
			t.Fatalf("round %d: stored %q, %v; want the winner's %q", round, got, err, want)
		}
	}
}

// Cross-process race on the file backend: the test binary re-executes itself
// as child processes (selected by raceChildEnv), which all start on a closed
// stdin together and race over the same keys.
const (
	raceChildEnv     = "COMPACTORD_STORAGE_RACE_CHILD"
	raceDirEnv       = "COMPACTORD_STORAGE_RACE_DIR"
	raceRoundsEnv    = "COMPACTORD_STORAGE_RACE_ROUNDS"
	raceChildren     = 8
	raceChildRounds  = 200
	raceShortRounds  = 50
	raceWinLinePrefx = "WIN "
)

// raceChild is the child's main. It prints "WIN <round>" for every key it
// won, and exits non-zero on any error other than a lost race.
func raceChild() int {
	id := os.Getenv(raceChildEnv)
	rounds, err := strconv.Atoi(os.Getenv(raceRoundsEnv))
	if err != nil {
		fmt.Fprintln(os.Stderr, "bad rounds:", err)
		return 2
	}
	ctx := context.Background()
	b, err := storage.Open(ctx, "file://"+os.Getenv(raceDirEnv))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	defer b.Close()
	// Start signal: the parent closes our stdin once every child runs.
	io.Copy(io.Discard, os.Stdin)
	out := bufio.NewWriter(os.Stdout)
	defer out.Flush()
	for r := range rounds {
		err := b.PutIfAbsent(ctx, fmt.Sprintf("_log/%05d.json", r), []byte("child "+id))
		switch {
		case err == nil:
			fmt.Fprintf(out, "%s%d\n", raceWinLinePrefx, r)
		case !storage.IsAlreadyExists(err):
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	return 0
}

func TestPutIfAbsentCrossProcess(t *testing.T) {
	rounds := raceChildRounds
	if testing.Short() {
		rounds = raceShortRounds
	}
	dir := t.TempDir()
	type child struct {
		cmd    *exec.Cmd
		stdin  io.WriteCloser
		stdout strings.Builder
		stderr strings.Builder
	}
	children := make([]*child, raceChildren)
	for i := range children {
		c := &child{cmd: exec.Command(os.Args[0], "-test.run=^$")}
		c.cmd.Env = append(os.Environ(),
			raceChildEnv+"="+strconv.Itoa(i),
			raceDirEnv+"="+dir,
			raceRoundsEnv+"="+strconv.Itoa(rounds))
		c.cmd.Stdout = &c.stdout
		c.cmd.Stderr = &c.stderr
		var err error
		if c.stdin, err = c.cmd.StdinPipe(); err != nil {
			t.Fatal(err)
		}
		if err := c.cmd.Start(); err != nil {
			t.Fatal(err)
		}
		children[i] = c
	}
	for _, c := range children {
		c.stdin.Close()
	}
	winners := make(map[int][]int) // round -> children that won it
	for i, c := range children {
		if err := c.cmd.Wait(); err != nil {
			t.Fatalf("child %d: %v\n%s", i, err, c.stderr.String())
		}
		for line := range strings.Lines(c.stdout.String()) {
			r, err := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(line, raceWinLinePrefx)))
			if err != nil {
				t.Fatalf("child %d printed %q", i, line)
			}
			winners[r] = append(winners[r], i)
		}
	}
	wins := make([]int, raceChildren)
	for _, w := range winners {
		for _, c := range w {
			wins[c]++
		}
	}
	t.Logf("rounds won per child: %v", wins)
	b := stores.Open(t, "file://"+dir)
	for r := range rounds {
		w := winners[r]
		if len(w) != 1 {
			t.Fatalf("round %d: winners %v, want exactly one", r, w)
		}
		got, err := b.Get(t.Context(), fmt.Sprintf("_log/%05d.json", r))
		if want := "child " + strconv.Itoa(w[0]); err != nil || string(got) != want {
			t.Fatalf("round %d: stored %q, %v; want %q", r, got, err, want)
		}
	}
}
