package scheduler_test

import (
	"bufio"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/compactord/compactord/internal/scheduler"
)

// TestPickScenarios runs the scenario files under testdata/pick: each
// case describes the tables (their state, their pending jobs with waiting
// times and backoffs), the workers and the leases, and the attempts Pick
// must start. See testdata/pick/README for the format.
func TestPickScenarios(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "pick", "*.txt"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no scenario files: %v", err)
	}
	n := 0
	for _, f := range files {
		cases, err := parsePickFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range cases {
			n++
			t.Run(filepath.Base(f)+"/"+c.name, func(t *testing.T) {
				got := scheduler.Pick(c.env)
				if g, w := refs(got.Start), c.start; !slices.Equal(g, w) {
					t.Errorf("start %v, want %v", g, w)
				}
				if g, w := got.WantLease, c.lease; !slices.Equal(g, w) && len(g)+len(w) > 0 {
					t.Errorf("lease wanted for %v, want %v", g, w)
				}
				if g, w := refs(got.Drop), c.drop; !slices.Equal(g, w) && len(g)+len(w) > 0 {
					t.Errorf("dropped %v, want %v", g, w)
				}
				pending := map[scheduler.Kind]int{}
				for k, v := range got.Pending {
					if v != 0 {
						pending[k] = v
					}
				}
				if !maps.Equal(pending, c.pending) {
					t.Errorf("pending %v, want %v", pending, c.pending)
				}
			})
		}
	}
	t.Logf("%d scenarios", n)
}

func refs(rs []scheduler.JobRef) []string {
	var out []string
	for _, r := range rs {
		out = append(out, r.Table+"/"+string(r.Kind))
	}
	return out
}

type pickCase struct {
	name               string
	env                scheduler.PickEnv
	start, lease, drop []string
	pending            map[scheduler.Kind]int
}

// epoch is time 0 of the scenario files, which give instants in seconds.
var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func secs(s string) (time.Time, error) {
	n, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("bad instant %q", s)
	}
	return epoch.Add(time.Duration(n * float64(time.Second))), nil
}

func parsePickFile(path string) ([]pickCase, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []pickCase
	var c *pickCase
	sc := bufio.NewScanner(f)
	line := 0
	fail := func(format string, args ...any) error {
		return fmt.Errorf("%s:%d: %s", path, line, fmt.Sprintf(format, args...))
	}
	for sc.Scan() {
		line++
		text := sc.Text()
		if i := strings.Index(text, "#"); i >= 0 {
			text = text[:i]
		}
		indented := strings.HasPrefix(text, " ") || strings.HasPrefix(text, "\t")
		fs := strings.Fields(text)
		if len(fs) == 0 {
			continue
		}
		if fs[0] == "case" {
			out = append(out, pickCase{name: strings.Join(fs[1:], "_"), env: scheduler.PickEnv{Now: epoch, Workers: 1}, pending: map[scheduler.Kind]int{}})
			c = &out[len(out)-1]
			continue
		}
		if c == nil {
			return nil, fail("%q before the first case", text)
		}
		if indented {
			if len(c.env.Tables) == 0 {
				return nil, fail("pending job before any table")
			}
			t := &c.env.Tables[len(c.env.Tables)-1]
			k, err := scheduler.ParseKind(fs[0])
			if err != nil || len(fs) < 2 {
				return nil, fail("want `<kind> <trigger> since=S [notbefore=S] [blocked]`: %q", text)
			}
			p := scheduler.PickPending{Kind: k, Trigger: scheduler.Trigger(fs[1])}
			for _, a := range fs[2:] {
				key, val, _ := strings.Cut(a, "=")
				switch key {
				case "since":
					p.Since, err = secs(val)
				case "notbefore":
					p.NotBefore, err = secs(val)
				case "blocked":
					p.Blocked = true
				default:
					err = fmt.Errorf("unknown attribute %q", a)
				}
				if err != nil {
					return nil, fail("%v", err)
				}
			}
			t.Pending = append(t.Pending, p)
			continue
		}
		switch fs[0] {
		case "now":
			if len(fs) != 2 {
				return nil, fail("now takes an instant")
			}
			if c.env.Now, err = secs(fs[1]); err != nil {
				return nil, fail("%v", err)
			}
		case "workers", "running":
			if len(fs) != 2 {
				return nil, fail("%s takes a number", fs[0])
			}
			n, err := strconv.Atoi(fs[1])
			if err != nil {
				return nil, fail("%v", err)
			}
			if fs[0] == "workers" {
				c.env.Workers = n
			} else {
				c.env.Running = n
			}
		case "draining":
			c.env.Draining = true
		case "table":
			if len(fs) < 2 {
				return nil, fail("table needs a name")
			}
			t := scheduler.PickTable{Name: fs[1], Owned: true, Synced: true, Open: true, LeaseReady: true}
			for _, fl := range fs[2:] {
				switch fl {
				case "running":
					t.Running = true
				case "notowned":
					t.Owned = false
				case "unsynced":
					t.Synced = false
				case "closed":
					t.Open = false
				case "removed":
					t.Removed = true
				case "halted":
					t.Halted = true
				case "paused":
					t.Paused = true
				case "nolease":
					t.LeaseReady = false
				default:
					return nil, fail("unknown table flag %q", fl)
				}
			}
			c.env.Tables = append(c.env.Tables, t)
		case "want":
			if len(fs) < 2 {
				return nil, fail("want what?")
			}
			switch fs[1] {
			case "start":
				c.start = fs[2:]
			case "lease":
				c.lease = fs[2:]
			case "drop":
				c.drop = fs[2:]
			case "pending":
				for _, a := range fs[2:] {
					key, val, _ := strings.Cut(a, "=")
					k, err := scheduler.ParseKind(key)
					if err != nil {
						return nil, fail("%v", err)
					}
					if c.pending[k], err = strconv.Atoi(val); err != nil {
						return nil, fail("%v", err)
					}
				}
			default:
				return nil, fail("unknown want %q", fs[1])
			}
		default:
			return nil, fail("unknown line %q", text)
		}
	}
	return out, sc.Err()
}
