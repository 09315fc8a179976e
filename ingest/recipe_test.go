package ingest

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/fpdedup/fpdedup/fpstore"
)

// TestRecipeRoundTrip: the recipe an index records gives back the way to
// read its records (csv/tsv named fields have a header), and a recipe
// checks against itself but not against another key list or separator.
func TestRecipeRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		name   string
		spec   KeySpec
		header bool // what KeySpecOf infers
	}{
		{"csv by name", KeySpec{Format: FormatCSV, Keys: []string{"user_id", "ts"}, Sep: ":", Header: true, Term: '\n'}, true},
		{"csv by number", KeySpec{Format: FormatCSV, Keys: []string{"1", "3"}, Sep: ":", Term: '\n'}, false},
		{"tsv by name", KeySpec{Format: FormatTSV, Keys: []string{"a"}, Sep: "|", Header: true, Term: '\n'}, true},
		{"jsonl", KeySpec{Format: FormatJSONL, Keys: []string{"user.id", "ts"}, Sep: ":", Term: '\n'}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := Recipe(RecordOptions{Spec: tc.spec, Hash: SHA256})
			if s.Hash != SHA256.String() || s.Format != tc.spec.Format.String() {
				t.Fatalf("recipe %+v", s)
			}
			back, ok, err := KeySpecOf(s)
			if err != nil || !ok || back.Format != tc.spec.Format || back.Sep != tc.spec.Sep || back.Header != tc.header || len(back.Keys) != len(tc.spec.Keys) {
				t.Fatalf("KeySpecOf(%+v) = %+v, %v, %v", s, back, ok, err)
			}
			if err := CheckRecipe("x.fpx", s, Recipe(RecordOptions{Spec: back, Hash: SHA256})); err != nil {
				t.Fatalf("a recipe does not check against itself: %v", err)
			}
			other := s
			other.KeySep = "/"
			err = CheckRecipe("x.fpx", s, other)
			var me *RecipeMismatchError
			if !errors.As(err, &me) || !errors.Is(err, ErrRecipeMismatch) || !errors.Is(err, fpstore.ErrSpecMismatch) {
				t.Fatalf("another separator: %v", err)
			}
		})
	}
	// Whole records record no recipe, and read as lines.
	s := Recipe(RecordOptions{Spec: KeySpec{Format: FormatLines, Term: '\n'}, Hash: XXH3})
	if len(s.Key) != 0 || s.Format != "" {
		t.Fatalf("whole records: %+v", s)
	}
	if spec, ok, err := KeySpecOf(s); ok || err != nil || spec.Format != FormatLines {
		t.Fatalf("KeySpecOf(whole) = %+v, %v, %v", spec, ok, err)
	}
	// Hex input records no recipe even with keys.
	if s := Recipe(RecordOptions{Spec: KeySpec{Format: FormatCSV, Keys: []string{"1"}}, HexInput: true}); len(s.Key) != 0 {
		t.Fatalf("hex input recorded a recipe: %+v", s)
	}
}

// TestAdoptRecipe: each recipe part a command line set stays; each other
// comes from the index; --format lines takes nothing; the header only in
// csv and tsv; an index without a recipe gives nothing.
func TestAdoptRecipe(t *testing.T) {
	named := fpstore.Spec{Hash: "xxh3", Key: []string{"user_id", "ts"}, KeySep: ":", Format: "csv"}
	numbered := fpstore.Spec{Hash: "xxh3", Key: []string{"1", "3"}, KeySep: "|", Format: "tsv"}
	jsonl := fpstore.Spec{Hash: "xxh3", Key: []string{"u.id"}, KeySep: ":", Format: "jsonl"}
	whole := fpstore.Spec{Hash: "xxh3"}
	lines := KeySpec{Format: FormatLines, Sep: ":", Term: '\n'} // the flags' defaults
	with := func(f func(*KeySpec)) KeySpec {
		s := lines
		f(&s)
		return s
	}
	for _, tc := range []struct {
		name  string
		idx   fpstore.Spec
		mine  KeySpec
		given RecipeParts
		want  KeySpec
	}{
		{"nothing given: all adopted", named, lines, RecipeParts{},
			KeySpec{Format: FormatCSV, Keys: []string{"user_id", "ts"}, Sep: ":", Header: true, Term: '\n'}},
		{"format and header given", named, with(func(s *KeySpec) { s.Format, s.Header = FormatCSV, true }), RecipeParts{Format: true, Header: true},
			KeySpec{Format: FormatCSV, Keys: []string{"user_id", "ts"}, Sep: ":", Header: true, Term: '\n'}},
		{"only keys given", named, with(func(s *KeySpec) { s.Keys = []string{"1", "2"} }), RecipeParts{Keys: true},
			KeySpec{Format: FormatCSV, Keys: []string{"1", "2"}, Sep: ":", Header: true, Term: '\n'}},
		{"header given false stays false", named, with(func(s *KeySpec) { s.Keys = []string{"1", "2"} }), RecipeParts{Keys: true, Header: true},
			KeySpec{Format: FormatCSV, Keys: []string{"1", "2"}, Sep: ":", Term: '\n'}},
		{"only the separator given", numbered, with(func(s *KeySpec) { s.Sep = "/" }), RecipeParts{Sep: true},
			KeySpec{Format: FormatTSV, Keys: []string{"1", "3"}, Sep: "/", Term: '\n'}},
		{"-z kept", numbered, with(func(s *KeySpec) { s.Term = 0 }), RecipeParts{},
			KeySpec{Format: FormatTSV, Keys: []string{"1", "3"}, Sep: "|", Term: 0}},
		{"--format lines takes nothing", named, lines, RecipeParts{Format: true}, lines},
		{"no header in jsonl", named, with(func(s *KeySpec) { s.Format = FormatJSONL }), RecipeParts{Format: true},
			KeySpec{Format: FormatJSONL, Keys: []string{"user_id", "ts"}, Sep: ":", Term: '\n'}},
		{"jsonl index into csv: no header to take", jsonl, with(func(s *KeySpec) { s.Format = FormatCSV }), RecipeParts{Format: true},
			KeySpec{Format: FormatCSV, Keys: []string{"u.id"}, Sep: ":", Term: '\n'}},
		{"whole-record index gives nothing", whole, with(func(s *KeySpec) { s.Header = true }), RecipeParts{Header: true},
			with(func(s *KeySpec) { s.Header = true })},
		{"all given", named, with(func(s *KeySpec) { s.Format, s.Keys = FormatJSONL, []string{"x"} }), RecipeParts{true, true, true, true},
			with(func(s *KeySpec) { s.Format, s.Keys = FormatJSONL, []string{"x"} })},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := AdoptRecipe(tc.idx, tc.mine, tc.given)
			if err != nil {
				t.Fatal(err)
			}
			if got.Format != tc.want.Format || !slices.Equal(got.Keys, tc.want.Keys) || got.Sep != tc.want.Sep || got.Header != tc.want.Header || got.Term != tc.want.Term {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
		})
	}
	// An unknown recorded format is an error only when it is needed.
	future := fpstore.Spec{Hash: "xxh3", Key: []string{"a"}, KeySep: ":", Format: "orc"}
	if _, err := AdoptRecipe(future, lines, RecipeParts{Header: true}); err == nil {
		t.Fatal("an unknown recorded format was adopted")
	}
	got, err := AdoptRecipe(future, with(func(s *KeySpec) { s.Format = FormatJSONL }), RecipeParts{Format: true})
	if err != nil || !slices.Equal(got.Keys, []string{"a"}) {
		t.Fatalf("format given: %+v, %v", got, err)
	}
}

// TestResolveRecipe: the one decision of how records are read against
// indexes: adopted from the first, validated, checked against each, a
// mismatch a warning only when assumed, lines as keys agreeing with any.
func TestResolveRecipe(t *testing.T) {
	named := fpstore.Spec{Hash: "xxh3", Key: []string{"user_id", "ts"}, KeySep: ":", Format: "csv"}
	other := fpstore.Spec{Hash: "xxh3", Key: []string{"user_id"}, KeySep: ":", Format: "csv"}
	whole := fpstore.Spec{Hash: "xxh3"}
	lines := KeySpec{Format: FormatLines, Sep: ":", Term: '\n'}
	csvBy := func(keys ...string) KeySpec {
		return KeySpec{Format: FormatCSV, Keys: keys, Sep: ":", Header: true, Term: '\n'}
	}
	idx := func(specs ...fpstore.Spec) []IndexRecipe {
		var rs []IndexRecipe
		for i, s := range specs {
			rs = append(rs, IndexRecipe{Path: string(rune('a'+i)) + ".fpx", Spec: s})
		}
		return rs
	}
	for _, tc := range []struct {
		name     string
		req      RecipeRequest
		against  []IndexRecipe
		want     KeySpec
		warnings int
		err      string // substring; "spec" for a *SpecError, "recipe" for a mismatch
	}{
		{"no index: as given", RecipeRequest{Spec: lines}, nil, lines, 0, ""},
		{"no index: invalid", RecipeRequest{Spec: KeySpec{Format: FormatCSV, Sep: ":", Term: '\n'}}, nil, KeySpec{}, 0, "spec"},
		{"adopted whole", RecipeRequest{Spec: lines}, idx(named), csvBy("user_id", "ts"), 0, ""},
		{"adopted, checked against the second", RecipeRequest{Spec: lines}, idx(named, other), KeySpec{}, 0, "recipe"},
		{"assumed: a warning", RecipeRequest{Spec: lines, Assume: true}, idx(named, other), csvBy("user_id", "ts"), 1, ""},
		{"given keys differ", RecipeRequest{Spec: csvBy("user_id"), Given: RecipeParts{Keys: true}}, idx(named), KeySpec{}, 0, "recipe"},
		{"given lines against a keyed index", RecipeRequest{Spec: lines, Given: RecipeParts{Format: true}}, idx(named), KeySpec{}, 0, "recipe"},
		{"lines are keys: agree", RecipeRequest{Spec: lines, Given: RecipeParts{Format: true}, LinesAreKeys: true}, idx(named), lines, 0, ""},
		{"whole-record index, whole records", RecipeRequest{Spec: lines}, idx(whole), lines, 0, ""},
		{"whole-record index, keyed records", RecipeRequest{Spec: csvBy("user_id"), Given: RecipeParts{Format: true, Keys: true, Header: true}}, idx(whole), KeySpec{}, 0, "recipe"},
		{"adopted but invalid", RecipeRequest{Spec: KeySpec{Format: FormatLines, Sep: ":", Header: true, Term: '\n'}, Given: RecipeParts{Format: true, Header: true}}, idx(named), KeySpec{}, 0, "spec"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, warnings, err := ResolveRecipe(tc.req, tc.against)
			var se *SpecError
			switch {
			case tc.err == "spec":
				if !errors.As(err, &se) {
					t.Fatalf("err %v, want a *SpecError", err)
				}
				return
			case tc.err == "recipe":
				if !errors.Is(err, ErrRecipeMismatch) || !errors.Is(err, fpstore.ErrSpecMismatch) {
					t.Fatalf("err %v, want a recipe mismatch", err)
				}
				return
			case err != nil:
				t.Fatal(err)
			}
			if len(warnings) != tc.warnings {
				t.Fatalf("warnings %v, want %d", warnings, tc.warnings)
			}
			if got.Format != tc.want.Format || !slices.Equal(got.Keys, tc.want.Keys) || got.Sep != tc.want.Sep || got.Header != tc.want.Header || got.Term != tc.want.Term {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

// TestRespelledRecipe: an index's key and the records' are compared as the
// columns they name in the input's header or schema, not as spelled: a
// column number for a header name (or a leaf number for a Parquet path)
// is the same recipe; other columns, another separator, a jsonl path and
// a name that no header resolves are refused.
func TestRespelledRecipe(t *testing.T) {
	header := []byte("event,ts,device_id,user_id\n")
	pq := openFixture(t, "events.parquet") // user_id, device_id, ts, amount, event
	idx := func(format string, keys ...string) []IndexRecipe {
		return []IndexRecipe{{Path: "x.fpx", Spec: fpstore.Spec{Hash: "xxh3", Key: keys, KeySep: ":", Format: format}}}
	}
	for _, c := range []struct {
		name    string
		against []IndexRecipe
		spec    KeySpec
		want    string // the error, when refused: at once, or by the reader
	}{
		{"csv: numbers for names", idx("csv", "user_id", "device_id"), KeySpec{Format: FormatCSV, Keys: []string{"4", "3"}, Sep: ":", Header: true}, ""},
		{"csv: names for numbers", idx("csv", "4", "3"), KeySpec{Format: FormatCSV, Keys: []string{"user_id", "device_id"}, Sep: ":", Header: true}, ""},
		{"csv: a leading zero", idx("csv", "4", "3"), KeySpec{Format: FormatCSV, Keys: []string{"04", "3"}, Sep: ":"}, ""},
		{"csv: other columns", idx("csv", "user_id", "device_id"), KeySpec{Format: FormatCSV, Keys: []string{"3", "4"}, Sep: ":", Header: true},
			`x.fpx was built with key user_id,device_id joined by ":", but these records are keyed by 3,4 joined by ":" (the index's key is columns 4,3 there, these records' 3,4)`},
		{"csv: a name the header lacks", idx("csv", "user", "device_id"), KeySpec{Format: FormatCSV, Keys: []string{"4", "3"}, Sep: ":", Header: true},
			`(the index's key there: key "user": no such column in the header`},
		{"csv: names without a header", idx("csv", "user_id"), KeySpec{Format: FormatCSV, Keys: []string{"4"}, Sep: ":"}, "x.fpx was built with key user_id"},
		{"csv: another separator", idx("csv", "user_id"), KeySpec{Format: FormatCSV, Keys: []string{"4"}, Sep: "/", Header: true}, "x.fpx was built with key user_id"},
		{"csv: fewer fields", idx("csv", "user_id", "device_id"), KeySpec{Format: FormatCSV, Keys: []string{"4"}, Sep: ":", Header: true}, "x.fpx was built with key user_id,device_id"},
		{"jsonl: one spelling", idx("jsonl", "a.b"), KeySpec{Format: FormatJSONL, Keys: []string{`a\.b`}, Sep: ":"}, "x.fpx was built with key a.b"},
		{"parquet: numbers for paths", idx("parquet", "user_id", "ts"), KeySpec{Format: FormatParquet, Keys: []string{"1", "3"}, Sep: ":"}, ""},
		{"parquet: paths for numbers", idx("parquet", "1", "3"), KeySpec{Format: FormatParquet, Keys: []string{"user_id", "ts"}, Sep: ":"}, ""},
		{"parquet: other leaves", idx("parquet", "1", "3"), KeySpec{Format: FormatParquet, Keys: []string{"ts", "user_id"}, Sep: ":"},
			`events.parquet: x.fpx was built with key 1,3 joined by ":", but these records are keyed by ts,user_id joined by ":" (the index's key is leaves 1,3 there, these records' 3,1)`},
	} {
		t.Run(c.name, func(t *testing.T) {
			spec, _, err := ResolveRecipe(RecipeRequest{Spec: c.spec, Given: RecipeParts{true, true, true, true}}, c.against)
			if err == nil {
				if c.spec.Format == FormatParquet {
					_, err = pq.KeyColumns(spec)
				} else {
					_, err = NewKeyer(spec, header)
				}
			}
			switch {
			case c.want == "" && err != nil:
				t.Fatal(err)
			case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want) || !errors.Is(err, ErrRecipeMismatch)):
				t.Fatalf("%v, want %s", err, c.want)
			}
		})
	}
}
