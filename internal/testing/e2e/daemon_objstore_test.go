package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// daemonObjstoreConfig: one table on a real object store, every schedule
// off (jobs run only when triggered, one at a time), leases on (their
// records go through the same put-if-absent), and a sync interval long
// enough that the only background requests during a job are the lease
// renewal (every 10s) and the re-read after the job.
const daemonObjstoreConfig = `
log:
  level: info
  format: json
http:
  listen: %s
tables:
  - url: %q
    name: t
workers: 2
schedule:
  merge: "off"
  compact: "off"
  index: "off"
  trim: "off"
  cleanup: "off"
poll_interval: 0s
sync_interval: 1h
shutdown_grace: 10s
lease:
  enabled: true
  ttl: 30s
  renew_interval: 10s
jobs:
  cleanup:
    retain_versions: 1
    older_than: 0s
    min_age: 0s
    allow_deleting_in_flight_writes: true
  trim:
    # With no reader grace the versions the merged generations were read
    # through do not pin them.
    reader_grace: 0s
`

// opCounts is compactord_objstore_operations_total by operation.
type opCounts map[string]float64

func objstoreOps(e exposition) opCounts {
	c := opCounts{}
	for k, v := range e.samples {
		if !strings.HasPrefix(k, "compactord_objstore_operations_total{") {
			continue
		}
		op := labelValue(k, "operation")
		c[op] += v
	}
	return c
}

func labelValue(series, label string) string {
	i := strings.Index(series, label+`="`)
	if i < 0 {
		return ""
	}
	rest := series[i+len(label)+2:]
	return rest[:strings.IndexByte(rest, '"')]
}

func (c opCounts) minus(o opCounts) (opCounts, float64) {
	d := opCounts{}
	total := 0.0
	for k, v := range c {
		if x := v - o[k]; x != 0 {
			d[k] = x
			total += x
		}
	}
	return d, total
}

func (c opCounts) String() string {
	keys := make([]string, 0, len(c))
	for k := range c {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, " %s=%g", k, c[k])
	}
	return strings.TrimSpace(b.String())
}

// TestDaemonJobsOnObjectStores runs `compactord run` (the Dockerfile-built
// binary) against a table on each real object store. Writers (the command
// line, in this process) leave work of every kind; each job is triggered
// through the admin API, must succeed, and its object-store requests are
// measured from /metrics (docs/operations.md, capacity planning, quotes
// these numbers). The table must verify and read back exactly afterwards,
// and the daemon must drain cleanly on SIGTERM.
func TestDaemonJobsOnObjectStores(t *testing.T) {
	bin := imageBinary(t)
	// COMPACTORD_E2E_SCALE multiplies the table's size; the numbers in
	// docs/operations.md were measured with 1 and 10.
	scale := int64(1)
	if v := os.Getenv("COMPACTORD_E2E_SCALE"); v != "" {
		if _, err := fmt.Sscan(v, &scale); err != nil || scale < 1 {
			t.Fatalf("COMPACTORD_E2E_SCALE=%q: want a positive integer", v)
		}
	}
	rows, sst := 200*scale, 100*scale
	forEachServer(t, func(t *testing.T, newURL func(t *testing.T) string) {
		url := newURL(t)
		// The writers: 10 appends, the delete of the first two appends'
		// fragments, an index, and a two-bucket MemWAL the Go MemWAL
		// writer flushes two generations into per shard.
		mustCLI(t, "table", "create", url, "--schema", "id:int64,cat:string,val:float64", "--primary-key", "id")
		for i := int64(0); i < 10; i++ {
			mustCLI(t, "table", "append", url, "--rows", fmt.Sprint(rows), "--start", fmt.Sprint(i*rows), "--seed", fmt.Sprint(i+1))
		}
		frags, _ := jsonLine(t, mustCLI(t, "inspect", url))["fragments"].([]any)
		for _, f := range frags[:2] {
			mustCLI(t, "table", "delete", url, "--fragment", fmt.Sprint(f.(map[string]any)["id"]))
		}
		mustCLI(t, "index", "create", url, "--name", "id_idx", "--column", "id", "--type", "btree")
		mustCLI(t, "wal", "configure", url, "--buckets", "2", "--maintain", "id_idx")
		s0, s1 := 100*rows, 200*rows // two key ranges past the base table, each written to both shards
		mustCLI(t, "wal", "write", url, "--rows", fmt.Sprint(sst), "--start", fmt.Sprint(s0), "--flush")
		mustCLI(t, "wal", "write", url, "--rows", fmt.Sprint(sst), "--start", fmt.Sprint(s1), "--flush")

		dir := t.TempDir()
		addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
		cfgPath := filepath.Join(dir, "compactord.yaml")
		if err := os.WriteFile(cfgPath, []byte(fmt.Sprintf(daemonObjstoreConfig, addr, url)), 0o644); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(bin, "run", "--config", cfgPath)
		cmd.Dir = dir
		d := &daemonProc{proc: startProc(t, "compactord", cmd), addr: addr, dir: dir}
		base := "http://" + addr
		waitFor(t, waitTimeout, "the daemon to own table t", d.proc, func() (bool, string) {
			code, body, err := httpGet(base + "/api/v1/tables/t")
			if err != nil || code != 200 {
				return false, fmt.Sprintf("%d %v %s", code, err, body)
			}
			var st struct {
				Owned  bool `json:"owned"`
				Synced bool `json:"synced"`
			}
			if err := json.Unmarshal([]byte(body), &st); err != nil {
				return false, err.Error()
			}
			return st.Owned && st.Synced, body
		})

		runs := func(e exposition, kind, result string) float64 {
			labels := []string{`table="t"`, `kind="` + kind + `"`}
			if result != "" {
				labels = append(labels, `result="`+result+`"`)
			}
			return e.sum("compactord_job_runs_total", labels...)
		}
		// Trim before and after cleanup. With no reader grace (config
		// above) the older versions do not pin the merged, caught-up
		// generations, so trim deletes them.
		for _, kind := range []string{"merge", "compact", "index", "trim", "cleanup", "trim"} {
			before := parseExposition(d.scrape(t))
			resp, err := http.Post(base+"/api/v1/tables/t/jobs/"+kind, "application/json", nil)
			if err != nil {
				t.Fatalf("trigger %s: %v", kind, err)
			}
			resp.Body.Close()
			if resp.StatusCode/100 != 2 {
				t.Fatalf("trigger %s: HTTP %d", kind, resp.StatusCode)
			}
			var after exposition
			waitFor(t, waitTimeout, kind+" to finish", d.proc, func() (bool, string) {
				after = parseExposition(d.scrape(t))
				return runs(after, kind, "") > runs(before, kind, ""), fmt.Sprintf("%s runs %v", kind, runs(after, kind, ""))
			})
			// "skipped" is a success that found nothing to do (the second
			// trim). A landed merge or compaction also queues index
			// catch-up (and a merge trim), so a kind may run more than
			// once meanwhile: every run must succeed.
			ok := func(e exposition) float64 { return runs(e, kind, "success") + runs(e, kind, "skipped") }
			if ok(after) < ok(before)+1 || runs(after, kind, "")-ok(after) != runs(before, kind, "")-ok(before) {
				t.Fatalf("%s did not succeed: runs by result now %v (success or skipped %v before)\n%s",
					kind, runs(after, kind, ""), ok(before), d.Output())
			}
			delta, total := objstoreOps(after).minus(objstoreOps(before))
			t.Logf("%-7s %4.0f object-store requests: %s", kind, total, delta)
		}
		e := parseExposition(d.scrape(t))
		if n := e.sum("compactord_sstables_merged_total", `table="t"`); n != 4 {
			t.Errorf("compactord_sstables_merged_total = %v, want 4 (two generations in each of two shards)", n)
		}
		if n := e.sum("compactord_sstable_trimmed_bytes_total", `table="t"`); n <= 0 {
			t.Errorf("compactord_sstable_trimmed_bytes_total = %v, want > 0 after cleanup and trim", n)
		}
		if n := e.sum("compactord_job_fragments_in_total", `table="t"`, `kind="compact"`); n < 2 {
			t.Errorf("compaction consumed %v fragments, want >= 2", n)
		}
		if n := e.sum("compactord_table_halted", `table="t"`); n != 0 {
			t.Errorf("table halted: %v", n)
		}
		t.Logf("daemon resident memory after the jobs: %.1f MiB", e.sum("process_resident_memory_bytes")/(1<<20))
		stopDaemon(t, d)

		wantIDs(t, scanIDs(t, url), [2]int64{2 * rows, 10 * rows}, [2]int64{s0, s0 + sst}, [2]int64{s1, s1 + sst})
		mustCLI(t, "verify", url, "--deep")
	})
}
