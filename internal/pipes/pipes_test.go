package pipes

import (
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
)

func TestWidenPipe(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("pipe sizes are a Linux feature")
	}
	if b, err := os.ReadFile("/proc/sys/fs/pipe-max-size"); err == nil {
		if max, _ := strconv.Atoi(strings.TrimSpace(string(b))); max < Size && os.Geteuid() != 0 {
			t.Skipf("fs.pipe-max-size is %d", max)
		}
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	before, err := size(w)
	if err != nil {
		t.Fatal(err)
	}
	if before >= Size {
		t.Fatalf("a new pipe already has %d bytes: nothing to test", before)
	}
	Widen(w)
	for _, f := range []*os.File{r, w} { // one pipe, two ends
		if n, err := size(f); err != nil || n < Size {
			t.Errorf("after Widen: %d bytes, %v; want >= %d", n, err, Size)
		}
	}
}
