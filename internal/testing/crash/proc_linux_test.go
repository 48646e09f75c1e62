//go:build linux

package crash

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// killPlan says when a process gets SIGKILL: at the afterEvents-th
// filesystem event under the watched directory (every object a merge
// creates, publishes or deletes is at least one), or after afterDelay,
// whichever comes first (0: never).
type killPlan struct {
	afterEvents int64
	afterDelay  time.Duration
}

// procResult is how one process ended.
type procResult struct {
	err            error // the wait error (nil: exit 0)
	killed         bool  // our SIGKILL ended it
	events         int64
	elapsed        time.Duration
	stdout, stderr string
}

// hungTimeout bounds one process.
const hungTimeout = 2 * time.Minute

// runProc runs binary with args and env, watching watchDir, and applies
// plan.
func runProc(binary string, env []string, watchDir string, args []string, plan killPlan) procResult {
	var out, errb bytes.Buffer
	cmd := exec.Command(binary, args...)
	cmd.Env = env
	cmd.Stdout, cmd.Stderr = &out, &errb
	// The kernel kills the child if the thread that started it exits, so
	// a dying test leaks no process.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}

	var mu sync.Mutex
	signaled := false
	kill := func() {
		mu.Lock()
		defer mu.Unlock()
		if !signaled && cmd.Process != nil {
			signaled = true
			_ = cmd.Process.Signal(syscall.SIGKILL)
		}
	}
	w, err := newWatcher(watchDir, plan.afterEvents, kill)
	if err != nil {
		return procResult{err: err}
	}
	started := make(chan error, 1)
	exited := make(chan error, 1)
	start := time.Now()
	// Started and waited for on one locked OS thread: the death signal is
	// tied to the thread that forked the child.
	go func() {
		runtime.LockOSThread()
		mu.Lock()
		err := cmd.Start()
		mu.Unlock()
		started <- err
		if err == nil {
			exited <- cmd.Wait()
		}
	}()
	if err := <-started; err != nil {
		w.Close()
		return procResult{err: err}
	}
	if plan.afterDelay > 0 {
		t := time.AfterFunc(plan.afterDelay, kill)
		defer t.Stop()
	}
	var res procResult
	hung := time.NewTimer(hungTimeout)
	defer hung.Stop()
	select {
	case res.err = <-exited:
	case <-hung.C:
		_ = cmd.Process.Kill()
		<-exited
		res.err = errors.New("hung: killed after " + hungTimeout.String())
	}
	res.events = w.Close()
	res.elapsed = time.Since(start)
	res.stdout, res.stderr = out.String(), errb.String()
	mu.Lock()
	defer mu.Unlock()
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && signaled && ws.Signaled() {
		res.killed = true
	}
	return res
}

// watcher counts inotify events under a directory tree (directories
// created meanwhile included) and calls fire once, at the target-th.
type watcher struct {
	f      *os.File
	mu     sync.Mutex
	dirs   map[int32]string
	events atomic.Int64
	target int64
	fire   func()
	done   chan struct{}
}

const watchMask = syscall.IN_CREATE | syscall.IN_MOVED_TO | syscall.IN_DELETE | syscall.IN_CLOSE_WRITE

func newWatcher(root string, target int64, fire func()) (*watcher, error) {
	fd, err := syscall.InotifyInit1(syscall.IN_CLOEXEC | syscall.IN_NONBLOCK)
	if err != nil {
		return nil, err
	}
	w := &watcher{f: os.NewFile(uintptr(fd), "inotify"), dirs: map[int32]string{}, target: target, fire: fire, done: make(chan struct{})}
	if err := w.addTree(root); err != nil {
		w.f.Close()
		return nil, err
	}
	go w.loop()
	return w, nil
}

func (w *watcher) addTree(root string) error {
	return filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if !d.IsDir() {
			return nil
		}
		wd, err := syscall.InotifyAddWatch(int(w.f.Fd()), p, watchMask)
		if err != nil {
			if errors.Is(err, syscall.ENOENT) {
				return nil
			}
			return err
		}
		w.mu.Lock()
		w.dirs[int32(wd)] = p
		w.mu.Unlock()
		return nil
	})
}

func (w *watcher) loop() {
	defer close(w.done)
	buf := make([]byte, 64*1024)
	for {
		n, err := w.f.Read(buf)
		if err != nil {
			return
		}
		for off := 0; off+syscall.SizeofInotifyEvent <= n; {
			wd := int32(binary.NativeEndian.Uint32(buf[off:]))
			mask := binary.NativeEndian.Uint32(buf[off+4:])
			nameLen := int(binary.NativeEndian.Uint32(buf[off+12:]))
			name := string(bytes.TrimRight(buf[off+syscall.SizeofInotifyEvent:off+syscall.SizeofInotifyEvent+nameLen], "\x00"))
			off += syscall.SizeofInotifyEvent + nameLen
			if mask&syscall.IN_ISDIR != 0 && mask&(syscall.IN_CREATE|syscall.IN_MOVED_TO) != 0 {
				w.mu.Lock()
				dir := w.dirs[wd]
				w.mu.Unlock()
				if dir != "" {
					_ = w.addTree(filepath.Join(dir, name))
				}
			}
			if mask&syscall.IN_IGNORED != 0 {
				continue
			}
			if c := w.events.Add(1); c == w.target && w.fire != nil {
				w.fire()
			}
		}
	}
}

// Close stops watching and returns the number of events seen.
func (w *watcher) Close() int64 {
	w.f.Close()
	<-w.done
	return w.events.Load()
}
