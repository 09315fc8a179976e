package rbloom

import "errors"

// Sentinel errors; compare with errors.Is. Every error about a header is
// also ErrBadHeader, every error about the chunks that follow it also
// ErrBadDump, so that a caller can say "a header the module would not load"
// or "a dump that lies" without listing them. Messages carry the numbers
// (which sub-filter, which iterator).
var (
	// ErrBadHeader: a dump header the module would not load, or that no
	// filter it makes could have (and fpdedup then will not evaluate).
	ErrBadHeader = errors.New("not a RedisBloom filter header")
	// ErrBadDump: chunks that do not make up the filter their header
	// describes.
	ErrBadDump = errors.New("not a RedisBloom filter dump")
)

// Header errors (each is also ErrBadHeader).
var (
	// ErrHeaderLength: fewer bytes than the chain's fields, or not exactly
	// those of its sub-filters.
	ErrHeaderLength = headerError("header length is not that of its sub-filters")
	// ErrNoLinks: a chain of no sub-filters.
	ErrNoLinks = headerError("a chain of no sub-filters")
	// ErrOptions: option bits the module does not know.
	ErrOptions = headerError("unknown options")
	// ErrSize: the chain's item count is not the sum of its sub-filters'.
	ErrSize = headerError("item counts do not add up")
	// ErrLinkError: a sub-filter's error rate outside (0, 1).
	ErrLinkError = headerError("error rate outside (0, 1)")
	// ErrLinkBytes: a sub-filter of no bytes, or larger than MaxLinkBytes,
	// or a chain larger than MaxDumpBytes.
	ErrLinkBytes = headerError("sub-filter size out of bounds")
	// ErrBitsBytes: bits is not bytes·8, as the module requires.
	ErrBitsBytes = headerError("bits is not bytes*8")
	// ErrN2: a power-of-two modulus (n2) above 2^63 or above the bits.
	ErrN2 = headerError("n2 out of bounds")
	// ErrHashes: hashes is not ceil(ln(2)·bpe), or bpe is negative, not a
	// number, or asks for more than MaxHashes hashes.
	ErrHashes = headerError("hashes do not match bits per entry")
	// ErrBudget: the header asks for more bookkeeping than the caller's
	// budget allows.
	ErrBudget = headerError("more sub-filters than the memory budget holds")
)

// Chunk errors (each is also ErrBadDump).
var (
	// ErrIterator: an iterator below 1, or smaller than its chunk, or
	// naming no byte of the filter.
	ErrIterator = dumpError("iterator out of range")
	// ErrChunkBackwards: a chunk that starts before the end of the last
	// one: it overlaps, repeats or goes backwards.
	ErrChunkBackwards = dumpError("chunk overlaps or goes backwards")
	// ErrChunkGap: a chunk that starts past the end of the last one.
	ErrChunkGap = dumpError("chunk skips bytes")
	// ErrChunkCrosses: a chunk that runs past the end of its sub-filter
	// (the module's never cross one, and BF.LOADCHUNK refuses them).
	ErrChunkCrosses = dumpError("chunk runs past its sub-filter")
	// ErrChunkSize: a chunk of no bytes that is not the end (a dump that
	// would never end), or of more than MaxChunk.
	ErrChunkSize = dumpError("chunk of no bytes or more than 16 MiB")
	// ErrDumpShort: the end (iterator 0) before every byte the header
	// describes.
	ErrDumpShort = dumpError("dump ends before its sub-filters do")
	// ErrDumpLong: bytes past those the header describes: the dump never
	// ends where it should. Read live, this is a filter that grew a
	// sub-filter while it was read: read it again.
	ErrDumpLong = dumpError("dump runs past its sub-filters")
)

// Builder errors, each the module's refusal of the same command.
var (
	// ErrParams: a capacity, error rate or expansion BF.RESERVE refuses.
	ErrParams = errors.New("BF.RESERVE parameters out of range")
	// ErrFull: an add of a new item to a full NONSCALING filter ("ERR non
	// scaling filter is full").
	ErrFull = errors.New("non scaling filter is full")
	// ErrGrow: the next sub-filter cannot be made (its size overflows, its
	// error rate underflows to 0, or it exceeds the builder's budget); the
	// module answers "ERR problem inserting into filter" or fails to
	// allocate.
	ErrGrow = errors.New("cannot add a sub-filter")
)

// Router and item errors.
var (
	// ErrRouter: an unknown router, or one given wrong parameters.
	ErrRouter = errors.New("bad router")
	// ErrItem: an unknown item kind.
	ErrItem = errors.New("bad item kind")
)

// kindError is a sentinel that is also its kind's sentinel.
type kindError struct {
	msg  string
	kind error
}

func (e *kindError) Error() string        { return e.msg }
func (e *kindError) Is(target error) bool { return target == e.kind }

func headerError(msg string) error { return &kindError{msg, ErrBadHeader} }
func dumpError(msg string) error   { return &kindError{msg, ErrBadDump} }
