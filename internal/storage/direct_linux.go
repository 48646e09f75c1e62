//go:build linux

package storage

import (
	"os"

	"golang.org/x/sys/unix"
)

// errInvalid is what a file system that cannot write a range around the
// page cache answers.
var errInvalid error = unix.EINVAL

// setDirect turns O_DIRECT on or off for f's later reads and writes.
func setDirect(f *os.File, on bool) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := rc.Control(func(fd uintptr) {
		fl, err := unix.FcntlInt(fd, unix.F_GETFL, 0)
		if err != nil {
			serr = err
			return
		}
		if on {
			fl |= unix.O_DIRECT
		} else {
			fl &^= unix.O_DIRECT
		}
		_, serr = unix.FcntlInt(fd, unix.F_SETFL, fl)
	}); err != nil {
		return err
	}
	return serr
}

// syncData makes f's data, and the metadata needed to read it back (its
// size, its blocks), durable: fdatasync, which leaves out the timestamps
// an fsync also writes. A published object is read by name and contents
// only.
func syncData(f *os.File) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := rc.Control(func(fd uintptr) {
		for {
			if serr = unix.Fdatasync(int(fd)); serr != unix.EINTR {
				return
			}
		}
	}); err != nil {
		return err
	}
	return serr
}

// allocAligned maps n bytes of anonymous memory: page-aligned, as an
// O_DIRECT write's memory must be, and outside the Go heap.
func allocAligned(n int) ([]byte, error) {
	return unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANON)
}

func freeAligned(b []byte) { _ = unix.Munmap(b[:cap(b)]) }
