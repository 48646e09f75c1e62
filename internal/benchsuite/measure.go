package benchsuite

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Run is one measured subprocess.
type Run struct {
	Wall time.Duration `json:"wall_ns"`
	// CPU is the child's user plus system time (for the DuckDB peer: the
	// span of its statements, as the script reports it).
	CPU time.Duration `json:"cpu_ns"`
	// MaxRSS is the child's peak resident set: getrusage's maxrss of the
	// waited child when it exceeds the suite's own peak, else the
	// largest VmHWM sampled from /proc while the child ran. (On Linux a
	// child's maxrss starts from its parent's peak, because Go forks with
	// CLONE_VM; VmHWM belongs to the child's own address space but is
	// only seen every 20 ms.) The suite generates data in child processes
	// to stay small.
	MaxRSS int64 `json:"max_rss_bytes"`
	// RusageMaxRSS, SampledHWM and ParentHWM are the sources of MaxRSS.
	RusageMaxRSS int64  `json:"rusage_max_rss_bytes"`
	SampledHWM   int64  `json:"sampled_hwm_bytes"`
	ParentHWM    int64  `json:"parent_hwm_bytes"`
	Stdout       []byte `json:"-"`
}

// runCmd runs argv with extra environment and measures it. A non-zero
// exit is an error carrying the last line of stderr.
func runCmd(ctx context.Context, env []string, argv ...string) (*Run, error) {
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	var parentHWM int64
	if st, err := procStatus(os.Getpid(), "VmHWM"); err == nil {
		parentHWM = st["VmHWM"]
	}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("%s: %w", strings.Join(argv, " "), err)
	}
	done := make(chan struct{})
	sampled := make(chan int64, 1)
	go func() {
		var hwm int64
		t := time.NewTicker(20 * time.Millisecond) // sampling interval of the measurement
		defer t.Stop()
		for {
			if st, err := procStatus(cmd.Process.Pid, "VmHWM"); err == nil {
				hwm = max(hwm, st["VmHWM"])
			}
			select {
			case <-done:
				sampled <- hwm
				return
			case <-t.C:
			}
		}
	}()
	err := cmd.Wait()
	wall := time.Since(start)
	close(done)
	r := &Run{Wall: wall, Stdout: stdout.Bytes(), SampledHWM: <-sampled, ParentHWM: parentHWM}
	if err != nil {
		return nil, fmt.Errorf("%s: %w: %s", strings.Join(argv, " "), err, lastLine(stderr.String()))
	}
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		r.CPU = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
		r.RusageMaxRSS = ru.Maxrss << 10 // kilobytes on Linux
	}
	r.MaxRSS = r.RusageMaxRSS
	if r.RusageMaxRSS <= parentHWM {
		r.MaxRSS = r.SampledHWM
	}
	return r, nil
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = s[i+1:]
	}
	if len(s) > 400 {
		s = s[:400] + "..."
	}
	return s
}

// warm reads files to the end so that every measured run starts with its
// input in the page cache, and flushes dirty pages (sync(2)) so a previous
// run's write-back does not land in the next run's time.
func warm(files []string) error {
	buf := make([]byte, 1<<20)
	for _, f := range files {
		fh, err := os.Open(f)
		if err != nil {
			return err
		}
		_, err = io.CopyBuffer(io.Discard, struct{ io.Reader }{fh}, buf)
		fh.Close()
		if err != nil {
			return fmt.Errorf("warm %s: %w", f, err)
		}
	}
	syscall.Sync()
	return nil
}

// fsyncFiles fsyncs every file, as compactord does for each file it writes.
func fsyncFiles(files []string) error {
	for _, f := range files {
		fh, err := os.Open(f)
		if err != nil {
			return err
		}
		err = fh.Sync()
		fh.Close()
		if err != nil {
			return fmt.Errorf("fsync %s: %w", f, err)
		}
	}
	return nil
}

// cloneTree copies the directory tree src to dst with hard links (cp -al).
// Table files are immutable (every write goes to a new name, published by
// rename or link), so a job run on the clone never changes the template.
func cloneTree(ctx context.Context, src, dst string) error {
	if err := os.RemoveAll(dst); err != nil {
		return err
	}
	_, err := runCmd(ctx, nil, "cp", "-al", src, dst)
	return err
}

// procStatus reads fields of /proc/PID/status, in bytes.
func procStatus(pid int, keys ...string) (map[string]int64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return nil, err
	}
	out := map[string]int64{}
	for _, line := range strings.Split(string(data), "\n") {
		for _, k := range keys {
			if rest, ok := strings.CutPrefix(line, k+":"); ok {
				kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
				if err != nil {
					return nil, fmt.Errorf("/proc/%d/status %s: %w", pid, k, err)
				}
				out[k] = kb << 10
			}
		}
	}
	for _, k := range keys {
		if _, ok := out[k]; !ok {
			return nil, fmt.Errorf("/proc/%d/status has no %s", pid, k)
		}
	}
	return out, nil
}

// procCPU is the user plus system time of a live process.
func procCPU(pid int) (time.Duration, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	if i < 0 || i+2 > len(s) {
		return 0, errors.New("malformed /proc stat")
	}
	f := strings.Fields(s[i+2:])
	if len(f) < 13 {
		return 0, errors.New("malformed /proc stat")
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, err
	}
	// USER_HZ is 100 on Linux.
	return time.Duration(ut+st) * 10 * time.Millisecond, nil
}

func statSize(path string) (uint64, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return 0, err
	}
	return uint64(fi.Size()), nil
}
