package failpoint

import (
	"bytes"
	"errors"
	"testing"
)

func TestArm(t *testing.T) {
	if err := Hit(Write, "x"); err != nil {
		t.Fatalf("disarmed: %v", err)
	}
	var buf bytes.Buffer
	w := Writer(&buf, "out")
	disarm := Arm(2, Write, Sync)
	_, err1 := w.Write([]byte("a"))
	_ = Hit(Read, "in") // not armed: not counted
	_, err2 := w.Write([]byte("b"))
	err3 := Hit(Sync, "out")
	n, log := disarm()
	var fe *Error
	if err1 != nil || !errors.As(err2, &fe) || fe.Op != Write || fe.N != 2 || fe.Path != "out" || err3 != nil {
		t.Fatalf("hits: %v, %v, %v", err1, err2, err3)
	}
	if n != 3 || len(log) != 3 || log[2] != "fsync out" || buf.String() != "a" {
		t.Fatalf("counted %d %v, wrote %q", n, log, buf.String())
	}
	if err := Hit(Write, "x"); err != nil {
		t.Fatalf("after disarm: %v", err)
	}
}
