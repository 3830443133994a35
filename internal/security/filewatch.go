package security

import (
	"fmt"
	"os"
	"strings"
	"time"
)

// fileWatch tells whether files changed (their sizes or modification times) since it last
// looked, looking at most once a second: what the TLS files and the Kerberos keytab are
// reloaded by. Not safe for concurrent use (its owner's lock guards it).
type fileWatch struct {
	files   []string
	checked time.Time
	stamp   string // "gone": a file was unreadable when last looked at
}

// newFileWatch stamps the files as they are now.
func newFileWatch(now time.Time, files ...string) (*fileWatch, error) {
	w := &fileWatch{files: files, checked: now}
	var err error
	w.stamp, err = fileStamp(files)
	return w, err
}

func fileStamp(files []string) (string, error) {
	var b strings.Builder
	for _, name := range files {
		if name == "" {
			continue
		}
		st, err := os.Stat(name)
		if err != nil {
			return "", fmt.Errorf("security: %w", err)
		}
		fmt.Fprintf(&b, "%d/%d;", st.Size(), st.ModTime().UnixNano())
	}
	return b.String(), nil
}

// changed reports whether the files changed since the last look that saw them (a file that
// comes back after being unreadable counts as changed). err: a file is unreadable now, said
// once until the files are readable again.
func (w *fileWatch) changed(now time.Time) (bool, error) {
	if now.Sub(w.checked) < time.Second {
		return false, nil
	}
	w.checked = now
	stamp, err := fileStamp(w.files)
	switch {
	case err != nil && w.stamp == "gone":
		return false, nil
	case err != nil:
		w.stamp = "gone"
		return false, err
	case stamp == w.stamp:
		return false, nil
	}
	w.stamp = stamp
	return true, nil
}
