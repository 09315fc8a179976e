package bench

import (
	"errors"
	"strings"
	"testing"
)

func TestSelectJobs(t *testing.T) {
	for _, tc := range []struct {
		in   []string
		want string // the order they run, or the error
	}{
		{nil, strings.Join(DefaultJobs, ",")},
		{[]string{"default"}, strings.Join(DefaultJobs, ",")},
		{[]string{"all"}, strings.Join(AllJobs, ",")},
		{[]string{"mem", "merge", "build"}, "build,merge,mem"},
		{[]string{"query-absent", "build", "build"}, "build,query-absent"},
		{[]string{"query-present"}, "error: job query-present needs job build"},
		{[]string{"sort"}, `error: no job "sort"`},
	} {
		sel, order, err := selectJobs(tc.in)
		var oe *OptionError
		switch {
		case strings.HasPrefix(tc.want, "error: "):
			if !errors.As(err, &oe) || !strings.Contains(err.Error(), strings.TrimPrefix(tc.want, "error: ")) {
				t.Errorf("selectJobs(%v) = %v, %v; want an OptionError with %q", tc.in, order, err, tc.want)
			}
		case err != nil || strings.Join(order, ",") != tc.want || len(sel) != len(order):
			t.Errorf("selectJobs(%v) = %v, %v, %v; want %s", tc.in, sel, order, err, tc.want)
		}
	}
}
