package reconcile_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fpdedup/fpdedup/reconcile/internal/reconciletest"
)

// keyParts are the fields of key(i): user_id, device_id, timestamp_ms.
func keyParts(i int) (string, string, string) {
	f := strings.Split(reconciletest.Key(i), ":")
	return f[0], f[1], f[2]
}

// csvRecords writes the dataset's records as csv with a header, keyed by
// user_id,device_id,timestamp_ms (so each record's key is key(i)), in two
// inputs that share the header, with the traps of a real export: a BOM,
// CRLF and LF endings, quoted fields holding commas, quotes and line feeds,
// a final record without its newline, a missing record repeated later.
// It returns the input names and the backfill expected byte for byte.
func csvRecords(t *testing.T, d *reconciletest.Dataset) ([]string, string) {
	t.Helper()
	const header = "event,user_id,device_id,timestamp_ms,payload\r\n"
	missing := map[int]bool{}
	for _, i := range d.Missing {
		missing[i] = true
	}
	var files [2]strings.Builder
	var want strings.Builder
	want.WriteString("\xef\xbb\xbf" + header)
	files[0].WriteString("\xef\xbb\xbf" + header)
	files[1].WriteString(header)
	half := len(d.Keys) / 2
	for i := range d.Keys {
		u, dev, ts := keyParts(i)
		var rec string
		switch i % 4 {
		case 0:
			rec = fmt.Sprintf("click,%s,%s,%s,plain\n", u, dev, ts)
		case 1:
			rec = fmt.Sprintf("view,%s,\"%s\",%s,\"a, b and \"\"c\"\"\"\r\n", u, dev, ts)
		case 2:
			rec = fmt.Sprintf("buy,\"%s\",%s,%s,\"two\nlines\"\n", u, dev, ts)
		default:
			rec = fmt.Sprintf("%d,%s,%s,%s,\n", i, u, dev, ts)
		}
		f := 0
		if i >= half {
			f = 1
		}
		files[f].WriteString(rec)
		if missing[i] {
			want.WriteString(rec)
		}
	}
	// A missing key seen again (another event of the same user, device and
	// time): both of its records are backfilled, in input order.
	u, dev, ts := keyParts(d.Missing[0])
	again := fmt.Sprintf("again,%s,%s,%s,repeat", u, dev, ts)
	files[1].WriteString(again) // no final newline: still a record
	want.WriteString(again + "\n")
	var names []string
	for i := range files {
		name := filepath.Join(d.Dir, fmt.Sprintf("events-%d.csv", i))
		if err := os.WriteFile(name, []byte(files[i].String()), 0o644); err != nil {
			t.Fatal(err)
		}
		names = append(names, name)
	}
	return names, want.String()
}

// A csv index (built with --format csv --header --key …) against Redis:
// --records are read with the index's own recipe, without any record flag,
// and the backfill holds the header once and then the missing records
// byte for byte, in input order, repeats included. A mismatched recipe is
// refused, and --on-bad skip counts the records that have no key.
func TestRecordsCSVRedis(t *testing.T) {
	reconciletest.PlainOnly(t, "a record format; the records pass runs under -race in TestRecordsJSONLMySQL")
	c := reconciletest.RedisDB(t, 7)
	d := reconciletest.NewDataset(t, 20_000)
	files, want := csvRecords(t, d)
	reconciletest.Fpdedup(t, d.Dir, nil, append([]string{"build", "-q", "--hash", "sha256", "--format", "csv", "--header",
		"--key", "user_id,device_id,timestamp_ms", "-o", "csv.fpx"}, files...)...).Want(t, 0)
	if got, want := reconciletest.Dump(t, d.Dir, "csv.fpx"), reconciletest.Dump(t, d.Dir, d.Index); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatal("the csv index does not hold the keys' fingerprints")
	}
	reconciletest.LoadRedisKeys(t, c, "ev:", reconciletest.Hexes(d.OnlineKeys(), reconciletest.FPHex))
	url := reconciletest.RedisURL(t, 7, "match=ev:*")

	args := []string{"reconcile", "--index", "csv.fpx", "--online", url, "--report", "r.json", "--backfill", "bf.csv"}
	for _, f := range files {
		args = append(args, "--records", f)
	}
	reconciletest.Fpdedup(t, d.Dir, nil, args...).Want(t, 1)
	rep := reconciletest.ReadReport(t, filepath.Join(d.Dir, "r.json"))
	reconciletest.WantCounts(t, rep.Counts, 18_000, 2_000, 200)
	if got := string(reconciletest.Must(os.ReadFile(filepath.Join(d.Dir, "bf.csv")))); got != want {
		t.Fatalf("backfill: %d bytes, want %d\n got %.300q\nwant %.300q", len(got), len(want), got, want)
	}
	rs := rep.Records
	if rs == nil || rs.Format != "csv" || !rs.Header || strings.Join(rs.Key, ",") != "user_id,device_id,timestamp_ms" ||
		rs.Records != 20_001 || rs.Missing != 2_001 || rs.Written != 2_001 || rs.Bad != 0 || rs.Inputs != 2 {
		t.Fatalf("records: %+v", rs)
	}
	// The backfill reads back with the same recipe: a build of it holds
	// exactly the missing fingerprints.
	reconciletest.Fpdedup(t, d.Dir, nil, "build", "-q", "--hash", "sha256", "--format", "csv", "--header",
		"--key", "user_id,device_id,timestamp_ms", "-o", "bf.fpx", "bf.csv").Want(t, 0)
	if got := reconciletest.Dump(t, d.Dir, "bf.fpx"); strings.Join(got, " ") != strings.Join(d.MissingFPs(), " ") {
		t.Fatalf("the backfill holds %d fingerprints, want %d", len(got), len(d.MissingFPs()))
	}

	// The same columns spelled by number are the index's recipe, as the
	// header resolves them: the same backfill.
	explicit := append(args[:len(args):len(args)], "--format", "csv", "--header", "--key", "2,3,4", "--backfill", "bf2.csv")
	reconciletest.Fpdedup(t, d.Dir, nil, explicit...).Want(t, 1)
	if string(reconciletest.Must(os.ReadFile(filepath.Join(d.Dir, "bf2.csv")))) != want {
		t.Fatal("--key 2,3,4: another backfill than --key user_id,device_id,timestamp_ms")
	}
	// Other columns are another recipe: refused, unless --assume-recipe.
	other := append(args[:len(args):len(args)], "--format", "csv", "--header", "--key", "2,3,5")
	r := reconciletest.Fpdedup(t, d.Dir, nil, other...).Want(t, 2)
	if !strings.Contains(r.Stderr, "--assume-recipe") {
		t.Fatalf("stderr: %s", r.Stderr)
	}
	r = reconciletest.Fpdedup(t, d.Dir, nil, append(other, "--assume-recipe", "--backfill", "bf3.csv")...).Want(t, 1)
	if !strings.Contains(r.Stderr, "warning") {
		t.Fatalf("--assume-recipe: %s", r.Stderr)
	}
	// Lines are not the index's records.
	r = reconciletest.Fpdedup(t, d.Dir, nil, "reconcile", "--index", "csv.fpx", "--online", url, "--records", d.Records, "--backfill", "x", "--format", "lines").Want(t, 2)
	if !strings.Contains(r.Stderr, "--assume-recipe") {
		t.Fatalf("stderr: %s", r.Stderr)
	}

	// A record without the key's fields: an error naming file and line
	// (fail, the default), or counted with --on-bad skip.
	bad := filepath.Join(d.Dir, "bad.csv")
	os.WriteFile(bad, []byte("event,user_id,device_id,timestamp_ms,payload\nx,u1\n"), 0o644)
	r = reconciletest.Fpdedup(t, d.Dir, nil, "reconcile", "--index", "csv.fpx", "--online", url, "--records", bad, "--backfill", "x").Want(t, 2)
	if !strings.Contains(r.Stderr, "bad.csv:2") {
		t.Fatalf("stderr: %s", r.Stderr)
	}
	reconciletest.Fpdedup(t, d.Dir, nil, "reconcile", "--index", "csv.fpx", "--online", url, "--records", bad, "--backfill", "x",
		"--on-bad", "quarantine=q.csv", "--report", "b.json").Want(t, 1)
	if rs := reconciletest.ReadReport(t, filepath.Join(d.Dir, "b.json")).Records; rs.Bad != 1 || rs.Records != 1 {
		t.Fatalf("records: %+v", rs)
	}
	if q := string(reconciletest.Must(os.ReadFile(filepath.Join(d.Dir, "q.csv")))); q != "x,u1\n" {
		t.Fatalf("quarantine: %q", q)
	}
	if n := c.DBSize(context.Background()).Val(); n != 18_200 {
		t.Fatalf("an audit wrote to Redis: %d keys", n)
	}
}

// A jsonl index against a MariaDB table of whole SHA-256 digests
// (BINARY(32)): the backfill is the missing records byte for byte, and
// --apply computes the digests from the records' keys with the index's
// recipe, after which nothing is missing.
func TestRecordsJSONLMySQL(t *testing.T) {
	db := reconciletest.MySQLDB(t)
	d := reconciletest.NewDataset(t, 20_000)
	var recs, want strings.Builder
	missing := map[int]bool{}
	for _, i := range d.Missing {
		missing[i] = true
	}
	for i := range d.Keys {
		u, dev, ts := keyParts(i)
		var rec string
		switch i % 3 {
		case 0:
			rec = fmt.Sprintf(`{"id":%d,"user":{"id":"%s"},"device_id":"%s","timestamp_ms":%s}`+"\n", i, u, dev, ts)
		case 1:
			rec = fmt.Sprintf(`{ "timestamp_ms" : %s, "device_id":"%s", "user":{"name":"x\"y","id":"%s"}, "tags":["a","b"] }`+"\r\n", ts, dev, u)
		default:
			rec = fmt.Sprintf(`{"user":{"id":"\u0075%s"},"device_id":"%s","timestamp_ms":%s,"note":"caf\u00e9"}`+"\n", u[1:], dev, ts)
		}
		recs.WriteString(rec)
		if missing[i] {
			want.WriteString(rec)
		}
	}
	name := filepath.Join(d.Dir, "events.jsonl")
	os.WriteFile(name, []byte(recs.String()), 0o644)
	reconciletest.Fpdedup(t, d.Dir, nil, "build", "-q", "--hash", "sha256", "--format", "jsonl", "--key", "user.id,device_id,timestamp_ms",
		"-o", "jsonl.fpx", name).Want(t, 0)
	if got, want := reconciletest.Dump(t, d.Dir, "jsonl.fpx"), reconciletest.Dump(t, d.Dir, d.Index); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatal("the jsonl index does not hold the keys' fingerprints")
	}
	reconciletest.CreateTable(t, db, "rc_jsonl", "BINARY(32)")
	reconciletest.LoadRows(t, db, "rc_jsonl", reconciletest.RowValues(d.OnlineKeys(), reconciletest.Bin32))
	url := reconciletest.MySQLURL(t, "rc_jsonl", "fp", "")
	env := reconciletest.MySQLEnv(t)

	reconciletest.Fpdedup(t, d.Dir, env, "reconcile", "--index", "jsonl.fpx", "--online", url, "--records", name, "--backfill", "bf.jsonl",
		"--report", "r.json").Want(t, 1)
	rep := reconciletest.ReadReport(t, filepath.Join(d.Dir, "r.json"))
	reconciletest.WantCounts(t, rep.Counts, 18_000, 2_000, 200)
	if got := string(reconciletest.Must(os.ReadFile(filepath.Join(d.Dir, "bf.jsonl")))); got != want.String() {
		t.Fatalf("backfill: %d bytes, want %d", len(got), want.Len())
	}
	if rs := rep.Records; rs.Format != "jsonl" || rs.Records != 20_000 || rs.Written != 2_000 {
		t.Fatalf("records: %+v", rs)
	}

	reconciletest.Fpdedup(t, d.Dir, env, "reconcile", "--index", "jsonl.fpx", "--online", url, "--records", name, "--apply",
		"--report", "a.json").Want(t, 1)
	rep = reconciletest.ReadReport(t, filepath.Join(d.Dir, "a.json"))
	if rep.Apply == nil || rep.Apply.Written != 2_000 || rep.Apply.NotInRecords != 0 || rep.Records.Digests != 2_000 {
		t.Fatalf("apply %+v, records %+v", rep.Apply, rep.Records)
	}
	for _, i := range d.Missing[:50] {
		var n int
		if err := db.QueryRow("SELECT COUNT(*) FROM rc_jsonl WHERE fp = ?", reconciletest.Bin32(d.Keys[i])).Scan(&n); err != nil || n != 1 {
			t.Fatalf("digest of %q not inserted (%v)", d.Keys[i], err)
		}
	}
	reconciletest.Fpdedup(t, d.Dir, env, "reconcile", "--index", "jsonl.fpx", "--online", url, "--report", "b.json").Want(t, 1)
	reconciletest.WantCounts(t, reconciletest.ReadReport(t, filepath.Join(d.Dir, "b.json")).Counts, 20_000, 0, 200)
}

// TestRecordsHashedAsTheIndex: a bloom's index may hold any hash; the
// records are hashed with the index's own, so that the backfill holds the
// records of the keys missing online (it came out empty, exit 1 all the
// same, for an index of XXH3 fingerprints: the records were hashed with
// SHA-256 whatever the index).
func TestRecordsHashedAsTheIndex(t *testing.T) {
	reconciletest.PlainOnly(t, "key recipes; the records pass runs under -race in TestRecordsJSONLMySQL")
	c := reconciletest.RedisDB(t, 4)
	dir := t.TempDir()
	var recs strings.Builder
	for i := range 100 {
		fmt.Fprintf(&recs, "ev-%d\n", i)
	}
	os.WriteFile(filepath.Join(dir, "k.txt"), []byte(recs.String()), 0o644)
	reconciletest.Fpdedup(t, dir, nil, "build", "-q", "-o", "t.fpx", "k.txt").Want(t, 0) // XXH3
	if err := c.SetBit(context.Background(), "hb:0", 999, 0).Err(); err != nil {         // an empty shard
		t.Fatal(err)
	}
	url := reconciletest.RedisURL(t, 4, "bloom=hb:*&shards=1&bits=1000&k=3")
	reconciletest.Fpdedup(t, dir, nil, "reconcile", "--index", "t.fpx", "--online", url, "--records", "k.txt", "--backfill", "bf.txt").Want(t, 1)
	if got, _ := os.ReadFile(filepath.Join(dir, "bf.txt")); string(got) != recs.String() {
		t.Fatalf("the backfill holds %d bytes, the records of the 100 keys missing %d", len(got), recs.Len())
	}
}
