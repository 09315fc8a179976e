package bitmapbloom

import "fmt"

// RebuiltShortError is a rebuilt segment that held fewer bits than the
// truth sets in it when it was to be swapped in: what was written was lost
// in part (its server restarted, or another client wrote to it). It was
// not swapped in, and the live key is as it was.
type RebuiltShortError struct {
	Key   string // KEY:rebuild
	Live  string // KEY
	Bits  int64  // set in Key
	Truth int64  // set by the truth
}

func (e *RebuiltShortError) Error() string {
	return e.Say("rerun the rebuild")
}

// Say is the error's text ending with rerun, what to do.
func (e *RebuiltShortError) Say(rerun string) string {
	return fmt.Sprintf("the rebuilt %s holds %d bits set where the truth sets %d: part of what was written to it is gone (its server restarted, or another client wrote to it), so it was not swapped in and %s is as it was; %s",
		e.Key, e.Bits, e.Truth, e.Live, rerun)
}
