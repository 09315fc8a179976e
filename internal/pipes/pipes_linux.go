package pipes

import (
	"os"

	"golang.org/x/sys/unix"
)

func widen(f *os.File) {
	var st unix.Stat_t
	if unix.Fstat(int(f.Fd()), &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFIFO {
		return
	}
	if n, err := unix.FcntlInt(f.Fd(), unix.F_GETPIPE_SZ, 0); err == nil && n < Size {
		_, _ = unix.FcntlInt(f.Fd(), unix.F_SETPIPE_SZ, Size)
	}
}

// size is the pipe's buffer size in bytes (for tests).
func size(f *os.File) (int, error) {
	return unix.FcntlInt(f.Fd(), unix.F_GETPIPE_SZ, 0)
}
