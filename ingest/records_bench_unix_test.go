//go:build unix

package ingest

import (
	"syscall"
	"time"
)

// processCPU is the CPU time, user and system, of the whole process.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return -1
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
