//go:build linux

package crash

import (
	"encoding/binary"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
)

// watcher counts filesystem events under a table directory: every object
// a process creates, publishes (link or rename) or deletes is at least one
// event, so "kill at the Nth event" kills a process at a point defined by
// its own progress through its object-store operations rather than by
// the clock.
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

// watchSupported reports whether event-triggered kills are available.
const watchSupported = true

// newWatcher watches every directory under root (and those created later)
// and calls fire once, on the target-th event (0: never).
func newWatcher(root string, target int64, fire func()) (*watcher, error) {
	fd, err := syscall.InotifyInit1(syscall.IN_CLOEXEC | syscall.IN_NONBLOCK)
	if err != nil {
		return nil, err
	}
	// A non-blocking descriptor makes the File pollable, so Close
	// interrupts the blocked Read.
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
				return nil // removed meanwhile
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
			nameBytes := buf[off+syscall.SizeofInotifyEvent : off+syscall.SizeofInotifyEvent+nameLen]
			off += syscall.SizeofInotifyEvent + nameLen
			if mask&syscall.IN_ISDIR != 0 && mask&(syscall.IN_CREATE|syscall.IN_MOVED_TO) != 0 {
				w.mu.Lock()
				dir := w.dirs[wd]
				w.mu.Unlock()
				name := string(nameBytes)
				for len(name) > 0 && name[len(name)-1] == 0 {
					name = name[:len(name)-1]
				}
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

// setDeathSignal makes the kernel kill the child when the thread that
// started it exits, so a test binary that dies leaks no compactord.
// REQUIRES: the caller starts the process from a goroutine locked to its
// OS thread for the child's whole life (see proc.start).
func setDeathSignal(a *syscall.SysProcAttr) { a.Pdeathsig = syscall.SIGKILL }
