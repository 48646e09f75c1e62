// Package buildinfo says which build runs: the version stamped with
// -ldflags, else the module version, and the VCS revision and Go version
// from the Go build info (runtime/debug.ReadBuildInfo), which a plain
// `go build` in a Git checkout records by itself.
package buildinfo

import (
	"runtime"
	"runtime/debug"
)

// Info describes a build.
type Info struct {
	// Version is the -ldflags version, the module version of a
	// `go install ...@vX`, or "dev".
	Version string `json:"version"`
	// Revision is the VCS commit (12 hex digits), "unknown" when the
	// build recorded none (-buildvcs=false, or not built from a checkout).
	Revision string `json:"revision"`
	// Modified: the work tree had uncommitted changes.
	Modified bool `json:"modified"`
	// Time is the commit time (RFC 3339), "" when unknown.
	Time      string `json:"commit_time,omitempty"`
	GoVersion string `json:"go_version"`
}

// Get describes the running binary; stamped is the -ldflags version ("" or
// "dev" when none was given).
func Get(stamped string) Info {
	bi, _ := debug.ReadBuildInfo()
	return From(bi, stamped)
}

// From describes the build of bi (nil: nothing recorded).
func From(bi *debug.BuildInfo, stamped string) Info {
	in := Info{Version: stamped, Revision: "unknown", GoVersion: runtime.Version()}
	if bi != nil {
		if bi.GoVersion != "" {
			in.GoVersion = bi.GoVersion
		}
		if (in.Version == "" || in.Version == "dev") && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			in.Version = bi.Main.Version
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				in.Revision = s.Value
				if len(in.Revision) > 12 {
					in.Revision = in.Revision[:12]
				}
			case "vcs.modified":
				in.Modified = s.Value == "true"
			case "vcs.time":
				in.Time = s.Value
			}
		}
	}
	if in.Version == "" {
		in.Version = "dev"
	}
	return in
}

// String is the one line `compactord --version` prints.
func (in Info) String() string {
	s := "compactord " + in.Version + " (revision " + in.Revision
	if in.Modified {
		s += ", modified"
	}
	return s + ", " + in.GoVersion + ")"
}
