package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// TestOneStreamOneOutput: ioPaths.check refuses two outputs that land in
// one place, whatever names them (a descriptor path, a symlink, a hard
// link, a FIFO, the file behind stdout), and lets /dev/null take several.
// stdout is a regular file here (as `> out.txt` makes it), so a stream to
// stdout and a path to that file are one place.
func TestOneStreamOneOutput(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	at := func(name string) string { return filepath.Join(dir, name) }
	for _, f := range []string{"a.txt", "in.txt", "stdout.txt"} {
		if err := os.WriteFile(at(f), []byte("x\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	mustDo(t, os.Link(at("a.txt"), at("hard.txt")))
	mustDo(t, os.Symlink("a.txt", at("lnk.txt")))
	mustDo(t, os.Symlink("new.txt", at("lnk-new.txt")))
	mustDo(t, syscall.Mkfifo(at("fifo"), 0o644))
	mustDo(t, os.Symlink("fifo", at("lnk-fifo")))
	mustDo(t, os.Symlink("/dev/null", at("lnk-null")))
	mustDo(t, os.Symlink("stdout.txt", at("lnk-stdout")))
	stdout, err := os.OpenFile(at("stdout.txt"), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer stdout.Close()
	// The descriptor stdout has in this test process: /dev/fd/N names it.
	fd := "/dev/fd/" + strconv.Itoa(int(stdout.Fd()))

	type out struct{ flag, path string }
	stream := func(flag, path string) out { return out{"stream " + flag, path} }
	cases := []struct {
		name    string
		outs    []out
		refused string // "" when accepted, else what the refusal says
	}{
		{"two files", []out{{"-o", "a.txt"}, {"--record", "b.txt"}}, ""},
		{"one file twice", []out{{"-o", "a.txt"}, {"--record", "a.txt"}}, "-o a.txt and --record a.txt are the same file"},
		{"a new file twice", []out{{"-o", "new.txt"}, {"--record", "./new.txt"}}, "are the same file"},
		{"hard link", []out{{"-o", "a.txt"}, {"--record", "hard.txt"}}, "are the same file"},
		{"symlink", []out{{"-o", "lnk.txt"}, {"--record", "a.txt"}}, "are the same file"},
		{"symlink to a new file", []out{{"-o", "lnk-new.txt"}, {"--record", "new.txt"}}, "are the same file"},
		{"FIFO twice", []out{{"-o", "fifo"}, {"--duplicates", "fifo"}}, "-o fifo and --duplicates fifo write to one stream"},
		{"FIFO and a link to it", []out{{"-o", "lnk-fifo"}, {"--duplicates", "fifo"}}, "write to one stream"},
		{"/dev/stdout twice", []out{{"-o", "/dev/stdout"}, {"--duplicates", "/dev/stdout"}}, "write to one stream"},
		{"/dev/stdout and /proc/self/fd/1", []out{{"-o", "/dev/stdout"}, {"--duplicates", "/proc/self/fd/1"}}, "write to one stream"},
		{"a descriptor twice", []out{{"-o", fd}, {"--duplicates", "/proc/self/fd/" + strings.TrimPrefix(fd, "/dev/fd/")}}, "write to one stream"},
		{"stdout stream twice", []out{stream("-o", ""), stream("--duplicates", "-")}, "stdout and --duplicates - write to one stream"},
		{"stdout stream and its descriptor", []out{stream("-o", ""), {"--record", fd}}, "stdout and --record " + fd + " write to one stream"},
		{"stdout stream and its file", []out{stream("-o", ""), {"--stats-json", "stdout.txt"}}, "stdout and --stats-json stdout.txt write to one stream"},
		{"stdout stream and a link to its file", []out{stream("stdout", ""), {"--metrics", "lnk-stdout"}}, "stdout and --metrics lnk-stdout write to one stream"},
		{"stdout stream and another file", []out{stream("-o", ""), {"--duplicates", "a.txt"}}, ""},
		{"stdout stream and an input", []out{stream("-o", "")}, ""},
		{"/dev/null many times", []out{{"-o", "/dev/null"}, {"--duplicates", "/dev/null"}, {"--record", "lnk-null"}, {"--stats-json", "/dev/null"}}, ""},
		{"- is not a file name", []out{{"--record", "-"}}, "--record -: this output is not written to stdout"},
		{"a descriptor not open", []out{{"--record", "/dev/fd/987"}}, "--record /dev/fd/987: descriptor 987 is not open"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var p ioPaths
			p.input("FILE", kindRecords, "in.txt")
			for _, o := range c.outs {
				if flag, ok := strings.CutPrefix(o.flag, "stream "); ok {
					p.stream(flag, o.path)
				} else {
					p.output(o.flag, o.path)
				}
			}
			inv := &invocation{stdin: strings.NewReader(""), stdout: stdoutWriter{stdout}}
			err := p.check(inv)
			switch {
			case c.refused == "" && err != nil:
				t.Errorf("refused: %v", err)
			case c.refused != "" && err == nil:
				t.Errorf("accepted, want %q", c.refused)
			case c.refused != "" && !strings.Contains(err.Error(), c.refused):
				t.Errorf("refused with %q, want %q", err, c.refused)
			case c.refused != "" && exitCode(err) != exitError:
				t.Errorf("exit %d, want %d", exitCode(err), exitError)
			}
		})
	}

	// The whole command: refused before any work, nothing written into the
	// FIFO (its reader, as `cat fifo &` would be, sees only EOF).
	release := drainFIFO(at("fifo"))
	code, o, e := runInProcess("dedup", "-o", "fifo", "--duplicates", "lnk-fifo", "in.txt")
	got, err := release()
	if err != nil {
		t.Fatal(err)
	}
	if code != exitError || o != "" || len(got) > 0 || !strings.Contains(e, "-o fifo and --duplicates lnk-fifo write to one stream") {
		t.Errorf("dedup -o fifo --duplicates lnk-fifo: exit %d, stdout %q, the FIFO got %q, stderr:\n%s", code, o, got, e)
	}
}

func mustDo(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
