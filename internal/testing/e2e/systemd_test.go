package e2e

import (
	"bufio"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

const unitPath = "deploy/systemd/compactord.service"

// unitDirectives parses a unit file into section -> key -> values (a key
// may repeat).
func unitDirectives(t *testing.T, src string) map[string]map[string][]string {
	t.Helper()
	out := map[string]map[string][]string{}
	section := ""
	sc := bufio.NewScanner(strings.NewReader(src))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, ";"):
		case strings.HasPrefix(line, "[") && strings.HasSuffix(line, "]"):
			section = line[1 : len(line)-1]
			out[section] = map[string][]string{}
		default:
			k, v, ok := strings.Cut(line, "=")
			if !ok || section == "" {
				t.Fatalf("%s:%d: not a key=value line in a section: %q", unitPath, n, line)
			}
			out[section][strings.TrimSpace(k)] = append(out[section][strings.TrimSpace(k)], strings.TrimSpace(v))
		}
	}
	return out
}

// verifyRoot lays out a file-system root for `systemd-analyze verify
// --root`: the host's unit tree (for the targets the unit names), the unit
// under /etc/systemd/system, and an executable at each command path the
// unit runs (verify checks they exist; the test binary stands in, so this
// test needs no build). It returns the root.
func verifyRoot(t *testing.T, unit []byte, commands []string) string {
	t.Helper()
	root := t.TempDir()
	var sysUnits string
	for _, d := range []string{"/usr/lib/systemd/system", "/lib/systemd/system"} {
		if fi, err := os.Stat(d); err == nil && fi.IsDir() {
			sysUnits = d
			break
		}
	}
	if sysUnits == "" {
		skipOrFail(t, "no systemd unit directory (/usr/lib/systemd/system); install systemd: apt-get install -y systemd")
	}
	dst := filepath.Join(root, "usr/lib/systemd/system")
	if _, err := copyContext(sysUnits, dst, &dockerignore{}); err != nil {
		t.Fatalf("copy %s: %v", sysUnits, err)
	}
	etc := filepath.Join(root, "etc/systemd/system")
	if err := os.MkdirAll(etc, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(etc, "compactord.service"), unit, 0o644); err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range commands {
		bin := filepath.Join(root, filepath.FromSlash(c))
		if err := os.MkdirAll(filepath.Dir(bin), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := copyFile(self, bin); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(bin, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// unitCommands returns the program paths of the unit's Exec* lines.
func unitCommands(svc map[string][]string) []string {
	var out []string
	for k, vs := range svc {
		if !strings.HasPrefix(k, "Exec") {
			continue
		}
		for _, v := range vs {
			// Strip systemd's prefixes (-, @, :, +, !) from the path.
			if f := strings.Fields(v); len(f) > 0 {
				out = append(out, strings.TrimLeft(f[0], "-@:+!"))
			}
		}
	}
	return out
}

// TestSystemdUnit runs `systemd-analyze verify`, which must print nothing,
// checks the hardening directives the deployment relies on, and checks that
// the exposure score documented in docs/deployment.md is the one
// `systemd-analyze security --offline=yes` gives.
func TestSystemdUnit(t *testing.T) {
	unit := readRepoFile(t, unitPath)
	d := unitDirectives(t, string(unit))
	svc := d["Service"]
	if svc == nil {
		t.Fatalf("%s has no [Service] section", unitPath)
	}
	want := map[string]string{
		"Type":                   "exec",
		"Restart":                "on-failure",
		"NoNewPrivileges":        "yes",
		"ProtectSystem":          "strict",
		"ProtectHome":            "yes",
		"PrivateTmp":             "yes",
		"PrivateDevices":         "yes",
		"DynamicUser":            "yes",
		"CapabilityBoundingSet":  "",
		"AmbientCapabilities":    "",
		"RestrictSUIDSGID":       "yes",
		"MemoryDenyWriteExecute": "yes",
		"LockPersonality":        "yes",
		"KillSignal":             "SIGTERM",
		// A configuration error exits 2; restarting cannot fix it.
		"RestartPreventExitStatus": "2",
	}
	for k, v := range want {
		got, ok := svc[k]
		if !ok || got[len(got)-1] != v {
			t.Errorf("[Service] %s=%v, want %q", k, got, v)
		}
	}
	// Nothing may be writable but the state directory: no ReadWritePaths
	// in the shipped unit (local tables get a drop-in, see the docs).
	if rw := svc["ReadWritePaths"]; len(rw) > 0 {
		t.Errorf("ReadWritePaths=%v in the shipped unit; local table directories belong in a drop-in", rw)
	}
	exec := svc["ExecStart"]
	if len(exec) != 1 {
		t.Fatalf("want one ExecStart, got %v", exec)
	}
	argv := strings.Fields(exec[0])
	if len(argv) < 4 || argv[1] != "run" || argv[2] != "--config" {
		t.Errorf("ExecStart=%s, want BINARY run --config FILE", exec[0])
	}
	// Every flag ExecStart passes must be one `compactord run` accepts.
	help := runCLI(context.Background(), "run", "--help")
	for _, a := range argv[1:] {
		if strings.HasPrefix(a, "--") && !strings.Contains(help.stdout, a+" ") {
			t.Errorf("ExecStart passes %s, which `compactord run --help` does not list:\n%s", a, help.stdout)
		}
	}
	// The stop timeout must outlast the daemon's drain (shutdown_grace,
	// 30s by default), or systemd kills jobs mid-upload.
	if ts := svc["TimeoutStopSec"]; len(ts) != 1 || !strings.HasSuffix(ts[0], "s") {
		t.Errorf("TimeoutStopSec=%v, want seconds", ts)
	} else if n, err := strconv.Atoi(strings.TrimSuffix(ts[0], "s")); err != nil || n <= 30 {
		t.Errorf("TimeoutStopSec=%s must exceed the default shutdown_grace of 30s", ts[0])
	}

	sa := requireTool(t, "systemd-analyze", "apt-get install -y systemd")
	root := verifyRoot(t, unit, unitCommands(svc))
	out, err := run(t, root, nil, sa, "verify", "--root="+root, "compactord.service")
	if err != nil || strings.TrimSpace(out) != "" {
		t.Errorf("systemd-analyze verify printed (err %v):\n%s", err, out)
	}

	// Key files reach the transient user only as credentials: the env
	// file must not advise a file mode (0640 cannot work with
	// DynamicUser=yes), and the drop-in that loads the Cloud Storage key
	// must pass verify too.
	for _, f := range []string{"deploy/systemd/compactord.env", "docs/deployment.md", unitPath} {
		if body := string(readRepoFile(t, f)); regexp.MustCompile(`(?i)GOOGLE_APPLICATION_CREDENTIALS=/etc|mode 0640`).MatchString(body) {
			t.Errorf("%s hands a key file to the service by file mode; with DynamicUser=yes only LoadCredential= works", f)
		}
	}
	dropIn := readRepoFile(t, "deploy/systemd/gcs-credentials.conf")
	dd := unitDirectives(t, string(dropIn))["Service"]
	if lc := dd["LoadCredential"]; len(lc) != 1 || !strings.HasPrefix(lc[0], "gcs-key:") ||
		len(dd["Environment"]) != 1 || dd["Environment"][0] != "GOOGLE_APPLICATION_CREDENTIALS=%d/gcs-key" {
		t.Errorf("gcs-credentials.conf: %v", dd)
	}
	dropRoot := verifyRoot(t, unit, unitCommands(svc))
	dropDir := filepath.Join(dropRoot, "etc/systemd/system/compactord.service.d")
	if err := os.MkdirAll(dropDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dropDir, "gcs-credentials.conf"), dropIn, 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := run(t, dropRoot, nil, sa, "verify", "--root="+dropRoot, "compactord.service"); err != nil || strings.TrimSpace(out) != "" {
		t.Errorf("systemd-analyze verify with the gcs-credentials drop-in printed (err %v):\n%s", err, out)
	}

	// Mutation check: verify must notice a broken directive, or an empty
	// output above proves nothing.
	bad := strings.Replace(string(unit), "NoNewPrivileges=yes", "NoNewPrivileges=maybe", 1)
	badRoot := verifyRoot(t, []byte(bad), unitCommands(svc))
	if out, _ := run(t, badRoot, nil, sa, "verify", "--root="+badRoot, "compactord.service"); !strings.Contains(out, "maybe") {
		t.Errorf("systemd-analyze verify did not report a broken directive; output:\n%s", out)
	}

	out, err = run(t, root, nil, sa, "security", "--offline=yes", "--root="+root, "compactord.service")
	if err != nil {
		t.Fatalf("systemd-analyze security: %v\n%s", err, out)
	}
	m := regexp.MustCompile(`Overall exposure level for compactord\.service: ([0-9.]+) (\S+)`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no exposure level in:\n%s", out)
	}
	score, _ := strconv.ParseFloat(m[1], 64)
	t.Logf("systemd-analyze security --offline=yes: %s %s", m[1], m[2])
	if score > 2.0 {
		t.Errorf("exposure level %s, want at most 2.0 (OK)", m[1])
	}
	docs := string(readRepoFile(t, "docs/deployment.md"))
	if !strings.Contains(docs, "exposure level "+m[1]+" "+m[2]) {
		t.Errorf("docs/deployment.md does not report the current score: want the text %q", "exposure level "+m[1]+" "+m[2])
	}
}
