package proc

import (
	"fmt"
	"os"
	"path/filepath"
)

// RepoRoot is the repository root: the nearest directory at or above the working directory
// that holds go.work. The tools that build and start the stack run from inside the repository.
func RepoRoot() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for d := wd; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.work")); err == nil {
			return d, nil
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("no go.work above %s: run this from the repository", wd)
		}
	}
}
