package mysqltable

import (
	"errors"
	"fmt"
	"io"
	"testing"

	"github.com/fpdedup/fpdedup/reconcile/online"
	"github.com/go-sql-driver/mysql"
)

// Retryable on its errors, and on errors of none.
func TestRetryable(t *testing.T) {
	for _, c := range []struct {
		err  error
		want bool
	}{
		{io.ErrUnexpectedEOF, true},
		{&mysql.MySQLError{Number: 1213, Message: "Deadlock found"}, true},
		{fmt.Errorf("writing: %w", &mysql.MySQLError{Number: 1927}), true},
		{&mysql.MySQLError{Number: 1146, Message: "Table doesn't exist"}, false},
		{&mysql.MySQLError{Number: 1045, Message: "Access denied"}, false},
		{online.Permanent{Err: errors.New("no")}, false},
	} {
		if got := Retryable(c.err); got != c.want {
			t.Errorf("Retryable(%v) = %v", c.err, got)
		}
	}
}
