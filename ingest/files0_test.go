package ingest

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"testing/iotest"
)

func TestReadFiles0(t *testing.T) {
	for _, c := range []struct {
		in, name string
		want     []string
		err      error
		errText  string
	}{
		{in: "a\x00", want: []string{"a"}},
		{in: "a", want: []string{"a"}},
		{in: "a\x00b c\x00d\ne\x00", want: []string{"a", "b c", "d\ne"}},
		{in: "a\x00b", want: []string{"a", "b"}},
		{in: "-\x00x.gz", want: []string{"-", "x.gz"}},
		{in: "\xff\x00", want: []string{"\xff"}},
		{in: "", err: ErrNoFileNames},
		{in: "\x00", err: ErrEmptyFileName, errText: "list:1: "},
		{in: "a\x00\x00b\x00", err: ErrEmptyFileName, errText: "list:2: "},
		{in: "a\x00b\x00\x00", err: ErrEmptyFileName, errText: "list:3: "},
		{in: "a\x00-\x00", name: "-", errText: "-:2: "},
	} {
		name := c.name
		if name == "" {
			name = "list"
		}
		got, err := ReadFiles0(strings.NewReader(c.in), name)
		switch {
		case c.err == nil && c.errText == "":
			if err != nil || !slices.Equal(got, c.want) {
				t.Errorf("ReadFiles0(%q) = %q, %v; want %q", c.in, got, err, c.want)
			}
		case err == nil:
			t.Errorf("ReadFiles0(%q) = %q, want an error", c.in, got)
		case c.err != nil && !errors.Is(err, c.err):
			t.Errorf("ReadFiles0(%q) error %v, want %v", c.in, err, c.err)
		case !strings.HasPrefix(err.Error(), c.errText):
			t.Errorf("ReadFiles0(%q) error %q does not start with %q", c.in, err, c.errText)
		}
	}
}

func TestReadFiles0ReadError(t *testing.T) {
	boom := errors.New("boom")
	_, err := ReadFiles0(iotest.ErrReader(boom), "list")
	if !errors.Is(err, boom) || !strings.Contains(err.Error(), "list") {
		t.Errorf("error = %v, want one naming the list and wrapping the read error", err)
	}
}
