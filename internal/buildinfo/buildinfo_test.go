package buildinfo

import (
	"runtime/debug"
	"testing"
)

func TestFrom(t *testing.T) {
	plain := &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Path: "github.com/compactord/compactord", Version: "(devel)"},
		Settings: []debug.BuildSetting{{Key: "vcs", Value: "git"}, {Key: "vcs.revision", Value: "cf5fd9d0123456789abcdef0123456789abcdef0"},
			{Key: "vcs.time", Value: "2026-01-02T03:04:05Z"}, {Key: "vcs.modified", Value: "true"}}}
	for _, tc := range []struct {
		name    string
		bi      *debug.BuildInfo
		stamped string
		want    Info
		line    string
	}{
		{"plain go build", plain, "dev", Info{Version: "dev", Revision: "cf5fd9d01234", Modified: true, Time: "2026-01-02T03:04:05Z", GoVersion: "go1.26.0"},
			"compactord dev (revision cf5fd9d01234, modified, go1.26.0)"},
		{"make build", plain, "v0.3.0-4-gcf5fd9d", Info{Version: "v0.3.0-4-gcf5fd9d", Revision: "cf5fd9d01234", Modified: true, Time: "2026-01-02T03:04:05Z", GoVersion: "go1.26.0"},
			"compactord v0.3.0-4-gcf5fd9d (revision cf5fd9d01234, modified, go1.26.0)"},
		{"go install @version", &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "v0.3.0"}}, "dev",
			Info{Version: "v0.3.0", Revision: "unknown", GoVersion: "go1.26.0"}, "compactord v0.3.0 (revision unknown, go1.26.0)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := From(tc.bi, tc.stamped)
			if got != tc.want || got.String() != tc.line {
				t.Fatalf("From = %+v %q, want %+v %q", got, got.String(), tc.want, tc.line)
			}
		})
	}
	if got := From(nil, ""); got.Version != "dev" || got.Revision != "unknown" || got.GoVersion == "" {
		t.Fatalf("From(nil) = %+v", got)
	}
}
