package etcdkv

import (
	"bytes"
	"strings"
	"testing"

	"github.com/fpdedup/fpdedup/fpstore"
)

func TestKeyFormatParse(t *testing.T) {
	h64 := "0123456789abcdef0123456789abcdeffedcba9876543210fedcba9876543210"
	for _, tc := range []struct {
		name string
		f    KeyFormat
		key  string
		ok   bool
		fp   string
	}{
		{"hex64", KeyFormat{Prefix: "/d/"}, "/d/" + h64, true, h64[:32]},
		{"hex64 default width", KeyFormat{Prefix: "/d/", Hex: 64}, "/d/" + h64, true, h64[:32]},
		{"hex32", KeyFormat{Prefix: "/d/", Hex: 32}, "/d/" + h64[:32], true, h64[:32]},
		{"hex32 given 64", KeyFormat{Prefix: "/d/", Hex: 32}, "/d/" + h64, false, ""},
		{"hex64 given 32", KeyFormat{Prefix: "/d/"}, "/d/" + h64[:32], false, ""},
		{"upper case", KeyFormat{Prefix: "/d/"}, "/d/" + strings.ToUpper(h64), false, ""},
		{"upper case in the tail", KeyFormat{Prefix: "/d/"}, "/d/" + h64[:63] + "A", false, ""},
		{"other prefix", KeyFormat{Prefix: "/d/"}, "/e/" + h64, false, ""},
		{"not hex", KeyFormat{Prefix: "/d/"}, "/d/" + h64[:10] + "g" + h64[11:], false, ""},
		{"invalid UTF-8", KeyFormat{Prefix: "/d/"}, "/d/\xff" + h64[1:], false, ""},
		{"empty prefix", KeyFormat{}, h64, true, h64[:32]},
		{"empty", KeyFormat{Prefix: "/d/"}, "", false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fp, ok := tc.f.Parse([]byte(tc.key))
			if ok != tc.ok || ok && fp.String() != tc.fp {
				t.Fatalf("Parse(%q) = %v, %v; want %s, %v", tc.key, fp, ok, tc.fp, tc.ok)
			}
		})
	}
	if err := (KeyFormat{Hex: 40}).Check(); err == nil {
		t.Fatal("hex=40 accepted")
	}
}

// Append and Parse agree, and key order is fingerprint order.
func TestKeyFormatAppend(t *testing.T) {
	f := KeyFormat{Prefix: "/dedupe/sha256/"}
	var prev []byte
	var prevFP fpstore.Fingerprint
	for i := range 1000 {
		d := digest(i)
		k := f.Append(nil, d[:])
		fp, ok := f.Parse(k)
		if !ok || fp != fpstore.FromBytes(d[:]) {
			t.Fatalf("%q: %v %v", k, fp, ok)
		}
		if prev != nil && bytes.Compare(prev, k) != fp.Compare(prevFP)*-1 {
			t.Fatalf("key order of %q and %q is not fingerprint order", prev, k)
		}
		prev, prevFP = k, fp
	}
	if got := (KeyFormat{Prefix: "/a\xff\xff"}).End(); got != "/b" {
		t.Fatalf("End = %q", got)
	}
	if got := (KeyFormat{}).End(); got != "\x00" {
		t.Fatalf("End of the empty prefix = %q", got)
	}
}

// FuzzKeyFormatParse: no panic; a key parses exactly when it is the
// prefix and lowercase hex of the width, into fpstore.ParseHex's answer.
func FuzzKeyFormatParse(f *testing.F) {
	f.Add("/d/", []byte("/d/0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"), false)
	f.Add("/d/", []byte("/d/0123456789abcdef0123456789abcdef"), true)
	f.Add("", []byte("ABCDEF"), true)
	f.Fuzz(func(t *testing.T, prefix string, key []byte, narrow bool) {
		kf := KeyFormat{Prefix: prefix, Hex: 64}
		if narrow {
			kf.Hex = 32
		}
		fp, ok := kf.Parse(key)
		rest, under := bytes.CutPrefix(key, []byte(prefix))
		want := under && len(rest) == kf.Hex && strings.Trim(string(rest), "0123456789abcdef") == ""
		if ok != want {
			t.Fatalf("Parse(%q) under %q: ok %v, want %v", key, prefix, ok, want)
		}
		if ok {
			if exp, err := fpstore.ParseHex(rest); err != nil || exp != fp {
				t.Fatalf("Parse(%q) = %s, ParseHex %s %v", key, fp, exp, err)
			}
		}
	})
}
