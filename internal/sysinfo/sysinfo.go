// Package sysinfo reads facts about the machine that more than one part of
// fpdedup needs: the default --mem and the benchmark's machine line.
package sysinfo

import (
	"bufio"
	"os"
	"strconv"
	"strings"
)

// MemTotal is the physical memory in bytes from /proc/meminfo, or 0 when it
// cannot be read.
func MemTotal() int64 {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if fields := strings.Fields(sc.Text()); len(fields) >= 2 && fields[0] == "MemTotal:" {
			kb, _ := strconv.ParseInt(fields[1], 10, 64)
			return kb << 10
		}
	}
	return 0
}

// DefaultMemoryBudget is half of min(physical RAM, cgroup memory limit): the rest is
// left to the page cache that the mapped indexes and the inputs live in.
func DefaultMemoryBudget() int64 {
	limit := MemTotal()
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
