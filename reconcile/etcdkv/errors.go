package etcdkv

import (
	"errors"
	"fmt"
	"strings"
)

// Sentinel errors (compare with errors.Is); the typed errors below wrap
// them and carry the facts.
var (
	// ErrUnreachable: no endpoint answered an etcd request within the
	// timeout (down, not etcd, or not answering). A *DialError names the
	// endpoints.
	ErrUnreachable = errors.New("etcd did not answer")
	// ErrCompacted: the revision a scan reads at was compacted before the
	// scan finished. A *CompactedError names the revision; scan again at a
	// new one.
	ErrCompacted = errors.New("the revision was compacted during the scan")
	// ErrTooLarge: one key and its value are larger than a request may be.
	ErrTooLarge = errors.New("the key and value are larger than one etcd request may be")
	// ErrDuplicate: a batch given to Create names one key twice.
	ErrDuplicate = errors.New("a key appears twice in one batch")
	// ErrTemplate: a value template is not valid (a *TemplateError says
	// where and why).
	ErrTemplate = errors.New("bad value template")
	// ErrField: a record's field cannot be put into the value where the
	// template puts it (a *FieldError names the field).
	ErrField = errors.New("a field does not fit the value template")
)

// A DialError is a connection that could not be made or checked: every
// endpoint is named, the credentials never are.
type DialError struct {
	Endpoints []string
	Err       error    // the last error seen (often context.DeadlineExceeded)
	Why       []string // Dial's: what a plain TCP connection to each endpoint found
}

func (e *DialError) Error() string {
	s := fmt.Sprintf("etcd at %s: %v: %v", strings.Join(e.Endpoints, ","), ErrUnreachable, e.Err)
	if len(e.Why) > 0 {
		s += " (" + strings.Join(e.Why, "; ") + ")"
	}
	return s
}

// Unwrap gives ErrUnreachable and the cause.
func (e *DialError) Unwrap() []error { return []error{ErrUnreachable, e.Err} }

// A CompactedError is a scan whose revision was compacted under it after
// Keys keys had been read: the keys read are a consistent prefix of that
// revision, but the rest of it is gone. Restart the scan at a new revision.
type CompactedError struct {
	Rev  int64 // the revision the scan was reading at
	Keys int64 // keys read before the page that failed
	Err  error // etcd's error (rpctypes.ErrCompacted)
}

func (e *CompactedError) Error() string {
	return fmt.Sprintf("etcd revision %d was compacted after %d keys of the scan had been read: %v", e.Rev, e.Keys, e.Err)
}

// Unwrap gives ErrCompacted and etcd's error.
func (e *CompactedError) Unwrap() []error { return []error{ErrCompacted, e.Err} }

// A TemplateError is a value template that Parse refused.
type TemplateError struct {
	Offset int    // byte offset in the template
	Reason string // what is wrong there
}

func (e *TemplateError) Error() string {
	return fmt.Sprintf("%v at byte %d: %s", ErrTemplate, e.Offset, e.Reason)
}

func (e *TemplateError) Unwrap() error { return ErrTemplate }

// A FieldError is a record field that cannot stand where the template puts
// it: a bare $name needs a JSON number, true, false or null; a name inside a
// string needs valid UTF-8; a field the record lacks.
type FieldError struct {
	Field  string
	Reason string
}

func (e *FieldError) Error() string {
	return fmt.Sprintf("%v: field %q %s", ErrField, e.Field, e.Reason)
}

func (e *FieldError) Unwrap() error { return ErrField }

// A KeyError is a write that failed for one key (too large for a request,
// or named twice in a batch).
type KeyError struct {
	Key []byte // the first bytes of the key
	Len int    // its whole length
	Err error  // ErrTooLarge, ErrDuplicate, or etcd's error
}

func (e *KeyError) Error() string {
	return fmt.Sprintf("etcd key %s: %v", quoteKey(e.Key, e.Len), e.Err)
}

func (e *KeyError) Unwrap() error { return e.Err }

// A LimitError is a transaction of one key, the fewest, that the server
// refused for its size: its --max-txn-ops or --max-request-bytes is below
// what one key needs. (Larger transactions it refuses are sent again in
// halves.)
type LimitError struct {
	Endpoints []string
	Limit     string    // the server's flag: --max-txn-ops or --max-request-bytes
	Key       *KeyError // the key (its first bytes and length)
	Bytes     int       // the key, three times, and its value, as the request carries them
	Err       error     // etcd's error
}

func (e *LimitError) Error() string {
	return fmt.Sprintf("etcd at %s refused a transaction of one key, %s (%d bytes with its value), the fewest a transaction holds: %v; the server's %s is below what one key needs",
		strings.Join(e.Endpoints, ","), quoteKey(e.Key.Key, e.Key.Len), e.Bytes, e.Err, e.Limit)
}

// Unwrap gives ErrTooLarge and etcd's error.
func (e *LimitError) Unwrap() []error { return []error{ErrTooLarge, e.Err} }

// A PermissionError is a write etcd refused for the user's permissions:
// the user may read the prefix (Dial checked) but not write under it.
type PermissionError struct {
	Endpoints []string
	User      string // "" when no user was named
	Prefix    string
	Err       error // etcd's "permission denied"
}

func (e *PermissionError) Error() string {
	who := "the client"
	if e.User != "" {
		who = fmt.Sprintf("the user %q", e.User)
	}
	return fmt.Sprintf("etcd at %s: %s lacks write permission on the prefix %q (%v): grant it a role with readwrite permission on the prefix's keys",
		strings.Join(e.Endpoints, ","), who, e.Prefix, e.Err)
}

// Unwrap gives ErrAuth and etcd's error.
func (e *PermissionError) Unwrap() []error { return []error{ErrAuth, e.Err} }

// A FileError is a TLS file (the CA, the client's certificate or key)
// that cannot be read or used: nothing was sent to any member.
type FileError struct {
	What string // "CA file", "client certificate and key files"
	Path string
	Err  error
}

func (e *FileError) Error() string { return fmt.Sprintf("etcd %s %s: %v", e.What, e.Path, e.Err) }

func (e *FileError) Unwrap() error { return e.Err }

// sampleLen is how much of a key a message or a sample keeps: enough to
// recognise it, bounded for a 64 KiB key.
const sampleLen = 120

// quoteKey quotes the first bytes of a key (invalid UTF-8 escaped), saying
// how long the whole key is when it was cut.
func quoteKey(k []byte, n int) string {
	if len(k) > sampleLen {
		k = k[:sampleLen]
	}
	if n > len(k) {
		return fmt.Sprintf("%q… (%d bytes)", k, n)
	}
	return fmt.Sprintf("%q", k)
}

// keyErr is a KeyError for key k.
func keyErr(k []byte, err error) *KeyError {
	return &KeyError{Key: append([]byte(nil), k[:min(len(k), sampleLen)]...), Len: len(k), Err: err}
}
