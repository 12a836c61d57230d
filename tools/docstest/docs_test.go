package docstest

import (
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fleetwright/fleetwright/tools/e2e"
	"github.com/fleetwright/fleetwright/tools/fleetwright/cli"
)

func docs(t *testing.T) []doc {
	t.Helper()
	ds, err := markdownFiles(e2e.Root(t))
	require.NoError(t, err)
	require.NotEmpty(t, ds)
	return ds
}

// TestLinksResolve: every relative link of every markdown file names a file or directory that
// exists, and its #anchor a heading (or <a id>) of that file.
func TestLinksResolve(t *testing.T) {
	root := e2e.Root(t)
	ds := docs(t)
	byPath := map[string]doc{}
	for _, d := range ds {
		byPath[d.Path] = d
	}
	checked := 0
	for _, d := range ds {
		for _, l := range links(d) {
			checked++
			target, anchor, _ := strings.Cut(l, "#")
			file := d.Path
			if target != "" {
				file = path.Clean(path.Join(path.Dir(d.Path), target))
				_, err := os.Stat(filepath.Join(root, filepath.FromSlash(file)))
				if !assert.NoError(t, err, "%s links to %s, which does not exist", d.Path, l) {
					continue
				}
			}
			if anchor == "" {
				continue
			}
			td, ok := byPath[file]
			if !assert.True(t, ok, "%s links to %s: an anchor into a file that is not markdown", d.Path, l) {
				continue
			}
			assert.True(t, anchors(td)[anchor], "%s links to %s: %s has no heading with the anchor #%s", d.Path, l, file, anchor)
		}
	}
	assert.Greater(t, checked, 20, "the docs link to each other")
}

// makeTargets are the Makefile's targets.
func makeTargets(t *testing.T) map[string]bool {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(e2e.Root(t), "Makefile"))
	require.NoError(t, err)
	out := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^([A-Za-z0-9][A-Za-z0-9_.-]*)\s*:([^=]|$)`).FindAllStringSubmatch(string(b), -1) {
		out[m[1]] = true
	}
	require.True(t, out["test"] && out["demo"] && out["help"], "the Makefile parses: %v", out)
	return out
}

// TestMakeTargetsExist: every `make X` in the docs' code is a Makefile target.
func TestMakeTargetsExist(t *testing.T) {
	targets := makeTargets(t)
	re := regexp.MustCompile(`(?:^|[\s;(&|])make\s+((?:[a-z][a-z0-9-]*\s*)+)`)
	found := 0
	for _, d := range docs(t) {
		for _, code := range d.Code {
			for _, m := range re.FindAllStringSubmatch(withoutComments(code), -1) {
				for _, target := range strings.Fields(m[1]) {
					if strings.Contains(target, "=") {
						break
					}
					found++
					assert.True(t, targets[target], "%s: `make %s` is no Makefile target (in %q)", d.Path, target, code)
				}
			}
		}
	}
	assert.Greater(t, found, 10)
}

// withoutComments drops shell comments (" # ..." to the end of a line) from code.
func withoutComments(code string) string {
	return regexp.MustCompile(`(?m)(^|\s)#.*$`).ReplaceAllString(code, "")
}

// cliInvocation finds the CLI's command words in a line of code: after `fleetwright`,
// `kubectl fleetwright`, `kubectl-fleetwright` or `go run ./tools/fleetwright` (not after -n,
// where fleetwright is the namespace).
func cliInvocation(line string) [][]string {
	f := strings.Fields(line)
	var out [][]string
	for i, tok := range f {
		switch tok {
		case "fleetwright", "kubectl-fleetwright", "./tools/fleetwright", "./tools/kubectl-fleetwright":
		default:
			continue
		}
		if i > 0 && slices.Contains([]string{"-n", "--namespace", "namespace", "ns", "-C", "cd"}, f[i-1]) {
			continue
		}
		if tok == "fleetwright" && i > 0 && f[i-1] != "kubectl" && !strings.HasSuffix(f[i-1], "$") && f[i-1] != "|" && f[i-1] != "&&" {
			continue // a word in a sentence or a path
		}
		var words []string
		for _, w := range f[i+1:] {
			if !commandWord.MatchString(w) || len(words) == 2 {
				break
			}
			words = append(words, w)
		}
		if len(words) > 0 {
			out = append(out, words)
		}
	}
	return out
}

// commandWord is a word that may name a command ("why", "node|nodeclaim"); a placeholder, a
// path or a flag ends the command.
var commandWord = regexp.MustCompile(`^[a-z][a-z-]*(\|[a-z][a-z-]*)*$`)

// TestCLICommandsExist: every command the docs run the CLI with is one of its commands.
func TestCLICommandsExist(t *testing.T) {
	commands := cli.Commands()
	known := func(words []string) bool {
		if slices.Contains(commands, words[0]) {
			return true // a command without subcommands; words[1] is its argument
		}
		if len(words) == 1 {
			return slices.ContainsFunc(commands, func(c string) bool { return strings.HasPrefix(c, words[0]+" ") }) // a group: `fleetwright why`
		}
		for _, sub := range strings.Split(words[1], "|") {
			if !slices.Contains(commands, words[0]+" "+sub) {
				return false
			}
		}
		return true
	}
	found := 0
	for _, d := range docs(t) {
		for _, code := range d.Code {
			for _, line := range strings.Split(withoutComments(code), "\n") {
				if strings.HasPrefix(line, "fleetwright ") {
					line = "$ " + line // a line that starts with the command
				}
				for _, words := range cliInvocation(line) {
					found++
					assert.True(t, known(words), "%s: `%s` is no command of the CLI (%v)", d.Path, strings.Join(words, " "), commands)
				}
			}
		}
	}
	assert.Greater(t, found, 10, "the docs show the CLI")
}
