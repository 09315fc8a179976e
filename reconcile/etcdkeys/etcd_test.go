package etcdkeys_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/fpdedup/fpdedup/reconcile"
	"github.com/fpdedup/fpdedup/reconcile/internal/reconciletest"
)

// The tests use etcd alone: they run beside those of Redis and MariaDB.
func TestMain(m *testing.M) {
	reconciletest.EtcdOnly()
	reconciletest.Main(m, reconcile.QuietRedisLogs)
}

// loadDataset writes the dataset's online keys under prefix as 64-hex
// keys with the value "1".
func loadDataset(t *testing.T, c *clientv3.Client, prefix string, d *reconciletest.Dataset) {
	t.Helper()
	var keys []string
	for _, k := range d.OnlineKeys() {
		keys = append(keys, prefix+reconciletest.FullHex(k))
	}
	reconciletest.EtcdPut(t, c, keys, nil)
}

// 20k truth keys, 10% missing, 1% online only, as 64-hex keys under a
// prefix, beside keys that are not fingerprints (a name, upper case, the
// wrong width, invalid UTF-8, 64 KiB), keys bound to a lease and a value
// of 1 MiB: exact
// counts, the bad keys counted and named, the leases reported, the
// missing and extra indexes and the backfill; --dry-run writes nothing;
// --apply creates exactly the missing keys with --value, never touching
// another, and reads them back; a rerun is a no-op.
func TestEtcdAudit(t *testing.T) {
	eps := reconciletest.Etcd(t)
	c := reconciletest.EtcdClient(t, eps)
	p := reconciletest.EtcdPrefix(t, c)
	d := reconciletest.NewDataset(t, 20_000)
	loadDataset(t, c, p, d)
	bad := []string{p + "not-a-fingerprint", p + strings.ToUpper(reconciletest.FullHex(d.Keys[0])),
		p + reconciletest.FPHex(d.Keys[1]), p + "\xff\xfe" + reconciletest.FullHex(d.Keys[2])[2:], p + strings.Repeat("a", 64<<10)}
	reconciletest.EtcdPut(t, c, bad, nil)
	ctx := context.Background()
	lease, err := c.Grant(ctx, 3600)
	if err != nil {
		t.Fatal(err)
	}
	leased := []string{p + reconciletest.FullHex(d.Keys[d.Online[0]]), p + reconciletest.FullHex(d.Keys[d.Online[1]]), p + reconciletest.FullHex(d.Keys[d.Online[2]])}
	reconciletest.EtcdPut(t, c, leased, nil, clientv3.WithLease(lease.ID))
	// A value of 1 MiB: the audit reads keys only.
	reconciletest.EtcdPut(t, c, []string{p + reconciletest.FullHex(d.Keys[d.Online[3]])}, []string{strings.Repeat("v", 1<<20)})
	url := reconciletest.EtcdURL(eps, p, "page=1000")
	before := reconciletest.EtcdGet(t, c, p)

	r := reconciletest.Fpdedup(t, d.Dir, nil, "reconcile", "--index", d.Index, "--online", url,
		"--report", "r.json", "--missing", "missing.fpx", "--extra", "extra.fpx",
		"--records", d.Records, "--backfill", "backfill.txt").Want(t, 1)
	rep := reconciletest.ReadReport(t, filepath.Join(d.Dir, "r.json"))
	reconciletest.WantCounts(t, rep.Counts, 18_000, 2_000, 200)
	if rep.Online.Kind != "etcd" || rep.Online.Source != url || !rep.Online.Wide || rep.Online.Values != 18_205 || rep.Online.Bad != 5 || rep.Agree || rep.ExitCode != 1 {
		t.Fatalf("report: %+v, agree %v, exit %d", rep.Online, rep.Agree, rep.ExitCode)
	}
	if !slices.Contains(rep.Online.BadSamples, `"`+p+`not-a-fingerprint"`) {
		t.Fatalf("bad samples %q", rep.Online.BadSamples)
	}
	e := rep.Etcd
	if e == nil || e.Prefix != p || e.Hex != 64 || e.Revision <= 0 || e.Keys != 18_205 || e.Pages < 19 || len(e.Compacted) != 0 {
		t.Fatalf("etcd section: %+v", e)
	}
	if e.Leased != 3 || e.Leases != 1 || e.MinTTL <= 0 || e.MinTTL > 3600 || e.Expired != 0 {
		t.Fatalf("leases: %+v", e)
	}
	for _, want := range []string{"only offline (missing online) 2000", "5 online values are not fingerprints", "3 keys bound to 1 lease", "read at revision"} {
		if !strings.Contains(r.Stderr, want) {
			t.Fatalf("summary lacks %q:\n%s", want, r.Stderr)
		}
	}
	if strings.Contains(r.Stderr, strings.Repeat("a", 200)) {
		t.Fatalf("the 64 KiB key is printed whole:\n%s", reconciletest.Head(r.Stderr))
	}
	if got := reconciletest.Dump(t, d.Dir, "missing.fpx"); !slices.Equal(got, d.MissingFPs()) {
		t.Fatalf("missing.fpx: %d fingerprints, want %d", len(got), len(d.MissingFPs()))
	}
	if got := reconciletest.Dump(t, d.Dir, "extra.fpx"); !slices.Equal(got, d.ExtraFPs()) {
		t.Fatalf("extra.fpx: %d fingerprints, want %d", len(got), len(d.ExtraFPs()))
	}
	if bf, err := os.ReadFile(filepath.Join(d.Dir, "backfill.txt")); err != nil || string(bf) != d.MissingRecords() {
		t.Fatalf("backfill: %d bytes (%v), want %d", len(bf), err, len(d.MissingRecords()))
	}

	// 64-hex keys are whole digests: --apply needs the records.
	r = reconciletest.Fpdedup(t, d.Dir, nil, "reconcile", "--index", d.Index, "--online", url, "--apply").Want(t, 2)
	if !strings.Contains(r.Stderr, "--apply needs --records FILE") {
		t.Fatalf("--apply without --records: %s", r.Stderr)
	}

	// --dry-run prints the transactions as the run sends them (128 keys
	// each, etcd's --max-txn-ops; a batch's last fewer) and writes
	// nothing. Before, it printed one transaction a key.
	r = reconciletest.Fpdedup(t, d.Dir, nil, "reconcile", "-q", "--index", d.Index, "--online", url, "--records", d.Records,
		"--dry-run", "--value", `{"src":"fpdedup"}`, "--batch", "1000").Want(t, 1)
	lines := strings.Split(strings.TrimSuffix(r.Stdout, "\n"), "\n")
	k0 := p + reconciletest.FullHex(d.Keys[d.Missing[0]])
	var txns []string
	for _, l := range lines {
		if strings.HasPrefix(l, "TXN ") {
			txns = append(txns, l)
		}
	}
	const head = ": IF CREATE_REVISION(key) = 0 for each THEN PUT key value for each ELSE GET each (those not found are sent again)"
	if len(lines) != 2_000+16 || len(txns) != 16 || txns[0] != "TXN of 128 keys"+head || txns[7] != "TXN of 104 keys"+head ||
		!slices.Contains(lines, `  "`+k0+`" "{\"src\":\"fpdedup\"}"`) {
		t.Fatalf("dry run: %d lines, %d transactions, first %q", len(lines), len(txns), lines[0])
	}
	if got := reconciletest.EtcdGet(t, c, p); len(got) != len(before) {
		t.Fatalf("--dry-run changed etcd: %d keys, were %d", len(got), len(before))
	}

	// --apply: exactly the missing keys, created once with the value.
	r = reconciletest.Fpdedup(t, d.Dir, nil, "reconcile", "--index", d.Index, "--online", url, "--records", d.Records,
		"--apply", "--value", `{"src":"fpdedup"}`, "--batch", "64", "--conns", "3", "--checkpoint", "apply.ckpt", "--report", "apply.json").Want(t, 1)
	rep = reconciletest.ReadReport(t, filepath.Join(d.Dir, "apply.json"))
	if rep.Apply == nil || rep.Apply.Written != 2_000 || rep.Missing != 0 || !rep.Apply.CheckpointRemoved || rep.ReadBack == nil || rep.ReadBack.Keys != 2_000 || rep.ReadBack.NotHeld != 0 {
		t.Fatalf("apply report: %+v, read back %+v, missing after %d", rep.Apply, rep.ReadBack, rep.Missing)
	}
	if e := rep.Etcd; e.Created != 2_000 || e.Existed != 0 || e.Value != `{"src":"fpdedup"}` {
		t.Fatalf("etcd writes: %+v", e)
	}
	after := reconciletest.EtcdGet(t, c, p)
	if len(after) != len(before)+2_000 {
		t.Fatalf("%d keys after --apply, %d before", len(after), len(before))
	}
	for k, kv := range after {
		if old, ok := before[k]; ok {
			if kv != old {
				t.Fatalf("%q changed: %+v, was %+v", k, kv, old)
			}
		} else if kv.Value != `{"src":"fpdedup"}` || kv.Version != 1 {
			t.Fatalf("%q written as %+v", k, kv)
		}
	}
	// The records were read for the keys' digests, without --backfill.
	if !strings.Contains(r.Stderr, "etcd compare-and-create: 2000 keys created") || !strings.Contains(r.Stderr, "2000 with keys missing online\n") {
		t.Fatalf("summary: %s", r.Stderr)
	}

	// A rerun finds nothing missing and writes nothing.
	r = reconciletest.Fpdedup(t, d.Dir, nil, "reconcile", "--index", d.Index, "--online", url, "--records", d.Records,
		"--apply", "--value", `{"src":"fpdedup"}`, "--report", "again.json").Want(t, 1)
	rep = reconciletest.ReadReport(t, filepath.Join(d.Dir, "again.json"))
	reconciletest.WantCounts(t, rep.Counts, 20_000, 0, 200)
	if rep.Etcd.Created != 0 || rep.Etcd.Txns != 0 {
		t.Fatalf("a rerun wrote: %+v", rep.Etcd)
	}
	if got := reconciletest.EtcdGet(t, c, p); !mapsEqual(got, after) {
		t.Fatal("a rerun changed etcd")
	}
}

func mapsEqual(a, b map[string]reconciletest.EtcdKV) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// --value with fields of CSV records: each key's value is made of its
// first record's fields (JSON-escaped in a string, as they are outside
// one), before any write; a record whose field does not fit, a field
// not in the header, a template that is no JSON, stop the run before
// anything is written, naming the record or the flag.
func TestEtcdValueFromRecords(t *testing.T) {
	reconciletest.PlainOnly(t, "values made from records; the apply runs under -race in the apply tests")
	eps := reconciletest.Etcd(t)
	c := reconciletest.EtcdClient(t, eps)
	p := reconciletest.EtcdPrefix(t, c)
	dir := t.TempDir()
	var csv strings.Builder
	csv.WriteString("user_id,device_id,timestamp_ms,obj\n")
	type rec struct{ u, d, ts, obj string }
	var recs []rec
	for i := range 1000 {
		r := rec{"u" + itoa(i), "d" + itoa(i%7), itoa(1714579200000 + i), "bkt1:log_" + itoa(i) + ".zip"}
		if i == 5 {
			r.obj = `a "quoted" \ é` // escaped inside the JSON string
		}
		recs = append(recs, r)
	}
	for _, r := range recs {
		csv.WriteString(r.u + "," + r.d + "," + r.ts + `,"` + strings.ReplaceAll(r.obj, `"`, `""`) + "\"\n")
	}
	// A later record of key 5 with another obj: the first record's wins.
	csv.WriteString(recs[5].u + "," + recs[5].d + "," + recs[5].ts + ",later\n")
	if err := os.WriteFile(filepath.Join(dir, "ev.csv"), []byte(csv.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	reconciletest.Fpdedup(t, dir, nil, "build", "-q", "--hash", "sha256", "--format", "csv", "--header", "--key", "user_id,device_id,timestamp_ms", "-o", "truth.fpx", "ev.csv").Want(t, 0)
	key := func(r rec) string { return p + reconciletest.FullHex(r.u+":"+r.d+":"+r.ts) }
	var online []string
	for i, r := range recs {
		if i%4 != 1 { // every fourth missing, key 5 among them
			online = append(online, key(r))
		}
	}
	reconciletest.EtcdPut(t, c, online, nil)
	url := reconciletest.EtcdURL(eps, p, "")
	args := []string{"reconcile", "--index", "truth.fpx", "--online", url, "--records", "ev.csv", "--apply"}

	for _, bad := range []struct {
		value, want string
		code        int
	}{
		{`{"ts":$obj}`, `ev.csv:3: record 2: the value: a field does not fit the value template: field "obj" is "bkt1:log_1.zip", not a JSON number`, 2},
		{`{"x":"$nosuch"}`, `key "nosuch": no such column in the header`, 2},
		{`{"x":"$obj"`, "--value: bad value template at byte 11", 2},
	} {
		r := reconciletest.Fpdedup(t, dir, nil, append(args, "--value", bad.value)...).Want(t, bad.code)
		if !strings.Contains(r.Stderr, bad.want) {
			t.Fatalf("--value %s: %s", bad.value, r.Stderr)
		}
		if got := reconciletest.EtcdGet(t, c, p); len(got) != len(online) {
			t.Fatalf("--value %s: %d keys written", bad.value, len(got)-len(online))
		}
	}

	tmpl := `{"obj":"$obj","id":"$user_id:$device_id","ts":$timestamp_ms}`
	reconciletest.Fpdedup(t, dir, nil, append(args, "--value", tmpl, "--report", "r.json")...).Want(t, 0)
	got := reconciletest.EtcdGet(t, c, p)
	if len(got) != len(recs) {
		t.Fatalf("%d keys, want %d", len(got), len(recs))
	}
	for i, r := range recs {
		kv := got[key(r)]
		if i%4 != 1 {
			if kv.Value != "1" {
				t.Fatalf("record %d: an existing key now %q", i, kv.Value)
			}
			continue
		}
		var v struct {
			Obj, ID string
			TS      int64
		}
		if err := json.Unmarshal([]byte(kv.Value), &v); err != nil || v.Obj != r.obj || v.ID != r.u+":"+r.d || itoa(int(v.TS)) != r.ts || kv.Version != 1 {
			t.Fatalf("record %d: value %q (%v), version %d", i, kv.Value, err, kv.Version)
		}
	}
}

func itoa(i int) string { return strconv.Itoa(i) }

// hex=32 keys are the index's own fingerprints: the audit compares them
// as they are, and --apply writes the missing ones from the index alone,
// without --records, as 32-hex keys.
func TestEtcdHex32(t *testing.T) {
	reconciletest.PlainOnly(t, "a key format; the audit runs under -race in TestEtcdAudit")
	eps := reconciletest.Etcd(t)
	c := reconciletest.EtcdClient(t, eps)
	p := reconciletest.EtcdPrefix(t, c)
	d := reconciletest.NewDataset(t, 5_000)
	var keys []string
	for _, k := range d.OnlineKeys() {
		keys = append(keys, p+reconciletest.FPHex(k))
	}
	reconciletest.EtcdPut(t, c, keys, nil)
	url := reconciletest.EtcdURL(eps, p, "hex=32")
	reconciletest.Fpdedup(t, d.Dir, nil, "reconcile", "--index", d.Index, "--online", url, "--report", "r.json").Want(t, 1)
	rep := reconciletest.ReadReport(t, filepath.Join(d.Dir, "r.json"))
	reconciletest.WantCounts(t, rep.Counts, 4_500, 500, 50)
	if rep.Online.Wide || rep.Etcd.Hex != 32 || rep.Online.Bad != 0 {
		t.Fatalf("report: %+v %+v", rep.Online, rep.Etcd)
	}
	reconciletest.Fpdedup(t, d.Dir, nil, "reconcile", "--index", d.Index, "--online", url, "--apply", "--report", "a.json").Want(t, 1)
	got := reconciletest.EtcdGet(t, c, p)
	for _, fp := range d.MissingFPs() {
		if kv, ok := got[p+fp]; !ok || kv.Value != "" || kv.Version != 1 {
			t.Fatalf("%s: %+v (held %v)", fp, kv, ok)
		}
	}
	if len(got) != 5_050 {
		t.Fatalf("%d keys, want 5050", len(got))
	}
}
