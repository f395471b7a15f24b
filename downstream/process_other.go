//go:build !linux

package downstream

import "errors"

// awaitExit cannot wait without reaping here; the caller then reaps first
// and kills the group afterwards (best effort).
func awaitExit(int) error { return errors.New("waitid is not available") }
