package pipeline

import (
	"errors"
	"testing"

	"github.com/fpdedup/fpdedup/fpstore"
	"github.com/fpdedup/fpdedup/ingest"
)

// TestRecipeRoundTrip: the recipe an index records gives back the way to
// read its records (csv/tsv named fields have a header), and a recipe
// checks against itself but not against another key list or separator.
func TestRecipeRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		name   string
		spec   ingest.KeySpec
		header bool // what KeySpecOf infers
	}{
		{"csv by name", ingest.KeySpec{Format: ingest.FormatCSV, Keys: []string{"user_id", "ts"}, Sep: ":", Header: true, Term: '\n'}, true},
		{"csv by number", ingest.KeySpec{Format: ingest.FormatCSV, Keys: []string{"1", "3"}, Sep: ":", Term: '\n'}, false},
		{"tsv by name", ingest.KeySpec{Format: ingest.FormatTSV, Keys: []string{"a"}, Sep: "|", Header: true, Term: '\n'}, true},
		{"jsonl", ingest.KeySpec{Format: ingest.FormatJSONL, Keys: []string{"user.id", "ts"}, Sep: ":", Term: '\n'}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := Recipe(ingest.RecordOptions{Spec: tc.spec, Hash: ingest.SHA256})
			if s.Hash != ingest.SHA256.String() || s.Format != tc.spec.Format.String() {
				t.Fatalf("recipe %+v", s)
			}
			back, ok, err := KeySpecOf(s)
			if err != nil || !ok || back.Format != tc.spec.Format || back.Sep != tc.spec.Sep || back.Header != tc.header || len(back.Keys) != len(tc.spec.Keys) {
				t.Fatalf("KeySpecOf(%+v) = %+v, %v, %v", s, back, ok, err)
			}
			if err := CheckRecipe("x.fpx", s, Recipe(ingest.RecordOptions{Spec: back, Hash: ingest.SHA256})); err != nil {
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
	s := Recipe(ingest.RecordOptions{Spec: ingest.KeySpec{Format: ingest.FormatLines, Term: '\n'}, Hash: ingest.XXH3})
	if len(s.Key) != 0 || s.Format != "" {
		t.Fatalf("whole records: %+v", s)
	}
	if spec, ok, err := KeySpecOf(s); ok || err != nil || spec.Format != ingest.FormatLines {
		t.Fatalf("KeySpecOf(whole) = %+v, %v, %v", spec, ok, err)
	}
	// Hex input records no recipe even with keys.
	if s := Recipe(ingest.RecordOptions{Spec: ingest.KeySpec{Format: ingest.FormatCSV, Keys: []string{"1"}}, HexInput: true}); len(s.Key) != 0 {
		t.Fatalf("hex input recorded a recipe: %+v", s)
	}
}
