package bench

import (
	"bufio"
	"os"
	"runtime"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/fpdedup/fpdedup/internal/sysinfo"
)

// Machine is where the figures were measured. A shared machine's load
// average is part of the result: the same build can be 30% slower when a
// neighbour compiles.
type Machine struct {
	CPU        string     `json:"cpu"`
	Cores      int        `json:"cores"`
	RAMBytes   int64      `json:"ram_bytes"`
	Kernel     string     `json:"kernel"`
	OS         string     `json:"os"`
	Arch       string     `json:"arch"`
	GoVersion  string     `json:"go_version"` // of the bench process (and the lookup benchmark)
	Fpdedup    string     `json:"fpdedup"`    // the measured binary's --version
	Commit     string     `json:"commit,omitempty"`
	TmpDir     string     `json:"tmp_dir"`
	TmpFS      string     `json:"tmp_fs"`
	RSSMeter   string     `json:"rss_meter"` // how peak RSS was measured
	CgroupCPU  string     `json:"cgroup_cpu,omitempty"`
	CgroupMem  string     `json:"cgroup_mem,omitempty"`
	LoadBefore [3]float64 `json:"load_before"`
	LoadAfter  [3]float64 `json:"load_after"`
}

func probeMachine() Machine {
	m := Machine{
		CPU:       cpuModel(),
		Cores:     runtime.NumCPU(),
		RAMBytes:  sysinfo.MemTotal(),
		OS:        runtime.GOOS,
		Arch:      runtime.GOARCH,
		GoVersion: runtime.Version(),
	}
	var u unix.Utsname
	if unix.Uname(&u) == nil {
		m.Kernel = unix.ByteSliceToString(u.Sysname[:]) + " " + unix.ByteSliceToString(u.Release[:])
	}
	if b, err := os.ReadFile("/sys/fs/cgroup/cpu.max"); err == nil {
		m.CgroupCPU = strings.TrimSpace(string(b))
	}
	if b, err := os.ReadFile("/sys/fs/cgroup/memory.max"); err == nil {
		m.CgroupMem = strings.TrimSpace(string(b))
	}
	m.LoadBefore = loadAvg()
	return m
}

func cpuModel() string {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return "unknown"
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if ok && strings.TrimSpace(k) == "model name" {
			return strings.Join(strings.Fields(v), " ")
		}
	}
	return "unknown"
}

// loadAvg is /proc/loadavg's three figures (1, 5 and 15 minutes).
func loadAvg() (l [3]float64) {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return l
	}
	f := strings.Fields(string(b))
	for i := 0; i < 3 && i < len(f); i++ {
		l[i], _ = strconv.ParseFloat(f[i], 64)
	}
	return l
}

// fsType names the file system holding dir: tmpfs matters (the page cache
// is the storage, so nothing can be dropped for a cold lookup).
func fsType(dir string) string {
	var st unix.Statfs_t
	if unix.Statfs(dir, &st) != nil {
		return "unknown"
	}
	switch uint64(st.Type) {
	case 0x01021994:
		return "tmpfs"
	case 0xef53:
		return "ext4"
	case 0x58465342:
		return "xfs"
	case 0x9123683e:
		return "btrfs"
	case 0x794c7630:
		return "overlayfs"
	case 0x2fc12fc1:
		return "zfs"
	case 0x6969:
		return "nfs"
	}
	return "0x" + strconv.FormatUint(uint64(st.Type), 16)
}

// freeBytes is the space an unprivileged user may still write in dir.
func freeBytes(dir string) int64 {
	var st unix.Statfs_t
	if unix.Statfs(dir, &st) != nil {
		return -1
	}
	return int64(st.Bavail) * st.Bsize
}
