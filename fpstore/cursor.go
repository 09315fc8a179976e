package fpstore

import "io"

// Cursor reads an index's fingerprints in ascending order, copying them out
// of the mapping in batches under the fault guard: what a merge holds never
// aliases the mapping, and a file truncated under it is an error, not a
// SIGBUS. Not safe for concurrent use.
type Cursor struct {
	x   *Index
	seg int
	pos int
}

// Cursor starts a cursor at the smallest fingerprint.
func (x *Index) Cursor() *Cursor { return &Cursor{x: x} }

// Read copies the next fingerprints into dst and returns how many; at the
// end it returns 0, io.EOF. Each segment's pages, all of them, are checked
// when the cursor enters it.
func (c *Cursor) Read(dst []Fingerprint) (int, error) {
	n := 0
	err := c.x.guard(func() error {
		for n < len(dst) && c.seg < len(c.x.foot.segments) {
			s, err := c.x.segment(c.seg)
			if err != nil {
				return err
			}
			if c.pos == 0 {
				// A whole pass checks the whole file: the segment's
				// directory and filter pages too, though only the
				// fingerprints are copied (CRC-32C runs at GB/s).
				if err := s.verifyRange(0, uint64(len(s.buf))); err != nil {
					return err
				}
			}
			end := min(len(s.fps), c.pos+len(dst)-n)
			n += copy(dst[n:], s.fps[c.pos:end])
			c.pos = end
			if c.pos == len(s.fps) {
				c.seg, c.pos = c.seg+1, 0
			}
		}
		return nil
	})
	if err != nil {
		return n, err
	}
	if n == 0 && len(dst) > 0 {
		return 0, io.EOF
	}
	return n, nil
}
