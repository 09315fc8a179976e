package atomicfile

import (
	"os"

	"golang.org/x/sys/unix"
)

// startWriteback asks the kernel to start writing f's bytes [off, off+n) to
// disk, without waiting. Advisory: an error here shows again at the fsync.
func startWriteback(f *os.File, off, n int64) {
	_ = unix.SyncFileRange(int(f.Fd()), off, n, unix.SYNC_FILE_RANGE_WRITE)
}
