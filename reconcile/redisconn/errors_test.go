package redisconn

import (
	"errors"
	"io"
	"testing"

	"github.com/fpdedup/fpdedup/reconcile/online"
)

// Retryable on Redis's errors, and on errors of none.
func TestRetryable(t *testing.T) {
	for _, c := range []struct {
		err  error
		want bool
	}{
		{io.ErrUnexpectedEOF, true},
		{respError{"redis: WRONGTYPE Operation against a key holding the wrong kind of value"}, false},
		{respError{"redis: OOM command not allowed"}, true},
		{online.Permanent{Err: errors.New("no")}, false},
	} {
		if got := Retryable(c.err); got != c.want {
			t.Errorf("Retryable(%v) = %v", c.err, got)
		}
	}
}
