package ingest

import (
	"errors"
	"fmt"
	"strings"

	"github.com/fpdedup/fpdedup/fpstore"
)

// The key recipe: how records became an index's fingerprints. An index
// records it in its spec (hash, key fields, separator, and the container
// format as provenance), so that records read later against the index
// give the same fingerprints, or are refused.

// RecipeRequest is how a command asks for records to be read: the key
// spec as its command line gave it (parts not given hold their defaults),
// which parts were given, and whether a recipe other than the indexes'
// is used anyway.
type RecipeRequest struct {
	Spec  KeySpec
	Given RecipeParts
	// Assume: records keyed otherwise than the indexes are read anyway;
	// the mismatch comes back as a warning.
	Assume bool
	// LinesAreKeys: in the lines format each line is a key, not a whole
	// record (query): such lines agree with any index's recipe.
	LinesAreKeys bool
}

// IndexRecipe is an index the records are read against: its path (for
// messages) and its spec.
type IndexRecipe struct {
	Path string
	Spec fpstore.Spec
}

// ResolveRecipe is how records are read against indexes, the one place
// the key recipe is decided: req.Spec completed from the first index's
// recorded recipe for the parts not given (AdoptRecipe), validated, then
// checked against every index (CheckRecipe). With req.Assume a mismatch is
// returned in warnings instead of as the error. With no indexes it only
// validates req.Spec.
func ResolveRecipe(req RecipeRequest, against []IndexRecipe) (spec KeySpec, warnings []error, err error) {
	spec = req.Spec
	if len(against) > 0 {
		if spec, err = AdoptRecipe(against[0].Spec, spec, req.Given); err != nil {
			return spec, nil, fmt.Errorf("%s: %w", against[0].Path, err)
		}
	}
	if err := spec.Validate(); err != nil {
		return spec, nil, &SpecError{Err: err}
	}
	if req.LinesAreKeys && len(spec.Keys) == 0 {
		return spec, nil, nil
	}
	reading := Recipe(RecordOptions{Spec: spec})
	for _, x := range against {
		if err := CheckRecipe(x.Path, x.Spec, reading); err != nil {
			if !req.Assume && respelled(spec, x.Spec) {
				spec.Respelled = append(spec.Respelled, x) // the reader checks its columns
				continue
			}
			if !req.Assume {
				return spec, nil, err
			}
			warnings = append(warnings, err)
		}
	}
	return spec, warnings, nil
}

// respelled reports whether the key items recorded in built may name the
// columns spec's name in another spelling (a column number for a header
// name): as many items, joined by the same separator, in a format whose
// items are names or numbers of columns resolved against the input's
// header or schema. A jsonl path has one spelling.
func respelled(spec KeySpec, built fpstore.Spec) bool {
	if len(built.Key) != len(spec.Keys) || built.KeySep != spec.Sep {
		return false
	}
	switch spec.Format {
	case FormatParquet:
		return true
	case FormatCSV, FormatTSV:
		return spec.Header || allDigits(built.Key)
	}
	return false
}

// SpecError is a key spec that cannot work (KeySpec.Validate's error),
// as ResolveRecipe completed it: a mistake in how the records were asked
// for, not in the records.
type SpecError struct{ Err error }

func (e *SpecError) Error() string { return e.Err.Error() }
func (e *SpecError) Unwrap() error { return e.Err }

// Recipe is the spec an index records for fingerprints of records read
// with o: the hash, and the key recipe when records are keyed by fields.
// Whole records and hex fingerprints record no recipe.
func Recipe(o RecordOptions) fpstore.Spec {
	s := fpstore.Spec{Hash: o.Hash.String()}
	if len(o.Spec.Keys) > 0 && !o.HexInput {
		s.Key = o.Spec.Keys
		s.KeySep = o.Spec.Sep
		s.Format = o.Spec.Format.String()
	}
	return s
}

// KeySpecOf is how to read records so that they give the fingerprints of
// an index with spec s: its recorded format, key fields and separator,
// with a header when csv or tsv fields are named. ok is false when s
// records no recipe (whole records: read them as lines).
func KeySpecOf(s fpstore.Spec) (spec KeySpec, ok bool, err error) {
	if len(s.Key) == 0 {
		return KeySpec{Format: FormatLines, Term: '\n'}, false, nil
	}
	f, err := ParseFormat(s.Format)
	if err != nil {
		return spec, true, fmt.Errorf("the index's recorded record format: %w", err)
	}
	spec = KeySpec{Format: f, Keys: s.Key, Sep: s.KeySep, Term: '\n'}
	spec.Header = (f == FormatCSV || f == FormatTSV) && !allDigits(s.Key)
	return spec, true, nil
}

// RecipeParts say which parts of a key recipe a command line set: the
// record format, the key fields, their separator, the header.
type RecipeParts struct {
	Format, Keys, Sep, Header bool
}

// AdoptRecipe completes mine, how a command line says to read records
// against an index with spec idx: each part the command line set (given)
// stays as given; each part it did not set comes from the index's recorded
// recipe (KeySpecOf), so that the same records give the index's
// fingerprints. In the lines format the whole record is the key and
// nothing else is taken (a --format lines given on the command line reads
// whole records); the header is taken only in csv and tsv, where the index
// has one when its key fields are named. An index that records no recipe
// (whole records) gives nothing. mine.Term (-z) is never changed. The
// caller then checks the result against the index (CheckRecipe): a part
// given otherwise than the index's is refused there, not here.
func AdoptRecipe(idx fpstore.Spec, mine KeySpec, given RecipeParts) (KeySpec, error) {
	if len(idx.Key) == 0 || given == (RecipeParts{true, true, true, true}) {
		return mine, nil
	}
	from, _, err := KeySpecOf(idx)
	if err != nil {
		if !given.Format {
			return mine, err
		}
		// The recorded format is not needed, only its key fields.
		from = KeySpec{Keys: idx.Key, Sep: idx.KeySep}
	}
	out := mine
	if !given.Format {
		out.Format = from.Format
	}
	if out.Format == FormatLines {
		return out, nil
	}
	if !given.Keys {
		out.Keys = append([]string(nil), from.Keys...)
	}
	if !given.Sep {
		out.Sep = from.Sep
	}
	if !given.Header && (out.Format == FormatCSV || out.Format == FormatTSV) {
		out.Header = from.Header
	}
	return out, nil
}

func allDigits(keys []string) bool {
	for _, k := range keys {
		if strings.Trim(k, "0123456789") != "" {
			return false
		}
	}
	return true
}

// ErrRecipeMismatch marks records keyed otherwise than an index was built:
// every answer about them would be silently wrong.
var ErrRecipeMismatch = errors.New("key recipes differ")

// RecipeMismatchError says which index was built how, and how the records
// at hand are keyed; when they differ in the columns an input's header or
// schema resolves them to (KeySpec.Respelled), Input names it and Detail
// says how.
type RecipeMismatchError struct {
	Index          string
	Built, Reading fpstore.Spec
	Input, Detail  string
}

func (e *RecipeMismatchError) Error() string {
	msg := fmt.Sprintf("%s was built with key %s, but these records are keyed by %s", e.Index, DescribeRecipe(e.Built), DescribeRecipe(e.Reading))
	if e.Input != "" {
		msg = e.Input + ": " + msg
	}
	if e.Detail != "" {
		msg += " (" + e.Detail + ")"
	}
	return msg
}

func (e *RecipeMismatchError) Is(target error) bool {
	return target == ErrRecipeMismatch || target == fpstore.ErrSpecMismatch
}

// CheckRecipe returns a *RecipeMismatchError unless records keyed by
// reading give the fingerprints of index, built with built: the same key
// fields and separator (the container format is provenance), as spelled.
// ResolveRecipe lets the reader compare the columns of key items spelled
// otherwise (KeySpec.Respelled).
func CheckRecipe(index string, built, reading fpstore.Spec) error {
	if len(built.Key) == len(reading.Key) && built.KeySep == reading.KeySep && strings.Join(built.Key, "\x00") == strings.Join(reading.Key, "\x00") {
		return nil
	}
	return &RecipeMismatchError{Index: index, Built: built, Reading: reading}
}

// DescribeRecipe words a spec's key recipe for messages.
func DescribeRecipe(s fpstore.Spec) string {
	if len(s.Key) == 0 {
		return "(the whole record)"
	}
	return fmt.Sprintf("%s joined by %q", strings.Join(s.Key, ","), s.KeySep)
}
