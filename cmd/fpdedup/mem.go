package main

import (
	"os"
	"strconv"
	"strings"

	"github.com/fpdedup/fpdedup/internal/sysinfo"
)

// defaultMem is half of min(physical RAM, cgroup memory limit): the rest is
// left to the page cache that the mapped indexes and the inputs live in.
func defaultMem() int64 {
	limit := sysinfo.MemTotal()
	for _, path := range []string{"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"} {
		b, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		if v, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64); err == nil && v > 0 && (limit <= 0 || v < limit) {
			limit = v
		}
	}
	if limit <= 0 {
		return 1 << 30
	}
	return limit / 2
}
