package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/compactord/compactord/internal/cli"
	"github.com/compactord/compactord/internal/storage"
	"github.com/compactord/compactord/internal/testing/gcsserver"
	"github.com/compactord/compactord/internal/testing/stores"
)

// forEachServer runs fn against each real object-store server started on
// loopback: versitygw (S3; shared by the test binary), Azurite (Azure Blob
// Storage; one per call) and fake-gcs-server (Cloud Storage, through the
// gs:// driver; one per call, found through STORAGE_EMULATOR_HOST, which
// the daemon started by a test inherits). newURL gives each caller an
// empty table location of its own.
func forEachServer(t *testing.T, fn func(t *testing.T, newURL func(t *testing.T) string)) {
	t.Run("s3", func(t *testing.T) {
		srv := stores.SharedS3(t)
		fn(t, func(t *testing.T) string { return srv.URL(stores.UniqueName(t)) })
	})
	t.Run("azblob", func(t *testing.T) {
		az := startAzurite(t)
		fn(t, func(t *testing.T) string { return az.URL(stores.UniqueName(t)) })
	})
	t.Run("gs", func(t *testing.T) {
		gs := gcsserver.Start(t)
		fn(t, func(t *testing.T) string { return gs.URL(stores.UniqueName(t)) })
	})
}

// cliResult is one in-process run of the command line.
type cliResult struct {
	code           int
	stdout, stderr string
}

func runCLI(ctx context.Context, args ...string) cliResult {
	var out, errb bytes.Buffer
	code := cli.Main(ctx, args, strings.NewReader(""), &out, &errb)
	return cliResult{code: code, stdout: out.String(), stderr: errb.String()}
}

// mustCLI runs a command that must succeed and returns its stdout.
func mustCLI(t *testing.T, args ...string) string {
	t.Helper()
	r := runCLI(context.Background(), args...)
	if r.code != 0 {
		t.Fatalf("compactord %s: exit %d: %s", strings.Join(args, " "), r.code, r.stderr)
	}
	return r.stdout
}

// jsonLine decodes the one JSON line a committing command prints.
func jsonLine(t *testing.T, s string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(strings.TrimSpace(s)), &m); err != nil {
		t.Fatalf("not one JSON line: %q: %v", s, err)
	}
	return m
}

// scanIDs returns the sorted ids of the table's live rows.
func scanIDs(t *testing.T, url string) []int64 {
	t.Helper()
	var ids []int64
	for _, line := range strings.Split(strings.TrimSpace(mustCLI(t, "table", "scan", url)), "\n") {
		if line == "" {
			continue
		}
		var row struct{ ID int64 }
		if err := json.Unmarshal([]byte(line), &row); err != nil {
			t.Fatalf("scan line %q: %v", line, err)
		}
		ids = append(ids, row.ID)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	return ids
}

// wantIDs checks the live ids are exactly the given ranges [lo, hi).
func wantIDs(t *testing.T, got []int64, ranges ...[2]int64) {
	t.Helper()
	var want []int64
	for _, r := range ranges {
		for i := r[0]; i < r[1]; i++ {
			want = append(want, i)
		}
	}
	sort.Slice(want, func(i, j int) bool { return want[i] < want[j] })
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("live ids: got %d rows %v, want %d rows %v", len(got), abbrev(got), len(want), abbrev(want))
	}
}

func abbrev(s []int64) string {
	if len(s) <= 12 {
		return fmt.Sprint(s)
	}
	return fmt.Sprintf("%v ... %v", s[:6], s[len(s)-6:])
}

// TestPutIfAbsentRace: on each real server, goroutines with their own
// bucket handles race put-if-absent on one key, round after round. Exactly
// one wins each round, every loser is told the key exists, and the stored
// object is the winner's. This is the property the commit loop rests on.
func TestPutIfAbsentRace(t *testing.T) {
	forEachServer(t, func(t *testing.T, newURL func(t *testing.T) string) {
		ctx := context.Background()
		url := newURL(t)
		const racers, rounds = 8, 10
		buckets := make([]storage.Bucket, racers)
		for i := range buckets {
			b, err := storage.Open(ctx, url)
			if err != nil {
				t.Fatalf("open %s: %v", url, err)
			}
			defer b.Close()
			buckets[i] = b
		}
		for round := 0; round < rounds; round++ {
			key := fmt.Sprintf("_versions/race-%02d.manifest", round)
			errs := make([]error, racers)
			start := make(chan struct{})
			var wg sync.WaitGroup
			for i := range buckets {
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-start
					errs[i] = buckets[i].PutIfAbsent(ctx, key, []byte(fmt.Sprintf("racer %d round %d", i, round)))
				}()
			}
			close(start)
			wg.Wait()
			winner := -1
			for i, err := range errs {
				switch {
				case err == nil:
					if winner >= 0 {
						t.Fatalf("round %d: racers %d and %d both won put-if-absent", round, winner, i)
					}
					winner = i
				case !storage.IsAlreadyExists(err):
					t.Fatalf("round %d: racer %d lost with %v, want an already-exists error", round, i, err)
				}
			}
			if winner < 0 {
				t.Fatalf("round %d: nobody won put-if-absent: %v", round, errs)
			}
			got, err := buckets[0].Get(ctx, key)
			if err != nil {
				t.Fatal(err)
			}
			if want := fmt.Sprintf("racer %d round %d", winner, round); string(got) != want {
				t.Fatalf("round %d: stored %q, but the winner wrote %q", round, got, want)
			}
		}
	})
}

// TestConcurrentAppendsAndJobs drives the command line against each real
// server: eight appends race through the commit loop, then a compaction
// races four more appends, then the MemWAL path (index, configure, write
// and flush, merge, catch-up, trim, cleanup) runs, with `verify` after each
// stage and the live rows checked against what was written.
func TestConcurrentAppendsAndJobs(t *testing.T) {
	forEachServer(t, func(t *testing.T, newURL func(t *testing.T) string) {
		url := newURL(t)
		ctx := context.Background()
		mustCLI(t, "table", "create", url, "--schema", "id:int64,cat:string,val:float64", "--primary-key", "id")

		// Stage 1: eight concurrent appends of 25 rows each.
		const writers, rows = 8, 25
		results := make([]cliResult, writers)
		var wg sync.WaitGroup
		for i := 0; i < writers; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				results[i] = runCLI(ctx, "table", "append", url, "--rows", fmt.Sprint(rows),
					"--start", fmt.Sprint(i*rows), "--seed", fmt.Sprint(i+1))
			}()
		}
		wg.Wait()
		versions := map[float64]bool{}
		retried := 0
		for i, r := range results {
			if r.code != 0 {
				t.Fatalf("append %d: exit %d: %s", i, r.code, r.stderr)
			}
			m := jsonLine(t, r.stdout)
			v, _ := m["version"].(float64)
			if versions[v] {
				t.Fatalf("two appends committed version %v", v)
			}
			versions[v] = true
			if a, _ := m["attempts"].(float64); a > 1 {
				retried++
			}
		}
		t.Logf("%d concurrent appends: %d needed more than one attempt", writers, retried)
		if head := jsonLine(t, mustCLI(t, "inspect", url))["version"]; head != float64(1+writers) {
			t.Fatalf("head version %v after create and %d appends, want %d", head, writers, 1+writers)
		}
		wantIDs(t, scanIDs(t, url), [2]int64{0, writers * rows})
		mustCLI(t, "verify", url)

		// Stage 2: delete one append's fragment, then compact while four
		// appends race it. A rewrite and an append touch disjoint
		// fragments: both commit.
		frags, _ := jsonLine(t, mustCLI(t, "inspect", url))["fragments"].([]any)
		if len(frags) != writers {
			t.Fatalf("%d fragments after %d appends", len(frags), writers)
		}
		first := int64(frags[0].(map[string]any)["id"].(float64))
		before := scanIDs(t, url)
		mustCLI(t, "table", "delete", url, "--fragment", fmt.Sprint(first))
		after := map[int64]bool{}
		for _, id := range scanIDs(t, url) {
			after[id] = true
		}
		var gone []int64
		for _, id := range before {
			if !after[id] {
				gone = append(gone, id)
			}
		}
		if len(gone) != rows || gone[0]%rows != 0 || gone[rows-1] != gone[0]+rows-1 {
			t.Fatalf("deleting fragment %d removed %v, want one append's %d keys", first, abbrev(gone), rows)
		}
		compactRes := make(chan cliResult, 1)
		appendRes := make([]cliResult, 4)
		go func() { compactRes <- runCLI(ctx, "compact", url) }()
		for i := range appendRes {
			wg.Add(1)
			go func() {
				defer wg.Done()
				appendRes[i] = runCLI(ctx, "table", "append", url, "--rows", fmt.Sprint(rows),
					"--start", fmt.Sprint(1000+i*rows), "--seed", fmt.Sprint(100+i))
			}()
		}
		wg.Wait()
		cr := <-compactRes
		if cr.code != 0 {
			t.Fatalf("compact racing appends: exit %d: %s", cr.code, cr.stderr)
		}
		cm := jsonLine(t, cr.stdout)
		if in, _ := cm["stats"].(map[string]any)["fragments_in"].(float64); in < 2 {
			t.Errorf("compaction rewrote %v fragments, want the small ones grouped (>= 2): %s", in, cr.stdout)
		}
		for i, r := range appendRes {
			if r.code != 0 {
				t.Fatalf("append %d racing the compaction: exit %d: %s", i, r.code, r.stderr)
			}
		}
		var live [][2]int64
		for lo := int64(0); lo < writers*rows; lo += rows {
			if lo != gone[0] {
				live = append(live, [2]int64{lo, lo + rows})
			}
		}
		live = append(live, [2]int64{1000, 1000 + 4*rows})
		wantIDs(t, scanIDs(t, url), live...)
		mustCLI(t, "verify", url)

		// Stage 3: the MemWAL path, written by the Go MemWAL writer.
		mustCLI(t, "index", "create", url, "--name", "id_idx", "--column", "id", "--type", "btree")
		cfg := jsonLine(t, mustCLI(t, "wal", "configure", url, "--buckets", "2", "--maintain", "id_idx"))
		if shards, _ := cfg["shards"].([]any); len(shards) != 2 {
			t.Fatalf("wal configure: %v", cfg)
		}
		mustCLI(t, "wal", "write", url, "--rows", "50", "--start", "2000", "--flush")
		mustCLI(t, "wal", "write", url, "--rows", "50", "--start", "3000", "--flush")
		merged := 0
		for _, l := range strings.Split(strings.TrimSpace(mustCLI(t, "merge", url)), "\n") {
			if g, ok := jsonLine(t, l)["generations"].([]any); ok {
				merged += len(g)
			}
		}
		if merged != 4 {
			t.Fatalf("merge merged %d generations, want 4 (two writes to each of two shards)", merged)
		}
		mustCLI(t, "index", "catchup", url)
		live = append(live, [2]int64{2000, 2050}, [2]int64{3000, 3050})
		wantIDs(t, scanIDs(t, url), live...)
		mustCLI(t, "verify", url, "--deep")
		// The caught-up index finds a merged row, a compacted one and one
		// appended during the compaction; a deleted key is gone.
		for key, want := range map[string]bool{"2010": true, "3049": true, fmt.Sprint((gone[0] + rows) % (writers * rows)): true,
			"1010": true, fmt.Sprint(gone[0] + 3): false} {
			out := strings.TrimSpace(mustCLI(t, "index", "lookup", url, "--name", "id_idx", "--key", key))
			if found := strings.Contains(out, `"id":`+key+`,`); found != want {
				t.Errorf("index lookup of %s: found=%v, want %v; output %q", key, found, want, out)
			}
		}

		// Cleanup, then trim with no reader grace: the versions that read
		// the merged, caught-up generations no longer pin them.
		mustCLI(t, "cleanup", url, "--retain-versions", "1", "--older-than", "0s", "--min-age", "0s")
		tr := jsonLine(t, mustCLI(t, "trim", url, "--reader-grace", "0s"))
		if n, _ := tr["deleted_generations"].(float64); n != 4 {
			t.Errorf("trim deleted %v generations, want 4 (merged, caught up, no retained version needs them): %v", tr["deleted_generations"], tr)
		}
		wantIDs(t, scanIDs(t, url), live...)
		mustCLI(t, "verify", url, "--deep")
	})
}

// waitTimeout bounds each poll of these tests.
const waitTimeout = 90 * time.Second
