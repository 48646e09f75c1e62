package cli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/zap"
)

// A bad configuration is one clear line naming the key and its line, and
// asks for exit code 2.
func TestRunBadConfig(t *testing.T) {
	dir := t.TempDir()
	for name, body := range map[string]string{
		"unknown key": "schedule:\n  merge: \"@every 1s\"\n  mrege: \"@every 1s\"\n",
		"bad cron":    "schedule:\n  merge: \"every second\"\n",
		"bad URL":     "tables:\n  - url: ftp://x/t\n",
		"duplicate":   "tables:\n  - url: mem://b/t\n  - url: mem://b/t\n",
	} {
		t.Run(name, func(t *testing.T) {
			file := filepath.Join(dir, strings.ReplaceAll(name, " ", "_")+".yaml")
			if err := os.WriteFile(file, []byte(body), 0o600); err != nil {
				t.Fatal(err)
			}
			var out, errb bytes.Buffer
			e := &env{stdin: strings.NewReader(""), stdout: &out, stderr: &errb, logger: zap.NewNop()}
			root := newRoot(e)
			root.SetArgs([]string{"run", "--config", file})
			root.SetOut(&out)
			root.SetErr(&errb)
			err := root.ExecuteContext(context.Background())
			if err == nil {
				t.Fatal("accepted")
			}
			if code := exitCodeOf(err); code != 2 {
				t.Fatalf("exit code %d, want 2 (%v)", code, err)
			}
			if !strings.HasPrefix(err.Error(), "config "+file+":") {
				t.Fatalf("message %q does not name the file and line", err)
			}
			r := run(t, "", "run", "--config", file)
			if r.code == 0 || strings.Count(strings.TrimSpace(r.stderr), "\n") != 0 {
				t.Fatalf("Main: exit %d, stderr %q", r.code, r.stderr)
			}
		})
	}
}

// logLines collects a child's JSON log lines.
type logLines struct {
	mu    sync.Mutex
	lines []map[string]any
	raw   []string
}

func (l *logLines) read(r io.Reader) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var m map[string]any
		_ = json.Unmarshal(sc.Bytes(), &m)
		l.mu.Lock()
		l.lines = append(l.lines, m)
		l.raw = append(l.raw, sc.Text())
		l.mu.Unlock()
	}
}

func (l *logLines) find(msg string) map[string]any {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, m := range l.lines {
		if m != nil && m["msg"] == msg {
			return m
		}
	}
	return nil
}

func (l *logLines) dump() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.raw, "\n")
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// The real process: SIGHUP reloads the file (a table is added), SIGTERM
// drains and exits 0.
func TestRunProcessReloadsOnSIGHUPAndDrainsOnSIGTERM(t *testing.T) {
	t1, t2 := newTable(t), newTable(t)
	file := filepath.Join(t.TempDir(), "c.yaml")
	write := func(tables ...string) {
		body := "http:\n  listen: 127.0.0.1:0\nlease:\n  enabled: false\ntables:\n"
		for i, tb := range tables {
			body += fmt.Sprintf("  - url: %s\n    name: t%d\n", tb, i+1)
		}
		if err := os.WriteFile(file, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(t1)
	cmd := exec.Command(os.Args[0], "run", "--config", file)
	cmd.Env = append(os.Environ(), "COMPACTORD_CLI_CHILD=1")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	logs := &logLines{}
	readDone := make(chan struct{})
	go func() { logs.read(stderr); close(readDone) }()
	defer func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			<-readDone
			_ = cmd.Wait()
		}
	}()
	waitFor(t, "the daemon to listen", func() bool { return logs.find("compactord running") != nil })
	base := "http://" + logs.find("compactord running")["listen"].(string)
	tables := func() int {
		res, err := http.Get(base + "/api/v1/tables")
		if err != nil {
			return -1
		}
		defer res.Body.Close()
		var doc struct {
			Tables []any `json:"tables"`
		}
		_ = json.NewDecoder(res.Body).Decode(&doc)
		return len(doc.Tables)
	}
	waitFor(t, "ready", func() bool {
		res, err := http.Get(base + "/-/ready")
		if err != nil {
			return false
		}
		res.Body.Close()
		return res.StatusCode == 200
	})
	if n := tables(); n != 1 {
		t.Fatalf("%d tables", n)
	}

	write(t1, t2)
	if err := cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the reload", func() bool { return logs.find("configuration reloaded") != nil })
	if n := tables(); n != 2 {
		t.Fatalf("%d tables after SIGHUP", n)
	}

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	<-readDone
	err = cmd.Wait()
	if err != nil {
		t.Fatalf("exit after SIGTERM: %v\n%s", err, logs.dump())
	}
	if logs.find("compactord stopped cleanly") == nil {
		t.Fatalf("no clean stop logged:\n%s", logs.dump())
	}
}
