package bench

import (
	"strings"
	"testing"
)

// parseEvent reads the generator's CSV records and refuses anything else
// by name, rather than writing a wrong row.
func TestParseEvent(t *testing.T) {
	e, err := parseEvent([]byte("u1234567,d0123abcde,1764633600003,payment,1234.05"))
	if err != nil || e.UserID != "u1234567" || e.DeviceID != "d0123abcde" || e.TimestampMs != 1764633600003 || e.EventType != "payment" || e.Amount != 123405 {
		t.Fatalf("%+v, %v", e, err)
	}
	for rec, want := range map[string]string{
		"u1,d2,3,login":            "4 fields",
		"u1,d2,x,login,0.00":       "invalid syntax",
		"u1,d2,3,login,12":         `amount "12"`,
		"u1,d2,3,login,1.5":        `amount "1.5"`,
		"u1,d2,3,login,a.00":       `amount "a.00"`,
		"u1,d2,3,login,0.00,extra": "6 fields",
		"u1,\"d,2\",3,login,0.00":  "6 fields",
	} {
		if _, err := parseEvent([]byte(rec)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want %q", rec, err, want)
		}
	}
}
