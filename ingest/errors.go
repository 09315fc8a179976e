package ingest

import (
	"errors"
	"fmt"
	"strconv"
)

// Sentinels, matched with errors.Is; the errors returned wrap them with the
// file name and position.
var (
	// ErrUnsupportedCompression marks an input compressed in a format that is
	// recognised (xz, bzip2, lz4, zip) but not decoded: hashing its bytes as
	// lines would give a silent wrong answer.
	ErrUnsupportedCompression = errors.New("unsupported compression")

	// ErrRecordTooLong marks a record over the caller's size limit.
	ErrRecordTooLong = errors.New("record too long")

	// ErrEmptyFileName marks a zero-length name in a --files0-from list.
	ErrEmptyFileName = errors.New("invalid zero-length file name")

	// ErrNoFileNames marks a --files0-from list that names no file; like GNU
	// sort we refuse it rather than fall back to stdin.
	ErrNoFileNames = errors.New("no input file names")

	// ErrUnknownHash marks a --hash name that is not one of ours.
	ErrUnknownHash = errors.New("unknown hash")

	// ErrInputChanged marks a regular file whose size or modification time
	// at the end of reading differs from what it was when opened (appended
	// to, truncated or rewritten meanwhile): what was read is no snapshot
	// of anything, so the run stops rather than publish it.
	ErrInputChanged = errors.New("the file changed while it was read")
)

// ErrParquetAsText: a Parquet file given where text records are read.
var ErrParquetAsText = errors.New("a Parquet file: its rows are read in the parquet format, keyed by columns")

// RecordError locates a bad record the way every fpdedup error about input
// reads: "FILE:LINE: record N: reason", where LINE is the
// physical line the record starts on and N its 1-based number in that input.
// A Parquet row has no line: "FILE: row group G, row N: reason", G numbered
// from 0 as Parquet tools number row groups, N the row's 1-based number in
// the file.
type RecordError struct {
	Name     string
	Line     int64
	Record   int64
	RowGroup int // a Parquet row's row group + 1; 0 in other formats
	Input    int // a Parquet row's input, numbered among the run's inputs from 0
	Err      error
}

func (e *RecordError) Error() string {
	if e.RowGroup > 0 {
		return fmt.Sprintf("%s: row group %d, row %d: %v", e.Name, e.RowGroup-1, e.Record, e.Err)
	}
	return fmt.Sprintf("%s:%d: record %d: %v", e.Name, e.Line, e.Record, e.Err)
}

func (e *RecordError) Unwrap() error { return e.Err }

// tooLong builds the error for a record over maxRecord bytes.
func tooLong(name string, line, record int64, maxRecord int) error {
	return &RecordError{
		Name: name, Line: line, Record: record,
		Err: fmt.Errorf("%w: more than %d bytes", ErrRecordTooLong, maxRecord),
	}
}

// KeyProblem is what is wrong with a key recipe, or with the header its
// names are resolved against.
type KeyProblem uint8

const (
	KeysInLines     KeyProblem = iota + 1 // key fields given in the lines format
	HeaderNotCSV                          // a header outside csv and tsv
	HeaderInJSONL                         // a header with jsonl
	NoKeys                                // csv, tsv or jsonl without key fields
	EmptyItem                             // an empty key item
	NameNeedsHeader                       // a column name without a header
	ColumnTooLarge                        // a column number past 2^31
	ColumnZero                            // column 0
	NoHeaderRecord                        // the input has no first record
	BlankHeader                           // the header is a blank line
	BadHeader                             // the header does not parse (Err)
	BeyondHeader                          // a column number past the header's N columns
	AmbiguousName                         // a name of columns N and M
	NoSuchColumn                          // a name the header lacks (Names lists it)
	BadEscape                             // a jsonl path with a stray backslash
	EmptyFieldName                        // a jsonl path with an empty step
	BeyondColumns                         // a Parquet leaf number past the file's N leaves
	NoSuchLeaf                            // a Parquet column path the file lacks (Names lists them)
	ParquetNeedsKey                       // a Parquet input without key columns
	AmbiguousLeaf                         // a Parquet column path of N leaves (Names describes them)
	GroupNotLeaf                          // a Parquet group's path (Names lists its leaves)
)

// KeyError is a key recipe that cannot give keys, said in the words of
// whoever asked for it (Say): the library names the parts of a recipe, the
// command line names its flags.
type KeyError struct {
	Problem KeyProblem
	Input   string // the input whose header is at fault, when known
	Item    string // the key item at fault, if one is
	// TimeField: the item is the time field (replay), not a key item.
	TimeField bool
	Format    Format
	N, M      int    // column numbers or counts the problem names
	Names     string // the header's names, listed
	Err       error  // the header's own fault
}

// Words name the parts of a key recipe in a message.
type Words struct {
	Key, TimeField, Header, Format string
}

// PlainWords are the library's own names for them.
var PlainWords = Words{Key: "key", TimeField: "time field", Header: "header", Format: "format"}

func (e *KeyError) Error() string { return e.Say(PlainWords) }
func (e *KeyError) Unwrap() error { return e.Err }

// Say is the message with the parts named by w.
func (e *KeyError) Say(w Words) string {
	item := w.Key
	if e.TimeField {
		item = w.TimeField
	}
	q := strconv.Quote(e.Item)
	var msg string
	switch e.Problem {
	case KeysInLines:
		msg = fmt.Sprintf("%s needs %s csv, tsv, jsonl or parquet: in lines format the whole record is the key", w.Key, w.Format)
	case HeaderNotCSV:
		msg = fmt.Sprintf("%s needs %s csv or tsv", w.Header, w.Format)
	case HeaderInJSONL:
		msg = fmt.Sprintf("%s needs %s csv or tsv: jsonl keys are field names", w.Header, w.Format)
	case NoKeys:
		msg = fmt.Sprintf("%s %v needs %s: the fields that make the key", w.Format, e.Format, w.Key)
	case EmptyItem:
		msg = fmt.Sprintf("%s: an empty item (two commas in a row?)", item)
	case NameNeedsHeader:
		msg = fmt.Sprintf("%s %s is a column name: it needs %s (or give the 1-based column number)", item, q, w.Header)
	case ColumnTooLarge:
		msg = fmt.Sprintf("%s %s: column number too large", item, e.Item)
	case ColumnZero:
		msg = fmt.Sprintf("%s %s: columns are numbered from 1", item, e.Item)
	case NoHeaderRecord:
		msg = fmt.Sprintf("%s: the input has no header record", w.Header)
	case BlankHeader:
		msg = fmt.Sprintf("%s: the header record is a blank line", w.Header)
	case BadHeader:
		msg = fmt.Sprintf("%s: the header record is bad: %v", w.Header, e.Err)
	case BeyondHeader:
		msg = fmt.Sprintf("%s %s: the header has only %d columns", item, e.Item, e.N)
	case AmbiguousName:
		msg = fmt.Sprintf("%s %s: columns %d and %d of the header both have that name; give the column number instead", item, q, e.N, e.M)
	case NoSuchColumn:
		msg = fmt.Sprintf("%s %s: no such column in the header, whose columns are %s", item, q, e.Names)
	case BadEscape:
		msg = fmt.Sprintf(`%s %s: a backslash escapes only a dot or a backslash (\. or \\)`, item, q)
	case EmptyFieldName:
		msg = fmt.Sprintf("%s %s: an empty field name (a stray dot?)", item, q)
	case ParquetNeedsKey:
		msg = fmt.Sprintf("a Parquet row has no bytes of its own to be a whole-record key: give %s, the columns that make it", w.Key)
	case BeyondColumns:
		msg = fmt.Sprintf("%s %s: the file has only %d leaf columns", item, e.Item, e.N)
	case NoSuchLeaf:
		msg = fmt.Sprintf("%s %s: no such leaf column in the file, whose leaf columns are %s", item, q, e.Names)
	case AmbiguousLeaf:
		msg = fmt.Sprintf("%s %s: %d leaf columns of the file have that path: %s; give the leaf number instead", item, q, e.N, e.Names)
	case GroupNotLeaf:
		msg = fmt.Sprintf("%s %s: a group, not a leaf column: its leaf columns are %s; give the ones that make the key", item, q, e.Names)
	default:
		msg = fmt.Sprintf("key problem %d", e.Problem)
	}
	if e.Input != "" {
		msg = e.Input + ": " + msg
	}
	return msg
}

// InInput says that err arose reading the input name: a *KeyError and a
// *RecipeMismatchError learn their input, an error that names it already (a *ParquetError or a
// *RecordError of that file) is as it is, and any other error is
// prefixed with it.
func InInput(err error, name string) error {
	var ke *KeyError
	if errors.As(err, &ke) && error(ke) == err {
		c := *ke
		c.Input = name
		return &c
	}
	var rm *RecipeMismatchError
	if errors.As(err, &rm) && error(rm) == err {
		c := *rm
		c.Input = name
		return &c
	}
	var pe *ParquetError
	var re *RecordError
	if errors.As(err, &pe) && pe.Name == name || errors.As(err, &re) && re.Name == name {
		return err
	}
	return fmt.Errorf("%s: %w", name, err)
}

// OnBadError is a bad-record policy that is none of fail, skip or
// quarantine=FILE.
type OnBadError struct{ Value string }

func (e *OnBadError) Error() string {
	return fmt.Sprintf("a bad-record policy is fail, skip or quarantine=FILE, not %q", e.Value)
}

// QuarantineError is a quarantine file that could not be made (or, with
// Writing, written).
type QuarantineError struct {
	Path    string
	Writing bool
	Err     error
}

func (e *QuarantineError) Error() string {
	if e.Writing {
		return fmt.Sprintf("quarantine: cannot write %s: %v", e.Path, e.Err)
	}
	return fmt.Sprintf("quarantine: %v", e.Err)
}

func (e *QuarantineError) Unwrap() error { return e.Err }
