package sysinfo

import (
	"testing"
)

// The sampler sees this process's own anonymous memory grow, and its
// Stop may be called again, and on a nil sampler.
func TestRSSSampler(t *testing.T) {
	s := StartRSSSampler()
	before, _ := s.Peaks()
	buf := make([]byte, 64<<20)
	for i := range buf {
		buf[i] = byte(i)
	}
	s = StartRSSSampler()
	after, file := s.Peaks()
	if before <= 0 || after < before+32<<20 || file < 0 {
		t.Fatalf("anon peaks %d then %d (file %d), want +64 MiB", before, after, file)
	}
	s.Stop()
	(*RSSSampler)(nil).Stop()
	_ = buf[len(buf)-1]
}

func TestDefaultMemoryBudget(t *testing.T) {
	if m, total := DefaultMemoryBudget(), MemTotal(); m <= 0 || total > 0 && m > total/2 {
		t.Fatalf("budget %d of %d bytes", m, total)
	}
}
