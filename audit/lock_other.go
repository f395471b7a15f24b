//go:build !unix

package audit

import (
	"errors"
	"os"
)

// lockFile fails: appends from several processes need flock(2), which this
// system lacks, and an unlocked append could break the chain.
func lockFile(*os.File) error { return errors.New("file locking is not supported on this system") }

func unlockFile(*os.File) {}
