package pipes

import (
	"os"

	"golang.org/x/sys/unix"
)

// widen works on the descriptor through SyscallConn, not Fd: Fd would put
// a descriptor that came non-blocking back in blocking mode, a flag it
// shares with the process at the pipe's other end.
func widen(f *os.File) {
	rc, err := f.SyscallConn()
	if err != nil {
		return
	}
	_ = rc.Control(func(fd uintptr) {
		var st unix.Stat_t
		if unix.Fstat(int(fd), &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFIFO {
			return
		}
		if n, err := unix.FcntlInt(fd, unix.F_GETPIPE_SZ, 0); err == nil && n < Size {
			_, _ = unix.FcntlInt(fd, unix.F_SETPIPE_SZ, Size)
		}
	})
}

// size is the pipe's buffer size in bytes (for tests).
func size(f *os.File) (n int, err error) {
	rc, err := f.SyscallConn()
	if err != nil {
		return 0, err
	}
	if cerr := rc.Control(func(fd uintptr) { n, err = unix.FcntlInt(fd, unix.F_GETPIPE_SZ, 0) }); cerr != nil {
		return 0, cerr
	}
	return n, err
}
